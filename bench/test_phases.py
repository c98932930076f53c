"""Every training phase, per implementation, device and workload, timed inside its worker (docs/method.md#what-is-measured; "Implementations and workloads").

Each case records its worker's timer floor (the empty phase's median), the phase's own CPU use and what its
counted rounds went through (each worker thread's CPU and context switches, the machine's steal time, Python's
garbage collections, a canary at their start and end: docs/method.md#what-the-rounds-went-through), and checks,
round by round, that the phase did its work (its product) and that no tensor an earlier round left was still alive
when its clock started, unless --round-checks off leaves those checks out of its rounds
(docs/method.md#switches-for-the-intervention-study). Under --benchmark-disable each case runs a few rounds, so the
test command checks every phase in both languages."""

import functools
import os
import statistics
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from phasebench import registry, schema
from phasebench.cpu_windows import phase_cpu, phase_faults, phase_host_and_gpu
from phasebench.fitness import Fitness
from phasebench.phase_round import CountedRound
from phasebench.plugin.calibration import calibrated_iterations
from phasebench.plugin.cases import RUN_ORDER
from phasebench.plugin.pairing import (
    BLOCK_ROUNDS,
    block_schedule,
    block_sizes,
    pair_worker_count,
    pairing_info,
    sibling_nodeid,
    sweep_slot,
    why_unpaired,
)
from phasebench.programs import DEFAULT_PROGRAM, split_case_phase
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import ONE_SHOT_PHASES, Workload
from phasebench.spec import TRAINING_PHASES as PHASE_NAMES
from phasebench.stats import paired_ratio, within_units
from phasebench.worker.client import RoundRecords, WorkerError, worker_clock

# pytest-benchmark reads the in-worker durations through this clock.
pytestmark = pytest.mark.benchmark(timer=worker_clock)

PARAMETER_TENSORS = 8  # conv1, conv2, fc1, fc2: a weight and a bias each


def expected(phase: str, workload: Workload) -> tuple[tuple, bool]:
    """What a phase must produce on a workload: the allowed shapes of its main tensor (an epoch's last
    batch may be shorter), and whether it has a loss."""
    batches = sorted({workload.batch_size, workload.last_batch})
    images = tuple((n, 1, 28, 28) for n in batches)
    outputs = tuple((n, 10) for n in batches)
    conv1 = ((workload.conv1_channels, 1, 5, 5),)
    return {
        "data_loading": (images, False),
        "copy_to_device": (images, False),
        "optimizer_init": (((workload.parameter_count,),), False),
        "forward": (outputs, False),
        "loss": (((),), True),
        "backward": (conv1, False),
        "param_update": (conv1, False),
        "progress_print": (((),), True),
        "train_step": (outputs, True),
        # The one-shot phases: the full batch's output of the captured graph or of the compiled model.
        "graph_capture": (outputs, False),
        "compile": (outputs, False),
    }[phase]



CHECKED_ROUNDS = 3  # under --benchmark-disable: enough consecutive rounds to see batches advance
RECOMPUTE_TOLERANCE = 1e-5  # forward's output against the model run again: the same kernels, the same draws
UPDATE_TOLERANCE = 1e-6  # conv1.weight against SGD's formula, relative to its largest value


def work_problems(phase: str, product: dict, workload: Workload = DEFAULT_WORKLOAD,
                  resident_on_device: bool = False) -> list[str]:
    """What is wrong with one round's product: the checks that prove the phase did its work. On cpu a
    batch is never copied; on an accelerator only where the whole split lives on the device."""
    problems = []
    shapes, has_loss = expected(phase, workload)
    if tuple(product["shape"]) not in shapes:
        problems.append(f"shape {product['shape']}, expected one of {shapes}")
    if not product["finite"]:
        problems.append("non-finite values")
    if (product["loss"] is not None) != has_loss:
        problems.append(f"loss {product['loss']}")
    if phase == "copy_to_device" and not (product["on_device"] and product["matches_host"]):
        problems.append(f"on the requested device: {product['on_device']}, equal to the host batch: "
                        f"{product['matches_host']}")
    if phase == "copy_to_device" and product["resident"] != resident_on_device:
        problems.append(f"the batch was {'not ' if resident_on_device else ''}copied, yet it "
                        f"{'lived' if resident_on_device else 'did not live'} on the device already")
    if phase == "forward" and not product["recompute_error"] <= RECOMPUTE_TOLERANCE:
        problems.append(f"the output differs by {product['recompute_error']:.3g} from the model run again on the "
                        f"same input with the same dropout draws")
    if phase == "backward" and not (product["zero_before"] and product["nonzero_grads"] == PARAMETER_TENSORS):
        problems.append(f"gradients zero before the clock: {product['zero_before']}; non-zero after it in "
                        f"{product['nonzero_grads']} of {PARAMETER_TENSORS} parameters")
    if phase == "param_update":
        if not product["moved"] > 0:
            problems.append("conv1.weight did not move")
        elif not product["update_error"] <= UPDATE_TOLERANCE * max(product["moved"], 1.0):
            problems.append(f"conv1.weight is {product['update_error']:.3g} away from what SGD with momentum prescribes")
    if phase == "optimizer_init" and not product["distinct"]:
        problems.append("the new model shares memory or values with the live one")
    return problems


def batch_problems(batches: list[int], epoch_batches: int) -> list[str]:
    """Consecutive rounds of one worker load consecutive batches, wrapping after the epoch's last."""
    return [f"round {i + 1} loaded batch {later} after batch {earlier}"
            for i, (earlier, later) in enumerate(zip(batches, batches[1:])) if later != (earlier + 1) % epoch_batches]


def leftover_problems(phase: str, products: list[dict]) -> list[str]:
    """Earlier rounds' tensors alive when a clock started (None: a train_step after a train_step, which
    frees the previous step's tensors itself, as any training loop does)."""
    problems = [f"round {i}: {p['leftovers']} tensors of earlier rounds alive when the clock started"
                for i, p in enumerate(products) if p["leftovers"]]
    if phase != "train_step":
        problems += [f"round {i}: leftovers not checked" for i, p in enumerate(products) if p["leftovers"] is None]
    return problems




class Rounds:
    """The worker of each round: the long-lived one of the implementation and device, or with
    --processes N, N fresh workers in turn, each warmed up and then timing its share of the rounds."""

    def __init__(self, phase, settings, pooled, spawn):
        self.phase, self.settings, self.pooled, self.spawn = phase, settings, pooled, spawn
        self.workers = []  # every worker used, in order
        self.worker, self.left = None, 0
        self.iterations = 1  # calls per round: a worker's share of the calls is its share of the rounds times these
        self.warmup_ns: list[int] = []  # the first worker's warm-up calls (--processes N): what a calibration reads

    def shares(self) -> list[int]:
        n, rounds = self.settings.processes, self.settings.rounds
        return [(rounds // n + (i < rounds % n)) * self.iterations for i in range(n)]

    def next(self):
        if self.settings.processes == 1:
            if self.worker is None or not self.worker.alive():
                self.worker = self.pooled()
                self.workers.append(self.worker)
            return self.worker
        if self.left == 0 and len(self.workers) >= self.settings.processes:
            return self.worker  # past every share (pedantic's call for its result): the last worker, not a new one
        if self.left == 0:
            self.start_next()
        self.left -= 1
        return self.worker

    def start_next(self):
        """With --processes N: the next fresh worker, warmed up, with its share of the calls to run."""
        self.close()
        self.worker = self.spawn()
        self.workers.append(self.worker)
        warmup = [self.worker.run_phase(self.phase, self.settings.switches.checks).ns
                  for _ in range(self.settings.warmup_rounds)]
        if len(self.workers) == 1:
            self.warmup_ns = warmup
        self.left = self.shares()[len(self.workers) - 1]

    def close(self):
        if self.settings.processes > 1 and self.worker is not None:
            self.worker.stop()


# What a paired phase's interval does not hold where its sweeps ran in one long-lived worker a side (--pair-workers 1,
# or too few sweeps for two).
LEAVES_OUT = "the spread between worker processes: each side's blocks ran in one long-lived worker (--pair-workers)"


class PairedBaselineError(RuntimeError):
    """A compared run's baseline that cannot give a paired measurement its calls per round."""


@dataclass
class PairedSide:
    """One implementation's part of a paired measurement."""

    workers: list  # its long-lived workers, one a slot: sweep s runs in slot s % len(workers)
    warmup: list = field(default_factory=list)  # (worker, ns, PhaseRound) per warm-up call, every worker's
    warmup_cost_ns: list = field(default_factory=list)  # each warm-up block's wall time per call, preparation included
    taken: list = field(default_factory=list)  # (worker, ns, PhaseRound) per counted call, in the order measured
    blocks: list = field(default_factory=list)  # each block's median per call, s, in the order measured
    block_slots: list = field(default_factory=list)  # each block's worker slot
    windows: list = field(default_factory=list)  # its blocks' utilization windows
    records: RoundRecords = field(default_factory=RoundRecords)  # what its counted rounds went through
    fitness: Fitness = field(default_factory=Fitness)  # whether the machine could measure it

    def ratio_units(self) -> list | None:
        """What paired_ratio takes as its units: each block's worker slot, where the sweeps rotated through more than
        one; None (each block pair a draw of its own) where they ran in one worker a side."""
        return self.block_slots if len(self.workers) > 1 else None

    def leaves_out(self) -> str | None:
        return LEAVES_OUT if len(self.workers) == 1 else None


@dataclass
class PairedPhase:
    sides: dict  # {implementation: PairedSide}, in the first sweep's order
    unpaired: dict  # {implementation: why it was not measured}: it cannot run here
    iterations: int
    iterations_from: str
    rounds: int  # counted rounds per side: --rounds, or more where a ratio stayed undecided


def paired_iterations(sides: dict, baseline_of) -> tuple[int, str]:
    """One rule for a paired phase's calls per round (docs/method.md#calls-per-round): a compared run's baseline's,
    which must hold every side with the same number; else the fastest side's median warm-up call into the target,
    within what the costliest side's calls cost a round (calibrated_iterations): both read from every side alike."""
    given = {impl: baseline_of(impl) for impl in sides}
    if any(given.values()):
        if None in given.values() or len(set(given.values())) > 1:
            raise PairedBaselineError(
                "the baseline cannot give this paired measurement its calls per round: it holds "
                + ", ".join(f"{impl}: {calls or 'no case'}" for impl, calls in given.items())
                + " (a paired compare needs every side, with one number: docs/method.md#calls-per-round)")
        return next(iter(given.values())), "baseline"
    warmups = [[ns for _, ns, _ in side.warmup] for side in sides.values()]
    fastest = min(warmups, key=lambda ns: statistics.median(ns) if ns else 0)
    costliest = max((statistics.median(side.warmup_cost_ns) for side in sides.values() if side.warmup_cost_ns),
                    default=0)
    return calibrated_iterations(fastest, costliest), "pair"


def measure_paired(group, phase, device, workload, settings, worker_for, utilization_of, baseline_of,
                   program: str = DEFAULT_PROGRAM) -> PairedPhase:
    """Every implementation of the group, side by side in time: their warm-up calls in turn, in each of their
    workers, then their counted rounds in blocks of BLOCK_ROUNDS in the balanced sequence
    (phasebench/plugin/pairing.py), each block rounds times calls per round calls, back to back in one request. Each side has
    --pair-workers long-lived workers (pair_worker_count); sweeps run two by two in each side's next worker
    (sweep_slot), so that the interval's draws are pairs of processes, not blocks of one process. `phase` is the
    program's own name of it (the workers are `program`'s)."""
    sizes = block_sizes(settings.rounds, BLOCK_ROUNDS)
    slots = range(pair_worker_count(settings.pair_workers, len(sizes)))
    sides, unpaired = {}, {}
    # The workers start as many at a time as the machine has cores: nothing is timed while they start.
    with ThreadPoolExecutor(os.cpu_count() or 1) as starting:
        started = {impl: [starting.submit(worker_for, impl, device, workload, slot, program) for slot in slots]
                   for impl in group}
        for impl, workers in started.items():
            try:
                sides[impl] = PairedSide([worker.result() for worker in workers])
            except pytest.skip.Exception as skipped:
                unpaired[impl] = f"{impl} cannot run here: {skipped}"
    checks = settings.switches.checks

    def run_block(worker, calls: int, into: list):
        """`calls` calls back to back in one request (the worker's PhaseCalls), each kept as (worker, ns, PhaseRound)."""
        block = worker.run_phase_block(phase, calls, checks)
        into += [(worker, timed.ns, timed) for timed in block.rounds]
        return block

    if settings.warmup_rounds:
        for side in sides.values():
            for worker in side.workers:
                block = run_block(worker, settings.warmup_rounds, side.warmup)
                side.warmup_cost_ns.append(block.wall_ns / settings.warmup_rounds)
    iterations, iterations_from = paired_iterations(sides, baseline_of)

    def sweep_blocks(sweeps: range) -> None:
        for sweep, impl in block_schedule(tuple(sides), sweeps.stop)[len(sides) * sweeps.start:]:
            side = sides[impl]
            slot = sweep_slot(sweep, len(side.workers))
            worker = side.workers[slot]
            side.records.open(worker)  # once per worker, before its first counted round
            side.fitness.begin()
            with utilization_of.window(worker, side.windows):
                block = run_block(worker, sizes[sweep] * iterations, side.taken)
            side.fitness.add(block.run_ns, block.wait_ns)
            calls = [timed.ns for timed in block.rounds]
            per_call = [sum(calls[start:start + iterations]) / iterations
                        for start in range(0, len(calls), iterations)]
            side.blocks.append(statistics.median(per_call) / 1e9)
            side.block_slots.append(slot)

    sweep_blocks(range(len(sizes)))
    # An undecided ratio that more blocks can narrow gets more sweeps, two at a time (the sequence stays balanced), up
    # to as many again.
    planned = len(sizes)
    while len(sizes) < 2 * planned and undecided_pairs(sides) and not settings.count:
        sizes += [BLOCK_ROUNDS, BLOCK_ROUNDS]
        sweep_blocks(range(len(sizes) - 2, len(sizes)))
    for side in sides.values():
        side.records.close_all()
    return PairedPhase(sides, unpaired, iterations, iterations_from, sum(sizes))


def undecided_pairs(sides: dict) -> list[str]:
    """The implementations of a paired measurement whose ratio to their reference, measured with them, has an interval
    wider than a decided one's, where more blocks can narrow it: where the sweeps rotated through several pairs of
    workers, only if the blocks spread that wide within their pairs of workers (more blocks narrow that spread, not
    the spread between pairs of processes). A run of too few rounds for any interval asked for none."""
    undecided = []
    for impl, side in sides.items():
        partner = registry.get(impl).pair
        if partner not in sides:
            continue
        ratio = paired_ratio(side.blocks, sides[partner].blocks, side.ratio_units())
        if ratio.low is None or ratio.decided:
            continue
        spread = None if side.ratio_units() is None else within_units(side.blocks, sides[partner].blocks,
                                                                      side.block_slots)
        if spread is None or not spread.decided:
            undecided.append(impl)
    return undecided


# Parametrized by phasebench/plugin/__init__.py's pytest_generate_tests: per selected implementation, each of its phases,
# each device, each workload; ids phase-impl-device[-wW-bB].
@pytest.mark.paired
def test_phase(request, benchmark, worker_for, new_worker, utilization_of, settings, baseline_iterations,
               phase_iterations, pairing, phase, impl, device, workload):
    # Another program's phase is named PROGRAM:PHASE (phasebench/programs.py): its workers are that program's, asked for
    # their own phase's name; the case keeps the qualified name as its group and saved phase.
    program, own_phase = split_case_phase(phase)
    settings = settings.for_program(program.name)  # a program's own rounds, where the command gives none
    if program.is_default:
        assert phase in PHASE_NAMES + ONE_SHOT_PHASES, f"no phase '{phase}' in phasebench/train/trainer.py's PHASES or ONE_SHOT"
    registered = registry.get(impl)
    one_shot = phase in ONE_SHOT_PHASES
    if one_shot:
        # Timed once per worker (docs/gpu.md#cuda-graphs-and-torchcompile): a fresh worker of its own, one round
        # without warm-up; the long-lived worker has run it, untimed, before its first step.
        fresh = new_worker(impl, device, workload)()
        pooled = lambda: fresh  # noqa: E731
        settings = types.SimpleNamespace(**{**vars(settings), "rounds": 1, "warmup_rounds": 0, "processes": 1})
    else:
        pooled = lambda: worker_for(impl, device, workload, program=program.name)  # noqa: E731 (skips what cannot run here)
    rounds = Rounds(own_phase, settings, pooled, new_worker(impl, device, workload) if settings.processes > 1 else None)
    taken = []  # (worker, ns, PhaseRound) per call, warm-up included
    # The calls pytest-benchmark counts: after the warm-up (run through one_round with one worker), its rounds' calls,
    # before the call that pedantic makes after them for its result (with more than one call per round) and those the
    # product checks add under CHECKED_ROUNDS; under --benchmark-disable, every call.
    first = settings.warmup_rounds if settings.processes == 1 and not one_shot and benchmark.enabled else 0
    checks = settings.switches.checks  # --round-checks off: no round computes or checks what proves its work
    # The warm-up's calls are never counted; the counted ones are set again once the calls per round are known.
    counted_rounds = range(first, first + settings.rounds) if benchmark.enabled else range(sys.maxsize)
    # What they went through (docs/method.md#what-the-rounds-went-through), read in each worker just before the first
    # counted round it runs and just after its last: not under --count (Valgrind's machine is not the program's).
    records = None if settings.count else RoundRecords()

    def one_round():
        worker = rounds.next()
        index = len(taken)
        if records and index in counted_rounds:
            records.open(worker)
        timed = worker.run_phase(own_phase, checks)
        # --count instructions: the clock pytest-benchmark reads advances by the round's count (1e-9 each).
        worker_clock.advance(timed.counted.instructions if timed.counted else timed.ns)
        taken.append((worker, timed.ns, timed))
        if records and (index == counted_rounds[-1] or (settings.processes > 1 and rounds.left == 0)):
            records.close(worker)  # its last counted round: the rounds' last, or with --processes N its share's

    benchmark.group = phase
    schema.write(benchmark, schema.PhaseInfo, implementation=impl, language=registered.language,
                 reference=registered.pair, device=device, phase=phase, **workload.as_info(), rounds=settings.rounds,
                 warmup_rounds=settings.warmup_rounds, threads=settings.threads, processes=settings.processes,
                 order=request.node.stash.get(RUN_ORDER, None), note=registered.notes.get(device),
                 round_checks="on" if checks else None,
                 **({} if program.is_default else {"program": program.name}))
    if pairing.applies and not one_shot:
        # Paired in time (docs/method.md#paired-in-time): the group's first case measures every side, each replays its own.
        pooled()  # skips this case where its implementation cannot run here
        measured = pairing.measure_once(lambda group: measure_paired(
            group, own_phase, device, workload, settings, worker_for, utilization_of,
            lambda other: baseline_iterations.get(sibling_nodeid(request.node, other)), program.name))
        side = measured.sides[impl]
        # Its warm-up calls first, then its counted ones: each worker's calls stay in the order it ran them.
        iterations, taken, records, workers = measured.iterations, side.warmup + side.taken, side.records, side.workers
        first = len(side.warmup)
        settings = types.SimpleNamespace(**{**vars(settings), "rounds": measured.rounds})  # more where undecided
        counted_ns = iter([ns for _, ns, _ in side.taken])

        def replayed_round():  # pedantic's call for its result, after its rounds, finds none left
            ns = next(counted_ns, None)
            if ns is not None:
                worker_clock.advance(ns)

        schema.write(benchmark, schema.PhaseInfo, iterations=iterations, iterations_from=measured.iterations_from,
                     rounds=measured.rounds, machine_fit=side.fitness.as_info(),
                     **pairing_info(impl, {name: other.blocks for name, other in measured.sides.items()},
                                    measured.unpaired, BLOCK_ROUNDS, side.leaves_out(), side.block_slots,
                                    side.ratio_units()))
        benchmark.pedantic(replayed_round, rounds=settings.rounds, warmup_rounds=0, iterations=iterations)
        utilization_of.record_windows(impl, device, side.windows)
        return finish_phase(benchmark, settings, registered, phase, impl, device, workload, taken, workers, records,
                            first, iterations)
    if benchmark.enabled:
        schema.write(benchmark, schema.PhaseInfo, unpaired=why_unpaired(request.config))
    # With several processes, no one worker's CPU is the case's: utilization then watches the device only.
    watched = pooled() if settings.processes == 1 else types.SimpleNamespace(pid=None, device=device, impl=impl)
    try:
        with utilization_of(watched):
            # The warm-up, as pedantic's warmup_rounds would run it, but one call a round whatever the calls per round:
            # the same calls in a baseline and in the run compared with it.
            for _ in range(first):
                one_round()
            iterations, iterations_from = 1, None
            # Under --benchmark-disable a round is one call, as is a one-shot phase's and a counted one's (a count
            # has no clock to resolve).
            if benchmark.enabled and not one_shot and not settings.count:
                # The baseline's calls per round where --benchmark-compare loaded one with this case: a median per call
                # of one call a round and one of 100 calls a round are not the same statistic.
                iterations, iterations_from = baseline_iterations.get(request.node.nodeid), "baseline"
                # Every implementation of a phase takes the calls per round its first-timed one calibrated, so that
                # their per-call medians, and the ratio between them, are the same statistic.
                same_phase = (phase, device, workload.label)
                if iterations is None and same_phase in phase_iterations:
                    iterations, iterations_from = phase_iterations[same_phase], "phase"
                if iterations is None:
                    if settings.processes > 1:
                        rounds.start_next()
                    warmup_ns = [ns for _, ns, _ in taken] if settings.processes == 1 else rounds.warmup_ns
                    iterations, iterations_from = calibrated_iterations(warmup_ns), "calibrated"
                phase_iterations.setdefault(same_phase, iterations)
                rounds.iterations = iterations
                if settings.processes > 1 and rounds.workers:
                    rounds.left = rounds.shares()[0]
                counted_rounds = range(first, first + settings.rounds * iterations)
            schema.write(benchmark, schema.PhaseInfo, iterations=iterations, iterations_from=iterations_from)
            benchmark.pedantic(one_round, rounds=settings.rounds, warmup_rounds=0, iterations=iterations)
        while len(taken) < CHECKED_ROUNDS and not one_shot:  # under --benchmark-disable
            one_round()
        if records:
            records.close_all()
        if one_shot:
            one_shot_problems = after_one_shot(fresh, phase)
    finally:
        rounds.close()
        if one_shot:
            fresh.stop()

    problems = one_shot_problems if one_shot else []
    return finish_phase(benchmark, settings, registered, phase, impl, device, workload, taken, rounds.workers, records,
                        first, iterations, problems)


def finish_phase(benchmark, settings, registered, phase, impl, device, workload, taken, workers, records, first,
                 iterations, problems=()):
    """What a case records of its calls (`taken`: (worker, ns, PhaseRound), warm-up first) once they are timed, and
    the checks that every round did its phase's work."""
    counted = taken[first:first + settings.rounds * iterations] if benchmark.enabled else taken
    floors = [worker.timer_floor_ns for worker in workers]
    schema.write(benchmark, schema.PhaseInfo, timer_floor_s=statistics.median(floors) / 1e9,
                 timer_floors_s=[floor / 1e9 for floor in floors], **phase_cpu([timed for _, _, timed in counted]),
                 **phase_faults([timed for _, _, timed in counted]), **phase_host_and_gpu([timed for _, _, timed in counted]),
                 **(records.figures() if records else {}))
    if settings.count:
        schema.write(benchmark, schema.CountedPhaseInfo,
                     **counted_info([timed.counted for _, _, timed in counted], workers))

    products = [timed.product for _, _, timed in taken]
    if not settings.switches.checks:  # what the worker did ("off" in both languages, the C++ one through pb_set_round_checks); unchecked
        did = ",".join(sorted({product.get("checks", "on") for product in products}))
        schema.write(benchmark, schema.PhaseInfo, round_checks=did)
        return
    program, own_phase = split_case_phase(phase)
    if not program.is_default:  # its program's checks (phasebench/programs.py), and its batches drawn one by one
        problems = list(problems) + [f"round {i}: {problem}" for i, product in enumerate(products)
                                     for problem in program.product_problems(own_phase, product)]
        for worker in workers:
            drawn = [timed.product["batch"] for w, _, timed in taken if w is worker and timed.product["batch"] is not None]
            problems += batch_problems(drawn, sys.maxsize)
        assert not problems, f"{phase} ({impl} on {device}):\n  " + "\n  ".join(problems[:10])
        return
    resident = device == "cpu" or registered.split_on_device
    problems = list(problems) + [f"round {i}: {problem}" for i, product in enumerate(products)
                                 for problem in work_problems(phase, product, workload, resident)]
    problems += leftover_problems(phase, products)
    if phase in ("data_loading", "copy_to_device", "train_step"):
        for worker in workers:
            problems += batch_problems([timed.product["batch"] for w, _, timed in taken if w is worker],
                                       workload.steps_per_epoch)
    assert not problems, f"{phase} ({impl} on {device}, {workload.label}):\n  " + "\n  ".join(problems[:10])


def counted_info(rounds: list[CountedRound], workers) -> dict:
    """What a counted case records (docs/instruction-counts.md): the metric and its unit, each counted round's
    instructions, the empty bracket's count (the floor), where the median round's instructions went, and the
    functions with the most of them in the last round; with caches or branches simulated (--count-i1/-d1/-ll,
    --count-branches), every event the rounds' dumps name, each counted round's total (count_events)."""
    import statistics

    counts = [r.instructions for r in rounds]
    middle = sorted(rounds, key=lambda r: r.instructions)[len(rounds) // 2]
    floors = [w.count_floor for w in workers]
    events = list(dict.fromkeys(event for r in rounds for event in r.events))
    simulated = {}
    if set(events) - {"Ir"}:  # caches or branches simulated: more than the instructions
        simulated["count_events"] = {event: [r.events.get(event, 0) for r in rounds] for event in events}
    return {"metric": "instructions", "unit": "instructions", "instructions": counts,
            "instructions_median": statistics.median(counts), "count_floor": statistics.median(floors),
            "count_floors": floors, "count_labels": [r.label for r in rounds], "split": middle.split,
            "top_functions": rounds[-1].top, "cpu_capability": workers[0].info.cpu_capability} | simulated


def after_one_shot(worker, phase: str) -> list[str]:
    """After its one-shot phase a worker steps with what it made (a replay, the compiled model), and refuses to
    run the phase again."""
    problems = []
    step = worker.run_phase("train_step").product
    if not (step["finite"] and step["loss"] is not None):
        problems.append(f"the train_step after {phase}: finite {step['finite']}, loss {step['loss']}")
    try:
        worker.run_phase(phase)
        problems.append(f"{phase} ran a second time in one worker")
    except WorkerError as error:
        if "runs once per worker" not in str(error):
            problems.append(f"a second {phase}: {error}")
    return problems


def test_nothing_left_over_in_any_order(worker_for, impl, device):
    """Whatever phase ran before, nothing it left is alive when the next phase's clock starts: each
    phase's preparation releases it, so a -k selection cannot change what a clock holds. (A one-shot phase
    runs once per worker: test_phase checks it.)"""
    worker = worker_for(impl, device)
    phases = [phase for phase in registry.get(impl).phases if phase not in ONE_SHOT_PHASES]
    problems = []
    for before in phases:
        for phase in phases:
            worker.run_phase(before)
            leftovers = worker.run_phase(phase).product["leftovers"]
            continuing = phase == before == "train_step"
            if leftovers != (None if continuing else 0):
                problems.append(f"{phase} after {before}: {leftovers} tensors of the earlier round alive at its clock")
    assert not problems, "\n".join(problems)


# How far a worker's floor may exceed this machine's, measured here: the worker measured its floor when it started,
# this test measures the machine's now, and the load of a shared machine may change between the two (a busy sibling
# hyperthread alone can slow a core's other thread by half).
FLOOR_MARGIN = 3


@functools.cache
def machine_clock_floor() -> dict[str, float]:
    """This machine's clock floor, measured in this process as a worker measures its own (phasebench/train/timing.py,
    the median of FLOOR_ROUNDS rounds): two clock reads back to back ("reads"), and two around an empty Python call
    ("call", the Python worker's empty phase); and the clock's resolution in ns ("tick")."""
    from phasebench.train.timing import FLOOR_ROUNDS, timed_cpu, timer_floor  # imports torch: only where it runs

    reads = []
    for _ in range(FLOOR_ROUNDS):
        start = time.perf_counter_ns()
        end = time.perf_counter_ns()
        reads.append(end - start)
    call = timer_floor(timed_cpu, lambda trainer: None, None)
    tick = time.get_clock_info("perf_counter").resolution * 1e9
    return {"reads": int(statistics.median(reads)), "call": call, "tick": tick}


def test_timer_floor(worker_for, settings, impl, device):
    """The clock's own cost, measured by each worker when it starts (docs/method.md#what-is-measured), against this
    machine's clock measured here. A clock that ticks every nanosecond advances across any read: no floor is 0. On
    cpu nothing but the body sits between the clock reads: the Python worker's floor is at most FLOOR_MARGIN times
    the same empty call timed here, and the C++ worker's at most FLOOR_MARGIN times two clock reads back to back in
    Python (C++ reads the same clock, with no interpreter between the reads)."""
    if settings.count:
        pytest.skip("--count instructions: the workers read no clock (their floor is the count bracket's)")
    worker = worker_for(impl, device)
    floor, machine = worker.timer_floor_ns, machine_clock_floor()
    language = registry.get(impl).language
    if machine["tick"] <= 1:
        assert floor > 0, f"{impl}: a timer floor of {floor} ns on a clock of {machine['tick']:g} ns resolution"
    if device == "cpu":
        mine = {"python": "call", "cpp": "reads"}[language]
        bound = FLOOR_MARGIN * machine[mine]
        assert floor <= bound, (f"{impl} timer floor on cpu {floor} ns, more than {FLOOR_MARGIN} x this machine's "
                                f"{machine[mine]} ns ({mine}, measured here: {machine})")


def test_a_tensor_whose_memory_a_view_keeps_alive_is_a_leftover(settings, tmp_path):
    """Python's leftover check follows a tensor's memory as C++'s does (its WeakTensor): a round's output freed
    while a view of it lives on still holds its memory when the next clock starts, and is counted."""
    from phasebench.train.trainer import Trainer

    trainer = Trainer(settings.source.root, log_path=str(tmp_path / "progress.log"))
    try:
        trainer.run_phase("forward")
        view = trainer.output.detach().view(-1)  # what a leak through a view would keep alive
        assert trainer.run_phase("loss").product["leftovers"] == 1
        del view
        assert trainer.run_phase("loss").product["leftovers"] == 0
    finally:
        trainer.close()

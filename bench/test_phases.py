"""Every training phase, per implementation and device, timed inside its worker (README, "What is measured").

Each case records its worker's timer floor (the empty phase's median) and the phase's own CPU use, and
checks, round by round, that the phase did its work (its product) and that no tensor an earlier round
left was still alive when its clock started. Under --benchmark-disable each case runs a few rounds, so
the test command checks every phase in both languages."""

import statistics
import types

import pytest

from bench.client import worker_clock
from bench.trainer import PHASE_NAMES
from conftest import DEVICES, IMPLEMENTATIONS, RUN_ORDER

# pytest-benchmark reads the in-worker durations through this clock.
pytestmark = pytest.mark.benchmark(timer=worker_clock)

EPOCH_BATCHES = 938  # 60,000 images in batches of 64, the last of 32
PARAMETER_TENSORS = 8  # conv1, conv2, fc1, fc2: a weight and a bias each
BATCH = ((64, 1, 28, 28), (32, 1, 28, 28))  # the last batch of an epoch holds 32
OUTPUT = ((64, 10), (32, 10))
CONV1 = ((10, 1, 5, 5),)
# What each phase must produce: allowed shapes of its main tensor, and whether it has a loss.
EXPECTED = {
    "data_loading": (BATCH, False),
    "copy_to_device": (BATCH, False),
    "optimizer_init": (((21840,),), False),  # the Net's parameter count
    "forward": (OUTPUT, False),
    "loss": (((),), True),
    "backward": (CONV1, False),
    "param_update": (CONV1, False),
    "progress_print": (((),), True),
    "train_step": (OUTPUT, True),
}
CHECKED_ROUNDS = 3  # under --benchmark-disable: enough consecutive rounds to see batches advance
RECOMPUTE_TOLERANCE = 1e-5  # forward's output against the model run again: the same kernels, the same draws
UPDATE_TOLERANCE = 1e-6  # conv1.weight against SGD's formula, relative to its largest value


def work_problems(phase: str, product: dict) -> list[str]:
    """What is wrong with one round's product: the checks that prove the phase did its work."""
    problems = []
    shapes, has_loss = EXPECTED[phase]
    if tuple(product["shape"]) not in shapes:
        problems.append(f"shape {product['shape']}, expected one of {shapes}")
    if not product["finite"]:
        problems.append("non-finite values")
    if (product["loss"] is not None) != has_loss:
        problems.append(f"loss {product['loss']}")
    if phase == "copy_to_device" and not (product["on_device"] and product["matches_host"]):
        problems.append(f"on the requested device: {product['on_device']}, equal to the host batch: "
                        f"{product['matches_host']}")
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


def batch_problems(batches: list[int]) -> list[str]:
    """Consecutive rounds of one worker load consecutive batches, wrapping after the epoch's last."""
    return [f"round {i + 1} loaded batch {later} after batch {earlier}"
            for i, (earlier, later) in enumerate(zip(batches, batches[1:])) if later != (earlier + 1) % EPOCH_BATCHES]


def leftover_problems(phase: str, products: list[dict]) -> list[str]:
    """Earlier rounds' tensors alive when a clock started (None: a train_step after a train_step, which
    frees the previous step's tensors itself, as any training loop does)."""
    problems = [f"round {i}: {p['leftovers']} tensors of earlier rounds alive when the clock started"
                for i, p in enumerate(products) if p["leftovers"]]
    if phase != "train_step":
        problems += [f"round {i}: leftovers not checked" for i, p in enumerate(products) if p["leftovers"] is None]
    return problems


# The kernel brings another running thread's CPU time up to date only at its scheduler tick (1 to 10 ms),
# so the process clock read around a shorter body bills it what that thread used before: the process
# figure is kept only where the bodies are long enough for that to be small (README, "Utilization").
PROCESS_CPU_MIN_BODY_S = 0.01


def phase_cpu(rounds) -> dict:
    """The phase's own CPU use over its timed bodies, in cores: the thread that ran them (exact at any
    length), and the whole process (all intra-op threads) where the bodies last long enough."""
    wall = sum(timed.ns for timed in rounds) or 1
    long_enough = statistics.median(timed.ns for timed in rounds) / 1e9 >= PROCESS_CPU_MIN_BODY_S
    return {"phase_thread_cpu_cores": round(sum(timed.thread_cpu_ns for timed in rounds) / wall, 3),
            "phase_cpu_cores": round(sum(timed.cpu_ns for timed in rounds) / wall, 3) if long_enough else None}


class Rounds:
    """The worker of each round: the long-lived one of the implementation and device, or with
    --processes N, N fresh workers in turn, each warmed up and then timing its share of the rounds."""

    def __init__(self, phase, settings, pooled, spawn):
        self.phase, self.settings, self.pooled, self.spawn = phase, settings, pooled, spawn
        self.workers = []  # every worker used, in order
        self.worker, self.left = None, 0

    def shares(self) -> list[int]:
        n, rounds = self.settings.processes, self.settings.rounds
        return [rounds // n + (i < rounds % n) for i in range(n)]

    def next(self):
        if self.settings.processes == 1:
            if self.worker is None or not self.worker.alive():
                self.worker = self.pooled()
                self.workers.append(self.worker)
            return self.worker
        if self.left == 0:
            self.close()
            self.worker = self.spawn()
            self.workers.append(self.worker)
            for _ in range(self.settings.warmup_rounds):
                self.worker.run_phase(self.phase)
            self.left = self.shares()[len(self.workers) - 1] if len(self.workers) <= self.settings.processes else 1
        self.left -= 1
        return self.worker

    def close(self):
        if self.settings.processes > 1 and self.worker is not None:
            self.worker.stop()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("phase", PHASE_NAMES)
def test_phase(request, benchmark, worker_for, new_worker, utilization_of, settings, phase, impl, device):
    assert phase in EXPECTED, f"no expected product for phase '{phase}': add it to EXPECTED"
    pooled = lambda: worker_for(impl, device)  # noqa: E731 (skips what cannot run here)
    rounds = Rounds(phase, settings, pooled, new_worker(impl, device) if settings.processes > 1 else None)
    taken = []  # (worker, ns, PhaseRound) per round, warm-up included

    def one_round():
        worker = rounds.next()
        timed = worker.run_phase(phase)
        worker_clock.advance(timed.ns)
        taken.append((worker, timed.ns, timed))

    benchmark.group = phase
    benchmark.extra_info.update(implementation=impl, device=device, phase=phase, rounds=settings.rounds,
                                warmup_rounds=settings.warmup_rounds, threads=settings.threads,
                                processes=settings.processes, order=request.node.stash.get(RUN_ORDER, None))
    # With several processes, no one worker's CPU is the case's: utilization then watches the device only.
    watched = pooled() if settings.processes == 1 else types.SimpleNamespace(pid=None, device=device, impl=impl)
    try:
        with utilization_of(watched):
            benchmark.pedantic(one_round, rounds=settings.rounds,
                               warmup_rounds=settings.warmup_rounds if settings.processes == 1 else 0, iterations=1)
        while len(taken) < CHECKED_ROUNDS:  # under --benchmark-disable
            one_round()
    finally:
        rounds.close()

    counted = taken[-settings.rounds:] if benchmark.enabled else taken
    floors = [worker.timer_floor_ns for worker in rounds.workers]
    benchmark.extra_info.update(timer_floor_s=statistics.median(floors) / 1e9,
                                timer_floors_s=[floor / 1e9 for floor in floors],
                                **phase_cpu([timed for _, _, timed in counted]))

    products = [timed.product for _, _, timed in taken]
    problems = [f"round {i}: {problem}" for i, product in enumerate(products) for problem in work_problems(phase, product)]
    problems += leftover_problems(phase, products)
    if phase in ("data_loading", "copy_to_device", "train_step"):
        for worker in rounds.workers:
            problems += batch_problems([timed.product["batch"] for w, _, timed in taken if w is worker])
    assert not problems, f"{phase} ({impl} on {device}):\n  " + "\n  ".join(problems[:10])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_nothing_left_over_in_any_order(worker_for, impl, device):
    """Whatever phase ran before, nothing it left is alive when the next phase's clock starts: each
    phase's preparation releases it, so a -k selection cannot change what a clock holds."""
    worker = worker_for(impl, device)
    problems = []
    for before in PHASE_NAMES:
        for phase in PHASE_NAMES:
            worker.run_phase(before)
            leftovers = worker.run_phase(phase).product["leftovers"]
            continuing = phase == before == "train_step"
            if leftovers != (None if continuing else 0):
                problems.append(f"{phase} after {before}: {leftovers} tensors of the earlier round alive at its clock")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_timer_floor(worker_for, impl, device):
    """The clock's own cost, measured by each worker when it starts (README, "What is measured"): on cpu
    nothing but the body sits between the clock reads."""
    worker = worker_for(impl, device)
    floor = worker.timer_floor_ns
    assert floor > 0 or impl == "cpp", f"{impl}: a timer floor of {floor} ns cannot be measured"
    if device == "cpu":
        bound = {"python": 300, "cpp": 100}[impl]
        assert floor <= bound, f"{impl} timer floor on cpu {floor} ns, more than {bound} ns"

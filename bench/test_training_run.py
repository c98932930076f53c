"""The published run end to end (docs/results.md#the-published-table-redone), per implementation and device.

Each round is a fresh worker process that trains --epochs epochs with every phase timed, then stops.
The benchmark's time is the published table's Total Time: the program's own time, measured inside
the worker from before its dataset is opened to the end of its last step (the published programs ran
with the interpreter and torch already loaded). extra_info gets what the worker reports, per round and
as medians: Summed Time (the phase timers added up), Step Count, each phase's total, the loop's time
and the phases' own CPU use; and, seen from here, the process total (spawn to exit) with its start-up
(spawn to trainer ready, torch's import included) and exit; and the start-up's parts as the worker reports them
(docs/method.md#a-workers-start-up-in-parts). One more fresh worker trains free-running,
without synchronizing inside the step, for a Total Time that the phase timers do not disturb. The utilization
recorded (extra_info gpu and cpu) is the timed rounds': sampled from this process across each round's train
request, the rounds' windows together; the free-running run's is in free_running. The train request may take
--round-timeout seconds per epoch.

Under --benchmark-disable (the test command) one timed round and the free-running run are checked, each
stopping after CHECK_STEPS steps (the train request's max_steps): the same code from the dataset's opening to
the last step, in seconds instead of minutes; a check, not a measurement."""

import dataclasses
import re
import statistics
import threading
import time
from contextlib import contextmanager, nullcontext

import pytest

from phasebench import registry, schema
from phasebench.fitness import Fitness, run_and_wait_ns
from phasebench.plugin.pairing import block_schedule, pairing_info, ratio_info, why_unpaired
from phasebench.programs import DEFAULT_PROGRAM, case_phase
from phasebench.programs import program as program_named
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import LOG_INTERVAL, ONE_SHOT_PHASES
from phasebench.stats import MEAN, paired_ratio
from phasebench.worker.client import describe_exit, worker_clock
from phasebench.worker.protocol import Train

CHECK_STEPS = 3 * LOG_INTERVAL + 1  # every phase runs, progress_print four times
HEARTBEAT_S = 15.0  # how often a long round says where it is
LOG_LINE = re.compile(rb"Train Epoch: (\d+) \[\s*(\d+)/\s*(\d+)\]")


def last_logged_position(log_path: str, batch_size: int = 0, steps_per_epoch: int = 0, epochs: int = 0) -> str | None:
    """Where the worker's published log says it is, from its last complete line: "epoch E, image N/60000",
    and with the workload's shape "step S/T" too (S counted from the images the line reports)."""
    try:
        with open(log_path, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - 4096))
            lines = LOG_LINE.findall(log.read())
    except OSError:
        return None
    if not lines:
        return None
    epoch, seen, total = (int(field) for field in lines[-1])
    where = f"epoch {epoch}" + (f"/{epochs}" if epochs else "") + f", image {seen}/{total}"
    if batch_size and steps_per_epoch and epochs:
        where += f", step {(epoch - 1) * steps_per_epoch + seen // batch_size}/{steps_per_epoch * epochs}"
    return where


@contextmanager
def heartbeat(say, label: str, log_path: str | None, interval: float = HEARTBEAT_S, **shape):
    """While a round trains, every `interval` seconds a line on the terminal: the time so far and the
    worker's last logged position. Read from the log the program writes anyway, from this process: the worker
    does nothing more for it. Its log is block-buffered (as the published programs' would be into a file),
    so the position lags by up to one buffer of lines (about 1,950 steps in Python,
    docs/getting-started.md#what-a-run-prints)."""
    done = threading.Event()
    started = time.monotonic()

    def beat():
        while not done.wait(interval):
            where = last_logged_position(log_path, **shape) if log_path else None
            say(f"{label}: {time.monotonic() - started:.0f} s so far"
                + (f"; its log is at {where}" if where else "; nothing logged yet"))

    thread = threading.Thread(target=beat, name="phasebench-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def train_in_fresh_worker(spawn, settings, synchronize: bool, watch=nullcontext, one_shot: bool = False,
                          max_steps: int = 0, say=None, label: str = "", workload=None) -> dict:
    """Spawn a worker, train while `watch` watches it, stop it. Returns what it reported plus the times
    seen from here: spawn to exit, and of that, spawn to trainer ready and stop request to exit. A run with a
    one-shot phase (a cold compile takes minutes on a loaded cpu) may take one --round-timeout more. With
    `say`, a heartbeat reports the round's progress while it trains."""
    worker = spawn()
    ready_ns = time.perf_counter_ns()
    shape = dict(batch_size=workload.batch_size, steps_per_epoch=workload.steps_per_epoch,
                 epochs=settings.epochs) if workload else {}
    beating = heartbeat(say, label, worker.log_path, **shape) if say else nullcontext()
    try:
        with watch(worker), beating:
            reply = worker.request(Train(settings.epochs, synchronize, max_steps),
                                   timeout=settings.round_timeout * (settings.epochs + one_shot))
    finally:
        stop_ns = time.perf_counter_ns()
        status = worker.stop()
    exit_ns = time.perf_counter_ns()
    assert status == 0, f"{worker.name} ended with {describe_exit(status)} after training"
    return dataclasses.asdict(reply) | {
        "total_ns": exit_ns - worker.started_ns, "startup_ns": ready_ns - worker.started_ns,
        "stopping_ns": exit_ns - stop_ns, "startup_parts_ns": worker.info.startup_parts_ns}


# A round's Total Time and phase totals each sum the hundreds of steps of an epoch, so their log ratios are close to
# normal: a ratio of the rounds is their geometric mean with its t interval, which four pairs give (the median's rank
# interval needs six: docs/method.md#every-ratio-with-its-interval).
RUN_STATISTIC = MEAN


@dataclasses.dataclass
class PairedRuns:
    """The rounds of a training run's group, measured side by side in time (phasebench/plugin/pairing.py)."""

    runs: dict  # {implementation: its rounds' reports, in the order run}
    windows: dict  # {implementation: its rounds' utilization windows}
    unpaired: dict  # {implementation: why it was not run}: it cannot run here
    fitness: dict  # {implementation: Fitness}: whether the machine could measure its rounds


def measure_paired_runs(group, device, workload, settings, new_worker, utilization_of, progress, plan,
                        program: str = DEFAULT_PROGRAM, max_steps: int = 0) -> PairedRuns:
    """--run-rounds rounds of every implementation of the group, each a fresh worker of `program`, in the balanced
    sequence (A B B A …): a pair of rounds runs back to back."""
    spawns, unpaired = {}, {}
    for impl in group:
        try:
            spawns[impl] = new_worker(impl, device, workload, program=program)
        except pytest.skip.Exception as skipped:
            unpaired[impl] = f"{impl} cannot run here: {skipped}"
    runs, windows = {impl: [] for impl in spawns}, {impl: [] for impl in spawns}
    fitness = {impl: Fitness() for impl in spawns}

    @contextmanager
    def watched(worker, impl):
        fitness[impl].begin()
        run, wait = run_and_wait_ns(worker.pid)  # from here: one request a round, a wake-up in seconds of training
        with utilization_of.window(worker, windows[impl]):
            yield
        ran, waited = run_and_wait_ns(worker.pid)
        fitness[impl].add(ran - run, waited - wait)

    for _, impl in block_schedule(tuple(spawns), settings.run_rounds):
        label = f"{impl} round {len(runs[impl]) + 1}/{settings.run_rounds}"
        progress(f"{label}: training {plan} ...")
        run = train_in_fresh_worker(spawns[impl], settings, synchronize=True,
                                    watch=lambda worker, impl=impl: watched(worker, impl),
                                    one_shot=registry.get(impl).one_shot is not None, say=progress, label=label,
                                    workload=workload, max_steps=max_steps)
        runs[impl].append(run)
        progress(f"{label}: {run['steps']} steps; Total Time {run['program_ns'] / 1e9:.1f} s, "
                 f"process {run['total_ns'] / 1e9:.1f} s")
    return PairedRuns(runs, windows, unpaired, fitness)


def phase_ratios(impl: str, paired: PairedRuns) -> dict:
    """Each phase's in-run total over its reference's, from the same pairs of rounds as the Total Time's ratio."""
    partner = registry.get(impl).pair
    if partner not in paired.runs:
        return {}
    own, theirs = paired.runs[impl], paired.runs[partner]
    shared = [name for name in own[0]["phase_ns"] if own[0]["phase_ns"][name] and theirs[0]["phase_ns"].get(name)]
    totals = {name: lambda run, name=name: run["phase_ns"][name] for name in shared} | {
        schema.SUMMED_RATIO: lambda run: sum(run["phase_ns"].values()), schema.PROCESS_TOTAL_RATIO: lambda run: run["total_ns"]}
    return {name: ratio_info(paired_ratio([read(run) for run in own], [read(run) for run in theirs],
                                          statistic=RUN_STATISTIC), partner, None)
            for name, read in totals.items()}


@pytest.mark.paired
@pytest.mark.benchmark(timer=worker_clock)  # the program's own time, as the worker measured it
def test_training_run(request, benchmark, new_worker, utilization_of, settings, progress, pairing, impl, device, workload):  # cases: phasebench/plugin/__init__.py
    spawn = new_worker(impl, device, workload)
    one_shot = registry.get(impl).one_shot is not None
    runs = []
    max_steps = 0 if benchmark.enabled else CHECK_STEPS
    steps = max_steps or workload.steps_per_epoch * settings.epochs
    rounds = settings.run_rounds if benchmark.enabled else 1
    plan = (f"{settings.epochs} epoch(s), {steps} steps" if benchmark.enabled else f"{steps} steps (a check)") + \
        ", in a fresh worker"

    def one_run():
        progress(f"round {len(runs) + 1}/{rounds}: training {plan} ...")
        runs.append(train_in_fresh_worker(spawn, settings, synchronize=True, watch=each_round, one_shot=one_shot,
                                          max_steps=max_steps, say=progress, label=f"round {len(runs) + 1}/{rounds}",
                                          workload=workload))
        worker_clock.advance(runs[-1]["program_ns"])
        progress(f"round {len(runs)}/{rounds}: {runs[-1]['steps']} steps; Total Time {runs[-1]['program_ns'] / 1e9:.1f} s, "
                 f"process {runs[-1]['total_ns'] / 1e9:.1f} s")

    benchmark.group = "training_run"
    schema.write(benchmark, schema.TrainingRunInfo, implementation=impl, language=registry.get(impl).language,
                 reference=registry.get(impl).pair, device=device, phase="training_run", **workload.as_info())
    if pairing.applies:
        # Paired in time (docs/method.md#paired-in-time): the group's first case runs every side's rounds in turn.
        paired = pairing.measure_once(lambda group: measure_paired_runs(group, device, workload, settings, new_worker,
                                                                        utilization_of, progress, plan))
        runs.extend(paired.runs[impl])
        replay = iter(runs)

        def replayed_run():
            worker_clock.advance(next(replay)["program_ns"])

        schema.write(benchmark, schema.TrainingRunInfo, phase_ratios=phase_ratios(impl, paired) or None,
                     machine_fit=paired.fitness[impl].as_info(),
                     **pairing_info(impl, {name: [run["program_ns"] / 1e9 for run in own]
                                           for name, own in paired.runs.items()}, paired.unpaired, 1, None,
                                    statistic=RUN_STATISTIC))
        benchmark.pedantic(replayed_run, rounds=len(runs), warmup_rounds=0, iterations=1)
        utilization_of.record_windows(impl, device, paired.windows[impl])
    else:
        if benchmark.enabled:
            schema.write(benchmark, schema.TrainingRunInfo, unpaired=why_unpaired(request.config))
        # The rounds' utilization, sampled from this process across each round's train request (nothing in the worker).
        with utilization_of.rounds(impl, device) as each_round:
            benchmark.pedantic(one_run, rounds=settings.run_rounds, warmup_rounds=0, iterations=1)  # each a cold start
    # The loop alone, with no phase timers: asked for by --free-running, always checked under --benchmark-disable.
    free, free_use = None, {}
    if settings.free_running:
        progress(f"free-running: training {plan}, no phase timers ...")
        free = train_in_fresh_worker(spawn, settings, synchronize=False, one_shot=one_shot,
                                     watch=lambda worker: utilization_of.beside(worker, "free-running", free_use),
                                     max_steps=max_steps, say=progress, label="free-running", workload=workload)
        progress(f"free-running: {free['steps']} steps; Total Time {free['program_ns'] / 1e9:.1f} s")

    # The phases the run times: each step phase by phase, or where the step is one graph the whole step; and
    # a one-shot phase (graph_capture, compile) once (docs/gpu.md#cuda-graphs-and-torchcompile).
    registered = registry.get(impl)
    timed_names = registered.run_phases
    for run in runs:
        assert set(timed_names) <= set(run["phase_ns"]), f"phases reported: {sorted(run['phase_ns'])}"
        assert "train_step" not in run["phase_ns"], "the run's in-loop step total is step_in_run, not train_step"
        assert run["steps"] == steps, f"{run['steps']} steps in {settings.epochs} epoch(s), expected {steps}"
        others = {name: ns for name, ns in run["phase_ns"].items() if ns and name not in timed_names}
        assert not others, f"{impl}'s run timed phases it does not have: {others}"
        timed = {name: run["phase_ns"][name] for name in timed_names}
        assert all(ns > 0 for ns in timed.values()), f"phase totals: {timed}"
        parts = {name: run[f"{name}_ns"] for name in ("startup", "setup", "loop", "program", "stopping", "total")}
        assert sum(timed.values()) <= run["loop_ns"], f"summed phases {sum(timed.values())} ns outlast their loop {parts}"
        assert parts["setup"] < parts["startup"] and parts["program"] == parts["setup"] + parts["loop"], (
            f"the program's time is its set-up (within the worker's start-up) and its loop: {parts}")
        assert parts["startup"] + parts["loop"] + parts["stopping"] <= parts["total"], f"the parts outlast the whole {parts}"
        # The worker's own parts of its start-up lie inside the start-up seen from here, its set-up among them.
        started = run["startup_parts_ns"]
        assert min(started.values()) >= 0 and sum(started.values()) <= parts["startup"], (started, parts)
        assert started["trainer"] + started.get("cuda_init", 0) <= parts["setup"], (started, parts)
        assert ("cuda_init" in started) == (device != "cpu"), f"start-up parts on {device}: {sorted(started)}"
    if free:
        assert free["steps"] == steps, f"free-running: {free['steps']} steps, expected {steps}"
        step_timed = {name: ns for name, ns in free["phase_ns"].items() if ns and name not in ONE_SHOT_PHASES}
        assert not step_timed, f"free-running, yet phases were timed: {step_timed}"
        if registered.one_shot:
            assert free["phase_ns"][registered.one_shot] > 0, f"free-running, {registered.one_shot} was not timed"
        assert 0 < free["loop_ns"] < free["total_ns"]
    every = runs + ([free] if free else [])

    summed_ns = [sum(run["phase_ns"][name] for name in timed_names) for run in runs]
    schema.write(
        benchmark, schema.TrainingRunInfo, epochs=settings.epochs,
        rounds=settings.run_rounds, warmup_rounds=0, threads=settings.threads, steps=runs[0]["steps"],
        summed_s=[ns / 1e9 for ns in summed_ns], summed_median_s=statistics.median(summed_ns) / 1e9,
        program_s=[run["program_ns"] / 1e9 for run in runs], process_total_s=[run["total_ns"] / 1e9 for run in runs],
        **{f"{name}_median_s": statistics.median(run[f"{name}_ns"] for run in runs) / 1e9
           for name in ("program", "setup", "startup", "loop", "stopping", "total")},
        phase_total_s={name: statistics.median(run["phase_ns"][name] for run in runs) / 1e9 for name in timed_names},
        # The timed bodies' own CPU use: process CPU time over their summed wall time.
        phase_cpu_cores=round(statistics.median(run["phase_cpu_ns"] / ns for run, ns in zip(runs, summed_ns)), 3),
        # The loop holds the one-shot phase (graph_capture, compile), timed apart so that it can be taken out; the
        # run's own utilization (gpu, cpu) beside it.
        free_running=free and {"total_s": free["program_ns"] / 1e9, "loop_s": free["loop_ns"] / 1e9,
                               "process_total_s": free["total_ns"] / 1e9, "one_shot": registered.one_shot,
                               "one_shot_s": free["phase_ns"][registered.one_shot] / 1e9 if registered.one_shot
                               else None, **free_use},
        # The worker's peak resident memory, and on cuda the peak allocated device memory, per timed round
        # and in the free-running run (docs/implementations.md#implementations-and-workloads).
        peak_rss_bytes=[run["peak_rss_bytes"] for run in every],
        peak_rss_median_bytes=statistics.median(run["peak_rss_bytes"] for run in every),
        peak_device_bytes=[run["peak_device_bytes"] for run in every],
        peak_device_median_bytes=(None if device == "cpu"
                                  else statistics.median(run["peak_device_bytes"] for run in every)),
        # The worker's page faults across each train request, per timed round and in the free-running run
        # (docs/page-faults.md): a trimmed heap faults its pages back in every step.
        minor_faults=[run["minor_faults"] for run in every],
        major_faults=[run["major_faults"] for run in every],
        minor_faults_per_step_median=round(statistics.median(run["minor_faults"] / run["steps"] for run in runs), 2),
        free_running_minor_faults_per_step=round(free["minor_faults"] / free["steps"], 2) if free else None,
        # Where each round's worker start went (docs/method.md#a-workers-start-up-in-parts).
        startup_parts_s=[{part: ns / 1e9 for part, ns in run["startup_parts_ns"].items()} for run in runs],
        startup_parts_median_s={part: statistics.median(run["startup_parts_ns"][part] for run in runs) / 1e9
                                for part in runs[0]["startup_parts_ns"]},
    )
    for run in every:
        assert run["peak_rss_bytes"] > 0, f"peak resident memory {run['peak_rss_bytes']}"
        on_cuda = run["peak_device_bytes"] is not None and run["peak_device_bytes"] > 0
        assert on_cuda == (device != "cpu"), f"peak device memory {run['peak_device_bytes']} on {device}"


PROGRAM_CHECK_STEPS = 60  # another program's run under --benchmark-disable: a check, not a measurement


@pytest.mark.paired
@pytest.mark.benchmark(timer=worker_clock)  # the program's own time, as the worker measured it
def test_program_run(request, benchmark, new_worker, utilization_of, settings, progress, pairing, program, impl,
                     device):  # cases: phasebench/plugin/cases.py, per program --program selects beside the seed's
    """A training run of another program (phasebench/programs.py): its declared fixed step count in a fresh worker a
    round, its loop untimed inside (docs/method.md#the-regression-program), paired rounds as test_training_run's. Its
    Total Time is the program's own time (set-up and loop, as the worker measured them); it keys as
    PROGRAM:training_run."""
    declared = program_named(program)
    steps = declared.run_steps if benchmark.enabled else PROGRAM_CHECK_STEPS
    max_steps = 0 if benchmark.enabled else PROGRAM_CHECK_STEPS
    plan = f"{steps} steps" + ("" if benchmark.enabled else " (a check)") + ", in a fresh worker"
    runs = []
    benchmark.group = case_phase(program, "training_run")
    schema.write(benchmark, schema.TrainingRunInfo, implementation=impl, language=registry.get(impl).language,
                 reference=registry.get(impl).pair, device=device, phase=benchmark.group, program=program)
    if pairing.applies:
        paired = pairing.measure_once(lambda group: measure_paired_runs(
            group, device, DEFAULT_WORKLOAD, settings, new_worker, utilization_of, progress, plan, program, max_steps))
        runs.extend(paired.runs[impl])
        schema.write(benchmark, schema.TrainingRunInfo, machine_fit=paired.fitness[impl].as_info(),
                     **pairing_info(impl, {name: [run["program_ns"] / 1e9 for run in own]
                                           for name, own in paired.runs.items()}, paired.unpaired, 1, None,
                                    statistic=RUN_STATISTIC))
        windows = paired.windows[impl]
    else:
        if benchmark.enabled:
            schema.write(benchmark, schema.TrainingRunInfo, unpaired=why_unpaired(request.config))
        spawn, windows = new_worker(impl, device, program=program), []
        for number in range(settings.run_rounds if benchmark.enabled else 1):
            progress(f"round {number + 1}: training {plan} ...")
            runs.append(train_in_fresh_worker(spawn, settings, synchronize=True, max_steps=max_steps,
                                              watch=lambda worker: utilization_of.window(worker, windows)))
    replay = iter(runs)

    def replayed_run():
        worker_clock.advance(next(replay)["program_ns"])

    benchmark.pedantic(replayed_run, rounds=len(runs), warmup_rounds=0, iterations=1)
    utilization_of.record_windows(impl, device, windows)
    for run in runs:
        parts = {name: run[f"{name}_ns"] for name in ("startup", "setup", "loop", "program", "stopping", "total")}
        assert run["steps"] == steps, f"{run['steps']} steps, expected {steps}"
        assert run["phase_ns"] == {}, f"the run timed phases: {run['phase_ns']}"
        assert 0 < parts["loop"] and parts["program"] == parts["setup"] + parts["loop"], parts
        assert parts["setup"] < parts["startup"] and parts["startup"] + parts["loop"] <= parts["total"], parts
    schema.write(
        benchmark, schema.TrainingRunInfo, rounds=len(runs), warmup_rounds=0, threads=settings.threads, steps=steps,
        program_s=[run["program_ns"] / 1e9 for run in runs], process_total_s=[run["total_ns"] / 1e9 for run in runs],
        **{f"{name}_median_s": statistics.median(run[f"{name}_ns"] for run in runs) / 1e9
           for name in ("program", "setup", "startup", "loop", "stopping", "total")},
        peak_rss_bytes=[run["peak_rss_bytes"] for run in runs],
        peak_rss_median_bytes=statistics.median(run["peak_rss_bytes"] for run in runs),
        startup_parts_s=[{part: ns / 1e9 for part, ns in run["startup_parts_ns"].items()} for run in runs])


def test_heartbeat_reports_the_logged_position_while_a_round_trains(tmp_path):
    """A long round is not silence: the heartbeat says the time so far and the last complete log line's place."""
    log = tmp_path / "worker.log"
    said = []
    with heartbeat(said.append, "round 1/3", str(log), interval=0.05):
        time.sleep(0.12)  # nothing written yet
        log.write_text("Train Epoch: 1 [  640/60000]\tLoss: 2.2931\nTrain Epoch: 2 [ 1280/60000]\tLoss: 1.9\nTrain Ep")
        time.sleep(0.12)
    count = len(said)
    time.sleep(0.12)
    assert len(said) == count, "the heartbeat outlived its round"
    assert said[0].startswith("round 1/3: 0 s so far; nothing logged yet"), said
    assert said[-1].endswith("its log is at epoch 2, image 1280/60000"), said
    assert last_logged_position(str(log), batch_size=64, steps_per_epoch=938, epochs=10) == \
        "epoch 2/10, image 1280/60000, step 958/9380"
    assert last_logged_position(str(tmp_path / "absent.log")) is None

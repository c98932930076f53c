"""The published run end to end (README, "The published table, redone"), per implementation and device.

Each round is a fresh worker process that trains --epochs epochs with every phase timed, then stops.
The benchmark's time is the published table's Total Time: the program's own time, measured inside
the worker from before its dataset is opened to the end of its last step (the published programs ran
with the interpreter and torch already loaded). extra_info gets what the worker reports, per round and
as medians: Summed Time (the phase timers added up), Step Count, each phase's total, the loop's time
and the phases' own CPU use; and, seen from here, the process total (spawn to exit) with its start-up
(spawn to trainer ready, torch's import included) and exit. One more fresh worker trains free-running,
without synchronizing inside the step, for a Total Time that the phase timers do not disturb; the
utilization recorded is that run's. The train request may take --round-timeout seconds per epoch.

Under --benchmark-disable (the test command) one timed round and the free-running run are checked, each
stopping after CHECK_STEPS steps (the train request's max_steps): the same code from the dataset's opening to
the last step, in seconds instead of minutes; a check, not a measurement."""

import statistics
import time
from contextlib import nullcontext

import pytest

from bench import implementations
from bench.client import describe_exit, worker_clock
from bench.implementations import ONE_SHOT_PHASES
from bench.trainer import LOG_INTERVAL, PHASE_NAMES

CHECK_STEPS = 3 * LOG_INTERVAL + 1  # every phase runs, progress_print four times


def train_in_fresh_worker(spawn, settings, synchronize: bool, watch=nullcontext, one_shot: bool = False,
                          max_steps: int = 0) -> dict:
    """Spawn a worker, train while `watch` watches it, stop it. Returns what it reported plus the times
    seen from here: spawn to exit, and of that, spawn to trainer ready and stop request to exit. A run with a
    one-shot phase (a cold compile takes minutes on a loaded cpu) may take one --round-timeout more."""
    worker = spawn()
    ready_ns = time.perf_counter_ns()
    try:
        with watch(worker):
            reply = worker.request({"cmd": "train", "epochs": settings.epochs, "synchronize": synchronize,
                                    "max_steps": max_steps},
                                   timeout=settings.round_timeout * (settings.epochs + one_shot))
    finally:
        stop_ns = time.perf_counter_ns()
        status = worker.stop()
    exit_ns = time.perf_counter_ns()
    assert status == 0, f"{worker.name} ended with {describe_exit(status)} after training"
    return reply | {"total_ns": exit_ns - worker.started_ns, "startup_ns": ready_ns - worker.started_ns,
                    "stopping_ns": exit_ns - stop_ns}


@pytest.mark.benchmark(timer=worker_clock)  # the program's own time, as the worker measured it
def test_training_run(benchmark, new_worker, utilization_of, settings, progress, impl, device, workload):  # cases: bench/plugin.py
    spawn = new_worker(impl, device, workload)
    one_shot = implementations.get(impl).one_shot is not None
    runs = []
    max_steps = 0 if benchmark.enabled else CHECK_STEPS
    steps = max_steps or workload.steps_per_epoch * settings.epochs
    rounds = settings.run_rounds if benchmark.enabled else 1
    plan = (f"{settings.epochs} epoch(s), {steps} steps" if benchmark.enabled else f"{steps} steps (a check)") + \
        ", in a fresh worker"

    def one_run():
        progress(f"round {len(runs) + 1}/{rounds}: training {plan} ...")
        runs.append(train_in_fresh_worker(spawn, settings, synchronize=True, one_shot=one_shot, max_steps=max_steps))
        worker_clock.advance(runs[-1]["program_ns"])
        progress(f"round {len(runs)}/{rounds}: {runs[-1]['steps']} steps; Total Time {runs[-1]['program_ns'] / 1e9:.1f} s, "
                 f"process {runs[-1]['total_ns'] / 1e9:.1f} s")

    benchmark.group = "training_run"
    benchmark.pedantic(one_run, rounds=settings.run_rounds, warmup_rounds=0, iterations=1)  # each round a cold start
    progress(f"free-running: training {plan}, no phase timers ...")
    free = train_in_fresh_worker(spawn, settings, synchronize=False, watch=utilization_of, one_shot=one_shot,
                                 max_steps=max_steps)
    progress(f"free-running: {free['steps']} steps; Total Time {free['program_ns'] / 1e9:.1f} s")

    # The phases the run times: each step phase by phase, or where the step is one graph the whole step; and
    # a one-shot phase (graph_capture, compile) once (README, "CUDA graphs and torch.compile").
    registered = implementations.get(impl)
    timed_names = registered.run_phases
    for run in runs:
        assert set(PHASE_NAMES) <= set(run["phase_ns"]), f"phases reported: {sorted(run['phase_ns'])}"
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
    assert free["steps"] == steps, f"free-running: {free['steps']} steps, expected {steps}"
    step_timed = {name: ns for name, ns in free["phase_ns"].items() if ns and name not in ONE_SHOT_PHASES}
    assert not step_timed, f"free-running, yet phases were timed: {step_timed}"
    if registered.one_shot:
        assert free["phase_ns"][registered.one_shot] > 0, f"free-running, {registered.one_shot} was not timed"
    assert 0 < free["loop_ns"] < free["total_ns"]

    summed_ns = [sum(run["phase_ns"][name] for name in timed_names) for run in runs]
    benchmark.extra_info.update(
        implementation=impl, language=implementations.get(impl).language, reference=implementations.get(impl).pair,
        device=device, phase="training_run", **workload.as_info(), epochs=settings.epochs,
        rounds=settings.run_rounds, warmup_rounds=0, threads=settings.threads, steps=runs[0]["steps"],
        summed_s=[ns / 1e9 for ns in summed_ns], summed_median_s=statistics.median(summed_ns) / 1e9,
        program_s=[run["program_ns"] / 1e9 for run in runs], process_total_s=[run["total_ns"] / 1e9 for run in runs],
        **{f"{name}_median_s": statistics.median(run[f"{name}_ns"] for run in runs) / 1e9
           for name in ("program", "setup", "startup", "loop", "stopping", "total")},
        phase_total_s={name: statistics.median(run["phase_ns"][name] for run in runs) / 1e9 for name in timed_names},
        # The timed bodies' own CPU use: process CPU time over their summed wall time.
        phase_cpu_cores=round(statistics.median(run["phase_cpu_ns"] / ns for run, ns in zip(runs, summed_ns)), 3),
        # The loop holds the one-shot phase (graph_capture, compile), timed apart so that it can be taken out.
        free_running={"total_s": free["program_ns"] / 1e9, "loop_s": free["loop_ns"] / 1e9,
                      "process_total_s": free["total_ns"] / 1e9, "one_shot": registered.one_shot,
                      "one_shot_s": free["phase_ns"][registered.one_shot] / 1e9 if registered.one_shot else None},
        # The worker's peak resident memory, and on cuda the peak allocated device memory, per timed round
        # and in the free-running run (README, "Implementations and workloads").
        peak_rss_bytes=[run["peak_rss_bytes"] for run in runs] + [free["peak_rss_bytes"]],
        peak_rss_median_bytes=statistics.median(run["peak_rss_bytes"] for run in runs + [free]),
        peak_device_bytes=[run["peak_device_bytes"] for run in runs + [free]],
        peak_device_median_bytes=(None if device == "cpu"
                                  else statistics.median(run["peak_device_bytes"] for run in runs + [free])),
    )
    for run in runs + [free]:
        assert run["peak_rss_bytes"] > 0, f"peak resident memory {run['peak_rss_bytes']}"
        on_cuda = run["peak_device_bytes"] is not None and run["peak_device_bytes"] > 0
        assert on_cuda == (device != "cpu"), f"peak device memory {run['peak_device_bytes']} on {device}"

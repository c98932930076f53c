"""The training run (docs/results.md#the-published-table-redone): the published loop, each phase timed in place
(or only the whole loop, free-running), as the published program runs it. Its C++ twin is pb_train's loop in
cpp/src/run.cpp."""

from __future__ import annotations

import time

import torch

from phasebench.spec import LOG_INTERVAL, ONE_SHOT_PHASES, STEP_IN_RUN


def train(t, bodies: dict, epochs: int, synchronize: bool, max_steps: int = 0) -> tuple[dict[str, int], int, int, int]:
    """The published run of trainer `t`, timing `bodies` (phases.RUN_BODIES, a test slowdown applied); with
    max_steps above 0 it stops after that many steps (a check under --benchmark-disable, not a measurement).
    Returns (phase totals in ns, steps, loop ns, process CPU ns of the timed bodies).

    The frees that fall inside a phase's clock stay there, as in the published program. A one-shot phase
    (graph_capture, compile) is inside the loop's time, and timed even free-running: once, outside any step, so
    that a reader can take it out. Where the step is one graph, step_in_run is timed whole (with the log line when
    due) after its batch's data_loading and copy_to_device."""
    step = t.step_piece
    totals = dict.fromkeys(bodies, 0)
    cpu_total = 0

    def run(name):
        nonlocal cpu_total
        if synchronize or name in ONE_SHOT_PHASES:
            ns, cpu_ns = t.timed(bodies[name], t)[:2]
            totals[name] += ns
            cpu_total += cpu_ns
        else:
            bodies[name](t)

    def one_shot():
        run(step.one_shot_phase)
        step.ready = True

    steps = 0
    t.release()
    if t.device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(t.device)
    start = time.perf_counter_ns()
    run("optimizer_init")
    if step.one_shot_at_start:
        one_shot()
    for epoch in range(1, epochs + 1):
        if max_steps and steps >= max_steps:
            break
        t.epoch = epoch
        t.batches = iter(t.loader)
        batch_idx = 0
        while not max_steps or steps < max_steps:
            run("data_loading")
            if t.host is None:
                break
            if step.due(t):
                one_shot()
            run("copy_to_device")
            t.seen = (batch_idx + 1) * t.batch_size
            if step.whole:
                t.log_due = batch_idx % LOG_INTERVAL == 0
                run(STEP_IN_RUN)
            else:
                run("forward")
                run("loss")
                run("backward")
                if t.sync == "allreduce" and t.group_attached:  # data parallel: dist-mnist.cpp's all-reduce
                    run("grad_sync")
                run("param_update")
                if batch_idx % LOG_INTERVAL == 0:
                    run("progress_print")
            batch_idx += 1
            steps += 1
    if t.device.type == "cuda":
        torch.cuda.synchronize()
    loop_ns = time.perf_counter_ns() - start
    t.batches = None  # the phases start a new epoch
    return totals, steps, loop_ns, cpu_total

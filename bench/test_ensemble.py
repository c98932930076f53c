"""M models trained together on one device (docs/gpu.md#concurrent-jobs-and-ensembles).

test_ensemble[impl-device-M] trains M independent models on the same batches in the long-lived worker of the
implementation and device. Member k is the Net built right after seed k (k = 1..M: member 1 starts from the
published model's weights, each other member from its own seed's), with its own SGD. python and cpp train the
members one after another (a loop in the worker's language); python-vmap trains them as one vectorized
ensemble (torch.func; phasebench/train/ensemble.py). tests/equivalence/test_ensembles.py proves what each member trains.

Each benchmark round is one step of all M members, timed inside the worker as a phase is: the batch is loaded
and copied to the device before the clock starts (data loading is excluded: it is the same whatever M is, and
would hide what M changes), the device is synchronized at both ends, and the clock holds every member's
forward, loss, backward and update. --rounds steps are counted after --warmup-rounds. extra_info: `models`,
the time per step (step_median_s) and per model-step (model_step_median_s: a step's time over M), the step's
own CPU use, the worker's timer floor, and the worker's CPU and GPU use during the rounds.

Under --benchmark-disable each case runs CHECKED_STEPS steps.
"""

import math
import statistics

import pytest

from phasebench import registry, schema
from phasebench.cpu_windows import phase_cpu
from phasebench.phase_round import PhaseRound
from phasebench.worker.client import worker_clock
from phasebench.worker.protocol import EnsembleReply, EnsembleStart, EnsembleStep, EnsembleStop

CHECKED_STEPS = 2  # the first step's losses tell the members apart; the second follows it


@pytest.mark.benchmark(timer=worker_clock)
def test_ensemble(benchmark, worker_for, utilization_of, settings, impl, device, models, workload):  # cases: phasebench/plugin/__init__.py
    registered = registry.get(impl)
    worker = worker_for(impl, device, workload)
    steps = []

    def one_step():
        reply = worker.request(EnsembleStep())
        worker_clock.advance(reply.ns)
        steps.append(reply)

    benchmark.group = f"ensemble-{models}"
    schema.write(
        benchmark, schema.EnsembleInfo, implementation=impl, language=registered.language,
        reference=registered.pair, device=device, phase=f"ensemble-{models}", **workload.as_info(), note=registered.notes.get(device), models=models,
        ensemble=registered.ensemble, seeds=f"1..{models}", rounds=settings.rounds,
        warmup_rounds=settings.warmup_rounds, threads=settings.threads, timer_floor_s=worker.timer_floor_ns / 1e9,
        clock="one step of every member; the batch is loaded and copied to the device before the clock starts")
    worker.request(EnsembleStart(models))
    try:
        with utilization_of(worker):
            benchmark.pedantic(one_step, rounds=settings.rounds, warmup_rounds=settings.warmup_rounds, iterations=1)
        while len(steps) < CHECKED_STEPS:  # under --benchmark-disable
            one_step()
    finally:
        if worker.alive():
            worker.request(EnsembleStop())  # the long-lived worker goes on without its M models

    counted = steps[-settings.rounds:] if benchmark.enabled else steps
    step_median_s = statistics.median(step.ns for step in counted) / 1e9
    schema.write(benchmark, schema.EnsembleInfo, step_median_s=step_median_s,
                 model_step_median_s=step_median_s / models, **phase_cpu([as_round(step) for step in counted]))

    problems = [f"step {i}: {len(step.losses)} losses for {models} models, or not all finite and below 10: "
                f"{step.losses[:4]}" for i, step in enumerate(steps)
                if len(step.losses) != models or not all(math.isfinite(x) and 0 <= x < 10 for x in step.losses)]
    # Different seeds give different models: a first step whose members all lose the same trained one model M times.
    if models > 1 and len(set(steps[0].losses)) == 1:
        problems.append(f"the {models} members' first losses are all {steps[0].losses[0]}: one model, not {models}")
    assert not problems, f"ensemble of {models} ({impl} on {device}):\n  " + "\n  ".join(problems[:10])



def as_round(step: EnsembleReply) -> PhaseRound:
    """An ensemble step's reply as test_phases.phase_cpu reads a phase's round."""
    return PhaseRound(step.ns, step.cpu_ns, step.thread_cpu_ns, {})

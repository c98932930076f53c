"""What one difference from pytorch/examples costs (docs/method.md#how-our-trainers-differ-from-pytorchexamples-and-why):
the C++ example reads loss.item() after every step, to check it for NaN; ours, like the published
Python program, reads it only for the log line. The read is timed as a phase of its own, in both
languages, so the README can say what leaving it out saves per step (on cuda it is a synchronization)."""

import pytest

from phasebench import registry, schema
from phasebench.cpu_windows import phase_cpu
from phasebench.worker.client import worker_clock

pytestmark = pytest.mark.benchmark(timer=worker_clock)


def test_loss_item(benchmark, worker_for, utilization_of, settings, impl, device, workload):  # per case: phasebench/plugin/__init__.py
    if registry.get(impl).step in registry.WHOLE_STEP_KINDS:
        pytest.skip(f"{impl} replays its step whole: it has no forward and loss of their own to read the loss after")
    worker = worker_for(impl, device, workload)
    losses, taken = [], []

    def one_round():
        timed = worker.run_phase("loss_item")
        worker_clock.advance(timed.ns)
        losses.append(timed.product["loss"])
        taken.append(timed)

    benchmark.group = "loss_item"
    schema.write(benchmark, schema.LossItemInfo, implementation=impl, device=device, phase="loss_item",
                 **workload.as_info(), rounds=settings.rounds, warmup_rounds=settings.warmup_rounds,
                 threads=settings.threads, timer_floor_s=worker.timer_floor_ns / 1e9)
    with utilization_of(worker):  # the worker's CPU and GPU during the rounds, as test_phase records them
        benchmark.pedantic(one_round, rounds=settings.rounds, warmup_rounds=settings.warmup_rounds, iterations=1)
    # The read's own CPU use over its timed bodies, as test_phase records a phase's.
    schema.write(benchmark, schema.LossItemInfo, **phase_cpu(taken[-settings.rounds:] if benchmark.enabled else taken))
    assert losses and all(loss is not None and 0 < loss < 10 for loss in losses), f"losses read: {losses[:5]}"

"""Every training phase of SPEC §2, per implementation and device, timed inside its worker.

Under --benchmark-disable each case runs one round and checks what the phase produced, so the
test command exercises every phase in both languages."""

import pytest

from bench.client import worker_clock
from bench.trainer import PHASE_NAMES
from conftest import DEVICES, IMPLEMENTATIONS

# pytest-benchmark reads the in-worker durations through this clock (SPEC §3).
pytestmark = pytest.mark.benchmark(timer=worker_clock)

BATCH = ((64, 1, 28, 28), (32, 1, 28, 28))  # the last batch of an epoch holds 32
OUTPUT = ((64, 10), (32, 10))
CONV1 = ((10, 1, 5, 5),)
# What each phase must produce: allowed shapes of its main tensor, and whether it has a loss.
EXPECTED = {
    "data_loading": (BATCH, False),
    "copy_to_device": (BATCH, False),
    "optimizer_init": (((21840,),), False),  # the Net's parameter count (SPEC §1)
    "forward": (OUTPUT, False),
    "loss": (((),), True),
    "backward": (CONV1, False),
    "param_update": (CONV1, False),
    "progress_print": (((),), True),
    "train_step": (OUTPUT, True),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("phase", PHASE_NAMES)
def test_phase(benchmark, worker_for, utilization_of, settings, phase, impl, device):
    assert phase in EXPECTED, f"no expected product for phase '{phase}': add it to EXPECTED"
    worker = worker_for(impl, device)
    products = []

    def one_round():
        ns, product = worker.run_phase(phase)
        worker_clock.advance(ns)
        products.append(product)

    benchmark.group = phase
    benchmark.extra_info.update(implementation=impl, device=device, phase=phase, rounds=settings.rounds,
                                warmup_rounds=settings.warmup_rounds, threads=settings.threads)
    with utilization_of(worker):
        benchmark.pedantic(one_round, rounds=settings.rounds, warmup_rounds=settings.warmup_rounds, iterations=1)

    shapes, has_loss = EXPECTED[phase]
    for product in products:
        assert tuple(product["shape"]) in shapes, f"{phase} produced shape {product['shape']}, expected one of {shapes}"
        assert product["finite"], f"{phase} produced non-finite values"
        assert (product["loss"] is not None) == has_loss, f"{phase} loss {product['loss']}"

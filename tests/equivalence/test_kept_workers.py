"""What the package's kept workers (conftest.py) rely on: a trainer restarted in a worker trains as one in a new
process, in both languages."""

from __future__ import annotations

import numpy as np
import pytest

from phasebench import registry
from phasebench.worker import protocol
from phasebench.worker.client import Worker
from tests.equivalence.pairs import (
    IMPLEMENTATIONS,
    LOADER_VARIANTS,
    POOL_GROUP,
    PUBLISHED_DROPOUT,
    assert_bit_identical,
    equivalence_options,
    get_params,
    restart,
)


@pytest.mark.xdist_group(POOL_GROUP)
def test_a_restarted_trainer_trains_as_a_new_process(kept_workers, settings, tmp_path):
    """What KeptWorkers relies on, in both languages: a new process trains 3 steps with the published dropout (its
    generator, loader and optimizer move on), is sent `start` as another implementation of its language (the first
    with a loader of its own, LOADER_VARIANTS) and trains 3 steps so, then is sent `start` as the first again: the
    new trainer repeats the new process's initial weights, losses and weights after, to the bit."""
    def options(impl: str) -> dict:
        return equivalence_options(settings, "cpu", str(tmp_path / f"{impl}.log"), impl) | {"dropout": PUBLISHED_DROPOUT}

    def three_steps(worker: Worker) -> tuple:
        initial = get_params(worker)
        losses = np.array(worker.request(protocol.TrainSteps(steps=3)).losses)
        return initial, losses, get_params(worker)

    for impl in IMPLEMENTATIONS:
        language = registry.get(impl).language
        other = next(name for (of, _), name in LOADER_VARIANTS.items() if of == language)
        worker = kept_workers.new_process(impl, options(impl))
        try:
            new = three_steps(worker)
            restart(worker, options(other), other)
            three_steps(worker)
            restart(worker, options(impl), impl)
            restarted = three_steps(worker)
            layout = worker.request(protocol.Layout()).layout
        finally:
            kept_workers.give_back(worker)
        labels = ("new process", f"restarted after {other}")
        assert_bit_identical(layout, new[0], restarted[0], f"{impl}: initial weights", labels)
        assert new[1].tobytes() == restarted[1].tobytes(), (
            f"{impl}: 3 steps' losses, {labels[0]} {new[1].tolist()}, {labels[1]} {restarted[1].tolist()}")
        assert_bit_identical(layout, new[2], restarted[2], f"{impl}: weights after 3 steps", labels)

"""The published pair, python and cpp, train the same model: the same threads, network, weights and batches, 100
steps with dropout off and on, and another workload (tests/equivalence/__init__.py); a whole epoch, a long check:
tests/equivalence/long_one_epoch.py."""

from __future__ import annotations

import numpy as np
import pytest

from phasebench.worker import protocol
from phasebench.worker.client import WorkerError
from tests.equivalence.pairs import (
    IMPLEMENTATIONS,
    OTHER_WORKLOAD,
    PARAM_COUNT,
    POOL_GROUP,
    PUBLISHED_DROPOUT,
    assert_same_batches,
    assert_same_training,
    bit_differences,
    get_params,
    set_params,
    worker_pair,
)

# The tests that borrow the package's kept workers, or share this module's pair, run in the pool's process.
pooled = pytest.mark.xdist_group(POOL_GROUP)


@pytest.fixture(scope="module")
def deterministic(settings, cpp_library, kept_workers, tmp_path_factory):
    """Dropout off, so that every result depends on weights and data alone: fresh trainers in the package's kept
    workers (a restarted trainer trains as a new process: test_kept_workers.py), which the earlier modules left
    idle, so that the module starts no process of its own. Only test_same_training_dropout_off trains this pair:
    it finds both loaders at batch 0 and both optimizers without momentum yet."""
    with worker_pair(settings, cpp_library, tmp_path_factory.mktemp("equivalence-deterministic"), 0.0,
                     kept=kept_workers) as pair:
        yield pair


@pooled
def test_same_thread_count(deterministic, settings):
    threads = {worker.impl: worker.info.threads for worker in deterministic.workers}
    assert threads == {impl: settings.threads for impl in IMPLEMENTATIONS}, (
        f"intra-op threads in effect {threads}, --threads asks for {settings.threads} in both")


@pooled
def test_same_network(deterministic):
    layouts = {impl: reply.layout for impl, reply in deterministic.ask_both(protocol.Layout()).items()}
    assert layouts["python"] == layouts["cpp"], (
        f"parameter names or shapes differ:\n  python {layouts['python']}\n  cpp    {layouts['cpp']}")
    counts = {impl: sum(int(np.prod(shape)) for _, shape in layout) for impl, layout in layouts.items()}
    buffers = {worker.impl: get_params(worker).size for worker in deterministic.workers}
    assert counts == buffers == {impl: PARAM_COUNT for impl in IMPLEMENTATIONS}, (
        f"parameter counts by layout {counts}, by buffer {buffers}; the Net has {PARAM_COUNT}")


@pooled
def test_parameters_round_trip_bit_exact(deterministic):
    layout = deterministic.python.request(protocol.Layout()).layout
    # Seed 1 already gives C++ the Python weights, so a set_params that did nothing would pass the
    # round trip of Python's weights alone: load other values first, with a -0.0 and a subnormal.
    other = np.random.default_rng(1).standard_normal(PARAM_COUNT).astype(np.float32)
    other[:2] = -0.0, np.finfo(np.float32).smallest_subnormal
    for what, values in (("other weights", other), ("Python's initial weights", deterministic.initial)):
        set_params(deterministic.cpp, values)
        differences = bit_differences(layout, values, get_params(deterministic.cpp), ("sent", "returned"))
        assert not differences, f"{what} loaded into C++ came back changed: {differences}"

    for worker in deterministic.workers:
        with pytest.raises(WorkerError, match=f"holds {PARAM_COUNT - 1} floats, the model has {PARAM_COUNT}"):
            set_params(worker, deterministic.initial[:-1])


@pooled
def test_same_batches(deterministic):
    assert_same_batches(deterministic)


@pooled
def test_same_training_dropout_off(deterministic):
    """From the same weights, STEPS steps in both languages end in the same losses and weights, to the bit. Why it
    takes 14-54 s here (load 4-6): STEPS steps in each language, one after the other (two intra-op pools at
    once spin against each other), the steps test_variant_same_training takes too; the pair is the module's own."""
    assert_same_training(deterministic, "dropout off")


@pooled
def test_same_losses_with_dropout(fresh_pair):
    """The graph that is timed: the published dropout, masks and all: two fresh trainers, so that both generators
    start at the seed, and STEPS steps in each, one after the other."""
    assert_same_training(fresh_pair(PUBLISHED_DROPOUT), f"dropout {PUBLISHED_DROPOUT}")


@pytest.mark.parametrize("dropout", [0.0, PUBLISHED_DROPOUT], ids=["dropout-off", "dropout-on"])
def test_same_training_on_cuda(settings, cpp_library, tmp_path, dropout):
    """On cuda, both workers under the deterministic numerics (pairs.equivalence_options): from the same weights,
    STEPS steps in both languages end in the same losses and weights, to the bit, with dropout off and with the
    published dropout (both draw their masks with the same ATen kernels from the same seeded cuda generator). Two
    workers of its own on the GPU; it skips without one."""
    with worker_pair(settings, cpp_library, tmp_path, dropout, device="cuda") as pair:
        assert_same_training(pair, f"dropout {dropout}, on cuda, deterministic numerics")


@pooled
@pytest.mark.parametrize("impls", [IMPLEMENTATIONS, ("python-batched", "cpp-batched")], ids="-vs-".join)
def test_same_training_on_another_workload(settings, cpp_library, kept_workers, tmp_path, impls):
    """The workload reaches both languages alike: on a wider Net with batches of 100, the same network, the same
    number of batches and the same first batch, and the same training, to the bit. (The walk through an epoch, to
    its middle and last batch, is the published workload's, test_same_batches: the batch size changes only where
    the loaders cut; 20 steps of the same losses need the first 20 batches alike.)"""
    with worker_pair(settings, cpp_library, tmp_path, PUBLISHED_DROPOUT, impls, OTHER_WORKLOAD,
                     kept=kept_workers) as pair:
        layouts = {impl: reply.layout for impl, reply in pair.ask_both(protocol.Layout()).items()}
        assert layouts[impls[0]] == layouts[impls[1]], f"parameter names or shapes differ: {layouts}"
        assert pair.initial.size == OTHER_WORKLOAD.parameter_count, (
            f"{pair.initial.size} parameters at {OTHER_WORKLOAD.label}, expected {OTHER_WORKLOAD.parameter_count}")
        assert_same_batches(pair, OTHER_WORKLOAD, walk=False)
        assert_same_training(pair, f"{OTHER_WORKLOAD.label}, dropout {PUBLISHED_DROPOUT}", steps=20)

"""This suite's own tests, as phasebench's plugin asks a suite to name them (phasebench/plugin/hooks.py): what a
benchmark run leaves out unless asked for (docs/usage.md#what-the-default-run-leaves-out), and the data-parallel
module, collected only under --world-size. The plugin itself names none of this suite's tests."""

from __future__ import annotations

from phasebench.plugin.cases import Selection

# name: the test it selects, what it is, how to ask for it, and the option that asks for it too. The test command
# (--benchmark-disable) checks every one of them.
SELECTIONS = {
    "jobs": Selection("test_concurrent_jobs", "concurrent jobs", "--jobs 1,2", "jobs"),
    "ensembles": Selection("test_ensemble", "ensembles", "--models 1,4,16", "models"),
    "worker-overhead": Selection("test_worker_overhead", "the worker's messaging overhead", "--extra worker-overhead"),
    "loss-item": Selection("test_loss_item", "loss.item() per step", "--extra loss-item"),
}


def pytest_phasebench_selections(config):
    return SELECTIONS


def pytest_ignore_collect(collection_path, config):
    """Without --world-size no distributed case exists: their module is not even collected."""
    if collection_path.name == "test_distributed.py" and collection_path.parent.name == "bench" \
            and not getattr(getattr(config, "phasebench", None), "world_sizes", ()):
        return True
    return None

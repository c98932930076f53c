"""How the cases are made (docs/options.md#options; "Implementations and workloads"): every test that takes `impl` and
`device` per implementation, device and workload the options chose, in an order that rotates the implementations."""

from __future__ import annotations

import pytest

from phasebench import registry
from phasebench.registry import DEVICES

RUN_ORDER = pytest.StashKey[int]()  # a test_phase case's place among the implementations of its phase
# What a benchmark run leaves out unless asked for: the default run answers the published table (the per-phase cases
# and one timed training run per implementation and device) and nothing more. name: (the test it selects, what it
# is, how to ask for it). The test command (--benchmark-disable) checks every one of them.
SELECTIONS = {
    "jobs": ("test_concurrent_jobs", "concurrent jobs", "--jobs 1,2"),
    "ensembles": ("test_ensemble", "ensembles", "--models 1,4,16"),
    "free-running": (None, "the free-running training run", "--free-running"),
    "worker-overhead": ("test_worker_overhead", "the worker's messaging overhead", "--extra worker-overhead"),
    "loss-item": ("test_loss_item", "loss.item() per step", "--extra loss-item"),
}


def chosen_selections(config) -> frozenset[str]:
    """The selections this run includes: --extra's, those their own options ask for, and all of them when the
    benchmarks are disabled (the test command runs every case once as a check). A ValueError names the valid ones."""
    if config.getoption("benchmark_disable", False):
        return frozenset(SELECTIONS)
    text = config.getoption("extra") or ""
    chosen = {part.strip() for part in text.split(",") if part.strip()}
    if chosen == {"all"}:
        return frozenset(SELECTIONS)
    bad = chosen - set(SELECTIONS)
    if bad:
        raise ValueError(f"--extra {text!r}: valid values are {', '.join(SELECTIONS)} (comma-separated), or all")
    for name, option in (("jobs", "jobs"), ("ensembles", "models"), ("free-running", "free_running")):
        if config.getoption(option):
            chosen.add(name)
    return frozenset(chosen)


def left_out_line(extras: frozenset[str]) -> str | None:
    """One line saying what this benchmark run left out and how to ask for it; None when it left out nothing."""
    missing = [f"{what} ({how})" for name, (_, what, how) in SELECTIONS.items() if name not in extras]
    if not missing:
        return None
    return (f"phasebench: this run left out {', '.join(missing)}; --extra all runs them all "
            f"(docs/options.md#what-the-default-run-leaves-out)")


def pytest_ignore_collect(collection_path, config):
    """Without --world-size no distributed case exists: their module is not even collected."""
    if collection_path.name == "test_distributed.py" and collection_path.parent.name == "bench" \
            and not getattr(getattr(config, "phasebench", None), "world_sizes", ()):
        return True
    return None


def pytest_generate_tests(metafunc):
    """Every test that takes `impl` and `device` runs per selected implementation (--impl) and device, and
    per workload (--width, --batch-size) where it takes `workload`; test_phase per phase of the
    implementation (the registry says which); test_concurrent_jobs per --jobs N and test_ensemble per
    --models M, for the implementations that run them (Implementation.runs_in). Ids read
    phase-impl-device[-N], as before workloads existed, with -wW-bB for other workloads, so saved baselines
    of the published workload still compare."""
    names = [name for name in ("phase", "impl", "device", "jobs", "models", "world_size", "workload")
             if name in metafunc.fixturenames]
    if not {"impl", "device"} <= set(names):
        return
    settings = metafunc.config.phasebench  # phasebench.plugin.Settings
    counts = {"jobs": lambda device: settings.jobs[device], "models": lambda device: settings.models,
              "world_size": lambda device: settings.world_sizes}
    count_name = next((name for name in counts if name in names), None)
    cases, ids = [], []
    # Workload outermost: a sweep runs one workload after another, so that the pooled workers of a workload
    # are done with (and stopped, conftest.py) before the next workload's start.
    for workload in (settings.workloads if "workload" in names else (None,)):
        for impl_name in settings.impls:
            impl = registry.get(impl_name)
            if not impl.runs_in(names):
                continue
            for phase in (impl.phases if "phase" in names else (None,)):
                for device in DEVICES:
                    if impl.absent_reason(device):  # a case it cannot have at all is not made (docs/options.md#options)
                        continue
                    for count in (counts[count_name](device) if count_name else (None,)):
                        values = {"phase": phase, "impl": impl_name, "device": device, "workload": workload,
                                  count_name: count}
                        cases.append(pytest.param(*(values[name] for name in names)))
                        ids.append("-".join([part for part in (phase, impl_name, device) if part]
                                            + ([f"world{count}" if count_name == "world_size" else str(count)]
                                               if count else [])
                                            + ([workload.id] if workload and workload.id else [])))
    metafunc.parametrize(names, cases, ids=ids)


def pytest_collection_modifyitems(config, items):
    """What an explicit choice excludes is deselected, not skipped (docs/options.md#options): the cases of devices
    --device leaves out, the selections a benchmark run was not asked for (SELECTIONS), under --benchmark-only the
    tests that are not benchmarks, and under --count everything but the per-phase cases (bench/test_phases.py's
    test_phase, the only ones it counts). cuda cases of the default devices stay, and skip with their reason where
    no GPU is usable."""
    settings = config.phasebench
    only_benchmarks = config.getoption("benchmark_only", False)
    left_out = {test for name, (test, _, _) in SELECTIONS.items() if test and name not in settings.extras}
    kept, deselected = [], []
    for item in items:
        params = getattr(item, "callspec", None) and item.callspec.params or {}
        name = getattr(item, "originalname", None)
        excluded = params.get("device", settings.devices[0]) not in settings.devices or name in left_out \
            or (settings.count is not None and name != "test_phase")
        not_a_benchmark = only_benchmarks and "benchmark" not in getattr(item, "fixturenames", ())
        (deselected if excluded or not_a_benchmark else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
    _rotate_implementations(items, settings.impls)


def _rotate_implementations(items, impls: tuple[str, ...]) -> None:
    """test_phase: which implementation runs first rotates from phase to phase, so that neither always
    follows the other on the machine (docs/method.md#what-is-measured). Each case's place is stashed."""
    from phasebench.spec import TRAINING_PHASES as PHASE_NAMES

    groups: dict[tuple, list[int]] = {}
    for index, item in enumerate(items):
        params = getattr(item, "callspec", None) and item.callspec.params
        if getattr(item, "originalname", None) == "test_phase" and params and params["impl"] in impls:
            groups.setdefault((params["phase"], params["device"], params["workload"]), []).append(index)
    for (phase, _, _), slots in groups.items():
        shift = PHASE_NAMES.index(phase) if phase in PHASE_NAMES else 0
        ranked = sorted((items[slot] for slot in slots),
                        key=lambda item: (impls.index(item.callspec.params["impl"]) - shift) % len(impls))
        for order, (slot, item) in enumerate(zip(slots, ranked)):
            items[slot] = item
            item.stash[RUN_ORDER] = order

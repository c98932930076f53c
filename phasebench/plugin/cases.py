"""How the cases are made (docs/usage.md#select): every test that takes `impl` and
`device` per implementation, device and workload the options chose, each phase's implementations in a random order
drawn from the run's order seed (--order-seed), and what a benchmark run leaves out unless asked: the selections a
suite names through pytest_phasebench_selections (phasebench/plugin/hooks.py; this repository's are in
bench/conftest.py). Nothing here names a suite's tests: a per-phase case is one that takes `phase`."""

from __future__ import annotations

import random
from typing import NamedTuple

import pytest

from phasebench import programs, registry
from phasebench.registry import DEVICES
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD

RUN_ORDER = pytest.StashKey[int]()  # a per-phase case's place in its phase's run order (run_orders)


class Selection(NamedTuple):
    """Something a benchmark run leaves out unless asked for: the default run answers the published table and nothing
    more. A suite names its own (pytest_phasebench_selections, phasebench/plugin/hooks.py); the test command
    (--benchmark-disable) checks every one of them."""

    test: str | None  # the test function it selects (its originalname); None: a part of another test
    what: str  # what it is, as the line of what a run left out says it
    how: str  # how to ask for it: --extra NAME, or an option of its own
    option: str | None = None  # the dest of an option that asks for it too (--jobs: "jobs")


# The plugin's own: its option --free-running (fixtures.py), which whatever suite trains whole runs reads.
PLUGIN_SELECTIONS = {"free-running": Selection(None, "the free-running training run", "--free-running",
                                               "free_running")}


def selections(config) -> dict[str, Selection]:
    """The selections of this run's suite, by name: the plugin's own and every pytest_phasebench_selections'."""
    found = {}
    for named in reversed(config.hook.pytest_phasebench_selections(config=config)):  # in registration order
        found |= named
    return found | PLUGIN_SELECTIONS


def chosen_selections(config, named: dict[str, Selection]) -> frozenset[str]:
    """The selections of `named` this run includes: --extra's, those their own options ask for, and all of them when
    the benchmarks are disabled (the test command runs every case once as a check). A ValueError names the valid
    ones."""
    if config.getoption("benchmark_disable", False):
        return frozenset(named)
    text = config.getoption("extra") or ""
    chosen = {part.strip() for part in text.split(",") if part.strip()}
    if chosen == {"all"}:
        return frozenset(named)
    bad = chosen - set(named)
    if bad:
        raise ValueError(f"--extra {text!r}: valid values are {', '.join(named)} (comma-separated), or all")
    for name, selection in named.items():
        if selection.option and config.getoption(selection.option, None):
            chosen.add(name)
    return frozenset(chosen)


def left_out_line(named: dict[str, Selection], extras: frozenset[str]) -> str | None:
    """One line saying what this benchmark run left out and how to ask for it; None when it left out nothing."""
    missing = [f"{selection.what} ({selection.how})" for name, selection in named.items() if name not in extras]
    if not missing:
        return None
    return (f"phasebench: this run left out {', '.join(missing)}; --extra all runs them all "
            f"(docs/usage.md#what-the-default-run-leaves-out)")


def per_phase_case(params: dict) -> bool:
    """A case of one phase in one process (a test parametrized by `phase`, not by `world_size`): what the count mode
    counts and what run_orders orders."""
    return "phase" in params and "world_size" not in params


def pytest_generate_tests(metafunc):
    """Every test that takes `impl` and `device` runs per selected implementation (--impl) and device, and
    per workload (--width, --batch-size) where it takes `workload`; test_phase per phase of the
    implementation (the registry says which) for the seed's program, and per phase of each other program --program
    selects (phasebench/programs.py: the published workload's cases, of the implementations that run it); a test
    that takes `program` per other program selected (ids PROGRAM-impl-device);
    test_concurrent_jobs per --jobs N and test_ensemble per --models M, for the implementations that run them
    (Implementation.runs_in). Ids read phase-impl-device[-N], as before workloads existed, with -wW-bB for other
    workloads, so saved baselines of the published workload still compare; another program's phase reads
    PROGRAM:PHASE. A test that takes no `phase` is the seed program's: it has cases only where that is selected."""
    names = [name for name in ("phase", "program", "impl", "device", "jobs", "models", "world_size", "workload")
             if name in metafunc.fixturenames]
    if not {"impl", "device"} <= set(names):
        return
    settings = metafunc.config.phasebench  # phasebench.plugin.Settings
    counts = {"jobs": lambda device: settings.jobs[device], "models": lambda device: settings.models,
              "world_size": lambda device: settings.world_sizes}
    count_name = next((name for name in counts if name in names), None)
    chosen = [programs.program(name) for name in settings.programs]
    if "program" in names:  # a test of the other programs' own (their training run): one case a program
        chosen = [found for found in chosen if not found.is_default]
    elif "phase" not in names:
        chosen = [found for found in chosen if found.is_default]
    # Workload outermost: a sweep runs one workload after another, so that the pooled workers of a workload
    # are done with (and stopped, conftest.py) before the next workload's start. Another program's cases come once,
    # on the published workload, after the seed's.
    runs = [(workload, found) for found in chosen if found.is_default
            for workload in (settings.workloads if "workload" in names else (None,))]
    runs += [(DEFAULT_WORKLOAD if "workload" in names else None, found) for found in chosen if not found.is_default]
    cases, ids = [], []
    for workload, found in runs:
        for impl_name in settings.impls:
            impl = registry.get(impl_name)
            if not impl.runs_in(names) or not found.runs(impl):
                continue
            for phase in (found.case_phases(impl) if "phase" in names else (None,)):
                for device in DEVICES:
                    # a case it cannot have at all is not made (docs/usage.md#run-skip-or-deselect)
                    if impl.absent_reason(device):
                        continue
                    for count in (counts[count_name](device) if count_name else (None,)):
                        values = {"phase": phase, "program": found.name, "impl": impl_name, "device": device,
                                  "workload": workload, count_name: count}
                        cases.append(pytest.param(*(values[name] for name in names)))
                        named = found.name if "program" in names else None
                        ids.append("-".join([part for part in (phase, named, impl_name, device) if part]
                                            + ([f"world{count}" if count_name == "world_size" else str(count)]
                                               if count else [])
                                            + ([workload.id] if workload and workload.id else [])))
    metafunc.parametrize(names, cases, ids=ids)


def not_selected_program(item, settings) -> bool:
    """A test of implementations that takes neither `phase` nor `program` is the seed program's: --program without it
    deselects it."""
    if programs.DEFAULT_PROGRAM in settings.programs or "impl" not in getattr(item, "fixturenames", ()):
        return False
    params = getattr(item, "callspec", None) and item.callspec.params or {}
    return "phase" not in params and "program" not in params


def pytest_collection_modifyitems(config, items):
    """What an explicit choice excludes is deselected, not skipped (docs/usage.md#run-skip-or-deselect): the cases
    of devices --device leaves out, the selections a benchmark run was not asked for (the suite's, selections()),
    under --benchmark-only the tests that are not benchmarks, under --count everything but the per-phase cases
    (per_phase_case: the only ones it counts), and the seed program's tests where --program leaves it out. cuda cases of the default devices stay, and skip
    with their reason where no GPU is usable."""
    settings = config.phasebench
    only_benchmarks = config.getoption("benchmark_only", False)
    left_out = {selection.test for name, selection in settings.selections.items()
                if selection.test and name not in settings.extras}
    kept, deselected = [], []
    for item in items:
        params = getattr(item, "callspec", None) and item.callspec.params or {}
        name = getattr(item, "originalname", None)
        excluded = params.get("device", settings.devices[0]) not in settings.devices or name in left_out \
            or (settings.count is not None and not per_phase_case(params)) or not_selected_program(item, settings)
        not_a_benchmark = only_benchmarks and "benchmark" not in getattr(item, "fixturenames", ())
        (deselected if excluded or not_a_benchmark else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
    run_orders(items, settings.impls, settings.order_seed)


def run_order(seed: int, phase: str, device: str, workload: str, present: list[str],
              impls: tuple[str, ...]) -> list[str]:
    """The order in which the implementations `present` run `phase` on `device` and `workload` (its id): a random
    permutation drawn from the run's seed, the same for the same seed whatever else the run selects (each draw is
    seeded by the seed and the case's names, never by what was drawn before it). Which implementation runs first is
    dealt from a shuffled deck per device, workload and program, a fresh shuffle of `impls` every len(impls) phases in
    the order its program's step runs them (phasebench/programs.py phase_place), so that over the phases each runs first about as often as any other and neither always follows
    the other (what the fixed rotation of earlier runs guaranteed); the others follow in a random order."""
    from phasebench.spec import ONE_SHOT_PHASES, TRAINING_PHASES

    index = programs.phase_place(phase, TRAINING_PHASES + ONE_SHOT_PHASES)
    # Each program's phases are dealt from a deck of their own (the seed's as before programs existed).
    of = programs.split_case_phase(phase)[0]
    deck, dealer = [], random.Random(f"phasebench run order {seed} {device} {workload}"
                                     + ("" if of.is_default else f" {of.name}"))
    while len(deck) <= index:
        deck += dealer.sample(impls, len(impls))
    rest = random.Random(f"phasebench run order {seed} {phase} {device} {workload}").sample(present, len(present))
    first = deck[index]
    return [first] + [impl for impl in rest if impl != first] if first in present else rest


def run_orders(items, impls: tuple[str, ...], seed: int) -> None:
    """The per-phase cases (per_phase_case): each phase's implementations run in the order run_order draws for it on each device and workload
    (docs/method.md#what-is-measured), each case in one of the places its phase's cases held in the collection, so
    nothing else moves. Each case's place in its order is stashed."""
    groups: dict[tuple, list[int]] = {}
    for index, item in enumerate(items):
        params = getattr(item, "callspec", None) and item.callspec.params
        if params and per_phase_case(params) and params["impl"] in impls:
            groups.setdefault((params["phase"], params["device"], params["workload"]), []).append(index)
    for (phase, device, workload), slots in groups.items():
        cases = {items[slot].callspec.params["impl"]: items[slot] for slot in slots}
        order = run_order(seed, phase, device, workload.id if workload else "", list(cases), impls)
        for place, (slot, impl) in enumerate(zip(slots, order)):
            items[slot] = cases[impl]
            cases[impl].stash[RUN_ORDER] = place

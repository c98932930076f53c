"""Paired timing (docs/method.md#paired-in-time): the implementations of one phase, device and workload are measured
side by side in time, in alternating blocks, so that both sides of every ratio see the same machine state.

A suite marks a benchmark test `@pytest.mark.paired`. Its cases that differ only in their implementation form a
group, together with each one's ratio partner (registry.Implementation.pair) where that was not selected, so that a
case run alone (-k, --impl, a gate's confirming rerun) is still measured beside its partner. Whichever case of a
group runs first measures every implementation of the group (Pairing.measure_once) and each case replays its own
measured rounds into pytest-benchmark's clock; a failed measurement fails every case of the group with its cause.

The blocks follow a balanced sequence: the group's order (drawn from the run's order seed, its first also the
implementation whose case runs first), then that order reversed, and so on (A B B A A B … for two), so that no
implementation always runs first into the machine's state or always follows another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from phasebench import registry
from phasebench.plugin.cases import RUN_ORDER, run_order

BLOCK_ROUNDS = 5  # counted rounds in a block of a paired phase (a training run's block: one fresh worker's run)
# Long-lived workers a side that a paired phase's sweeps rotate through (--pair-workers): the fewest worker pairs whose
# median ratio has a 95 % interval, so that the interval holds the spread between processes.
PAIR_WORKERS = 6
MIN_PAIRS = 6  # the fewest pairs whose median has a 95 % rank interval (phasebench/stats.py)
PAIRED_WITH = pytest.StashKey[tuple[str, ...]]()  # a paired case's group: its implementations in the first sweep's order


def paired_case(item) -> bool:
    return item.get_closest_marker("paired") is not None and "impl" in (
        getattr(item, "callspec", None) and item.callspec.params or {})


def group_key(item) -> tuple:
    """What a paired case's group shares: its test and every parameter but the implementation."""
    params = item.callspec.params
    return (item.originalname,) + tuple(sorted((name, str(getattr(value, "label", value)))
                                               for name, value in params.items() if name != "impl"))


def partners(present: list[str], phase: str | None, device: str) -> list[str]:
    """Each present implementation's ratio partner that can run this phase on this device and is not present."""
    found = []
    for impl in present:
        partner = registry.get(impl).pair
        runs = registry.get(partner)
        if partner in present or partner in found or runs.absent_reason(device) or not runs.single_model:
            continue
        if phase is not None and phase not in runs.phases:
            continue
        found.append(partner)
    return found


def pair_groups(items, impls: tuple[str, ...], seed: int) -> None:
    """Stashes each paired case's group, in the order drawn for it (cases.run_order), its partners last; and runs
    the group's cases one after the other in that order, where its first case stood, so that the case that measures
    the group runs first and its partners replay at once (an interrupted run loses no measured case that it could
    have saved)."""
    groups: dict[tuple, list[int]] = {}
    for index, item in enumerate(items):
        if paired_case(item):
            groups.setdefault(group_key(item), []).append(index)
    for slots in groups.values():
        cases = {items[slot].callspec.params["impl"]: items[slot] for slot in slots}
        params = items[slots[0]].callspec.params
        workload = params.get("workload")
        if all(RUN_ORDER in case.stash for case in cases.values()):  # a per-phase case: ordered by cases.run_orders
            order = sorted(cases, key=lambda impl: cases[impl].stash[RUN_ORDER])
        else:
            name = params.get("phase") or items[slots[0]].originalname
            order = run_order(seed, name, params["device"], workload.id if workload else "", list(cases), impls)
            for slot, impl in zip(slots, order):
                items[slot] = cases[impl]
        group = tuple(order) + tuple(partners(order, params.get("phase"), params["device"]))
        for impl in order:
            cases[impl].stash[PAIRED_WITH] = group
    together, placed = [], set()
    for item in items:
        if id(item) in placed:
            continue
        members = [item]
        if paired_case(item):
            members = sorted((items[slot] for slot in groups[group_key(item)]),
                             key=lambda case: case.stash[PAIRED_WITH].index(case.callspec.params["impl"]))
        together += members
        placed.update(id(member) for member in members)
    items[:] = together


def block_schedule(order: tuple[str, ...], sweeps: int) -> list[tuple[int, str]]:
    """(sweep, implementation) for each block: the order, then the order reversed, alternately."""
    return [(sweep, impl) for sweep in range(sweeps) for impl in (order if sweep % 2 == 0 else order[::-1])]


def pair_worker_count(asked: int, sweeps: int) -> int:
    """Workers a side for a paired phase of `sweeps` sweeps: as many as asked, at most one per two sweeps (each pair
    of workers runs both orders), and one where that gives too few pairs of workers for an interval (its block pairs
    are then the draws, and the ratio says what it leaves out)."""
    count = min(asked, sweeps // 2)
    return count if count >= MIN_PAIRS else 1


def sweep_slot(sweep: int, workers: int) -> int:
    """The worker slot of a sweep: sweeps two by two in each slot in turn, so that every pair of workers runs one sweep
    in each order (A B, then B A) and the order never goes with a process."""
    return (sweep // 2) % workers


def block_sizes(rounds: int, block_rounds: int) -> list[int]:
    """Rounds split into blocks of block_rounds, the last the remainder."""
    return [min(block_rounds, rounds - start) for start in range(0, rounds, block_rounds)]


@dataclass
class Failed:
    """A group's measurement that raised: every case of the group fails with it."""

    case: str
    error: str


@dataclass
class PairStore:
    """The session's measured groups: {group key: what the measure returned, or Failed}."""

    measured: dict[tuple, Any] = field(default_factory=dict)


@dataclass
class Pairing:
    """A paired case's view of its group (the `pairing` fixture)."""

    store: PairStore
    key: tuple | None  # None: not a paired case, or pairing does not apply to this run
    group: tuple[str, ...]
    nodeid: str

    @property
    def applies(self) -> bool:
        return self.key is not None

    def measure_once(self, measure: Callable[[tuple[str, ...]], Any]) -> Any:
        """What measure(group) returned for this case's group, measured by the first case of the group to ask; a
        measurement that raised fails this case with its cause (and raises again in the case that ran it)."""
        if self.key not in self.store.measured:
            try:
                self.store.measured[self.key] = measure(self.group)
            except BaseException as error:
                self.store.measured[self.key] = Failed(self.nodeid, f"{type(error).__name__}: {error}")
                raise
        found = self.store.measured[self.key]
        if isinstance(found, Failed):
            pytest.fail(f"its paired measurement with {', '.join(self.group)}, run by {found.case}, failed: "
                        f"{found.error}", pytrace=False)
        return found


def why_unpaired(config) -> str | None:
    """Why this run times no case paired, or None where it pairs them: a run that times nothing, or counts, or
    spreads each case over fresh workers, times each case alone."""
    if config.getoption("benchmark_disable", False):
        return "--benchmark-disable: nothing is timed"
    if config.getoption("unpaired", False):
        return "--unpaired: each case timed alone"
    settings = config.phasebench
    if settings.count:
        return "--count: a count does not drift with the machine"
    if settings.processes > 1:
        return f"--processes {settings.processes}: each case's rounds are spread over fresh workers of its own"
    return None


@pytest.fixture(scope="session")
def pair_store() -> PairStore:
    return PairStore()


@pytest.fixture
def pairing(request, pair_store) -> Pairing:
    group = request.node.stash.get(PAIRED_WITH, ())
    key = group_key(request.node) if group and why_unpaired(request.config) is None else None
    return Pairing(pair_store, key, group, request.node.nodeid)


def pytest_configure(config):
    config.addinivalue_line("markers", "paired: the test's implementations are measured side by side in time "
                                       "(phasebench/plugin/pairing.py)")


@pytest.hookimpl(trylast=True)  # after cases.py's run orders
def pytest_collection_modifyitems(config, items):
    if why_unpaired(config) is None:  # a run that times each case alone keeps the collection's order
        pair_groups(items, config.phasebench.impls, config.phasebench.order_seed)


def sibling_nodeid(item, impl: str) -> str:
    """The node id the case of `impl` in this case's group has (the ids read [phase-]impl-device[-...]:
    cases.pytest_generate_tests), whether or not it was collected: a baseline's cases are looked up by it."""
    own, device = item.callspec.params["impl"], item.callspec.params["device"]
    case_id = item.callspec.id.replace(f"{own}-{device}", f"{impl}-{device}", 1)
    return item.nodeid[: len(item.nodeid) - len(item.callspec.id) - 2] + f"[{case_id}]"


def ratio_info(interval, to: str, leaves_out: str | None) -> dict:
    """A case's `ratio` (phasebench/record.py Case): its interval to `to`, and what that interval does not hold."""
    return interval.as_info() | {"to": to, "undecided": interval.undecided_because(), "leaves_out": leaves_out}


def pairing_info(impl: str, sides: dict[str, list[float]], unpaired: dict[str, str], block_rounds: int,
                 leaves_out: str | None, block_workers: list[int] | None = None, units: list | None = None,
                 statistic: str = "median") -> dict:
    """What a paired case records (phasebench/record.py Case): the implementations measured with it, its blocks and
    the worker slot of each, and its ratio to its reference where that was measured beside it, else why not; `units`
    and `statistic`: paired_ratio's (each block's worker pair, or None; the pairs' median or geometric mean)."""
    from phasebench.stats import paired_ratio

    info = {"paired_with": list(sides), "pair_block_rounds": block_rounds, "block_medians_s": sides[impl]}
    if block_workers is not None:
        info["block_workers"] = block_workers
    partner = registry.get(impl).pair
    if partner in sides:
        info["ratio"] = ratio_info(paired_ratio(sides[impl], sides[partner], units, statistic=statistic), partner,
                                   leaves_out)
    elif partner in unpaired:
        info["unpaired"] = unpaired[partner]
    return info

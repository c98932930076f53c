"""Points made into series: ordered along first-parent history (`git rev-list --first-parent`) or by torch version,
the runs at one commit (or one release) made one point, their change points found, and what the series were split
on, said.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from phasebench.history import changes
from phasebench.history.points import Point, SeriesKey


@dataclass(frozen=True)
class Position:
    """Where a point lies along the series' axis."""

    x: str  # the commit's full hash, or the torch version
    short: str  # the short hash, or the torch version
    label: str  # the short hash and subject, or the torch version
    order: int
    date: str | None = None  # the commit's date (YYYY-MM-DD, git's committer date); None by torch version


@dataclass
class Found:
    """A change point of a series, with the commits (or releases) it lies between."""

    change: changes.Change
    before: Position
    after: Position
    confirmed: bool  # both neighbours were run often enough (runs_to_confirm) and every run after lies beyond every
    # run before
    also_changed: dict  # context that differs between the two neighbours' runs (phasebench.history.points)
    measurement: tuple[str, ...] = ()  # the measurement fields among them (measurement_changed): a step there is a
    # change of what was measured, not of the code measured

    @property
    def range(self) -> str:
        """The commit range (git's A..B: after A, up to B) or release range the step lies in."""
        return f"{self.before.short}..{self.after.short}"

    def kind(self, by: str) -> str:
        """What the step is a change of: "measurement" where what was measured changed there (the count bracket, the
        method's sources); else what the axis changes, "code" along commits and "release" along torch versions."""
        return "measurement" if self.measurement else "code" if by == "commit" else "release"

    def kind_words(self, by: str) -> str:
        """kind(by) in words: a change of measurement names what of it changed ("measurement: count bracket")."""
        kind = self.kind(by)
        return f"{kind}: {', '.join(self.measurement)}" if self.measurement else kind


@dataclass
class Series:
    key: SeriesKey
    positions: list[Position]
    runs: list[list[Point]]  # the runs at each position
    changes: list[Found] = field(default_factory=list)
    spread: float = 0.0  # the run-to-run spread, as a fraction: a count's measured one, a time's between_run_spread

    @property
    def values(self) -> list[float]:
        """Each position's value: the median of its runs' medians."""
        return [statistics.median(point.value for point in runs) for runs in self.runs]

    def newest(self) -> Newest:
        """Its newest point's commit, that commit's date and the series' method. Along commits the newest position
        is the commit (its date git's); by torch version, the commit of the newest release's latest run (its date
        the one the run recorded, pytest-benchmark's commit_info["time"])."""
        at, runs = self.positions[-1], self.runs[-1]
        latest = max(runs, key=lambda point: point.run or "")
        commit = at.x if at.date else latest.commit
        date = at.date or (latest.commit_time or "")[:10] or None
        return Newest(commit, date, self.key.method, at)


@dataclass(frozen=True)
class Newest:
    """A series' newest point: its commit (full hash; None where its runs recorded none), the commit's date
    (YYYY-MM-DD; None where neither git nor the run gave one) and the method the series was measured with."""

    commit: str | None
    date: str | None
    method: int
    at: Position


class Order:
    """Positions along first-parent history of `rev` in `repo` (oldest first) or by torch version."""

    def __init__(self, by: str, repo: Path | None = None, rev: str = "HEAD"):
        self.by = by
        self.commits: dict[str, Position] = {}
        if by == "commit":
            command = ["git", "-C", str(repo or "."), "log", "--first-parent", "--format=%H%x00%cs%x00%s", rev]
            lines = subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()
            for order, line in enumerate(reversed(lines)):
                sha, date, subject = line.split("\0", 2)
                self.commits[sha] = Position(sha, sha[:7], f"{sha[:7]} {subject}", order, date or None)

    def position(self, point: Point) -> Position | None:
        if self.by == "torch":
            return None if point.torch is None else Position(point.torch, point.torch, point.torch, 0)
        if point.commit is None:
            return None
        found = self.commits.get(point.commit)
        if found is None and len(point.commit) < 40:  # an abbreviated hash
            found = next((p for sha, p in self.commits.items() if sha.startswith(point.commit)), None)
        return found

    def why_not(self, point: Point) -> str:
        if self.by == "torch":
            return "no torch version recorded"
        if point.commit is None:
            return "no commit recorded"
        return f"commit {point.commit[:7]} is not on the first-parent history"


def version_order(version: str) -> tuple:
    """A torch version's sort key: its release numbers, then its pre-release and local parts as text."""
    public, _, local = version.partition("+")
    numbers = tuple(int(n) for n in re.findall(r"\d+", public.split("a")[0].split("b")[0].split("rc")[0])[:3])
    return numbers, public, local


def build(points: list[Point], order: Order, count_spreads: dict[str, float] | None = None) -> tuple[
        list[Series], list[str]]:
    """The series of the points, their change points found, and the points left out, each said why."""
    by_key: dict[SeriesKey, dict[str, list[Point]]] = defaultdict(lambda: defaultdict(list))
    positions: dict[str, Position] = {}
    left_out: dict[str, set[str]] = defaultdict(set)
    for point in points:
        position = order.position(point)
        if position is None:
            left_out[order.why_not(point)].add(point.source)
            continue
        positions[position.x] = position
        by_key[point.key][position.x].append(point)
    spreads = changes.default_count_spreads() if count_spreads is None else count_spreads

    def sort_key(x: str):
        return version_order(x) if order.by == "torch" else positions[x].order

    found = []
    for key, at in by_key.items():
        xs = sorted(at, key=sort_key)
        series = Series(key, [positions[x] for x in xs], [at[x] for x in xs])
        series.changes = find_changes(series, spreads)
        found.append(series)
    found.sort(key=lambda s: (s.key.metric, s.key.machine, s.key.method, s.key.device, s.key.workload, s.key.phase,
                              s.key.implementation))
    notes = [f"{why}: {len(sources)} result file(s) left out ({', '.join(sorted(sources)[:3])}"
             f"{', …' if len(sources) > 3 else ''})" for why, sources in sorted(left_out.items())]
    return found, notes


def find_changes(series: Series, spreads: dict[str, float]) -> list[Found]:
    """The series' change points, each with its interval (changes.bootstrap_interval); sets series.spread."""
    values = series.values
    if series.key.metric == "instructions":
        fullname = next((p.fullname for runs in series.runs for p in runs), None)
        threshold = changes.count_threshold_pct(fullname, spreads, [list(p.rounds) for runs in series.runs
                                                                    for p in runs])
        series.spread = threshold / changes.count_gate.SPREAD_FACTOR / 100.0
        steps = [with_interval(step, rounds_at(series.runs[step.index - 1]), rounds_at(series.runs[step.index]))
                 for step in changes.count_changes(values, threshold)]
    else:
        series.spread = changes.between_run_spread(values)
        found = changes.time_changes(values)
        bounds = [0, *(step.index for step in found), len(values)]
        steps = [with_interval(step, [p.value for runs in series.runs[start:step.index] for p in runs],
                               [p.value for runs in series.runs[step.index:stop] for p in runs])
                 for step, start, stop in zip(found, bounds, bounds[2:])]
    return [Found(step, series.positions[step.index - 1], series.positions[step.index],
                  confirmed(series.runs[step.index - 1], series.runs[step.index], step.change_pct,
                            runs_to_confirm(series.key.metric)),
                  also_changed(series.runs[step.index - 1], series.runs[step.index]),
                  measurement_changed(series.runs[step.index - 1], series.runs[step.index])) for step in steps]


def rounds_at(runs: list[Point]) -> list[float]:
    """Every counted round of the runs at one position (a run that kept no rounds, its median)."""
    return [value for point in runs for value in (point.rounds or (point.value,))]


def with_interval(step: changes.Change, before: list[float], after: list[float]) -> changes.Change:
    interval = changes.bootstrap_interval(before, after)
    return step if interval is None else dataclasses.replace(step, low_pct=interval[0], high_pct=interval[1])


# The runs each neighbour of a step needs before the step is confirmed. Where runs differ by noise alone, n runs on
# each side fall wholly on one given side of each other with probability (n!)^2 / (2n)!: 1/6 for two runs, 1/20 for
# three. A time series takes three; a count, whose runs repeat up to a small measured spread, two.
RUNS_TO_CONFIRM = {"instructions": 2, "time": 3}


def runs_to_confirm(metric: str) -> int:
    return RUNS_TO_CONFIRM.get(metric, RUNS_TO_CONFIRM["time"])


def confirmed(before: list[Point], after: list[Point], change_pct: float, needed: int = 2) -> bool:
    """Whether the neighbouring commits' re-runs confirm a step: each was run at least `needed` times
    (runs_to_confirm), and every run after it lies beyond every run before it, in the step's direction."""
    if len(before) < needed or len(after) < needed:
        return False
    if change_pct > 0:
        return min(p.value for p in after) > max(p.value for p in before)
    return max(p.value for p in after) < min(p.value for p in before)


def also_changed(before: list[Point], after: list[Point]) -> dict:
    """{name: (before, after)} of the context that differs between the two neighbours' runs."""
    differ = {}
    for name in (before[0].context.keys() | after[0].context.keys()):
        old = {str(p.context.get(name)) for p in before}
        new = {str(p.context.get(name)) for p in after}
        if old != new:
            differ[name] = (", ".join(sorted(old)), ", ".join(sorted(new)))
    return dict(sorted(differ.items()))


# The context a run records that defines what its value holds: where one of these differs between a step's
# neighbours, the step is a change of measurement. The method version, the count mode's pins, the switches and the
# calls per round are in the series' key, so no step lies across them: their series are drawn apart.
MEASUREMENT_CONTEXT = ("count bracket", "method sources")


def measurement_changed(before: list[Point], after: list[Point]) -> tuple[str, ...]:
    """The measurement fields (MEASUREMENT_CONTEXT) that differ between the two neighbours' runs, each recorded on
    both sides (a run that predates a field's record says nothing of it)."""
    found = []
    for name in MEASUREMENT_CONTEXT:
        old = {str(p.context.get(name)) for p in before}
        new = {str(p.context.get(name)) for p in after}
        if old != new and "None" not in old | new:
            found.append(name)
    return tuple(found)


def differences(values: set[str]) -> list[str]:
    """Each value less the words every value has (pins differ in one setting of many), "(none)" where nothing is left."""
    common = set.intersection(*(set(value.split()) for value in values))
    return sorted(" ".join(word for word in value.split() if word not in common) or "(none)" for value in values)


def splits(series: list[Series]) -> list[str]:
    """What the series of one case (metric, device, workload, implementation and phase alike) were split on, and
    why: one line per key field that took more than one value for some case."""
    by_case: dict[tuple, list[SeriesKey]] = defaultdict(list)
    for s in series:
        by_case[(s.key.metric, s.key.device, s.key.workload, s.key.implementation, s.key.phase)].append(s.key)
    fields: dict[str, set[str]] = defaultdict(set)
    cases: dict[str, int] = defaultdict(int)
    for keys in by_case.values():
        if len(keys) < 2:
            continue
        named = [dict(key.machine) | {"method": str(key.method)} for key in keys]
        for name in sorted({n for entry in named for n in entry}):
            values = {entry.get(name, "unrecorded") for entry in named}
            if len(values) > 1:
                fields[name] |= values
                cases[name] += 1
    reasons = {"method": "a different measurement method holds something else in its clocks (phasebench/method.py)",
               "torch": "another torch build runs other kernels", "kernel": "the kernel changes scheduling and faults",
               "CPU": "another CPU model", "cores": "another number of cores", "threads": "another thread count",
               "valgrind": "another Valgrind counts otherwise", "glibc": "another glibc runs other code",
               "CPU capability": "another instruction set is dispatched to", "pins": "other pins",
               "torch build": "CUDA builds are compared with CUDA builds only", "GPU": "another GPU",
               "caches": "another simulated cache geometry", "branches": "branch simulation on or off",
               "calls per round": "a median per call of one call a round and of several is not the same statistic"}
    lines = [f"split on {name} ({reasons.get(name, 'a machine difference')}): {cases[name]} case(s) into series of "
             f"{' | '.join(differences(values))}" for name, values in sorted(fields.items())]
    metrics = {s.key.metric for s in series}
    if len(metrics) > 1:
        lines.append(f"times and instruction counts are separate series: {', '.join(sorted(metrics))}")
    return lines

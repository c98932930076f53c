"""The gate of a run compared with one saved baseline, beyond pytest-benchmark's own --benchmark-compare-fail
(phasebench/plugin/gating.py; docs/gating.md#baselines-and-ci-gating): a baseline that shares no benchmark with the run,
a run in which nothing ran, and with --phase-ratio-fail the median ratio of every implementation to the one the
registry names as its reference (python/cpp for the published pair), per phase, device and workload; what of
machine_info its comparison leaves out (PER_RUN_KEYS); and the machine_info differences that pytest-benchmark could
not print.
"""

from __future__ import annotations

from dataclasses import dataclass

from phasebench import results
from phasebench.gate.verdict import is_gated
from phasebench.saved import SavedResult
from phasebench.stats import change_either_way

# What a run draws or reads anew each time by design, so that two runs of one tree on one machine differ in it: the
# seed of the run order (--order-seed; the cases' own `order` records where each ran), and the CPU's momentary clock
# that pytest-benchmark's cpuinfo reads (hz_actual moves with frequency scaling from one reading to the next).
# A comparison leaves them out: on the same machine it has nothing to say, across machines everything else differs.
PER_RUN_KEYS = (("phasebench", "order_seed"), ("cpu", "hz_actual"), ("cpu", "hz_actual_friendly"))


def without_per_run(machine_info: dict) -> dict:
    """machine_info less PER_RUN_KEYS: what two runs on one machine share (a new dict; nested ones shared but for the
    sections a key is left out of, which are copied)."""
    kept = dict(machine_info)
    for section, key in PER_RUN_KEYS:
        if isinstance(kept.get(section), dict) and key in kept[section]:
            kept[section] = {name: value for name, value in kept[section].items() if name != key}
    return kept


def machine_info_differences(current, saved, prefix: str = "") -> list[str]:
    """'key: saved → current' for every leaf of machine_info that differs, dotted keys."""
    if isinstance(current, dict) and isinstance(saved, dict):
        return [line for key in sorted(current.keys() | saved.keys(), key=str)
                for line in machine_info_differences(current.get(key), saved.get(key), f"{prefix}{key}.")]
    return [] if current == saved else [f"{prefix.rstrip('.')}: {saved!r} → {current!r}"]


def phase_medians(result: SavedResult) -> dict[tuple[str, str, str], dict[str, float]]:
    """{(phase, device, workload id): {implementation: median seconds}} of a result's one-process cases.

    The phases no gate judges are left out (phasebench.gate.verdict.NOT_GATED_PHASES)."""
    medians: dict[tuple[str, str, str], dict[str, float]] = {}
    for key, case in result.cases.items():
        if is_gated(key):
            medians.setdefault((key.phase, key.device, key.workload), {})[key.implementation] = case.median
    return medians


def paired_ratios(result: SavedResult) -> dict[tuple[str, str, str], dict[str, dict]]:
    """{(phase, device, workload id): {implementation: its saved paired ratio}} of a result's paired cases."""
    found: dict[tuple[str, str, str], dict[str, dict]] = {}
    for key, case in result.cases.items():
        ratio = getattr(case.info, "ratio", None)
        if is_gated(key) and ratio:
            found.setdefault((key.phase, key.device, key.workload), {})[key.implementation] = ratio
    return found


@dataclass(frozen=True)
class RatioChange:
    phase: str
    device: str
    before: float  # impl / reference in the baseline: its paired ratio's estimate, else the medians' ratio
    after: float  # and in this run
    workload: str = ""  # its id; '' for the published workload
    impl: str = "python"
    reference: str = "cpp"
    low: float | None = None  # this run's 95 % interval of `after`, where it was paired and the interval exists
    high: float | None = None

    def verdict(self, limit: float) -> str:
        """`moved` (beyond the baseline's ratio moved by limit percent either way), `unchanged` (within), or with an
        interval `undecided`: moved only where the interval lies wholly beyond, unchanged only where wholly within."""
        if self.low is None:
            return "moved" if self.percent > limit else "unchanged"
        up, down = self.before * (1 + limit / 100), self.before / (1 + limit / 100)
        if self.low > up or self.high < down:
            return "moved"
        return "unchanged" if down <= self.low and self.high <= up else "undecided"

    @property
    def loser(self) -> str:
        """The implementation that became slower relative to the other."""
        return self.impl if self.after > self.before else self.reference

    @property
    def percent(self) -> float:
        """How much slower the loser became relative to the other, in percent."""
        return change_either_way(self.before, self.after)

    def __str__(self) -> str:
        other = self.reference if self.loser == self.impl else self.impl
        where = f"{self.device}, {self.workload}" if self.workload else self.device
        interval = f" [{self.low:.3f}, {self.high:.3f}]" if self.low is not None else ""
        return (f"{self.phase} on {where}: {self.impl}/{self.reference} ratio {self.before:.3f} → "
                f"{self.after:.3f}{interval}, {self.loser} {self.percent:.1f}% slower relative to {other}")


def ratio_changes(baseline: SavedResult, current: SavedResult) -> list[RatioChange]:
    """Every (phase, device, workload) and implementation whose median and its reference's are in both,
    largest change first (docs/gating.md#baselines-and-ci-gating)."""
    before, after = phase_medians(baseline), phase_medians(current)
    paired_before, paired_after = paired_ratios(baseline), paired_ratios(current)
    changes = []
    for key in before.keys() & after.keys():
        phase, device, workload_id = key
        for impl, reference in results.ratio_pairs(before[key].keys() & after[key].keys()):
            pairs = before[key], after[key]
            if all(medians[impl] and medians[reference] for medians in pairs):
                ratio_before, ratio_after = (medians[impl] / medians[reference] for medians in pairs)
                low = high = None
                saved_before = paired_before.get(key, {}).get(impl)
                if saved_before and saved_before.get("to") == reference:
                    ratio_before = saved_before["estimate"]
                saved_after = paired_after.get(key, {}).get(impl)
                if saved_after and saved_after.get("to") == reference:
                    ratio_after, low, high = saved_after["estimate"], saved_after["low"], saved_after["high"]
                    if low is None:  # too few pairs for an interval: nothing can be decided
                        low, high = 0.0, float("inf")
                changes.append(RatioChange(phase, device, ratio_before, ratio_after, workload_id, impl, reference,
                                           low, high))
    return sorted(changes, key=lambda change: (-change.percent, change.phase, change.device, change.workload,
                                               change.impl))


def gate_failures(baselines: dict[str, SavedResult], current: SavedResult, ratio_limit: int | None) -> list[str]:
    """What fails a compared run beyond pytest-benchmark's own --benchmark-compare-fail: a baseline that
    shares no benchmark with the run, or a run in which no benchmark ran (the gate would pass by comparing
    nothing) and, with ratio_limit,
    every phase whose python/cpp ratio moved more than ratio_limit percent.

    baselines: {path: the saved baseline}, those pytest-benchmark compared with; current: this run's."""
    if not current.benchmarks:  # every case skipped (a GPU runner without its GPU) or failed: the gate must not pass
        return [f"nothing compared: no benchmark ran, so none was compared with {', '.join(map(str, baselines))}"]
    failures = []
    ran = {case.fullname for case in current.benchmarks}
    for path, baseline in baselines.items():
        if not ran & {case.fullname for case in baseline.benchmarks}:
            failures.append(f"nothing compared: no benchmark of this run is in baseline {path}")
        elif ratio_limit is not None:
            changes = ratio_changes(baseline, current)
            if not changes:
                failures.append(f"--phase-ratio-fail: no phase has python and cpp medians, nor any implementation and its "
                                f"reference, both here and in {path}")
            failures += [f"{change}, over the {ratio_limit}% limit (baseline {path})"
                         for change in changes if change.verdict(ratio_limit) == "moved"]
    return failures


def undecided_ratios(baselines: dict[str, SavedResult], current: SavedResult, ratio_limit: int | None) -> list[str]:
    """With ratio_limit, every ratio whose interval in this run neither lies wholly beyond the baseline's ratio moved by
    the limit nor wholly within it: the run could not decide whether it moved."""
    if ratio_limit is None or not current.benchmarks:
        return []
    return [f"{change}: its interval holds both a move of {ratio_limit}% and none (baseline {path})"
            for path, baseline in baselines.items() for change in ratio_changes(baseline, current)
            if change.verdict(ratio_limit) == "undecided"]

"""Change points of a series: where its value stepped between two neighbouring points.

A count series is deterministic up to the count gate's measured spread, so a step between consecutive points beyond
the gate's threshold for the case (phasebench/gate/counts.py: ten times the spread measured on an unchanged tree, at
least 0.5 %) is a change. A time series is noisy from run to run; its detector is the one the change-point study
chose (lab/studies/changepoint_study.py, docs/history.md#choosing-the-time-detector): ruptures' Pelt with the l1 cost on
the log values, its penalty scaled by the series' own between-run spread.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from phasebench.gate import counts as count_gate

BETA = 2.0  # the penalty's factor: BIC's 2 · log n, in units of the between-run spread
MIN_SEGMENT = 2  # points between two change points at least
MIN_POINTS = 2 * MIN_SEGMENT + 1  # a time series shorter than this has no change point found in it
MIN_SPREAD = 0.01  # the between-run spread assumed at least (1 %, as a log ratio)
RESAMPLES = 2000  # bootstrap resamples of a change's interval
SEED = 0  # the bootstrap's seed: the same history gives the same intervals on every build
# The interval is computed on the very runs in which the change was found (a segment may be two points), so it is
# descriptive: how those runs spread about the step, not a confidence interval for the change. What tests a change is
# its confirmation by re-runs of both neighbours (series.confirmed). docs/history.md#the-spread-beside-a-change says
# why no held-out interval is computed.
INTERVAL_HEADING = "spread (descriptive)"
INTERVAL_METHOD = (f"Spread (descriptive): the 2.5th to 97.5th percentiles of a bootstrap ({RESAMPLES} resamples, "
                   f"seed {SEED}) of the median after over the median before, resampling each side's counted rounds "
                   "(counts: every round of every run at the commit before and at the commit after) or its runs "
                   "(times: every run of the segment before and of the segment after). These are the runs in which "
                   "the change was found, so the range describes how they spread about the step; it is not a "
                   "confidence interval for the change. A change is tested by re-running both neighbours "
                   "(confirmed)")


@dataclass(frozen=True)
class Change:
    """A step between point `index - 1` and point `index` of a series."""

    index: int  # the first point after the step
    before: float  # the value the step is measured from: the point before, or the median of the segment before
    after: float
    threshold_pct: float | None  # what the step had to exceed (a count's; a time change has a penalty instead)
    low_pct: float | None = None  # the descriptive 95 % range of change_pct (bootstrap_interval), None if not computed
    high_pct: float | None = None

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.after / self.before - 1.0)

    def interval_text(self) -> str:
        if self.low_pct is None or self.high_pct is None:
            return "—"
        return f"[{self.low_pct:+.1f}, {self.high_pct:+.1f}] %"


def bootstrap_interval(before: list[float], after: list[float], resamples: int = RESAMPLES,
                       seed: int = SEED) -> tuple[float, float] | None:
    """The 95 % percentile-bootstrap interval of 100 · (median(after) / median(before) - 1), each side resampled
    with replacement on its own; None where a side is empty or not positive. Seeded: the same samples give the same
    interval."""
    if not before or not after or min(before) <= 0:
        return None
    rng = random.Random(seed)
    found = sorted(100.0 * (statistics.median(rng.choices(after, k=len(after)))
                            / statistics.median(rng.choices(before, k=len(before))) - 1.0)
                   for _ in range(resamples))
    return found[int(0.025 * (resamples - 1))], found[int(math.ceil(0.975 * (resamples - 1)))]


def between_run_spread(values: list[float]) -> float:
    """The spread of a series' log values from run to run, estimated from its consecutive differences (the MAD of
    the differences, scaled to a normal standard deviation and divided by √2): a few steps in the series barely move
    it, where a standard deviation would grow with each. At least MIN_SPREAD."""
    logs = [math.log(v) for v in values if v > 0]
    diffs = [abs(b - a) for a, b in zip(logs, logs[1:])]
    if len(diffs) < 2:
        return MIN_SPREAD
    return max(MIN_SPREAD, 1.4826 * statistics.median(diffs) / math.sqrt(2.0))


def time_changes(values: list[float], beta: float = BETA, spread: float | None = None) -> list[Change]:
    """The change points of a time series (one value per point, each a whole run's median or the median of runs):
    ruptures' Pelt with the l1 cost (the sum of absolute deviations from each segment's median) on the log values,
    penalty beta · σ · log n, σ the between-run spread; each change's size is the median of its segment after against
    the median of its segment before."""
    if len(values) < MIN_POINTS or any(v <= 0 for v in values):
        return []
    import numpy as np  # the time detector's own imports: reading and counting need neither
    import ruptures

    sigma = between_run_spread(values) if spread is None else max(spread, MIN_SPREAD)
    logs = np.log(np.asarray(values, dtype=float)).reshape(-1, 1)
    penalty = beta * sigma * math.log(len(values))
    ends = ruptures.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1).fit(logs).predict(pen=penalty)
    bounds = [0, *ends]
    found = []
    for start, index, stop in zip(bounds, bounds[1:], bounds[2:]):
        before, after = statistics.median(values[start:index]), statistics.median(values[index:stop])
        found.append(Change(index, before, after, None))
    return found


def count_threshold_pct(fullname: str | None, spreads: dict[str, float], rounds: list[list[float]]) -> float:
    """The count gate's threshold for a case: SPREAD_FACTOR times its spread measured on an unchanged tree (the gate's
    count_spread.json) or, for a case that file lacks, of the series' own counted rounds; at least MIN_THRESHOLD."""
    if fullname in spreads:
        measured = spreads[fullname]
    else:
        measured = max((count_gate.spread_percent(counted) for counted in rounds if counted), default=0.0)
    return max(count_gate.MIN_THRESHOLD, count_gate.SPREAD_FACTOR * measured)


def count_changes(values: list[float], threshold_pct: float) -> list[Change]:
    """The change points of a count series: each step between consecutive points beyond the threshold."""
    return [Change(i, values[i - 1], values[i], threshold_pct) for i in range(1, len(values))
            if values[i - 1] > 0 and abs(100.0 * (values[i] / values[i - 1] - 1.0)) > threshold_pct]


def default_count_spreads() -> dict[str, float]:
    """The count gate's own measured spreads ({} where its file cannot be read)."""
    try:
        return count_gate.load_spreads(count_gate.DEFAULT_SPREAD)
    except ValueError:
        return {}

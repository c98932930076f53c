"""Every interval the product states (docs/method.md#every-ratio-with-its-interval), on scipy: a Python/C++ ratio from
paired blocks (the answer, the verdict, the ratio gate), and the paired change of a head against its base (the
wall-time gate, phasebench.gate.decide says why paired t on log-ratios), with the smallest change that test detects.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass

from scipy import stats as scipy_stats

CONFIDENCE = 0.95
# A ratio whose interval reaches further than this from its estimate, either way on the log scale (a relative
# half-width), is undecided: the run could not measure it closely enough to publish a number.
DECIDED_HALF_WIDTH = 0.10


# -- a ratio from paired blocks ----------------------------------------------------------------------------

def median_rank_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The distribution-free interval for the median of `values` (independent draws): the k-th smallest and the
    k-th largest, with k the largest for which a median outside them has probability at most 1 - confidence
    (the sign test's binomial, Bin(n, 1/2)). None where n is too small for that confidence (below 6 at 95 %)."""
    n = len(values)
    k = _rank(n, confidence)
    if k < 1:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


@functools.cache
def _rank(n: int, confidence: float) -> int:
    """The k of median_rank_interval: P(median < x_(k)) = P(Bin(n, 1/2) <= k - 1), the largest k whose tail stays
    within (1 - confidence) / 2; 0 where none does."""
    tail = (1 - confidence) / 2
    k = 0
    while scipy_stats.binom.cdf(k, n, 0.5) <= tail:
        k += 1
    return k


MEDIAN, MEAN = "median", "mean"  # a RatioInterval's statistic: the pairs' median ratio, or their geometric mean


@dataclass(frozen=True)
class RatioInterval:
    """One side's time over another's, from n pairs measured side by side in time (pairs of workers, each the median
    of its blocks' ratios, or pairs of blocks or of fresh workers' runs). Its statistic is the pairs' median ratio,
    with the rank interval of that median, or, for pairs each of which sums hundreds of steps (a training run's
    rounds: their log ratios are close to normal), their geometric mean with Student's t interval; None where the
    pairs are too few for it."""

    estimate: float
    low: float | None
    high: float | None
    pairs: int
    confidence: float = CONFIDENCE
    statistic: str = MEDIAN

    @property
    def half_width(self) -> float | None:
        """The interval's relative half-width: half its width on the log scale, as a fraction (0.05: ±5 %)."""
        if self.low is None:
            return None
        return math.exp((math.log(self.high) - math.log(self.low)) / 2) - 1

    @property
    def decided(self) -> bool:
        return self.half_width is not None and self.half_width <= DECIDED_HALF_WIDTH

    def undecided_because(self) -> str | None:
        """Why the ratio is undecided, or None where it is decided."""
        if self.low is None:
            need = 2 if self.statistic == MEAN else next(
                n for n in range(1, 100) if median_rank_interval([1.0] * n, self.confidence))
            return f"{self.pairs} pair(s): a {self.confidence:.0%} interval needs {need}"
        if not self.decided:
            return (f"its {self.confidence:.0%} interval spans ±{self.half_width:.0%}, more than the "
                    f"±{DECIDED_HALF_WIDTH:.0%} a decided ratio may")
        return None

    def as_info(self) -> dict:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "pairs": self.pairs,
                "confidence": self.confidence, "half_width": self.half_width, "decided": self.decided,
                "statistic": self.statistic}

    @classmethod
    def from_info(cls, info: dict) -> RatioInterval:
        return cls(info["estimate"], info["low"], info["high"], info["pairs"], info.get("confidence", CONFIDENCE),
                   info.get("statistic", MEDIAN))


def paired_ratio(sides: list[float], references: list[float], units: list | None = None,
                 confidence: float = CONFIDENCE, statistic: str = MEDIAN) -> RatioInterval:
    """The ratio of `sides` to `references`, the i-th of each measured side by side in time (a block of rounds each,
    or a fresh worker's run each): the median of the n ratios, and the rank interval of that median; with
    statistic=MEAN (pairs that each sum hundreds of steps), their geometric mean and its t interval.

    `units`: the i-th pair's unit of independent draws (the pair of worker processes that ran it). The pairs of one
    unit share its processes' own offsets, so they are not independent draws of the ratio: each unit then gives one
    ratio, the median of its pairs', and the estimate and its interval are those units' (`pairs` counts units)."""
    assert len(sides) == len(references) and sides, "paired blocks: as many of one side as of the other, at least one"
    logs = [math.log(a / b) for a, b in zip(sides, references)]
    if units is not None:
        assert len(units) == len(logs), "one unit per pair"
        by_unit: dict = {}
        for unit, log in zip(units, logs):
            by_unit.setdefault(unit, []).append(log)
        logs = [statistics.median(unit_logs) for unit_logs in by_unit.values()]
    if statistic == MEAN:
        mean = statistics.fmean(logs)
        if len(logs) < 2:
            return RatioInterval(math.exp(mean), None, None, len(logs), confidence, MEAN)
        half = t_quantile(0.5 + confidence / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        return RatioInterval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs), confidence, MEAN)
    interval = median_rank_interval(logs, confidence)
    low, high = (math.exp(interval[0]), math.exp(interval[1])) if interval else (None, None)
    return RatioInterval(math.exp(statistics.median(logs)), low, high, len(logs), confidence)


def within_units(sides: list[float], references: list[float], units: list) -> RatioInterval | None:
    """The pairs' ratios with each unit's own offset taken out (each divided by its unit's median ratio), as one
    interval about 1: how far the pairs of one unit spread, which more pairs of that unit can narrow, where the
    spread between units (paired_ratio's, with the units) is what more pairs cannot. Only units of two pairs or more
    say how their pairs spread; None where no unit has two."""
    logs = [math.log(a / b) for a, b in zip(sides, references)]
    by_unit: dict = {}
    for unit, log in zip(units, logs):
        by_unit.setdefault(unit, []).append(log)
    centred = [math.exp(log - statistics.median(unit_logs))
               for unit_logs in by_unit.values() if len(unit_logs) >= 2 for log in unit_logs]
    return paired_ratio(centred, [1.0] * len(centred)) if centred else None


# -- a head against its base across paired runs -------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """Head against base across n paired runs: the change as a fraction (0.2 = 20 % slower) with its interval."""

    n: int
    estimate: float  # exp(mean d) - 1
    low: float | None  # the 95 % interval of the change; None with one pair
    high: float | None
    p_value: float | None  # two-sided, paired t on d

    @property
    def significant(self) -> bool:
        return self.low is not None and (self.low > 0 or self.high < 0)

    def interval(self) -> str:
        if self.low is None:
            return "n/a (one pair)"
        return f"{self.low * 100:+.1f} … {self.high * 100:+.1f} %"


def t_quantile(p: float, df: int) -> float:
    """The x with P(T <= x) = p for Student's t with df degrees of freedom."""
    return float(scipy_stats.t.ppf(p, df))


def paired_change(base: list[float], head: list[float]) -> Change:
    """Paired t on the log-ratios head_i / base_i (phasebench.gate.decide says why)."""
    assert len(base) == len(head) and base, "paired runs: as many head as base values, at least one"
    logs = [math.log(h / b) for b, h in zip(base, head)]
    n, mean = len(logs), statistics.fmean(logs)
    if n == 1:
        return Change(1, math.exp(mean) - 1, None, None, None)
    error = statistics.stdev(logs) / math.sqrt(n)
    if error == 0:  # identical ratios in every pair: no spread to test against
        return Change(n, math.exp(mean) - 1, math.exp(mean) - 1, math.exp(mean) - 1, 0.0 if mean else 1.0)
    half = t_quantile(0.5 + CONFIDENCE / 2, n - 1) * error
    p_value = float(2 * scipy_stats.t.sf(abs(mean) / error, n - 1))
    return Change(n, math.exp(mean) - 1, math.exp(mean - half) - 1, math.exp(mean + half) - 1, p_value)


def minimum_detectable(spread: float, n: int, power: float = 0.8) -> float:
    """The smallest true slowdown (a fraction) that the paired t test detects with `power`, given the standard
    deviation `spread` of the log-ratio d over pairs of runs of an unchanged tree and n pairs per decision."""
    if n < 2:
        return math.inf
    shift = (t_quantile(0.5 + CONFIDENCE / 2, n - 1) + t_quantile(power, n - 1)) * spread / math.sqrt(n)
    return math.exp(shift) - 1


def change_either_way(before: float, after: float) -> float:
    """How much larger the larger figure is than the smaller, in percent: a slowdown and the speed-up
    that undoes it count the same (a 2× slowdown and a 2× speed-up are both 100%)."""
    return (max(before, after) / min(before, after) - 1) * 100

"""Paired statistics of the intervention study, shared by its driver (lab/studies/) and the report: a percentile bootstrap
interval of a mean and a geometric mean. Small and pure: no run, no file."""

from __future__ import annotations

import math
import random
import statistics

RESAMPLES = 10_000
CONFIDENCE = 0.95


def bootstrap_interval(values: list[float], resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                       seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of `values`: the values resampled with replacement `resamples`
    times (a seeded generator: the same values give the same interval)."""
    if not values:
        raise ValueError("no values to bootstrap")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[max(0, math.floor(tail * resamples))]
    high = means[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return low, high


def geometric_mean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def paired_change(baseline: list[float], switched: list[float], resamples: int = RESAMPLES,
                  confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float, float]:
    """The change from baseline to switched over paired positive values: exp(mean d) − 1 of d = ln(switched /
    baseline) per pair, with its percentile bootstrap interval, as fractions (0.05 is +5 %)."""
    if len(baseline) != len(switched):
        raise ValueError(f"{len(baseline)} baseline and {len(switched)} switched values: they are paired")
    d = [math.log(s / b) for b, s in zip(baseline, switched)]
    low, high = bootstrap_interval(d, resamples, confidence, seed)
    return math.expm1(statistics.fmean(d)), math.expm1(low), math.expm1(high)

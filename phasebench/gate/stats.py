"""The gates' arithmetic, without scipy: Student's t (its distribution and quantiles), the paired change of head
against base across runs with its 95 % interval (phasebench.gate.decide says why paired t on log-ratios), the
smallest change that test detects, and a change measured either way.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass

CONFIDENCE = 0.95


# -- Student's t ------------------------------------------------------------------------------------------

def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (modified Lentz)."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast on this side only
        return 1 - _incomplete_beta(1 - x, b, a)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny, f, c, d = 1e-300, 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            term = 1.0
        elif i % 2 == 0:
            term = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            term = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + term * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + term / c
        c = c if abs(c) > tiny else tiny
        f *= c * d
        if abs(1 - c * d) < 1e-14:
            break
    return front * (f - 1)


def t_cdf(x: float, df: int) -> float:
    """P(T <= x) for Student's t with df degrees of freedom: P(|T| > |x|) = I_{df/(df+x²)}(df/2, 1/2)."""
    tail = 0.5 * _incomplete_beta(df / (df + x * x), df / 2, 0.5)
    return 1 - tail if x >= 0 else tail


@functools.cache
def t_quantile(p: float, df: int) -> float:
    """The x with P(T <= x) = p (bisection on t_cdf)."""
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


# -- one comparison ----------------------------------------------------------------------------------------

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
    p_value = 2 * (1 - t_cdf(abs(mean) / error, n - 1))
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

"""The pull-request gate's decision (README, "Baselines and CI gating"): base and head run alternately on the
same machine, several whole runs each, and a case regresses only when the evidence across those runs says so.

The unit of evidence is the run. Rounds within one run share that process's offset (its memory layout, its
thread placement, what the neighbours did meanwhile), so they are not independent, and a test over pooled
rounds overstates the evidence. Each base run is paired with the head run beside it, and per case the paired
log-ratio d_i = ln(head median_i / base median_i) is taken: a slowdown is multiplicative, and whatever hit
both runs of a pair (drift, a busy neighbour) cancels in it.

The test is Student's t on the mean of d over the n pairs, with its 95 % interval. Not a rank test: with the
few pairs a gated run can afford, the Wilcoxon signed-rank and sign tests cannot reach significance at all
(their smallest two-sided p with 4 pairs is 2/16 = 0.125, with 5 pairs 2/32 = 0.0625), while each d is the log of a ratio of two medians
of many rounds, close enough to normal for t. A case fails only when all three hold:
  - the change is larger than the threshold (its estimate, exp(mean d) - 1);
  - it is significant (the interval's lower end lies above no change);
  - head's median is slower than base's by more than the absolute floor (below).
The same for the ratio gate, with d_i = ln(ratio in head run i / ratio in base run i) where the ratio is an
implementation's median over its reference's in that run.

The absolute floor: a change smaller than what the clock itself varies by is a change of the clock, not of
the phase. Every phase case records its worker's timer floor (the median cost of timing an empty phase,
measured at the worker's start); the floor of a case is the largest timer floor its runs measured plus twice
those floors' spread (standard deviation) across the runs. Only tiny phases (a few µs) come near it.

    python -m phasebench.gate.paired --base B1.json B2.json … --head H1.json H2.json … [--threshold 10%]
        [--ratio-threshold 10%] [--markdown FILE] [--failing FILE]

prints every case's verdict and exits 1 when one regressed (phasebench/gate/__init__.py's `python -m phasebench.gate A B` shows the
same table for one pair, without intervals).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from phasebench import gate, results

DEFAULT_THRESHOLD = 10.0  # percent: README, "Baselines and CI gating" says where it comes from
CONFIDENCE = 0.95


# -- Student's t, without scipy ---------------------------------------------------------------------------

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
    """Paired t on the log-ratios head_i / base_i (module docstring)."""
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


# -- runs ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One saved result: per case (its fullname) the raw median, the case key and the worker's timer floor."""

    path: str
    medians: dict[str, float]
    keys: dict[str, tuple]  # fullname -> (phase, implementation, device, workload id)
    floors: dict[str, float]  # fullname -> timer floor (s), for phase cases
    method: int | None = None  # the measurement method that made it (bench/results.py)

    @classmethod
    def load(cls, path) -> Run:
        error = gate.baseline_error(Path(path))
        if error:
            raise SystemExit(f"{path}: {error}")
        return cls.of(path, json.loads(Path(path).read_text(encoding="utf8")))

    @classmethod
    def of(cls, path, saved: dict) -> Run:
        """From a loaded result (pytest-benchmark's JSON)."""
        medians, keys, floors = {}, {}, {}
        for bench in saved["benchmarks"]:
            key = gate.case_key(bench)
            if key and key[0] == "worker_overhead":  # our messaging, not training (README, "Noise")
                continue
            name = bench["fullname"]
            medians[name] = bench["stats"]["median"]
            if key:
                keys[name] = key
            floor = (bench.get("extra_info") or {}).get("timer_floor_s")
            if floor:
                floors[name] = floor
        return cls(str(path), medians, keys, floors, results.method_of(saved))


@dataclass(frozen=True)
class Verdict:
    kind: str  # "median" or "ratio"
    case: str  # the fullname, or "phase impl/reference on device[, workload]"
    base: float  # median over the base runs of the case's median (s), or of the ratio
    head: float
    change: Change
    floor: float | None  # seconds; None for ratios
    verdict: str  # "regressed" (for ratios: which side), "faster", "unchanged", "within threshold", "below floor"
    members: tuple[str, ...]  # the fullnames whose rerun retests it

    @property
    def failed(self) -> bool:
        return self.verdict.startswith("regressed")


def _floor(runs: list[Run], name: str) -> float | None:
    floors = [run.floors[name] for run in runs if name in run.floors]
    if not floors:
        return None
    return max(floors) + 2 * (statistics.stdev(floors) if len(floors) > 1 else 0.0)


def _judge(change: Change, threshold: float, shift: float | None, floor: float | None) -> str:
    if change.n == 1:
        return "not decided (one pair)"
    if change.significant and change.low > 0:
        if change.estimate * 100 <= threshold:
            return "within threshold"
        if floor is not None and shift is not None and shift <= floor:
            return "below floor"
        return "regressed"
    if change.significant and change.high < 0:
        return "faster"
    return "unchanged"


def decide(base_runs: list[Run], head_runs: list[Run], threshold: float = DEFAULT_THRESHOLD,
           ratio_threshold: float = DEFAULT_THRESHOLD) -> list[Verdict]:
    """Every case in all runs of both sides, then every implementation against its reference (per phase, device
    and workload): failures first, then the largest change."""
    if len(base_runs) != len(head_runs) or not base_runs:
        raise ValueError(f"paired runs: {len(base_runs)} base and {len(head_runs)} head results")
    methods = {run.method for run in base_runs + head_runs}
    if len(methods) > 1:
        raise ValueError("runs of different measurement methods (bench/results.py): "
                         + ", ".join(f"{run.path} method {run.method}" for run in base_runs + head_runs))
    runs = base_runs + head_runs
    names = sorted(set.intersection(*(set(run.medians) for run in runs)))
    verdicts = []
    for name in names:
        base = [run.medians[name] for run in base_runs]
        head = [run.medians[name] for run in head_runs]
        change = paired_change(base, head)
        floor = _floor(runs, name)
        shift = statistics.median(head) - statistics.median(base)
        verdicts.append(Verdict("median", name, statistics.median(base), statistics.median(head), change, floor,
                                _judge(change, threshold, shift, floor), (name,)))

    by_key = {key: name for name, key in base_runs[0].keys.items() if name in names}
    present: dict[tuple, set[str]] = {}
    for phase, impl, device, workload_id in by_key:
        present.setdefault((phase, device, workload_id), set()).add(impl)
    for (phase, device, workload_id), impls in sorted(present.items()):
        for impl, reference in gate.ratio_pairs(impls):
            where = f"{device}, {workload_id}" if workload_id else device
            own, ref = by_key[phase, impl, device, workload_id], by_key[phase, reference, device, workload_id]
            verdicts.append(_ratio_verdict(f"{phase} {impl}/{reference} on {where}", own, ref, base_runs, head_runs,
                                           ratio_threshold))
    return sorted(verdicts, key=lambda v: (not v.failed, -abs(v.change.estimate)))


def _ratio_verdict(case: str, own: str, ref: str, base_runs: list[Run], head_runs: list[Run],
                   threshold: float) -> Verdict:
    """An implementation's median over its reference's, run by run: either side may be the one that lost, so
    the change is taken as the loser's (its median over the other's), and the floor and the verdict are its."""
    ratios = [[run.medians[own] / run.medians[ref] for run in side] for side in (base_runs, head_runs)]
    change = paired_change(*ratios)
    loser, other = (own, ref) if change.estimate >= 0 else (ref, own)
    if loser == ref:
        change = paired_change(*([1 / ratio for ratio in side] for side in ratios))
    # In seconds: how much more the loser takes in head than its base ratio to the other predicts.
    head_loser, head_other = (statistics.median(run.medians[name] for run in head_runs) for name in (loser, other))
    base_ratio = statistics.median(run.medians[loser] / run.medians[other] for run in base_runs)
    floor = _floor(base_runs + head_runs, loser)
    verdict = _judge(change, threshold, head_loser - base_ratio * head_other, floor)
    if verdict == "regressed":
        verdict = f"regressed ({_short(loser)} slower relative to {_short(other)})"
    return Verdict("ratio", case, statistics.median(ratios[0]), statistics.median(ratios[1]),
                   paired_change(*ratios), floor, verdict, (own, ref))


def _short(fullname: str) -> str:
    return fullname.rpartition("::")[2]


# -- output -------------------------------------------------------------------------------------------------

def _quantity(verdict: Verdict, value: float) -> str:
    return f"{value:.3f}" if verdict.kind == "ratio" else f"{value * 1e3:.4f} ms"


def table(verdicts: list[Verdict], threshold: float, ratio_threshold: float) -> str:
    """The job summary: per case base and head, the change with its interval, significant or not, the verdict."""
    n = verdicts[0].change.n if verdicts else 0
    failed = [v for v in verdicts if v.failed]
    lines = [f"**Gate: {'FAILED, ' + str(len(failed)) + ' regressed' if failed else 'passed'}** ({n} paired runs; a "
             f"case regresses when its change exceeds {threshold:g} % (ratios {ratio_threshold:g} %), its 95 % "
             f"interval lies above no change, and the slowdown exceeds the case's absolute floor)", "",
             "| case | base | head | change | 95 % interval | p | significant | floor | verdict |",
             "|---|---:|---:|---:|---|---:|---|---:|---|"]
    for v in verdicts:
        p = "n/a" if v.change.p_value is None else f"{v.change.p_value:.3f}"
        floor = "" if v.floor is None else f"{v.floor * 1e6:.2f} µs"
        mark = f"**{v.verdict}**" if v.failed else v.verdict
        lines.append(f"| {v.case} | {_quantity(v, v.base)} | {_quantity(v, v.head)} | {v.change.estimate * 100:+.1f} % "
                     f"| {v.change.interval()} | {p} | {'yes' if v.change.significant else 'no'} | {floor} | {mark} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", nargs="+", required=True, help="base's saved results, in run order")
    parser.add_argument("--head", nargs="+", required=True, help="head's, in the same order (paired with base's)")
    parser.add_argument("--threshold", type=gate.parse_percent, default=int(DEFAULT_THRESHOLD), metavar="X%")
    parser.add_argument("--ratio-threshold", type=gate.parse_percent, default=int(DEFAULT_THRESHOLD), metavar="X%")
    parser.add_argument("--markdown", help="also write the table here (the CI job summary)")
    parser.add_argument("--failing", help="write the fullnames of the cases that failed here, one a line")
    args = parser.parse_args(argv)
    if len(args.base) != len(args.head):
        parser.error(f"{len(args.base)} base and {len(args.head)} head results: they are compared in pairs")
    try:
        verdicts = decide([Run.load(p) for p in args.base], [Run.load(p) for p in args.head], args.threshold,
                          args.ratio_threshold)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if not verdicts:
        raise SystemExit("nothing compared: no case is in every base and head result")
    text = table(verdicts, args.threshold, args.ratio_threshold)
    print(text, end="")
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf8")
    failed = [v for v in verdicts if v.failed]
    if args.failing:
        Path(args.failing).write_text("".join(f"{name}\n" for name in dict.fromkeys(
            member for v in failed for member in v.members)), encoding="utf8")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

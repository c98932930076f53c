"""The pull-request gate's decision (docs/gating.md#baselines-and-ci-gating): base and head run alternately on the
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

phasebench.gate.paired is its command (.ci/bench-pr); phasebench.gate.cli (`python -m phasebench.gate A B`) shows
the same table for one pair of results, without intervals.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from phasebench import results
from phasebench.gate.verdict import Verdict, is_gated, short
from phasebench.saved import SavedResult, SavedResultError
from phasebench.stats import Change, paired_change

DEFAULT_THRESHOLD = 10.0  # percent: docs/gating.md#baselines-and-ci-gating says where it comes from


# -- runs ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """What the gate reads of one saved result (SavedResult): per case (its fullname) the raw median, the case key,
    the worker's timer floor and the calls per round; and what of the run must match every other run it is paired
    with (incomparable)."""

    path: str
    medians: dict[str, float]
    keys: dict[str, tuple]  # fullname -> (phase, implementation, device, workload id)
    floors: dict[str, float]  # fullname -> timer floor (s), for phase cases
    method: int | None = None  # the measurement method that made it (phasebench/results.py)
    switched: tuple = ()  # the intervention study's switches it ran with (results.switched, as pairs); () for none
    iterations: dict = field(default_factory=dict)  # fullname -> calls per round (stats.iterations), where recorded
    order_seed: int | None = None  # the seed of its run order (machine_info's order_seed)
    dataset: str | None = None  # the data it read (mnist, fashion-mnist, synthetic)
    torch: str | None = None  # torch's version

    @classmethod
    def load(cls, path) -> Run:
        try:
            return cls.of(SavedResult.load(path))
        except SavedResultError as error:
            raise SystemExit(str(error)) from None

    @classmethod
    def of(cls, result: SavedResult) -> Run:
        medians, keys, floors, iterations = {}, {}, {}, {}
        for case in result.benchmarks:
            if case.key and not is_gated(case.key):
                continue
            medians[case.fullname] = case.median
            if case.key:
                keys[case.fullname] = case.key
            floor = getattr(case.info, "timer_floor_s", None)
            if floor:
                floors[case.fullname] = floor
            if case.stats.get("iterations") is not None:
                iterations[case.fullname] = case.stats["iterations"]
        machine = result.machine
        return cls(result.source, medians, keys, floors, result.method, tuple(results.switched(machine).items()),
                   iterations, machine.order_seed, machine.dataset, machine.torch)


@dataclass(frozen=True)
class CaseDecision:
    kind: str  # "median" or "ratio"
    case: str  # the fullname, or "phase impl/reference on device[, workload]"
    base: float  # median over the base runs of the case's median (s), or of the ratio
    head: float
    change: Change
    floor: float | None  # seconds; None for ratios
    verdict: Verdict
    detail: str  # for ratios which side lost and why it fails or is only reported; "one pair" when not decided
    members: tuple[str, ...]  # the fullnames whose rerun retests it

    @property
    def failed(self) -> bool:
        return self.verdict.fails

    @property
    def text(self) -> str:
        return self.verdict.text(self.detail)


def _floor(runs: list[Run], name: str) -> float | None:
    floors = [run.floors[name] for run in runs if name in run.floors]
    if not floors:
        return None
    return max(floors) + 2 * (statistics.stdev(floors) if len(floors) > 1 else 0.0)


def _judge(change: Change, threshold: float, shift: float | None, floor: float | None) -> tuple[Verdict, str]:
    """The outcome and its detail."""
    if change.n == 1:
        return Verdict.NOT_DECIDED, "one pair"
    if change.significant and change.low > 0:
        if change.estimate * 100 <= threshold:
            return Verdict.WITHIN_THRESHOLD, ""
        if floor is not None and shift is not None and shift <= floor:
            return Verdict.BELOW_FLOOR, ""
        return Verdict.REGRESSED, ""
    if change.significant and change.high < 0:
        return Verdict.IMPROVED, ""
    return Verdict.UNCHANGED, ""


def _values(runs: list[Run], value_of) -> str:
    """The values `value_of` takes over a side's runs, in words: one value, or each of them."""
    found = sorted({str(value_of(run)) for run in runs})
    return " and ".join(found) if len(found) < 4 else f"{', '.join(found[:3])} and {len(found) - 3} more"


def newer_than_this_code(error: SavedResultError) -> bool:
    """Whether a result could not be read only because a newer method or format made it (phasebench/saved.py): a head
    that raised either, read by the gate, which runs base's code."""
    return error.reason.endswith("read it with the code that made it")


def incomparable(base_runs: list[Run], head_runs: list[Run]) -> list[str]:
    """Why base's runs cannot be set against head's, one reason a line, or [] where they can: every run the gate pairs
    (both sides, and a confirming rerun's) must share the measurement method, the run order (the order seed), the
    data, torch's version, and per case the calls per round (docs/gating.md#not-comparable). .ci/bench-pr gives every
    run after base's first `--benchmark-compare` of that run, which carries its order seed and calls per round."""
    runs = base_runs + head_runs
    reasons = []
    for what, value_of, why in (
            ("method", lambda run: run.method, "phasebench/method.py says what changed"),
            ("run order", lambda run: run.order_seed, "each run takes base's first run's order seed"),
            ("data", lambda run: run.dataset, "each run reads the data base's first run read"),
            ("torch", lambda run: run.torch, "the two trees' requirements.txt")):
        if len({value_of(run) for run in runs}) > 1:
            reasons.append(f"{what}: base {_values(base_runs, value_of)}, head {_values(head_runs, value_of)} ({why})")
    named = sorted(set.intersection(*(set(run.medians) for run in runs))) if runs else []
    differing = [name for name in named if len({run.iterations.get(name) for run in runs}) > 1]
    for name in differing[:3]:
        calls = [_values(side, lambda run, case=name: run.iterations.get(case)) for side in (base_runs, head_runs)]
        reasons.append(f"calls per round of {short(name)}: base {calls[0]}, head {calls[1]} (a median per call of one "
                       f"call a round and of many is not the same statistic)")
    if len(differing) > 3:
        reasons.append(f"calls per round of {len(differing) - 3} more case(s) differ too")
    return reasons


def decide(base_runs: list[Run], head_runs: list[Run], threshold: float = DEFAULT_THRESHOLD,
           ratio_threshold: float = DEFAULT_THRESHOLD) -> list[CaseDecision]:
    """Every case in all runs of both sides, then every implementation against its reference (per phase, device
    and workload): failures first, then the largest change."""
    if len(base_runs) != len(head_runs) or not base_runs:
        raise ValueError(f"paired runs: {len(base_runs)} base and {len(head_runs)} head results")
    methods = {run.method for run in base_runs + head_runs}
    if len(methods) > 1:
        raise ValueError("runs of different measurement methods (phasebench/results.py): "
                         + ", ".join(f"{run.path} method {run.method}" for run in base_runs + head_runs))
    if len({run.switched for run in base_runs + head_runs}) > 1:
        raise ValueError("runs timed with different switches (docs/method.md#switches-for-the-intervention-study): "
                         + ", ".join(f"{run.path} {results.switched_text(dict(run.switched))}"
                                     for run in base_runs + head_runs))
    runs = base_runs + head_runs
    names = sorted(set.intersection(*(set(run.medians) for run in runs)))
    verdicts = []
    for name in names:
        base = [run.medians[name] for run in base_runs]
        head = [run.medians[name] for run in head_runs]
        change = paired_change(base, head)
        floor = _floor(runs, name)
        shift = statistics.median(head) - statistics.median(base)
        verdicts.append(CaseDecision("median", name, statistics.median(base), statistics.median(head), change, floor,
                                *_judge(change, threshold, shift, floor), (name,)))

    by_key = {key: name for name, key in base_runs[0].keys.items() if name in names}
    present: dict[tuple, set[str]] = {}
    for phase, impl, device, workload_id in by_key:
        present.setdefault((phase, device, workload_id), set()).add(impl)
    for (phase, device, workload_id), impls in sorted(present.items()):
        for impl, reference in results.ratio_pairs(impls):
            where = f"{device}, {workload_id}" if workload_id else device
            own, ref = by_key[phase, impl, device, workload_id], by_key[phase, reference, device, workload_id]
            verdicts.append(_ratio_verdict(f"{phase} {impl}/{reference} on {where}", own, ref, base_runs, head_runs,
                                           ratio_threshold))
    return sorted(verdicts, key=lambda v: (not v.failed, -abs(v.change.estimate)))


def _ratio_verdict(case: str, own: str, ref: str, base_runs: list[Run], head_runs: list[Run],
                   threshold: float) -> CaseDecision:
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
    outcome, detail = _judge(change, threshold, head_loser - base_ratio * head_other, floor)
    if outcome is Verdict.REGRESSED:
        # A ratio alone cannot tell the loser's slowdown from the other's speed-up: it fails only when the loser is
        # also slower in its own paired medians, significantly and beyond its floor; otherwise it is reported.
        own_change = paired_change([run.medians[loser] for run in base_runs], [run.medians[loser] for run in head_runs])
        own_shift = head_loser - statistics.median(run.medians[loser] for run in base_runs)
        slower = own_change.significant and own_change.low > 0 and (floor is None or own_shift > floor)
        if slower:
            detail = f"{short(loser)} slower relative to {short(other)}, and slower in its own medians"
        else:
            outcome = Verdict.RATIO_MOVED
            detail = f"{short(loser)} not slower in its own medians: {short(other)} got faster"
    return CaseDecision("ratio", case, statistics.median(ratios[0]), statistics.median(ratios[1]),
                   paired_change(*ratios), floor, outcome, detail, (own, ref))


# -- output -------------------------------------------------------------------------------------------------

def _quantity(verdict: CaseDecision, value: float) -> str:
    return f"{value:.3f}" if verdict.kind == "ratio" else f"{value * 1e3:.4f} ms"


def outcome(verdicts: list[CaseDecision]) -> str:
    """The gate's verdict in a few words: "FAILED, N regressed", "passed", or with one run a side, where no case can
    be judged (no interval), "no verdict"."""
    failed = [v for v in verdicts if v.failed]
    if failed:
        return f"FAILED, {len(failed)} regressed"
    if verdicts and all(v.verdict is Verdict.NOT_DECIDED for v in verdicts):
        return "no verdict"
    return "passed"


ACCEPT_LABEL = "benchmark-change-accepted"  # the pull-request label by which a maintainer accepts (workflows)
HOW_TO_ACCEPT = (f"a maintainer who accepts the change passes the gate without a verdict: --accept-change REASON, on a "
                 f"pull request the label {ACCEPT_LABEL}")


def not_comparable_text(reasons: list[str], accepted: str | None) -> str:
    """The job summary of a gate whose base and head cannot be compared: its first line the verdict with every reason,
    FAILED unless a maintainer accepted the change (`accepted`, the acceptance's reason), then the reasons a line."""
    if accepted:
        first = (f"**Gate: passed, change accepted** (base and head cannot be compared: {'; '.join(reasons)}; accepted "
                 f"by a maintainer: {accepted}; no case is judged)")
    else:
        first = f"**Gate: FAILED, not comparable** ({'; '.join(reasons)}; {HOW_TO_ACCEPT})"
    return "\n".join([first, "", *(f"- {reason}" for reason in reasons)]) + "\n"


def _rule(verdicts: list[CaseDecision], threshold: float, ratio_threshold: float) -> str:
    n = verdicts[0].change.n if verdicts else 0
    if n == 1:
        return "one run a side: a change has no interval, so no case is judged; .ci/bench-pr's paired runs decide"
    return (f"{n} paired runs; a case regresses when its change exceeds {threshold:g} % (ratios {ratio_threshold:g} %), "
            f"its 95 % interval lies above no change, and the slowdown exceeds the case's absolute floor")


def _rows(verdicts: list[CaseDecision]) -> list[str]:
    lines = ["| case | base | head | change | 95 % interval | p | significant | floor | verdict |",
             "|---|---:|---:|---:|---|---:|---|---:|---|"]
    for v in verdicts:
        p = "n/a" if v.change.p_value is None else f"{v.change.p_value:.3f}"
        floor = "" if v.floor is None else f"{v.floor * 1e6:.2f} µs"
        mark = v.verdict.cell(v.detail)
        lines.append(f"| {v.case} | {_quantity(v, v.base)} | {_quantity(v, v.head)} | {v.change.estimate * 100:+.1f} % "
                     f"| {v.change.interval()} | {p} | {'yes' if v.change.significant else 'no'} | {floor} | {mark} |")
    return lines


def table(verdicts: list[CaseDecision], threshold: float, ratio_threshold: float) -> str:
    """The job summary: its first line the verdict, then per case base and head, the change with its interval,
    significant or not, the verdict."""
    lines = [f"**Gate: {outcome(verdicts)}** ({_rule(verdicts, threshold, ratio_threshold)})", "", *_rows(verdicts)]
    return "\n".join(lines) + "\n"


def confirmed_table(first: list[CaseDecision], rerun: list[CaseDecision], threshold: float,
                    ratio_threshold: float) -> str:
    """The job summary of a gate whose failing cases ran again alone (.ci/bench-pr): the rerun's verdict is the
    gate's, so its first line is that verdict; then the rerun's table, then the first runs'."""
    flagged, failed = sum(v.failed for v in first), sum(v.failed for v in rerun)
    if failed:
        why = (f"confirmed: {failed} regressed again when the first runs' failing cases ran again alone, of "
               f"{flagged} in the first runs")
    else:
        why = (f"cleared by the rerun: {flagged} regressed in the first runs, none when their cases ran again "
               f"alone")
    lines = [f"**Gate: {outcome(rerun)}** ({why}; {_rule(rerun, threshold, ratio_threshold)})", "",
             "### The failing cases run again alone (the verdict)", "", *_rows(rerun), "",
             f"### The first runs ({flagged} regressed; their cases were run again alone, above)", "", *_rows(first)]
    return "\n".join(lines) + "\n"

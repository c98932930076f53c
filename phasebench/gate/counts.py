"""The instruction-count gate (docs/instruction-counts.md; .ci/bench-pr-count): base and head counted in the same
job under `--count instructions`, one saved result each, and per case a verdict on head's median count against
base's. The threshold of a case comes from its measured spread, never from a hand: ten times the
spread measured across counts of an unchanged tree (the gate's own count_spread.json beside this module, a copy of
results/instruction-counts/spread.json, or the file `--spread` names) or, for a case that file lacks, of this job's own
counted rounds of that case in base and head; at least 0.5 %. A regression beyond it fails; an improvement beyond it
is reported and never fails. A base and head that cannot be compared (a base without the mode, another count bracket,
method, run order, data, torch, or calls per round of a case) fail the gate, naming why in its first line, unless
--accept-change says that a maintainer accepted the change: then it passes without a verdict, except where the method
alone changed and the count bracket did not, which says the counts are comparable: those are judged.

    python -m phasebench.gate.counts --base BASE.json --head HEAD.json [--spread spread.json] [--markdown gate.md]
        [--accept-change REASON]

Exit status 1 when a case regressed or base and head cannot be compared (unaccepted), 0 otherwise, 2 on a usage error
or a thresholds file that is missing or unreadable. Imports no torch."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from phasebench import results, schema
from phasebench.gate.decide import HOW_TO_ACCEPT, newer_than_this_code
from phasebench.gate.verdict import Verdict, short
from phasebench.saved import SavedResult, SavedResultError

SPREAD_FACTOR = 10.0  # the threshold is this many times the spread
MIN_THRESHOLD = 0.5  # percent
DEFAULT_SPREAD = Path(__file__).with_name("count_spread.json")  # package data (pyproject.toml)


def spread_percent(counts: list[float]) -> float:
    """(max - min) / median of a case's counts, in percent."""
    if len(counts) < 2:
        return 0.0
    return 100.0 * (max(counts) - min(counts)) / statistics.median(counts)


def counted_cases(result: SavedResult) -> dict[str, dict]:
    """{case fullname: {"median", "rounds" (the counts), "floor", "phase", "impl"}} of a counted result."""
    cases = {}
    for case in result.benchmarks:
        info = case.info
        if not isinstance(info, schema.CountedPhaseInfo):
            continue
        counts = info.instructions or []
        cases[case.fullname] = {"median": statistics.median(counts), "rounds": counts,
                                    "floor": info.count_floor, "phase": info.phase, "impl": info.implementation}
    return cases


def bracket_of(result: SavedResult):
    return (result.machine.count or {}).get("bracket")


# The reason a method change alone gives, where the count bracket stayed: accepted, the counts are judged.
SAME_BRACKET = "the count bracket is the same"


def not_comparable(base: SavedResult, head: SavedResult) -> list[str]:
    """Why base's counts cannot be set against head's, one reason each, or []."""
    if base.metric != "instructions":
        return [f"base holds {base.metric}, not instruction counts (base lacks the mode)"]
    reasons = []
    if bracket_of(base) != bracket_of(head):
        reasons.append(f"the count bracket changed (base {bracket_of(base)!r}, head {bracket_of(head)!r})")
    if base.method != head.method:
        if bracket_of(base) == bracket_of(head):
            reasons.append(f"method: base {base.method}, head {head.method}, but {SAME_BRACKET} (a method change "
                           f"that alters what a count holds must change the bracket, phasebench/worker/counting.py; "
                           f"accepted, the counts are judged)")
        else:
            reasons.append(f"method: base {base.method}, head {head.method}")
    for what, value_of in (("run order", lambda result: result.machine.order_seed),
                           ("data", lambda result: result.machine.dataset),
                           ("torch", lambda result: result.machine.torch)):
        if value_of(base) != value_of(head):
            reasons.append(f"{what}: base {value_of(base)}, head {value_of(head)}")
    calls = [{case.fullname: case.stats.get("iterations") for case in result.benchmarks} for result in (base, head)]
    differing = sorted(name for name in calls[0].keys() & calls[1].keys() if calls[0][name] != calls[1][name])
    reasons += [f"calls per round of {short(name)}: base {calls[0][name]}, head {calls[1][name]}"
                for name in differing[:3]]
    if len(differing) > 3:
        reasons.append(f"calls per round of {len(differing) - 3} more case(s) differ too")
    return reasons


def judged_when_accepted(reasons: list[str]) -> bool:
    """Whether an accepted change leaves the counts comparable: the method alone changed, the bracket did not."""
    return bool(reasons) and all(SAME_BRACKET in reason for reason in reasons)


@dataclass(frozen=True)
class Row:
    """The verdict on one case; for a case in one side alone only that side's median."""

    case: str  # the fullname
    base: float | None  # median instructions
    head: float | None
    change_pct: float | None
    threshold_pct: float | None
    spread_pct: float | None  # the measured spread the threshold comes from
    verdict: Verdict

    def as_json(self) -> dict:
        return asdict(self) | {"verdict": self.verdict.value}


def load_spreads(path: Path) -> dict[str, float]:
    """{case fullname: spread percent} of a thresholds file; ValueError naming the file when it cannot be read."""
    try:
        spreads = json.loads(Path(path).read_text(encoding="utf8"))["spread_pct"]
    except FileNotFoundError:
        raise ValueError(f"thresholds file {path} does not exist") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"thresholds file {path} is unreadable ({type(error).__name__}: {error})") from None
    if not isinstance(spreads, dict):
        raise ValueError(f"thresholds file {path} is unreadable (spread_pct is not an object)")
    return spreads


def decide(base: SavedResult, head: SavedResult, spreads: dict[str, float]) -> list[Row]:
    """Per case present in both: base and head medians, the change, the threshold and the verdict."""
    rows = []
    base_cases, head_cases = counted_cases(base), counted_cases(head)
    for name in sorted(base_cases.keys() & head_cases.keys()):
        b, h = base_cases[name], head_cases[name]
        # The spread measured across counts of an unchanged tree; for a case it lacks, this job's round-to-round one.
        measured = spreads[name] if name in spreads else max(spread_percent(b["rounds"]), spread_percent(h["rounds"]))
        threshold = max(MIN_THRESHOLD, SPREAD_FACTOR * measured)
        change = 100.0 * (h["median"] / b["median"] - 1.0)
        verdict = (Verdict.REGRESSED if change > threshold else Verdict.IMPROVED if change < -threshold
                   else Verdict.UNCHANGED)
        rows.append(Row(name, b["median"], h["median"], change, threshold, measured, verdict))
    for name in sorted(base_cases.keys() ^ head_cases.keys()):
        rows.append(Row(name, base_cases.get(name, {}).get("median"), head_cases.get(name, {}).get("median"), None,
                        None, None, Verdict.ONLY_IN_BASE if name in base_cases else Verdict.ONLY_IN_HEAD))
    return rows


def markdown(rows: list[Row], reasons: list[str] | None = None, accepted: str | None = None) -> str:
    """The job summary, its first line the verdict: FAILED with how many regressed, passed, or where base and head
    cannot be compared FAILED with why, unless a maintainer accepted the change (`accepted`)."""
    failed = [r for r in rows if r.verdict.fails]
    judged = not reasons or (accepted and judged_when_accepted(reasons))
    if reasons and not accepted:
        verdict = f"FAILED, not comparable ({'; '.join(reasons)}; {HOW_TO_ACCEPT})"
    elif reasons and not judged:
        verdict = (f"passed, change accepted (base and head cannot be compared: {'; '.join(reasons)}; accepted by a "
                   f"maintainer: {accepted}; no case is judged)")
    else:
        verdict = f"FAILED, {len(failed)} regressed" if failed else "passed"
    lines = [f"## Instruction-count gate: {verdict} (base vs head, `--count instructions`)", ""]
    if reasons:
        lines += [f"- {reason}" for reason in reasons] + [""]
        if judged:
            lines += [f"Accepted by a maintainer ({accepted}): the method alone changed, so the counts are judged.", ""]
    if not judged:
        return "\n".join(lines)
    lines += ["| case | base (instructions) | head (instructions) | change | threshold | verdict |",
              "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        change = "—" if r.change_pct is None else f"{r.change_pct:+.3f} %"
        threshold = "—" if r.threshold_pct is None else f"{r.threshold_pct:.2f} %"
        cells = ["—" if value is None else f"{value:,.0f}" for value in (r.base, r.head)]
        lines.append(f"| {short(r.case)} | {cells[0]} | {cells[1]} | {change} | {threshold} | {r.verdict.cell()} |")
    better = [r for r in rows if r.verdict is Verdict.IMPROVED]
    lines += ["", f"{len(failed)} regression(s), {len(better)} improvement(s) (reported, never failing) of "
                  f"{len(rows)} case(s): the gate {'FAILS' if failed else 'passes'}.", ""]
    return "\n".join(lines)


def _read(path: str, side: str, prog: str) -> SavedResult | str:
    """A side's counted result, or why this code cannot compare it: a method or format newer than it reads (the gate
    runs base's code). Anything else unreadable is SystemExit naming the file."""
    try:
        return SavedResult.load(path)
    except SavedResultError as error:
        if not newer_than_this_code(error):
            raise SystemExit(f"{prog}: {error}") from None
        return (f"method: {side} {error.reason.removesuffix(': read it with the code that made it')} (the gate runs "
                f"base's code)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phasebench.gate.counts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True,
                        help="base's counted result: a file, or a saved run in --storage by number (0001), name (base, "
                             "for 0001_base.json) or a glob that matches one")
    parser.add_argument("--head", required=True, help="head's, the same way")
    parser.add_argument("--storage", default=results.DEFAULT_STORAGE,
                        help="where saved runs named by number, name or glob are, as --benchmark-storage (default: "
                             "%(default)s)")
    parser.add_argument("--spread", type=Path, default=DEFAULT_SPREAD,
                        help="the spread per case measured on an unchanged tree (JSON: {\"spread_pct\": {case: "
                             "percent}}; default: the gate's own, %(default)s)")
    parser.add_argument("--markdown", help="write the table here too (the CI job summary)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--accept-change", metavar="REASON",
                        help="a maintainer accepted that base and head cannot be compared (REASON says who and why; "
                             "the workflow passes it for the pull request's label): the gate passes, without a verdict "
                             "unless the method alone changed; where they can be compared, it judges them as usual")
    args = parser.parse_args(argv)
    args.base, args.head = (str(results.find_result(name, args.storage, parser.prog)) for name in (args.base, args.head))
    base, head = (_read(path, side, parser.prog) for path, side in ((args.base, "base"), (args.head, "head")))
    if not isinstance(head, str) and head.metric != "instructions":
        parser.error(f"{args.head} holds {head.metric}: head must be counted (--count instructions)")
    try:
        spreads = load_spreads(args.spread)
    except ValueError as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return 2
    unread = [side for side in (base, head) if isinstance(side, str)]
    reasons = unread or not_comparable(base, head)
    accepted = args.accept_change if reasons else None
    judged = not reasons or (accepted and judged_when_accepted(reasons))
    rows = decide(base, head, spreads) if judged else []
    text = markdown(rows, reasons, accepted)
    if args.accept_change and not reasons:
        text += (f"A change was accepted ({args.accept_change}), but base and head can be compared: the gate judged "
                 f"them as usual.\n")
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json:
        # Named and placed (Valgrind counts on cpu alone) for the pull request's comment (phasebench.gate.comment).
        Path(args.json).write_text(json.dumps({"gate": "instructions", "device": "cpu",
                                               "note": "; ".join(reasons) or None, "accepted": accepted,
                                               "rows": [r.as_json() for r in rows]}, indent=1))
    if reasons and not accepted:
        return 1
    return 1 if any(r.verdict.fails for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

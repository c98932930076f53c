"""`python -m phasebench.gate.paired`: the pull-request gate's decision on paired runs (.ci/bench-pr;
docs/gating.md#baselines-and-ci-gating), by phasebench.gate.decide, whose docstring says how a case is judged.

    python -m phasebench.gate.paired --base B1.json B2.json … --head H1.json H2.json … [--threshold 10%]
        [--ratio-threshold 10%] [--markdown FILE] [--failing FILE] [--confirm-base B … --confirm-head H …]

prints every case's verdict, the gate's first, and exits 1 when one regressed. Where base and head cannot be compared
(another method, run order, data, torch, or calls per round of a case; a head result newer than this code reads) it
fails, exit 1, naming what differs in its first line, unless --accept-change REASON says that a maintainer accepted
the change: then it passes without a verdict, saying so (`python -m phasebench.gate A B` shows the same table for one
pair, without intervals). With --confirm-base and --confirm-head,
the runs of the failing cases run again alone (.ci/bench-pr), theirs is the verdict. Runs are files, or saved runs in
--storage by number, name or glob (phasebench.results.find_results).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from phasebench import results
from phasebench.gate.decide import (
    DEFAULT_THRESHOLD,
    Run,
    confirmed_table,
    decide,
    incomparable,
    newer_than_this_code,
    not_comparable_text,
    outcome,
    table,
)
from phasebench.gate.options import parse_percent
from phasebench.saved import SavedResult, SavedResultError

PROG = "phasebench.gate.paired"


def verdict_row(v, runs: list[Run], threshold: float, ratio_threshold: float) -> dict:
    """One case's verdict as data: what the comment shows of it."""
    key = next((run.keys[v.case] for run in runs if v.case in run.keys), None)
    row = {"kind": v.kind, "case": v.case, "base": v.base, "head": v.head,
           "unit": "ratio" if v.kind == "ratio" else "s", "change_pct": 100 * v.change.estimate,
           "low_pct": None if v.change.low is None else 100 * v.change.low,
           "high_pct": None if v.change.high is None else 100 * v.change.high,
           "threshold_pct": float(ratio_threshold if v.kind == "ratio" else threshold), "verdict": v.verdict.value,
           "detail": v.detail}
    if key:
        row |= {"phase": key[0], "implementation": key[1], "device": key[2]}
    return row


def verdict_data(verdicts, runs: list[Run], threshold: float, ratio_threshold: float, note: str | None,
                 first=None, accepted: str | None = None) -> dict:
    """The gate's verdicts as data (--json), beside its Markdown: the rerun's where there was one, the first
    runs' under "first_rows"; where base and head cannot be compared, why (note) and the maintainer's acceptance
    (accepted, None where none applied) instead of rows."""
    devices = sorted({key[2] for run in runs for key in run.keys.values()})
    data = {"gate": "time", "device": ", ".join(devices),
            "outcome": ("change accepted" if accepted else "not comparable") if note else outcome(verdicts),
            "note": note, "accepted": accepted if note else None,
            "threshold_pct": float(threshold), "ratio_threshold_pct": float(ratio_threshold),
            "rows": [verdict_row(v, runs, threshold, ratio_threshold) for v in verdicts]}
    if first is not None:
        data["first_rows"] = [verdict_row(v, runs, threshold, ratio_threshold) for v in first]
    return data


def load_runs(side: str, paths: list[str]) -> tuple[list[Run], list[str]]:
    """A side's runs, and why any of them cannot be compared with this code's: a result of a method or format newer
    than this code reads (head raised it, and the gate runs base's code). Any other unreadable result is SystemExit."""
    loaded, newer = [], []
    for path in paths:
        try:
            loaded.append(Run.of(SavedResult.load(path)))
        except SavedResultError as error:
            if not newer_than_this_code(error):
                raise SystemExit(str(error)) from None
            newer.append(f"method: {side} {error.reason.removesuffix(': read it with the code that made it')} (the "
                         f"gate runs base's code)")
    return loaded, list(dict.fromkeys(newer))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", nargs="+", required=True,
                        help="base's saved results, in run order: files, or saved runs in --storage by number (0001), "
                             "name (first-base-1, for 0001_first-base-1.json) or glob ('*first-base-*', in the order "
                             "saved)")
    parser.add_argument("--head", nargs="+", required=True, help="head's, in the same order (paired with base's)")
    parser.add_argument("--confirm-base", nargs="+", metavar="BASE",
                        help="base's runs of the cases that failed in --base and --head, run again alone: their "
                             "verdict is the gate's (exit status, --failing), the summary opens with it and shows both")
    parser.add_argument("--confirm-head", nargs="+", metavar="HEAD", help="head's, paired with --confirm-base's")
    parser.add_argument("--storage", default=results.DEFAULT_STORAGE,
                        help="where saved runs named by number, name or glob are, as --benchmark-storage (default: "
                             "%(default)s)")
    parser.add_argument("--threshold", type=parse_percent, default=int(DEFAULT_THRESHOLD), metavar="X%")
    parser.add_argument("--ratio-threshold", type=parse_percent, default=int(DEFAULT_THRESHOLD), metavar="X%")
    parser.add_argument("--markdown", help="also write the table here (the CI job summary)")
    parser.add_argument("--failing", help="write the fullnames of the cases that failed here, one a line")
    parser.add_argument("--json", help="write the verdicts here as data (the pull request's comment reads them: "
                                       "python -m phasebench.gate.comment)")
    parser.add_argument("--accept-change", metavar="REASON",
                        help="a maintainer accepted that base and head cannot be compared (REASON says who and why; "
                             "the workflow passes it for the pull request's label): the gate passes without a verdict, "
                             "saying so, where they cannot be; where they can, it judges them as usual")
    args = parser.parse_args(argv)
    if (args.confirm_base is None) != (args.confirm_head is None):
        parser.error("--confirm-base and --confirm-head come together: the rerun is paired as the first runs are")
    stages = [(args.base, args.head)] + ([(args.confirm_base, args.confirm_head)] if args.confirm_base else [])
    stages = [tuple([str(path) for path in results.find_results(names, args.storage, PROG)] for names in sides)
              for sides in stages]
    for base, head in stages:
        if len(base) != len(head):
            parser.error(f"{len(base)} base and {len(head)} head results: they are compared in pairs")
    loaded = [(load_runs("base", base), load_runs("head", head)) for base, head in stages]
    stages = [(base[0], head[0]) for base, head in loaded]
    newer = list(dict.fromkeys(reason for sides in loaded for _, reasons in sides for reason in reasons))
    every_base = [run for base, _ in stages for run in base]
    every_head = [run for _, head in stages for run in head]
    reasons = newer or incomparable(every_base, every_head)
    accepted = args.accept_change if reasons else None
    try:
        decided = [] if reasons else [decide(base, head, args.threshold, args.ratio_threshold) for base, head in stages]
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if not reasons and not all(decided):
        raise SystemExit("nothing compared: no case is in every base and head result")
    verdicts = decided[-1] if decided else []  # the gate's: the rerun's where there is one
    if reasons:
        text = not_comparable_text(reasons, accepted)
    elif len(decided) == 2:
        text = confirmed_table(decided[0], verdicts, args.threshold, args.ratio_threshold)
    else:
        text = table(verdicts, args.threshold, args.ratio_threshold)
    if args.accept_change and not reasons:
        text += (f"\nA change was accepted ({args.accept_change}), but base and head can be compared: the gate judged "
                 f"them as usual.\n")
    print(text, end="")
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf8")
    if args.json:
        first = stages[0][0] or stages[0][1]
        Path(args.json).write_text(json.dumps(verdict_data(verdicts, first, args.threshold, args.ratio_threshold,
                                                           "; ".join(reasons) or None,
                                                           decided[0] if len(decided) == 2 else None, accepted),
                                              indent=1), encoding="utf8")
    if reasons:
        if args.failing:
            Path(args.failing).write_text("", encoding="utf8")
        return 0 if accepted else 1
    failed = [v for v in verdicts if v.failed]
    if args.failing:
        Path(args.failing).write_text("".join(f"{name}\n" for name in dict.fromkeys(
            member for v in failed for member in v.members)), encoding="utf8")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m phasebench.gate.paired`: the pull-request gate's decision on paired runs (.ci/bench-pr;
docs/gating.md#baselines-and-ci-gating), by phasebench.gate.decide, whose docstring says how a case is judged.

    python -m phasebench.gate.paired --base B1.json B2.json … --head H1.json H2.json … [--threshold 10%]
        [--ratio-threshold 10%] [--markdown FILE] [--failing FILE]

prints every case's verdict and exits 1 when one regressed; where base and head were measured by different methods
(head changed what a clock holds) it says so and exits 0 without a verdict (`python -m phasebench.gate A B` shows the same table
for one pair, without intervals).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from phasebench.gate.decide import DEFAULT_THRESHOLD, Run, decide, method_change, table
from phasebench.gate.options import parse_percent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", nargs="+", required=True, help="base's saved results, in run order")
    parser.add_argument("--head", nargs="+", required=True, help="head's, in the same order (paired with base's)")
    parser.add_argument("--threshold", type=parse_percent, default=int(DEFAULT_THRESHOLD), metavar="X%")
    parser.add_argument("--ratio-threshold", type=parse_percent, default=int(DEFAULT_THRESHOLD), metavar="X%")
    parser.add_argument("--markdown", help="also write the table here (the CI job summary)")
    parser.add_argument("--failing", help="write the fullnames of the cases that failed here, one a line")
    args = parser.parse_args(argv)
    if len(args.base) != len(args.head):
        parser.error(f"{len(args.base)} base and {len(args.head)} head results: they are compared in pairs")
    base_runs, head_runs = [Run.load(p) for p in args.base], [Run.load(p) for p in args.head]
    not_comparable = method_change(base_runs, head_runs)
    try:
        verdicts = [] if not_comparable else decide(base_runs, head_runs, args.threshold, args.ratio_threshold)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if not verdicts and not not_comparable:
        raise SystemExit("nothing compared: no case is in every base and head result")
    text = not_comparable or table(verdicts, args.threshold, args.ratio_threshold)
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

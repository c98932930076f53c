"""`python -m phasebench.gate BASELINE RESULT` (files, run numbers, names or globs, as phasebench.report takes them):
how every benchmark's median and every implementation/reference ratio moved between two saved results, in
phasebench.gate.paired's table (one run a side gives no interval: .ci/bench-pr's interleaved runs decide).
"""

from __future__ import annotations

import argparse

from phasebench import results
from phasebench.gate.decide import DEFAULT_THRESHOLD, Run, decide, table
from phasebench.saved import SavedResult
from phasebench.stats import change_either_way

PROG = "phasebench.gate"


def _load(name: str, storage: str) -> tuple[str, SavedResult]:
    """A saved result (phasebench.results.find_results: a path, a run number, the name it was saved under, a glob
    that matches one), and its path."""
    path = str(results.find_result(name, storage, PROG))
    return path, SavedResult.read(path, PROG)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", help="a saved pytest-benchmark result: a file, a run number (0001), the name it "
                                         "was saved under (before, for 0001_before.json) or a glob ('*before')")
    parser.add_argument("result", help="another one, of the same benchmarks")
    parser.add_argument("--storage", default=results.DEFAULT_STORAGE,
                        help=f"where saved results are, as --benchmark-storage (default: {results.DEFAULT_STORAGE})")
    args = parser.parse_args(argv)
    (args.baseline, baseline), (args.result, result) = (_load(name, args.storage) for name in (args.baseline, args.result))
    different = results.mismatch(baseline, result.method, result.metric, results.switched(result.machine))
    if different:
        raise SystemExit(different.replace("this run", args.result))
    verdicts = decide([Run.of(baseline)], [Run.of(result)])
    if not verdicts:
        raise SystemExit(f"{args.result} has no benchmark that {args.baseline} has")
    print(table(verdicts, DEFAULT_THRESHOLD, DEFAULT_THRESHOLD), end="")
    print("One run a side: no interval, so no verdict. The evidence is the run: .ci/bench-pr runs base and head "
          "alternately, several runs each, and python -m phasebench.gate.paired decides on them "
          "(docs/gating.md#baselines-and-ci-gating).")
    medians = [v for v in verdicts if v.kind == "median"]
    ratios = [v for v in verdicts if v.kind == "ratio"]
    largest = max(medians, key=lambda v: change_either_way(v.base, v.head))
    largest_ratio = (f"{max(change_either_way(v.base, v.head) for v in ratios):.1f}%" if ratios
                     else "none (no phase has an implementation and its reference)")
    print(f"largest median change {change_either_way(largest.base, largest.head):.1f}% ({largest.case}); "
          f"largest ratio change {largest_ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

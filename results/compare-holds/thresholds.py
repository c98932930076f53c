"""Which thresholds one run against one run holds on unchanged code: every ordered pair of distinct unchanged runs
in the files given (summarize.py --runs; the planted pairs left out) taken as baseline and compared run, the share
of those pairs that pass pytest-benchmark's median check (a regression of more than T %) and the ratio gate (a
python/cpp ratio that moved more than T % either way), per threshold; and per case the largest regression seen.

    .venv/bin/python results/compare-holds/thresholds.py RUNS.json [RUNS.json ...]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

MEDIAN_THRESHOLDS = (30, 50, 75, 100, 150)
RATIO_THRESHOLDS = (10, 20, 30, 50, 100)


def ratios(medians: dict[str, float]) -> dict[str, float]:
    """{phase: python median / cpp median} of one run's phase cases."""
    return {name.split("[")[1].split("-")[0]: medians[name] / medians[name.replace("-python-", "-cpp-")]
            for name in medians
            if name.startswith("test_phase[") and "-python-" in name and name.replace("-python-", "-cpp-") in medians}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args()
    runs = [run for path in args.runs for run in json.loads(path.read_text()) if "planted" not in run["pair"]]
    pairs = [(base["medians_s"], head["medians_s"]) for i, base in enumerate(runs) for j, head in enumerate(runs)
             if i != j]
    print(f"{len(runs)} unchanged runs, {len(pairs)} ordered pairs (baseline, compared run)\n")
    print("| threshold | pairs that pass the median check | pairs that pass the ratio gate |")
    print("|---|---|---|")
    for median_t, ratio_t in zip(MEDIAN_THRESHOLDS, RATIO_THRESHOLDS):
        median_ok = sum(not any(head[k] > (1 + median_t / 100) * base[k] for k in head.keys() & base.keys())
                        for base, head in pairs)
        ratio_ok = 0
        for base, head in pairs:
            before, after = ratios(base), ratios(head)
            ratio_ok += not any(max(before[k] / after[k], after[k] / before[k]) > 1 + ratio_t / 100
                                for k in before.keys() & after.keys())
        print(f"| median {median_t} %, ratio {ratio_t} % | {100 * median_ok / len(pairs):.0f} % | "
              f"{100 * ratio_ok / len(pairs):.0f} % |")
    worst: dict[str, float] = {}
    for base, head in pairs:
        for k in head.keys() & base.keys():
            worst[k] = max(worst.get(k, -100.0), 100 * (head[k] / base[k] - 1))
    print("\n| case | largest regression between two unchanged runs |\n|---|---|")
    for name, change in sorted(worst.items(), key=lambda item: -item[1]):
        print(f"| {name} | {change:+.0f} % |")


if __name__ == "__main__":
    main()

"""How many pairs of training-run rounds a default run needs: each saved run's pairs of fresh workers' Total Times,
the rank interval of their median over all of them against the geometric mean's t interval over the first N
(phasebench/stats.py paired_ratio, both statistics), and whether each holds the runs' median ratio.

    python -m lab.studies.paired.run_pairs DIR --runs-json results/paired-workers/run-pairs.json > run-pairs.md
    python -m lab.studies.paired.run_pairs --from results/paired-workers/run-pairs.json > run-pairs.md

DIR holds a paired study's saved runs (new-*.json, lab/studies/paired/before_after.sh); --runs-json keeps each run's
rounds, from which --from draws the same tables."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from lab.studies.paired.run_files import summary_main
from phasebench.saved import SavedResult
from phasebench.stats import MEAN, MEDIAN, paired_ratio

FIRST = 4  # the pairs the t interval takes: the default run's --run-rounds


def run_rounds(path: Path) -> dict:
    """{impl: each round's Total Time, s} of a saved run's training-run cases, in the order measured."""
    return {case.info.implementation: case.info.block_medians_s for case in SavedResult.load(path).benchmarks
            if case.name.startswith("test_training_run[")}


def read_kept(path: Path) -> dict:
    """The rounds --runs-json kept: {run: {impl: Total Time per round}}."""
    return json.loads(path.read_text())


def table(runs: dict[str, dict]) -> str:
    rows, estimates = [], {}
    for name, rounds in runs.items():
        python, cpp = rounds["python"], rounds["cpp"]
        estimates[name] = (paired_ratio(python, cpp, statistic=MEDIAN),
                           paired_ratio(python[:FIRST], cpp[:FIRST], statistic=MEAN))
    median_of_runs = statistics.median(rank.estimate for rank, _ in estimates.values())
    for name, (rank, mean) in estimates.items():
        rows.append(f"| {name} | {len(runs[name]['python'])} | {rank.estimate:.3f} [{rank.low:.3f}, {rank.high:.3f}] | "
                    f"{rank.half_width:.1%} | {rank.low <= median_of_runs <= rank.high} | "
                    f"{mean.estimate:.3f} [{mean.low:.3f}, {mean.high:.3f}] | {mean.half_width:.1%} | "
                    f"{mean.low <= median_of_runs <= mean.high} |")
    rank_widths = [rank.half_width for rank, _ in estimates.values()]
    mean_widths = [mean.half_width for _, mean in estimates.values()]
    return "\n".join([
        f"Total Time, Python / C++, per run: the median of all its pairs with the rank interval, and the geometric mean "
        f"of its first {FIRST} pairs with the t interval (95 %); \"holds\": whether the interval holds the median of "
        f"the runs' medians, {median_of_runs:.3f}.", "",
        f"| run | pairs | median [rank interval] | half-width | holds | mean of first {FIRST} [t interval] | "
        f"half-width | holds |", "|---|---:|---:|---:|---|---:|---:|---|", *rows, "",
        f"Median half-width: rank interval {statistics.median(rank_widths):.1%}, t interval of {FIRST} pairs "
        f"{statistics.median(mean_widths):.1%}."])


def main(argv: list[str]) -> int:
    return summary_main(argv, __doc__, lambda folder, run: run_rounds(folder / f"{run}.json"), read_kept, table)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

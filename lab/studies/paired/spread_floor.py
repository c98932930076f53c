"""How much of a ratio's spread across a paired study's runs no single run's interval can hold: per ratio, the spread
of the runs' estimates, the standard error each run's own pairs give it, and the part of the spread between runs
that those standard errors leave unexplained, with the narrowest 95 % half-width an interval from one run would need
to hold the runs' middle even with unlimited pairs of its own.

    python -m lab.studies.paired.spread_floor DIR --runs-json spread-floor.json
    python -m lab.studies.paired.spread_floor --from spread-floor.json

DIR holds a paired study's saved runs (new-*.json and their .time files, lab/studies/paired/before_after.sh); the
figures kept of method 9's twenty runs are packed in results/paired-workers/spread-floor.tar.xz.

A run's draws of a ratio are its units, as its saved interval's are: per pair of workers the mean log ratio of its
block pairs (a per-call phase), or each pair of fresh workers' rounds (the training run). The run's estimate is their
mean and its standard error their standard deviation over the square root of their number. Across the runs, the
variance of the estimates less the mean squared standard error is the variance between runs that no run's units
show (floored at 0). 1.96 times its square root, as a relative half-width, is the floor: an interval from one run
narrower than it holds the runs' middle in fewer than 95 % of runs however many pairs the run measures. Its 95 %
interval resamples the runs with replacement (seeded)."""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

from lab.studies.paired.run_files import load_and_wall, summary_main
from phasebench.saved import SavedResult

RATIOS = ("training_run", "forward", "backward", "train_step", "param_update")
Z95 = 1.959964
RESAMPLES = 10_000


def unit_logs(python, cpp) -> list[float]:
    """A paired case's draws of its ratio: per worker slot the mean log ratio of its block pairs, or each block pair
    where the blocks name no slot (a training run's pairs of fresh workers)."""
    logs = [math.log(a / b) for a, b in zip(python.info.block_medians_s, cpp.info.block_medians_s)]
    slots = python.info.block_workers
    if slots is None:
        return logs
    by_slot: dict[int, list[float]] = {}
    for slot, log in zip(slots, logs):
        by_slot.setdefault(slot, []).append(log)
    return [statistics.fmean(slot_logs) for slot_logs in by_slot.values()]


def run_figures(folder: Path, name: str) -> dict:
    result = SavedResult.load(folder / f"{name}.json")
    load, wall = load_and_wall(folder, name)
    ratios = {}
    for phase in RATIOS:
        python, cpp = result.cases[(phase, "python", "cpu", "")], result.cases[(phase, "cpp", "cpu", "")]
        saved = python.info.ratio
        ratios[phase] = {"units": [round(log, 6) for log in unit_logs(python, cpp)],
                         "saved": {key: saved[key] for key in ("estimate", "low", "high", "half_width", "decided")}}
    return {"commit": result.commit_info.get("id", "")[:7], "load": load, "wall_s": wall, "ratios": ratios}


def read_kept(path: Path) -> dict:
    """The figures --runs-json kept: {run: its figures}."""
    return json.loads(path.read_text())


def floor_of(estimates: np.ndarray, squared_errors: np.ndarray) -> float:
    """The relative half-width that the between-run variance no run's units show gives a 95 % interval."""
    unexplained = max(0.0, float(np.var(estimates, ddof=1)) - float(np.mean(squared_errors)))
    return math.exp(Z95 * math.sqrt(unexplained)) - 1


def ratio_row(phase: str, runs: list[dict], rng: np.random.Generator) -> str:
    units = [run["ratios"][phase]["units"] for run in runs]
    estimates = np.array([statistics.fmean(u) for u in units])
    squared_errors = np.array([statistics.variance(u) / len(u) for u in units])
    floor = floor_of(estimates, squared_errors)
    picks = [rng.integers(0, len(runs), len(runs)) for _ in range(RESAMPLES)]
    low, high = np.percentile([floor_of(estimates[p], squared_errors[p]) for p in picks], [2.5, 97.5])
    between = math.exp(float(np.std(estimates, ddof=1))) - 1
    within = math.exp(math.sqrt(float(np.mean(squared_errors)))) - 1
    saved = [run["ratios"][phase]["saved"] for run in runs]
    middle = statistics.median(s["estimate"] for s in saved)
    holding = sum(1 for s in saved if s["low"] is not None and s["low"] <= middle <= s["high"])
    halves = [s["half_width"] for s in saved if s["half_width"] is not None]
    return (f"| {phase} | {len(runs)} | {statistics.median(len(u) for u in units):g} | ±{between:.1%} | ±{within:.1%} | "
            f"±{floor:.1%} [{low:.1%}, {high:.1%}] | ±{statistics.median(halves):.1%} | {holding}/{len(runs)} |")


def table(runs: dict[str, dict]) -> str:
    rng = np.random.default_rng(1)
    listed = list(runs.values())
    return "\n".join([
        "| ratio | runs | draws a run | spread of the runs' estimates (sd) | a run's own standard error (rms) | "
        "floor: narrowest 95 % half-width that holds the runs' middle [95 % bootstrap] | saved intervals: median "
        "half-width | saved intervals holding the runs' median |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
        *(ratio_row(phase, listed, rng) for phase in RATIOS)])


def main(argv: list[str]) -> int:
    return summary_main(argv, __doc__, run_figures, read_kept, table)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

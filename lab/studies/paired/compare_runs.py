"""The tables of lab/studies/paired/before_after.sh's runs: per ratio, how much it moves across unchanged runs before
pairing (old-N.json) and with it (new-N.json), and what the paired runs' intervals say.

    python -m lab.studies.paired.compare_runs OUT_DIR [--runs-json FILE] > OUT_DIR/summary.md

Per ratio (Total Time and the per-call phases): its relative IQR across the runs (IQR over median) of each side, and
new/old with a 95 % percentile bootstrap interval (each side's runs resampled with replacement, seeded); for the new
runs, in how many the ratio was decided, the median relative half-width of its interval, in how many runs the
interval holds the median of all new runs' estimates, and in how many a case of the ratio was marked unfit. With
--runs-json, every run's figures that the tables are made of (its load, wall time, and per ratio its value, saved
interval and fitness) go to FILE: what a results folder keeps instead of the runs themselves.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

from lab.studies.paired.run_files import load_and_wall, study_arguments
from phasebench.saved import SavedResult

RATIOS = ("training_run", "forward", "backward", "train_step", "param_update", "data_loading")
RESAMPLES = 10_000


def relative_iqr(values) -> float:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return float((q3 - q1) / median)


def ratio_of(result: SavedResult, phase: str) -> tuple[float, dict | None, list]:
    """python/cpp of a phase (the paired estimate where saved, else the medians'), its saved ratio, both cases' fit."""
    python, cpp = result.cases[(phase, "python", "cpu", "")], result.cases[(phase, "cpp", "cpu", "")]
    saved = python.info.ratio
    fits = [case.info.machine_fit for case in (python, cpp)]
    return (saved["estimate"] if saved else python.median / cpp.median), saved, fits


def run_figures(folder: Path, path: Path, result: SavedResult) -> dict:
    """One run's figures for --runs-json."""
    loads, wall = load_and_wall(folder, path.stem)
    figures = {"run": path.stem, "commit": result.commit_info.get("id", "")[:7], "method": result.machine.method,
               "threads": result.machine.threads, "load_before_after": loads, "wall_s": wall, "ratios": {}}
    for phase in RATIOS:
        value, saved, fits = ratio_of(result, phase)
        figures["ratios"][phase] = {"value": value, "saved": saved, "fit": [fit and fit.get("fit") for fit in fits]}
    return figures


def main(argv: list[str]) -> int:
    arguments = study_arguments(argv, __doc__)
    if arguments is None:
        return 2
    runs_json, folder = arguments
    runs = {side: [(path, SavedResult.load(path)) for path in sorted(folder.glob(f"{side}-*.json"),
                                                                        key=lambda p: int(p.stem.split("-")[1]))]
            for side in ("old", "new")}
    rng = np.random.default_rng(1)
    lines = [f"{len(runs['old'])} runs before pairing (old), {len(runs['new'])} with it (new), alternated.", "",
             "| ratio | old: range | old: relative IQR | new: range | new: relative IQR | new/old [95 % bootstrap] | "
             "new: decided | new: median half-width | new: intervals holding the new median | new: unfit |",
             "|---|---|---:|---|---:|---|---:|---:|---:|---:|"]
    for phase in RATIOS:
        old = [ratio_of(result, phase) for _, result in runs["old"]]
        new = [ratio_of(result, phase) for _, result in runs["new"]]
        old_values, new_values = np.array([r for r, _, _ in old]), np.array([r for r, _, _ in new])
        resampled = [relative_iqr(rng.choice(new_values, len(new_values))) /
                     max(relative_iqr(rng.choice(old_values, len(old_values))), 1e-12) for _ in range(RESAMPLES)]
        low, high = np.percentile(resampled, [2.5, 97.5])
        point = relative_iqr(new_values) / max(relative_iqr(old_values), 1e-12)
        saved = [s for _, s, _ in new if s]
        decided = sum(bool(s.get("decided")) for s in saved)
        halves = [s["half_width"] for s in saved if s.get("half_width") is not None]
        middle = statistics.median(new_values)
        holding = sum(1 for s in saved if s.get("low") is not None and s["low"] <= middle <= s["high"])
        unfit = sum(1 for _, _, fits in new if any(fit and not fit.get("fit", True) for fit in fits))
        lines.append(f"| {phase} | {old_values.min():.2f}–{old_values.max():.2f} | {relative_iqr(old_values):.3f} | "
                     f"{new_values.min():.2f}–{new_values.max():.2f} | {relative_iqr(new_values):.3f} | "
                     f"{point:.2f} [{low:.2f}, {high:.2f}] | {decided}/{len(new)} | "
                     f"{'—' if not halves else f'±{statistics.median(halves):.1%}'} | {holding}/{len(new)} | "
                     f"{unfit}/{len(new)} |")
    loads = []
    for side in ("old", "new"):
        for path, _ in runs[side]:
            before_after, wall = load_and_wall(folder, path.stem)
            loads.append(f"| {path.stem} | {' → '.join(f'{load:.2f}' for load in before_after)} | {wall:.0f} |")
    lines += ["", "| run | load average before → after | wall s |", "|---|---|---:|", *loads]
    print("\n".join(lines))
    if runs_json:
        runs_json.write_text(json.dumps([run_figures(folder, path, result) for side in ("old", "new")
                                         for path, result in runs[side]], separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

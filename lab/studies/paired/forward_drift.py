"""How forward's per-call ratio moved across a paired study's runs, beside the machine's speed: per run its wall
time, each language's median forward call and their difference, and the saved ratio.

    python -m lab.studies.paired.forward_drift DIR --runs-json results/paired-workers/forward-drift.json
    python -m lab.studies.paired.forward_drift --from results/paired-workers/forward-drift.json

DIR holds a paired study's saved runs (new-*.json and their .time files, lab/studies/paired/before_after.sh)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from lab.studies.paired.run_files import load_and_wall, summary_main
from phasebench.saved import SavedResult


def run_figures(folder: Path, name: str) -> dict:
    forward = {case.info.implementation: case for case in SavedResult.load(folder / f"{name}.json").benchmarks
               if case.name.startswith("test_phase[forward-")}
    load, wall = load_and_wall(folder, name)
    return {"wall_s": wall, "load": load, "python_ms": forward["python"].median * 1e3,
            "cpp_ms": forward["cpp"].median * 1e3, "ratio": forward["python"].info.ratio["estimate"]}


def read_kept(path: Path) -> dict:
    """The figures --runs-json kept: {run: its figures}."""
    return json.loads(path.read_text())


def table(runs: dict[str, dict]) -> str:
    rows = [f"| {name} | {run['wall_s']} | {run['cpp_ms']:.3f} | {run['python_ms']:.3f} | "
            f"{run['python_ms'] - run['cpp_ms']:.3f} | {run['ratio']:.3f} |" for name, run in runs.items()]
    walls = [run["wall_s"] for run in runs.values()]
    ratios = [run["ratio"] for run in runs.values()]
    cpp = [run["cpp_ms"] for run in runs.values()]
    return "\n".join([
        "forward per call across the runs, in the order run: the run's wall time, each language's median call, their "
        "difference and the saved ratio (median of its pairs of workers).", "",
        "| run | wall (s) | C++ forward (ms) | Python forward (ms) | difference (ms) | ratio |",
        "|---|---:|---:|---:|---:|---:|", *rows, "",
        f"Pearson correlation across the runs: ratio with wall time {statistics.correlation(ratios, walls):.2f}, "
        f"ratio with C++'s forward call {statistics.correlation(ratios, cpp):.2f}."])


def main(argv: list[str]) -> int:
    return summary_main(argv, __doc__, run_figures, read_kept, table)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

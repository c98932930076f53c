"""The tables of lab/studies/paired/defaults.sh's runs: per machine state and setting, each phase's per-call medians in
both languages, its paired ratio with its interval, and how long each worker's threads waited for a core.

    python -m lab.studies.paired.summarize OUT_DIR [--runs-json FILE] > OUT_DIR/summary.md

With --runs-json, every run's figures that the table is made of go to FILE: what a results folder keeps instead of
the runs themselves.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lab.studies.paired.run_files import load_and_wall, runs_json_option
from phasebench.report.cases import paired_direction
from phasebench.saved import SavedResult

PHASES = ("forward", "backward", "train_step")


def rows(folder: Path) -> list[str]:
    lines = ["| run | load before → after | phase | python (ms) | cpp (ms) | python / cpp [95 %] | half-width | "
             "rounds | threads waited, python / cpp |", "|---|---|---|---:|---:|---|---:|---:|---|"]
    for path in sorted(folder.glob("*.json"), key=lambda p: (p.stem.split("-")[0] != "quiet", p.stem)):
        result = SavedResult.load(path)
        loads = [f"{load:.2f}" for load in load_and_wall(folder, path.stem)[0]]
        cases = result.cases
        for phase in PHASES:
            python, cpp = cases.get((phase, "python", "cpu", "")), cases.get((phase, "cpp", "cpu", ""))
            if python is None or cpp is None:
                continue
            ratio = python.info.ratio or {}
            waits = [(case.info.machine_fit or {}).get("run_queue_wait_share") for case in (python, cpp)]
            half = ratio.get("half_width")
            lines.append(f"| {path.stem} | {' → '.join(loads)} | {phase} | {python.median * 1e3:.3f} | "
                         f"{cpp.median * 1e3:.3f} | {paired_direction(ratio) if ratio else '—'} | "
                         f"{'—' if half is None else f'±{half:.1%}'} | {python.info.rounds} | "
                         f"{' / '.join('—' if w is None else f'{w:.0%}' for w in waits)} |")
    return lines


def run_figures(folder: Path) -> list[dict]:
    """Each run's figures for --runs-json: its load averages and wall time, and per phase both medians, the saved
    paired ratio, the rounds and both cases' machine_fit."""
    figures = []
    for path in sorted(folder.glob("*.json")):
        result = SavedResult.load(path)
        loads, wall = load_and_wall(folder, path.stem)
        run = {"run": path.stem, "commit": result.commit_info.get("id", "")[:7], "threads": result.machine.threads,
               "omp_wait_policy": result.machine.omp_wait_policy, "load_before_after": loads, "wall_s": wall,
               "phases": {}}
        for phase in PHASES:
            python, cpp = result.cases.get((phase, "python", "cpu", "")), result.cases.get((phase, "cpp", "cpu", ""))
            if python is not None and cpp is not None:
                run["phases"][phase] = {"python_median_s": python.median, "cpp_median_s": cpp.median,
                                        "rounds": python.info.rounds, "ratio": python.info.ratio,
                                        "machine_fit": [python.info.machine_fit, cpp.info.machine_fit]}
        figures.append(run)
    return figures


def main(argv: list[str]) -> int:
    runs_json, argv = runs_json_option(argv)
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(rows(Path(argv[0]))))
    if runs_json:
        runs_json.write_text(json.dumps(run_figures(Path(argv[0])), separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

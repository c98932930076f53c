"""The table of lab/studies/paired/loaded.sh's runs: per ratio, what each run printed (its interval, or undecided and
why), whether the decided intervals of the runs hold each other's (pairwise overlap), and which cases each run marked
as measured on a machine unfit to measure.

    python -m lab.studies.paired.loaded_summary OUT_DIR [--runs-json FILE] > OUT_DIR/summary.md

With --runs-json, each run's load averages, wall time and per ratio its saved interval and both cases' machine_fit go
to FILE.
"""

from __future__ import annotations

import itertools
import json
import sys

from lab.studies.paired.compare_runs import RATIOS
from lab.studies.paired.run_files import load_and_wall, study_arguments
from phasebench.report.cases import paired_direction
from phasebench.saved import SavedResult


def main(argv: list[str]) -> int:
    arguments = study_arguments(argv, __doc__)
    if arguments is None:
        return 2
    runs_json, folder = arguments
    runs = [(path.stem, SavedResult.load(path)) for path in sorted(folder.glob("loaded-*.json"))]
    lines = ["| ratio | " + " | ".join(name for name, _ in runs) + " | decided intervals overlap | unfit marks |",
             "|---|" + "---|" * len(runs) + "---|---:|"]
    for phase in RATIOS:
        cells, intervals, unfit = [], [], 0
        for _, result in runs:
            python, cpp = (result.cases[(phase, impl, "cpu", "")] for impl in ("python", "cpp"))
            ratio = python.info.ratio or {}
            text = paired_direction(ratio)
            if text == "undecided":
                text += f" ({ratio.get('undecided')})"
            else:
                intervals.append((ratio["low"], ratio["high"]))
            cells.append(text)
            unfit += sum(1 for case in (python, cpp) if not ((case.info.machine_fit or {}).get("fit", True)))
        overlap = all(a[0] <= b[1] and b[0] <= a[1] for a, b in itertools.combinations(intervals, 2))
        lines.append(f"| {phase} | " + " | ".join(cells) + f" | {'yes' if overlap else 'no'} "
                     f"({len(intervals)} decided) | {unfit} |")
    lines += ["", "| run | load average before → after | wall s |", "|---|---|---:|"]
    for name, _ in runs:
        loads, wall = load_and_wall(folder, name)
        lines.append(f"| {name} | {' → '.join(f'{load:.2f}' for load in loads)} | {wall:.0f} |")
    print("\n".join(lines))
    if runs_json:
        figures = []
        for name, result in runs:
            loads, wall = load_and_wall(folder, name)
            figures.append({"run": name, "commit": result.commit_info.get("id", "")[:7],
                            "threads": result.machine.threads, "load_before_after": loads, "wall_s": wall,
                            "ratios": {phase: {"ratio": result.cases[(phase, "python", "cpu", "")].info.ratio,
                                               "machine_fit": [result.cases[(phase, impl, "cpu", "")].info.machine_fit
                                                               for impl in ("python", "cpp")]}
                                       for phase in RATIOS}})
        runs_json.write_text(json.dumps(figures, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

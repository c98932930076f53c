"""The tables of lab/studies/paired/defaults.sh's runs: per machine state and setting, each phase's per-call medians in
both languages, its paired ratio with its interval, and how long each worker's threads waited for a core.

    python -m lab.studies.paired.summarize OUT_DIR > OUT_DIR/summary.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from phasebench.report.cases import paired_direction
from phasebench.saved import SavedResult

PHASES = ("forward", "backward", "train_step")


def rows(folder: Path) -> list[str]:
    lines = ["| run | load before → after | phase | python (ms) | cpp (ms) | python / cpp [95 %] | half-width | "
             "rounds | threads waited, python / cpp |", "|---|---|---|---:|---:|---|---:|---:|---|"]
    for path in sorted(folder.glob("*.json"), key=lambda p: (p.stem.split("-")[0] != "quiet", p.stem)):
        result = SavedResult.load(path)
        times = (folder / f"{path.stem}.time").read_text()
        loads = re.findall(r"(?:before|after): ([\d.]+)", times)
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


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(rows(Path(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

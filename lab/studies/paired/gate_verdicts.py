"""The ratio gate's verdicts over pairs of saved runs: per ratio, in how many pairs --phase-ratio-fail=LIMIT decided it
(moved, or unchanged) and in how many it failed the gate (moved).

    python -m lab.studies.paired.gate_verdicts --recipe OUT_DIR [--limit 10] [--runs-json FILE] > OUT_DIR/summary.md
    python -m lab.studies.paired.gate_verdicts --consecutive STUDY_DIR [--limit 10] [--runs-json FILE]

--recipe: lab/studies/paired/gate_recipe.sh's runs: each baseline (base-NN.json) with the run of the same code compared
with it (unchanged-NN.json) and with the planted slowdown (planted-NN.json), each compared run's exit status beside it.
--consecutive: a before/after study's new runs (new-1.json, new-2.json, …) taken two by two as baseline and head, as
the gate would judge them offline: independent runs, so neither takes the other's calls per round or run order as a
compared run does. With --runs-json the verdicts the tables count go to FILE.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from lab.studies.paired.run_files import load_and_wall, new_runs, runs_json_option
from phasebench.gate.compare import ratio_changes
from phasebench.saved import SavedResult

USAGE = __doc__


def verdicts(baseline: SavedResult, head: Path, limit: float) -> dict[str, dict]:
    """{phase: its verdict, the baseline's ratio, the head's and its interval} of every ratio the gate compares."""
    return {change.phase: {"verdict": change.verdict(limit), "before": change.before, "after": change.after,
                           "low": change.low, "high": change.high}
            for change in ratio_changes(baseline, SavedResult.load(head))}


def table(pairs: list[dict], title: str) -> list[str]:
    """Per ratio: pairs, decided (moved or unchanged), moved; then the whole."""
    counts: dict[str, Counter] = {}
    for pair in pairs:
        for phase, verdict in pair["verdicts"].items():
            counts.setdefault(phase, Counter())[verdict["verdict"]] += 1
    lines = [f"### {title}", "", "| ratio | pairs | decided | moved (fails the gate) | undecided |", "|---|---:|---:|---:|---:|"]
    total = Counter()
    for phase, count in sorted(counts.items()):
        total += count
        pairs_n = sum(count.values())
        lines.append(f"| {phase} | {pairs_n} | {count['moved'] + count['unchanged']} | {count['moved']} | "
                     f"{count['undecided']} |")
    ratios = sum(total.values())
    if ratios:
        decided = total["moved"] + total["unchanged"]
        lines.append(f"| all | {ratios} | {decided} ({decided / ratios:.0%}) | {total['moved']} | {total['undecided']} |")
    failing = sum(any(verdict["verdict"] == "moved" for verdict in pair["verdicts"].values()) for pair in pairs)
    lines += ["", f"Pairs the ratio gate fails (a ratio moved): {failing} of {len(pairs)}."]
    statuses = [pair.get("exit_status") for pair in pairs if pair.get("exit_status") is not None]
    if statuses:
        lines += [f"Exit statuses of the compared runs: {', '.join(map(str, statuses))} (0 passed, 1 failed, "
                  "6 undecided)."]
    return lines + [""]


def recipe_pairs(folder: Path, limit: float) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {"unchanged": [], "planted": []}
    for base in sorted(folder.glob("base-*.json")):
        number, baseline = base.stem.split("-", 1)[1], SavedResult.load(base)
        for kind, pairs in found.items():
            head = folder / f"{kind}-{number}.json"
            if not head.exists():
                continue
            rc = folder / f"{kind}-{number}.rc"
            pairs.append({"baseline": base.stem, "head": head.stem, "loads": load_and_wall(folder, head.stem)[0],
                          "exit_status": int(rc.read_text()) if rc.exists() else None,
                          "verdicts": verdicts(baseline, head, limit)})
    return found


def consecutive_pairs(folder: Path, limit: float) -> list[dict]:
    runs = new_runs(folder)
    return [{"baseline": first, "head": second,
             "verdicts": verdicts(SavedResult.load(folder / f"{first}.json"), folder / f"{second}.json", limit)}
            for first, second in zip(runs[::2], runs[1::2])]


def main(argv: list[str]) -> int:
    runs_json, argv = runs_json_option(argv)
    limit = 10.0
    if "--limit" in argv:
        at = argv.index("--limit")
        limit, argv = float(argv[at + 1]), argv[:at] + argv[at + 2:]
    if len(argv) != 2 or argv[0] not in ("--recipe", "--consecutive"):
        print(USAGE, file=sys.stderr)
        return 2
    folder = Path(argv[1])
    if argv[0] == "--recipe":
        kept = recipe_pairs(folder, limit)
        lines = [f"The baseline recipe's ratio gate at --phase-ratio-fail={limit:g}%, {len(kept['unchanged'])} "
                 f"baselines each compared with a run of the same code and with a planted slowdown of Python's forward.",
                 "", *table(kept["unchanged"], "Unchanged"), *table(kept["planted"], "Planted")]
    else:
        kept = {"consecutive": consecutive_pairs(folder, limit)}
        lines = [f"{len(kept['consecutive'])} pairs of independent default runs of one tree, judged offline at "
                 f"--phase-ratio-fail={limit:g}%.", "", *table(kept["consecutive"], "Unchanged, offline")]
    print("\n".join(lines))
    if runs_json:
        runs_json.write_text(json.dumps(kept, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

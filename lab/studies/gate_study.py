"""What the pull-request gate does on this machine, measured (lab/studies/gate-study; docs/gating.md#baselines-and-ci-gating):
false alarms over gated runs of an unchanged tree, detections over runs with one phase slowed in head, each with
its 95 % interval (Wilson's score interval: exact enough at these counts and never outside 0..1), the time of one
gated run, and per case the minimum detectable effect: the smallest slowdown the gate catches in 80 % of gated
runs, given the spread of the paired log-ratio measured over the unchanged runs.

    python -m lab.studies.gate_study OUT_DIR --slow python/forward:0.5ms
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
from pathlib import Path

from phasebench.gate.decide import DEFAULT_THRESHOLD, Run
from phasebench.gate.options import parse_percent
from phasebench.gate.verdict import short
from phasebench.registry import NAMES
from phasebench.spec import TRAINING_PHASES
from phasebench.stats import CONFIDENCE, t_quantile
from tests.knobs import parse_slow_phase

POWER = 0.8  # of the whole gate; a regression must fail twice (first runs, then the rerun), so each stage needs √0.8


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95 % score interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def minimum_detectable(spread: float, pairs: int, threshold: float, relative_floor: float) -> float:
    """The smallest true slowdown (a fraction) that both stages flag with probability POWER: the estimate must clear
    the threshold, the floor and the interval's lower end; each stage is a paired t over `pairs` pairs."""
    if pairs < 2:
        return math.inf
    error = spread / math.sqrt(pairs)
    stage_power = math.sqrt(POWER)
    needed = max(t_quantile(0.5 + CONFIDENCE / 2, pairs - 1) * error, math.log1p(threshold),
                 math.log1p(relative_floor))
    return math.expm1(needed + t_quantile(stage_power, pairs - 1) * error)


def _runs(folder: Path, stage: str, side: str) -> list[Path]:
    found = sorted(folder.glob(f"storage/*/*_{stage}-{side}-*.json"), key=lambda path: int(path.stem.rsplit("-", 1)[1]))
    return found


def study(out: Path, slow: str, threshold: float) -> dict:
    rows = list(csv.DictReader((out / "runs.tsv").open(encoding="utf8"), delimiter="\t"))
    knob = parse_slow_phase(slow, TRAINING_PHASES, NAMES)
    result: dict = {"slow": slow, "threshold_percent": threshold, "gated_runs": []}
    spreads: dict[str, list[float]] = {}
    medians: dict[str, list[float]] = {}
    floors: dict[str, list[float]] = {}
    pairs = None
    for row in rows:
        folder = out / f"{row['label']}-{row['index']}"
        failing_file = folder / "confirm-failing.txt"
        failing = failing_file.read_text(encoding="utf8").split() if failing_file.exists() else []
        first_failing = (folder / "first-failing.txt")
        first = first_failing.read_text(encoding="utf8").split() if first_failing.exists() else []
        result["gated_runs"].append({"label": row["label"], "index": int(row["index"]), "status": int(row["status"]),
                                     "seconds": int(row["seconds"]), "first_stage_failing": first, "failing": failing})
        if row["label"] != "unchanged":
            continue
        base = [Run.load(path) for path in _runs(folder, "first", "base")]
        head = [Run.load(path) for path in _runs(folder, "first", "head")]
        pairs = len(base)
        for name in set.intersection(*(set(run.medians) for run in base + head)):
            spreads.setdefault(name, []).extend(math.log(h.medians[name] / b.medians[name]) for b, h in zip(base, head))
            medians.setdefault(name, []).extend(run.medians[name] for run in base + head)
            floors.setdefault(name, []).extend(run.floors[name] for run in base + head if name in run.floors)

    def is_slowed(name: str) -> bool:
        case = short(name)
        return case.startswith(f"test_phase[{knob.phase}-") and (knob.impl is None or f"-{knob.impl}-" in case)

    runs = result["gated_runs"]
    unchanged = [run for run in runs if run["label"] == "unchanged"]
    slowed = [run for run in runs if run["label"] == "slowed"]
    false_alarms = sum(run["status"] != 0 for run in unchanged)
    detections = sum(run["status"] == 1 and any(is_slowed(name) for name in run["failing"]) for run in slowed)

    def is_slowed_phase(name: str) -> bool:  # a ratio gate on the slowed phase names its reference's case too
        return short(name).startswith(f"test_phase[{knob.phase}-")

    # A slowed run's verdict on the cases that were not slowed is a false alarm as much as an unchanged run's.
    other_alarms = sum(run["status"] == 1 and any(not is_slowed_phase(name) for name in run["failing"])
                       for run in slowed)
    result |= {
        "false_alarms": [false_alarms, len(unchanged), *wilson(false_alarms, len(unchanged))],
        "detections": [detections, len(slowed), *wilson(detections, len(slowed))],
        "other_alarms_in_slowed": [other_alarms, len(slowed), *wilson(other_alarms, len(slowed))],
        "seconds": {label: sorted(run["seconds"] for run in runs if run["label"] == label) for label in ("unchanged", "slowed")},
        "pairs": pairs,
        "mde": {},
    }
    for name in sorted(spreads):
        spread = statistics.stdev(spreads[name]) if len(spreads[name]) > 1 else math.inf
        median = statistics.median(medians[name])
        floor = (max(floors[name]) + 2 * statistics.stdev(floors[name])) if len(floors[name]) > 1 else 0.0
        result["mde"][name] = {"median_s": median, "spread_log": spread, "floor_s": floor,
                               "mde": minimum_detectable(spread, pairs, threshold / 100, floor / median)}
    return result


def markdown(result: dict) -> str:
    def rate(counts):
        k, n, low, high = counts
        return f"{k} of {n} (95 % interval {low * 100:.0f}–{high * 100:.0f} %)"

    seconds = result["seconds"]
    lines = [f"False alarms (unchanged tree): {rate(result['false_alarms'])}.",
             f"Detections ({result['slow']} in head, the slowed case named): {rate(result['detections'])}.",
             f"Slowed runs whose verdict also named a case that was not slowed (a false alarm there): "
             f"{rate(result['other_alarms_in_slowed'])}.",
             f"One gated run: unchanged {statistics.median(seconds['unchanged']):.0f} s (range {min(seconds['unchanged'])}"
             f"–{max(seconds['unchanged'])} s), slowed {statistics.median(seconds['slowed']):.0f} s (range "
             f"{min(seconds['slowed'])}–{max(seconds['slowed'])} s; a failing first stage reruns its cases).", "",
             f"Minimum detectable slowdown per case ({result['pairs']} pairs, threshold {result['threshold_percent']} %, "
             f"detected in 80 % of gated runs), from the spread of the paired log-ratio over the unchanged runs:", "",
             "| case | median (ms) | spread of ln(head/base) | absolute floor (µs) | minimum detectable slowdown |",
             "|---|---:|---:|---:|---:|"]
    for name, case in result["mde"].items():
        lines.append(f"| {short(name)} | {case['median_s'] * 1e3:.4f} | {case['spread_log']:.3f} | "
                     f"{case['floor_s'] * 1e6:.2f} | {case['mde'] * 100:.0f} % |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="lab/studies/gate-study's OUT_DIR")
    parser.add_argument("--slow", required=True, help="the knob the slowed runs used")
    parser.add_argument("--threshold", type=parse_percent, default=int(DEFAULT_THRESHOLD), metavar="X%")
    args = parser.parse_args(argv)
    result = study(args.out, args.slow, args.threshold)
    (args.out / "study.json").write_text(json.dumps(result, indent=1), encoding="utf8")
    print(markdown(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

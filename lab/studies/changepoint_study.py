"""Which detector finds the change points of a time series (docs/history.md#choosing-the-time-detector): steps of
5, 10, 20 and 50 % planted into series whose noise is the spread measured between whole runs of one unchanged
tree, and each candidate's detections and false alarms counted.

The noise: groups of saved default runs of one commit, method and machine (GROUPS); per case, each run's median
as a log residual from the mean of the case's runs (scaled by √(n/(n-1)), the mean being estimated from the same
runs), its standard deviation the case's between-run spread, the residuals divided by it pooled over every case
into one heavy-tailed shape. A synthetic series of one case is POINTS runs, each a draw from that shape times the
case's spread, a step planted at a random point in the middle third (none in the null series). A group of two runs
gives its cases' spreads only. The shape is bounded by the few runs per case (five runs' standardized residuals
lie within ±1.8): the measured outliers are in the spreads, not in the shape's tails.

The candidates, each fed the series alone (the spread it judges by is its own estimate from the series,
phasebench.history.changes.between_run_spread, as the product's is):
- consecutive: a change where two consecutive runs differ by more than k times the spread of a difference;
- window: medians of w runs on each side of each boundary, a change beyond k times the spread;
- ruptures' Pelt (l2 and l1 costs) and Binseg (l2) on the log values, penalty β·σ²·log n for l2 and β·σ·log n for
  l1 (BIC's β = 2, scaled by the series' spread), and l1 with β = 3;
- phasebench.history: the chosen one as the product implements it (phasebench.history.changes.time_changes).

A detection is a change found within TOLERANCE points of the planted one; every other change found is a false
alarm. The spread buckets split the cases by their measured between-run spread.

    python -m lab.studies.changepoint_study results/changepoints  # writes noise.json, detections.csv, table.md
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import glob
import json
import math
import random
import statistics
import sys
import tarfile
from pathlib import Path

import numpy as np
import ruptures

from phasebench.history import changes
from phasebench.repository import ROOT
from phasebench.saved import SavedResult

# Saved runs repeated without a change in between: one commit, one method, one machine, the same options.
GROUPS = {
    "answer (default run, method 3)": "results/answer/*.json",
    "gate rounds r20 (method 2)": "results/gate/rounds-and-threads/rounds/r20-*.json",
    "gate threads t2 (method 2)": "results/gate/rounds-and-threads/threads/t2-*.json",
    "hygiene-after (method 2)": "results/method2/hygiene-after-*.json",
    "distributed paired (method 3)": "results/distributed/paired/run*.json",
    "republish default run (method 3)": "results/republish/default-run*.json",
}
SHAPE_RUNS = 3  # a group of fewer runs gives its cases' spreads but no residuals to the shape
STEPS_PCT = (0, 5, 10, 20, 50)  # 0: the null series, where every change found is a false alarm
POINTS = 30
TRIALS = 12  # series per case and step
TOLERANCE = 1
BUCKETS = ((0.0, 0.02, "under 2 %"), (0.02, 0.10, "2 to 10 %"), (0.10, math.inf, "over 10 %"))


def saved_runs(root: Path, pattern: str) -> list[SavedResult]:
    """The saved runs a GROUPS pattern names: files, and the members of the .tar.xz archives under its folder (each
    archive holds paths relative to the folder it sits in), a path found twice read once."""
    found = {Path(path).relative_to(root).as_posix(): Path(path).read_bytes()
             for path in sorted(glob.glob(str(root / pattern)))}
    for archive in sorted((root / Path(pattern).parts[0] / Path(pattern).parts[1]).rglob("*.tar.xz")):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = (archive.parent / member.name).relative_to(root).as_posix()
                if member.isfile() and fnmatch.fnmatch(name, pattern) and name not in found:
                    found[name] = tar.extractfile(member).read()
    return [SavedResult.from_json(json.loads(found[name]), name) for name in sorted(found)]


def measured_noise(root: Path = ROOT) -> dict:
    """{"cases": {group/case: spread}, "shape": [standardized residuals]} from the GROUPS' saved runs."""
    cases, shape = {}, []
    for group, pattern in GROUPS.items():
        runs = saved_runs(root, pattern)
        runs = [run for run in runs if run.machine.testing is None]
        medians: dict[tuple, list[float]] = {}
        for run in runs:
            # a run of data-parallel cases is read for those alone, as a series of them is
            for key, case in (run.distributed_cases or run.cases).items():
                medians.setdefault(key, []).append(case.median)
        for key, values in sorted(medians.items()):
            if len(values) < 2:
                continue
            logs = [math.log(v) for v in values]
            mean = statistics.fmean(logs)
            scale = math.sqrt(len(logs) / (len(logs) - 1))
            residuals = [(x - mean) * scale for x in logs]
            spread = statistics.stdev(logs)
            cases[f"{group}: {'/'.join(key[1::-1])}"] = spread
            if len(values) >= SHAPE_RUNS and spread > 0:
                shape += [r / spread for r in residuals]
    return {"groups": GROUPS, "cases": cases, "shape": shape}


def consecutive(k: float):
    def detect(values: list[float]) -> list[int]:
        limit = k * math.sqrt(2.0) * changes.between_run_spread(values)
        logs = [math.log(v) for v in values]
        return [i for i in range(1, len(logs)) if abs(logs[i] - logs[i - 1]) > limit]
    return detect


def window(w: int, k: float):
    """Median of w runs before each boundary against median of w runs after; boundaries scoring over k times the
    spread, the highest of each stretch of such boundaries kept (a step lifts its neighbours' scores too)."""
    def detect(values: list[float]) -> list[int]:
        logs = [math.log(v) for v in values]
        limit = k * changes.between_run_spread(values)
        score = {i: abs(statistics.median(logs[i:i + w]) - statistics.median(logs[i - w:i]))
                 for i in range(w, len(logs) - w + 1)}
        over = [i for i in sorted(score) if score[i] > limit]
        found: list[int] = []
        for i in over:
            if found and i - 1 in over and i - 1 >= found[-1]:
                if score[i] > score[found[-1]]:
                    found[-1] = i
                continue
            found.append(i)
        return found
    return detect


def ruptures_method(algo, model: str, beta: float = 2.0):
    def detect(values: list[float]) -> list[int]:
        logs = np.log(np.asarray(values, dtype=float)).reshape(-1, 1)
        sigma = changes.between_run_spread(values)
        # l2's cost is a sum of squares (σ² per point), l1's a sum of absolute deviations (about σ per point).
        pen = beta * (sigma ** 2 if model == "l2" else sigma) * math.log(len(values))
        return algo(model=model, min_size=2, jump=1).fit(logs).predict(pen=pen)[:-1]
    return detect


METHODS = {
    "consecutive k=3": consecutive(3.0),
    "consecutive k=5": consecutive(5.0),
    "window w=3 k=3": window(3, 3.0),
    "window w=3 k=4": window(3, 4.0),
    "ruptures Pelt l2": ruptures_method(ruptures.Pelt, "l2"),
    "ruptures Binseg l2": ruptures_method(ruptures.Binseg, "l2"),
    "ruptures Pelt l1": ruptures_method(ruptures.Pelt, "l1"),
    "ruptures Pelt l1 β=3": ruptures_method(ruptures.Pelt, "l1", 3.0),
    # What phasebench.history reports: the same detector as it is implemented there.
    "phasebench.history": lambda values: [change.index for change in changes.time_changes(values)],
}


def bucket_of(spread: float) -> str:
    return next(name for low, high, name in BUCKETS if low <= spread < high)


def simulate(noise: dict, seed: int = 37) -> list[dict]:
    """One row per (case, step, trial, method): the planted point, the changes found, detected or not, false alarms."""
    rng = random.Random(seed)
    shape = noise["shape"]
    rows = []
    for case, spread in sorted(noise["cases"].items()):
        for step in STEPS_PCT:
            for trial in range(TRIALS):
                planted = rng.randrange(POINTS // 3, 2 * POINTS // 3) if step else None
                values = [math.exp(spread * rng.choice(shape)) * (1 + step / 100 if planted is not None
                                                                  and i >= planted else 1.0) for i in range(POINTS)]
                for method, detect in METHODS.items():
                    found = detect(values)
                    hits = [i for i in found if planted is not None and abs(i - planted) <= TOLERANCE]
                    rows.append({"case": case, "spread": round(spread, 5), "bucket": bucket_of(spread),
                                 "step_pct": step, "trial": trial, "method": method, "planted": planted,
                                 "found": " ".join(map(str, found)), "detected": int(bool(hits)),
                                 "false_alarms": len(found) - min(len(hits), 1)})
    return rows


def aggregate(rows: list[dict]) -> list[dict]:
    """Per (case, step, method): the series simulated, those whose planted step was found, the false alarms."""
    totals: dict[tuple, dict] = {}
    for r in rows:
        key = (r["case"], r["step_pct"], r["method"])
        total = totals.setdefault(key, {"case": r["case"], "spread": r["spread"], "bucket": r["bucket"],
                                        "step_pct": r["step_pct"], "method": r["method"], "series": 0,
                                        "detected": 0, "false_alarms": 0})
        total["series"] += 1
        total["detected"] += r["detected"]
        total["false_alarms"] += r["false_alarms"]
    return list(totals.values())


def table(totals: list[dict]) -> str:
    """Markdown: per spread bucket and method, detection % at each planted step and false alarms per 100 runs."""
    lines = []
    for _, _, bucket in BUCKETS:
        mine = [t for t in totals if t["bucket"] == bucket]
        if not mine:
            continue
        cases = len({t["case"] for t in mine})
        lines += ["", f"**Between-run spread {bucket}** ({cases} cases, {TRIALS} series of {POINTS} runs each per step)",
                  "", "| method | " + " | ".join(f"detected at {s} %" for s in STEPS_PCT if s)
                  + " | false alarms per 100 runs |", "|---|" + "---:|" * len(STEPS_PCT)]
        for method in METHODS:
            cells = []
            for step in STEPS_PCT[1:]:
                chosen = [t for t in mine if t["method"] == method and t["step_pct"] == step]
                cells.append(f"{100 * sum(t['detected'] for t in chosen) / sum(t['series'] for t in chosen):.0f} %")
            alarms = [t for t in mine if t["method"] == method]
            per_run = sum(t["false_alarms"] for t in alarms) / (sum(t["series"] for t in alarms) * POINTS)
            cells.append(f"{100 * per_run:.2f}")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines[1:]) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.studies.changepoint_study", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder for noise.json, detections.csv (per case, step and method) and table.md")
    parser.add_argument("--seed", type=int, default=37)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    noise = measured_noise()
    (args.out / "noise.json").write_text(json.dumps(noise, indent=1) + "\n", encoding="utf8")
    totals = aggregate(simulate(noise, args.seed))
    with open(args.out / "detections.csv", "w", newline="", encoding="utf8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(totals[0]))
        writer.writeheader()
        writer.writerows(totals)
    text = table(totals)
    (args.out / "table.md").write_text(text, encoding="utf8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The summary of results/compare-holds/run-pairs.sh's pairs: per pair, both runs' exit statuses, what failed the
compare (pytest-benchmark's "Field 'median' has failed" lines and the ratio gate's lines, from the `after` log), the
largest median change and the largest ratio change (recomputed from the two saved runs), and per case the calls per
round; written as Markdown to stdout and as compact JSON to --json. --runs writes every saved run's medians (and
its commit, order seed and calls per round), which thresholds.py reads.

    .venv/bin/python results/compare-holds/summarize.py OUT [--json FILE] [--runs FILE]"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

FAILED_FIELD = re.compile(r"(test_\w+\[[^\]]+\]) \(\S+\) - Field '(\w+)' has failed \w+: ([\d.]+) > ([\d.]+)")
RATIO_LINE = re.compile(r"^(\w+ on [^:]+: \S+ median ratio .*over the \d+% limit)", re.M)


def ratios(run: dict) -> dict[str, float]:
    """{"PHASE on DEVICE": python median / cpp median} of a saved run's phase cases (the ratio gate's pairs)."""
    medians = {}
    for b in run["benchmarks"]:
        info = b["extra_info"]
        if b["name"].startswith("test_phase["):
            medians.setdefault(f"{info['phase']} on {info['device']}", {})[info["implementation"]] = b["stats"]["median"]
    return {key: m["python"] / m["cpp"] for key, m in medians.items() if m.get("python") and m.get("cpp")}


def either_way(before: float, after: float) -> float:
    """How much slower the loser became relative to the other, in percent (phasebench.stats)."""
    return 100 * (max(before, after) / min(before, after) - 1)


def saved(dir: Path, name: str) -> dict:
    [path] = sorted(dir.glob(f"storage/*/*_{name}.json")) or [None]
    return json.loads(path.read_text()) if path else {"benchmarks": []}


def pair(dir: Path) -> dict:
    before, after = saved(dir, "before"), saved(dir, "after")
    medians = {b["name"]: b["stats"]["median"] for b in before["benchmarks"]}
    changes = {b["name"]: 100 * (b["stats"]["median"] / medians[b["name"]] - 1)
               for b in after["benchmarks"] if medians.get(b["name"])}
    log = (dir / "after.log").read_text(errors="replace") if (dir / "after.log").exists() else ""
    ratio_before, ratio_after = ratios(before), ratios(after)
    moved = sorted(((either_way(ratio_before[key], ratio_after[key]), key) for key in ratio_before.keys() & ratio_after),
                   reverse=True)
    worst = max(changes, key=lambda name: changes[name]) if changes else None
    rc = {side: int((dir / f"{side}.rc").read_text()) if (dir / f"{side}.rc").exists() else None
          for side in ("before", "after")}
    return {
        "pair": dir.name, "before_rc": rc["before"], "after_rc": rc["after"],
        "failed_fields": [{"case": m[1], "field": m[2], "change_pct": float(m[3]), "limit_pct": float(m[4])}
                          for m in FAILED_FIELD.finditer(log)],
        "ratio_failures": RATIO_LINE.findall(log),
        "worst_median_change": {"case": worst, "change_pct": round(changes[worst], 1)} if worst else None,
        "worst_ratio_change": ({"ratio": f"{moved[0][1]}: python/cpp {ratio_before[moved[0][1]]:.3f} → "
                                         f"{ratio_after[moved[0][1]]:.3f}", "change_pct": round(moved[0][0], 1)}
                               if moved else None),
        "iterations": {b["name"]: b["stats"]["iterations"] for b in after["benchmarks"]},
        "iterations_from": sorted({str(b["extra_info"].get("iterations_from")) for b in after["benchmarks"]}),
        "canary_ms": [round(1e3 * b["extra_info"]["canary_start_s"], 2) for run in (before, after)
                      for b in run["benchmarks"] if b["extra_info"].get("canary_start_s")],
        "median_changes_pct": {name: round(change, 1) for name, change in sorted(changes.items())},
    }


def runs(out: Path, dirs: list[Path]) -> list[dict]:
    """Every saved run of the pairs: its pair, side, commit, whether its tree was dirty, order seed, and per case its
    median (s) and calls per round."""
    kept = []
    for dir in dirs:
        for side in ("before", "after"):
            run = saved(dir, side)
            if not run["benchmarks"]:
                continue
            kept.append({"pair": str(dir.relative_to(out)), "side": side,
                         "commit": run["commit_info"].get("id"), "dirty": run["commit_info"].get("dirty"),
                         "order_seed": run["machine_info"]["phasebench"].get("order_seed"),
                         "medians_s": {b["name"]: b["stats"]["median"] for b in run["benchmarks"]},
                         "iterations": {b["name"]: b["stats"]["iterations"] for b in run["benchmarks"]}})
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--runs", type=Path)
    args = parser.parse_args()
    dirs = sorted((rc.parent for rc in args.out.rglob("before.rc")),
                  key=lambda d: ("planted" in d.relative_to(args.out).parts, len(str(d)), str(d)))
    pairs = [pair(d) | {"pair": str(d.relative_to(args.out))} for d in dirs]
    if args.json:
        args.json.write_text(json.dumps(pairs, indent=1) + "\n")
    if args.runs:
        args.runs.write_text(json.dumps(runs(args.out, dirs), separators=(",", ":")) + "\n")
    print("| pair | before | after (the compare) | what failed | largest median change | largest ratio change |")
    print("|---|---|---|---|---|---|")
    for p in pairs:
        failed = [f"{f['case']} {f['field']} +{f['change_pct']:.1f}%" for f in p["failed_fields"]]
        failed += [line.split(":")[0] + " ratio" for line in p["ratio_failures"]]
        wm, wr = p["worst_median_change"], p["worst_ratio_change"]
        median = f"{wm['case']} {wm['change_pct']:+.1f}%" if wm else "—"
        ratio = f"{wr['ratio'].split(':')[0]} {wr['change_pct']:.1f}%" if wr else "—"
        print(f"| {p['pair']} | {p['before_rc']} | {p['after_rc']} | {'; '.join(failed) or '—'} | {median} | {ratio} |")
    unchanged = [p for p in pairs if "planted" not in p["pair"]]
    groups: dict[str, list[dict]] = {}  # alternate.sh's pairs by their tree's label; run-pairs.sh's in one group
    for p in unchanged:
        label = re.sub(r"-\d+$", "", p["pair"].split("/")[0]) if "/" in p["pair"] else "unchanged"
        groups.setdefault(label, []).append(p)
    for label, members in groups.items():
        spread: dict[str, list[float]] = {}
        for p in members:
            for name, change in p["median_changes_pct"].items():
                spread.setdefault(name, []).append(change)
        passed = sum(p["after_rc"] == 0 for p in members)
        print(f"\n{label}: {passed} of {len(members)} pairs passed the compare.\n")
        print("| case | calls per round | median change, each pair (%) | largest |abs| (median |abs|) |")
        print("|---|---|---|---|")
        for name, changes in sorted(spread.items(), key=lambda item: -max(map(abs, item[1]))):
            calls = sorted({p["iterations"].get(name) for p in members} - {None})
            print(f"| {name} | {', '.join(map(str, calls))} | {' '.join(f'{c:+.0f}' for c in changes)} | "
                  f"{max(map(abs, changes)):.0f} ({statistics.median(map(abs, changes)):.0f}) |")

if __name__ == "__main__":
    main()

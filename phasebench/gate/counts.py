"""The instruction-count gate (docs/instruction-counts.md; .ci/bench-pr-count): base and head counted in the same
job under `--count instructions`, one saved result each, and per case a verdict on head's median count against
base's. The threshold of a case comes from its measured spread, never from a hand: ten times the
spread measured across counts of an unchanged tree (docs/instruction-counts/spread.json, from `--spread`) or, for a
case that file lacks, of this job's own counted rounds of that case in base and head; at least 0.5 %. A regression beyond it fails; an
improvement beyond it is reported and never fails. A base without the mode, or whose count bracket differs from
head's, is "not comparable": the gate passes with a note.

    python -m phasebench.gate.counts --base BASE.json --head HEAD.json [--spread spread.json] [--markdown gate.md]

Exit status 1 when a case regressed, 0 otherwise, 2 on a usage error. Imports no torch."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from phasebench import results

SPREAD_FACTOR = 10.0  # the threshold is this many times the spread
MIN_THRESHOLD = 0.5  # percent


def spread_percent(counts: list[float]) -> float:
    """(max - min) / median of a case's counts, in percent."""
    if len(counts) < 2:
        return 0.0
    return 100.0 * (max(counts) - min(counts)) / statistics.median(counts)


def counted_cases(result: dict) -> dict[str, dict]:
    """{case fullname: {"median", "rounds" (the counts), "floor", "phase", "impl"}} of a counted result."""
    cases = {}
    for bench in result.get("benchmarks", []):
        info = bench.get("extra_info") or {}
        if info.get("metric") != "instructions":
            continue
        counts = info.get("instructions") or []
        cases[bench["fullname"]] = {"median": statistics.median(counts), "rounds": counts,
                                    "floor": info.get("count_floor"), "phase": info.get("phase"),
                                    "impl": info.get("implementation")}
    return cases


def bracket_of(result: dict):
    return (((result.get("machine_info") or {}).get("phasebench") or {}).get("count") or {}).get("bracket")


def not_comparable(base: dict, head: dict) -> str | None:
    """Why base's counts cannot be set against head's, or None."""
    if results.metric_of(base) != "instructions":
        return f"base holds {results.metric_of(base)}, not instruction counts (base lacks the mode)"
    if bracket_of(base) != bracket_of(head):
        return f"the count bracket changed (base {bracket_of(base)!r}, head {bracket_of(head)!r})"
    return None


def decide(base: dict, head: dict, spreads: dict[str, float]) -> list[dict]:
    """Per case present in both: base and head medians, the change, the threshold and the verdict."""
    rows = []
    base_cases, head_cases = counted_cases(base), counted_cases(head)
    for name in sorted(base_cases.keys() & head_cases.keys()):
        b, h = base_cases[name], head_cases[name]
        # The spread measured across counts of an unchanged tree; for a case it lacks, this job's round-to-round one.
        measured = spreads[name] if name in spreads else max(spread_percent(b["rounds"]), spread_percent(h["rounds"]))
        threshold = max(MIN_THRESHOLD, SPREAD_FACTOR * measured)
        change = 100.0 * (h["median"] / b["median"] - 1.0)
        verdict = "regression" if change > threshold else "improvement" if change < -threshold else "unchanged"
        rows.append({"case": name, "base": b["median"], "head": h["median"], "change_pct": change,
                     "threshold_pct": threshold, "spread_pct": measured, "verdict": verdict})
    for name in sorted(base_cases.keys() ^ head_cases.keys()):
        rows.append({"case": name, "base": base_cases.get(name, {}).get("median"),
                     "head": head_cases.get(name, {}).get("median"), "change_pct": None, "threshold_pct": None,
                     "spread_pct": None, "verdict": "only in " + ("base" if name in base_cases else "head")})
    return rows


def short(name: str) -> str:
    return name.split("::")[-1]


def markdown(rows: list[dict], note: str | None = None) -> str:
    lines = ["## Instruction-count gate (base vs head, `--count instructions`)", ""]
    if note:
        return "\n".join(lines + [f"**Not comparable**: {note}. The gate passes.", ""])
    lines += ["| case | base (instructions) | head (instructions) | change | threshold | verdict |",
              "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        change = "—" if r["change_pct"] is None else f"{r['change_pct']:+.3f} %"
        threshold = "—" if r["threshold_pct"] is None else f"{r['threshold_pct']:.2f} %"
        cells = ["—" if r[k] is None else f"{r[k]:,.0f}" for k in ("base", "head")]
        verdict = f"**{r['verdict'].upper()}**" if r["verdict"] == "regression" else r["verdict"]
        lines.append(f"| {short(r['case'])} | {cells[0]} | {cells[1]} | {change} | {threshold} | {verdict} |")
    failed = [r for r in rows if r["verdict"] == "regression"]
    better = [r for r in rows if r["verdict"] == "improvement"]
    lines += ["", f"{len(failed)} regression(s), {len(better)} improvement(s) (reported, never failing) of "
                  f"{len(rows)} case(s): the gate {'FAILS' if failed else 'passes'}.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phasebench.gate.counts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True)
    parser.add_argument("--head", required=True)
    parser.add_argument("--spread", help="the spread per case measured on an unchanged tree (JSON: {case: percent})")
    parser.add_argument("--markdown", help="write the table here too (the CI job summary)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    base, head = (results.load(path, parser.prog) for path in (args.base, args.head))
    if results.metric_of(head) != "instructions":
        parser.error(f"{args.head} holds {results.metric_of(head)}: head must be counted (--count instructions)")
    spreads = json.loads(Path(args.spread).read_text())["spread_pct"] if args.spread else {}
    note = not_comparable(base, head)
    rows = [] if note else decide(base, head, spreads)
    text = markdown(rows, note)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"note": note, "rows": rows}, indent=1))
    return 1 if any(r["verdict"] == "regression" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

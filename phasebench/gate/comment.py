"""`python -m phasebench.gate.comment GATE.json ... [--history-url URL] [--run-url URL]`: the pull request's one
comment, rendered from the gates' verdict files (the wall-time gate's, `python -m phasebench.gate.paired --json`,
and the instruction-count gate's, `python -m phasebench.gate.counts --json`), of every device that ran: the verdict,
the cases that changed (phase, implementation, base, head, change, threshold, verdict), the cases that could not be
compared and why, and a link to the history page. Its first line is a hidden marker, MARKER, by which the workflow
that posts it (.github/workflows/benchmark-comment.yml) finds the comment to update.

Exit status 0 (the comment is written whatever the verdict), 2 where a file cannot be read as a verdict file.
Imports nothing of the suite but the gates' vocabulary.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from phasebench.gate.verdict import Verdict

MARKER = "<!-- phasebench-gate -->"
GATE_NAMES = {"time": "wall time", "instructions": "instruction count"}
# The verdicts of a case that changed: beyond its threshold either way, or significant and reported.
CHANGED = {Verdict.REGRESSED, Verdict.IMPROVED, Verdict.WITHIN_THRESHOLD, Verdict.BELOW_FLOOR, Verdict.RATIO_MOVED}
NOT_COMPARED = {Verdict.ONLY_IN_BASE: "only in base", Verdict.ONLY_IN_HEAD: "only in head",
                Verdict.NOT_DECIDED: "one pair of runs: no interval, so no verdict"}
DEVICES = ("cpu", "cuda", "mps")


class Unreadable(ValueError):
    pass


def case_parts(case: str) -> tuple[str, str, str]:
    """(phase, implementation, device) of a case's fullname (…::test_phase[forward-python-cpu]) or of a ratio
    case ("forward python/cpp on cpu"); the name itself and blanks where it is neither."""
    ratio = re.fullmatch(r"(\S+) (\S+/\S+) on ([^,]+)(?:, .*)?", case)
    if ratio:
        return ratio.group(1), ratio.group(2), ratio.group(3)
    inside = re.search(r"\[([^\]]+)\]$", case)
    if not inside:
        return case, "", ""
    parts = inside.group(1).split("-")
    at = next((i for i in range(len(parts) - 1, 0, -1) if parts[i] in DEVICES), None)
    if at is None or at < 2:
        return inside.group(1), "", ""
    return parts[0], "-".join(parts[1:at]), parts[at]


def load(path: Path) -> dict:
    """A verdict file, its rows' verdicts made Verdicts; Unreadable naming the file where it is none."""
    try:
        held = json.loads(Path(path).read_text(encoding="utf8"))
        rows = held["rows"]
        if not isinstance(rows, list):
            raise TypeError("rows is not a list")
        by_word = {v.value: v for v in Verdict}
        for row in rows:
            row["verdict"] = by_word[row["verdict"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise Unreadable(f"{path}: not a gate's verdict file ({type(error).__name__}: {error})") from None
    held.setdefault("gate", "instructions" if any("spread_pct" in row for row in rows) else "time")
    if not held.get("device"):
        devices = {case_parts(row["case"])[2] for row in rows} - {""}
        held["device"] = ", ".join(sorted(devices)) or "cpu"
    return held


def quantity(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "ratio":
        return f"{value:.3f}×"
    if unit == "instructions":
        return f"{value:,.0f}"
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {name}"
    return f"{value * 1e9:.3g} ns"


def unit_of(held: dict, row: dict) -> str:
    return row.get("unit") or ("instructions" if held["gate"] == "instructions" else "s")


def cell(text: str) -> str:
    """Text safe in a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def verdict_of(held: dict) -> str:
    """A verdict file's outcome in a few words: FAILED, passed, not comparable or no verdict."""
    if held.get("note"):
        return "not comparable, passes"
    failed = [r for r in held["rows"] if r["verdict"].fails]
    if failed:
        return f"FAILED, {len(failed)} regressed"
    if held["rows"] and all(r["verdict"] is Verdict.NOT_DECIDED for r in held["rows"]):
        return "no verdict"
    return "passed"


def render(files: list[dict], history_url: str | None = None, run_url: str | None = None) -> str:
    """The comment's Markdown."""
    regressed = sum(row["verdict"].fails for held in files if not held.get("note") for row in held["rows"])
    if regressed:
        headline = f"❌ **FAILED**: {regressed} case(s) regressed"
    elif files and all(h.get("note") for h in files):
        headline = "⚪ **not comparable**: no case was judged; the gates pass"
    elif not files:
        headline = "⚪ **no gate ran**: no verdict file was found"
    else:
        headline = "✅ **passed**: no case regressed"
    lines = [MARKER, f"## phasebench: {headline}", "", "| gate | device | verdict | cases |", "|---|---|---|---:|"]
    for held in files:
        lines.append(f"| {GATE_NAMES.get(held['gate'], held['gate'])} | {cell(held['device'])} | "
                     f"{'**' + verdict_of(held) + '**' if verdict_of(held).startswith('FAILED') else verdict_of(held)} "
                     f"| {len(held['rows'])} |")
    changed = [(held, row) for held in files for row in held["rows"] if row["verdict"] in CHANGED]
    changed.sort(key=lambda pair: (not pair[1]["verdict"].fails, pair[1]["verdict"] is not Verdict.IMPROVED,
                                   -abs(pair[1].get("change_pct") or 0.0)))
    lines += ["", "### Cases that changed", ""]
    if changed:
        lines += ["| gate | phase | implementation | device | base | head | change | threshold | verdict |",
                  "|---|---|---|---|---:|---:|---:|---:|---|"]
        for held, row in changed:
            phase, impl, device = (row.get("phase"), row.get("implementation"), row.get("device"))
            if not phase:
                phase, impl, device = case_parts(row["case"])
            unit = unit_of(held, row)
            change = "—" if row.get("change_pct") is None else f"{row['change_pct']:+.1f} %"
            if row.get("low_pct") is not None and row.get("high_pct") is not None:
                change += f" [{row['low_pct']:+.1f}, {row['high_pct']:+.1f}]"
            threshold = "—" if row.get("threshold_pct") is None else f"{row['threshold_pct']:.2g} %"
            word = row["verdict"].text(row.get("detail") or "")
            lines.append(f"| {GATE_NAMES.get(held['gate'], held['gate'])} | {cell(phase)} | {cell(impl or '')} | "
                         f"{cell(device or held['device'])} | {quantity(row.get('base'), unit)} | "
                         f"{quantity(row.get('head'), unit)} | {change} | {threshold} | "
                         f"{'**' + cell(word) + '**' if row['verdict'].fails else cell(word)} |")
    elif any(held["rows"] for held in files):
        lines.append("None: every case compared is unchanged.")
    else:
        lines.append("None compared.")
    missing = [f"- {GATE_NAMES.get(h['gate'], h['gate'])} on {h['device']}: not comparable: {cell(h['note'])}"
               for h in files if h.get("note")]
    missing += [f"- {GATE_NAMES.get(h['gate'], h['gate'])} on {h['device']}: `{row['case'].rpartition('::')[2]}`: "
                f"{NOT_COMPARED[row['verdict']]}" for h in files for row in h["rows"] if row["verdict"] in NOT_COMPARED]
    if missing:
        lines += ["", "### Cases that could not be compared", "", *missing]
    unchanged = sum(row["verdict"] is Verdict.UNCHANGED for h in files for row in h["rows"])
    lines += ["", f"{unchanged} case(s) unchanged. A wall-time change is the paired runs' estimate with its 95 % "
                  "interval; a count's is head's median over base's."]
    links = []
    if history_url:
        links.append(f"[every phase across main's commits]({history_url})")
    if run_url:
        links.append(f"[the runs, tables and saved results]({run_url})")
    if links:
        lines += ["", "See " + " and ".join(links) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phasebench.gate.comment", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path,
                        help="the gates' verdict files (gate.json of .ci/bench-pr and of .ci/bench-pr-count), any "
                             "device; none gives a comment saying no gate ran")
    parser.add_argument("--history-url", help="the history page's address, linked from the comment")
    parser.add_argument("--run-url", help="the workflow run's address, linked from the comment")
    parser.add_argument("--out", type=Path, help="write the comment here (default: standard output)")
    args = parser.parse_args(argv)
    try:
        files = [load(path) for path in args.files]
    except Unreadable as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return 2
    text = render(files, args.history_url, args.run_url)
    if args.out:
        args.out.write_text(text, encoding="utf8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m phasebench.gate.comment GATE.json ... [--history-url URL] [--run-url URL]`: the pull request's one
comment, rendered from the gates' verdict files (the wall-time gate's, `python -m phasebench.gate.paired --json`,
and the instruction-count gate's, `python -m phasebench.gate.counts --json`), of every device that ran: the verdict,
the cases that changed (phase, implementation, base, head, change, threshold, verdict), the cases that could not be
compared and why, a change a maintainer accepted, and a link to the history page. Its first line is a hidden marker,
MARKER, by which the script that posts it (phasebench.gate.post) finds the comment to update.

A verdict file comes from a pull request's run, whose code may have written it: each is checked against SCHEMA
(the types of what is rendered, its size), and every string of it is escaped (escape: no mention, link, reference,
HTML or Markdown of it reaches the comment); the comment is capped at MAX_COMMENT characters. Files of the count
gate's older vocabulary ("regression", "improvement") are read in today's words.

Exit status 0 (the comment is written whatever the verdict), 2 where a file cannot be read as a verdict file.
Imports nothing of the suite but the gates' vocabulary.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from pathlib import Path

from phasebench.gate.verdict import Verdict

MARKER = "<!-- phasebench-gate -->"
GATE_NAMES = {"time": "wall time", "instructions": "instruction count"}
# The verdicts of a case that changed: beyond its threshold either way, or significant and reported.
CHANGED = {Verdict.REGRESSED, Verdict.IMPROVED, Verdict.WITHIN_THRESHOLD, Verdict.BELOW_FLOOR, Verdict.RATIO_MOVED}
NOT_COMPARED = {Verdict.ONLY_IN_BASE: "only in base", Verdict.ONLY_IN_HEAD: "only in head",
                Verdict.NOT_DECIDED: "one pair of runs: no interval, so no verdict"}
DEVICES = ("cpu", "cuda", "mps")
# The count gate's words before the gates shared one vocabulary (phasebench/gate/verdict.py).
OLDER_WORDS = {"regression": Verdict.REGRESSED, "improvement": Verdict.IMPROVED}

# What a verdict file may hold, as rendered: key -> the types its value may have (None: null). Other keys are not
# rendered, and not read.
TEXT, NUMBER, OPTIONAL_TEXT, OPTIONAL_NUMBER = (str,), (int, float), (str, type(None)), (int, float, type(None))
SCHEMA = {"gate": OPTIONAL_TEXT, "device": OPTIONAL_TEXT, "note": OPTIONAL_TEXT, "accepted": OPTIONAL_TEXT,
          "outcome": OPTIONAL_TEXT, "threshold_pct": OPTIONAL_NUMBER, "ratio_threshold_pct": OPTIONAL_NUMBER,
          "rows": (list,), "first_rows": (list,)}
ROW_SCHEMA = {"case": TEXT, "verdict": TEXT, "kind": OPTIONAL_TEXT, "unit": OPTIONAL_TEXT, "detail": OPTIONAL_TEXT,
              "phase": OPTIONAL_TEXT, "implementation": OPTIONAL_TEXT, "device": OPTIONAL_TEXT,
              **{name: OPTIONAL_NUMBER for name in ("base", "head", "change_pct", "low_pct", "high_pct", "threshold_pct",
                                                    "spread_pct")}}
REQUIRED, ROW_REQUIRED = ("rows",), ("case", "verdict")
UNITS = ("s", "ratio", "instructions")
MAX_FILE_BYTES = 4 << 20  # a verdict file of every case of every device is tens of kilobytes
MAX_TEXT = 200  # characters of one string of a verdict file shown in the comment
MAX_COMMENT = 60_000  # characters: GitHub refuses a comment over 65,536


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


def checked(held, source: str) -> dict:
    """A verdict file's content, its rows' verdicts made Verdicts (older words read as today's), where it matches
    SCHEMA; Unreadable naming the file and the key where it does not."""
    def check(mapping, schema: dict, required: tuple, where: str) -> None:
        if not isinstance(mapping, dict):
            raise Unreadable(f"{source}: not a gate's verdict file ({where} is not an object)")
        for key in required:
            if key not in mapping:
                raise Unreadable(f"{source}: not a gate's verdict file ({where} has no {key!r})")
        for key, types in schema.items():
            value = mapping.get(key)
            if key in mapping and (not isinstance(value, types) or isinstance(value, bool)):
                raise Unreadable(f"{source}: not a gate's verdict file ({where}'s {key!r} is "
                                 f"{type(value).__name__}, not {' or '.join(t.__name__ for t in types)})")

    check(held, SCHEMA, REQUIRED, "the file")
    if held.get("gate") is not None and held["gate"] not in GATE_NAMES:
        raise Unreadable(f"{source}: not a gate's verdict file (gate {held['gate'][:40]!r} is none of "
                         f"{', '.join(GATE_NAMES)})")
    by_word = {v.value: v for v in Verdict} | OLDER_WORDS
    for index, row in enumerate(held["rows"]):
        check(row, ROW_SCHEMA, ROW_REQUIRED, f"row {index}")
        if row["verdict"] not in by_word:
            raise Unreadable(f"{source}: not a gate's verdict file (row {index}'s verdict {row['verdict'][:40]!r} "
                             f"is no gate's word)")
        if row.get("unit") is not None and row["unit"] not in UNITS:
            raise Unreadable(f"{source}: not a gate's verdict file (row {index}'s unit {row['unit'][:40]!r})")
        row["verdict"] = by_word[row["verdict"]]
    if held.get("gate") is None:
        held["gate"] = "instructions" if any("spread_pct" in row for row in held["rows"]) else "time"
    if not held.get("device"):
        devices = {case_parts(row["case"])[2] for row in held["rows"]} - {""}
        held["device"] = ", ".join(sorted(devices)) or "cpu"
    return held


def load(path: Path) -> dict:
    """A verdict file, checked (checked()); Unreadable naming the file where it is none, or larger than
    MAX_FILE_BYTES."""
    try:
        if Path(path).stat().st_size > MAX_FILE_BYTES:
            raise Unreadable(f"{path}: not a gate's verdict file (larger than {MAX_FILE_BYTES} bytes)")
        held = json.loads(Path(path).read_text(encoding="utf8"))
    except (OSError, ValueError) as error:
        if isinstance(error, Unreadable):
            raise
        raise Unreadable(f"{path}: not a gate's verdict file ({type(error).__name__}: {error})") from None
    return checked(held, str(path))


ZERO_WIDTH_SPACE = "&#8203;"
# After these a zero-width space: no @mention or e-mail, #reference, scheme:// or emoji :code:, www. or domain link.
BROKEN_AFTER = "@#:."
MARKDOWN = set("\\`*_{}[]()!|~$")  # backslashed: no emphasis, code, link, image, table cell or math
HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def escape(text, limit: int = MAX_TEXT) -> str:
    """A string from a verdict file as plain text in Markdown, whatever it holds: one line, at most `limit`
    characters, control and format characters dropped, HTML's characters as entities, Markdown's backslashed, and a
    zero-width space after each character that could start a mention, a reference or a link (BROKEN_AFTER) and in
    every run of hexadecimal digits (a commit's hash is a link)."""
    text = " ".join("".join(ch for ch in str(text) if unicodedata.category(ch) not in ("Cc", "Cf") or ch.isspace())
                    .split())
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    out, hex_run = [], 0
    for ch in text:
        hex_run = hex_run + 1 if ch in "0123456789abcdefABCDEF" else 0
        out.append(HTML.get(ch) or ("\\" + ch if ch in MARKDOWN else ch))
        if ch in BROKEN_AFTER or hex_run == 6:
            out.append(ZERO_WIDTH_SPACE)
            hex_run = 0
    return "".join(out)


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


def refused(held: dict) -> bool:
    """Whether a verdict file says that base and head cannot be compared, and no maintainer accepted it: it fails."""
    return bool(held.get("note")) and not held.get("accepted")


def verdict_of(held: dict) -> str:
    """A verdict file's outcome in a few words: FAILED, not comparable, change accepted, passed or no verdict."""
    if refused(held):
        return "FAILED, not comparable"
    failed = [r for r in held["rows"] if r["verdict"].fails]
    if failed:
        return f"FAILED, {len(failed)} regressed"
    if held.get("note"):
        return "passed, change accepted" + ("" if held["rows"] else ", no case judged")
    if held["rows"] and all(r["verdict"] is Verdict.NOT_DECIDED for r in held["rows"]):
        return "no verdict"
    return "passed"


def gate_name(held: dict) -> str:
    return GATE_NAMES[held["gate"]]


def headline(files: list[dict]) -> str:
    regressed = sum(row["verdict"].fails for held in files for row in held["rows"])
    incomparable = sum(map(refused, files))
    if regressed or incomparable:
        parts = ([f"{regressed} case(s) regressed"] if regressed else []) + (
            [f"{incomparable} gate(s) could not compare base and head"] if incomparable else [])
        return "❌ **FAILED**: " + " and ".join(parts)
    if not files:
        return "⚪ **no gate ran**: no verdict file was found"
    if all(held.get("note") and not held["rows"] for held in files):
        return "⚪ **change accepted**: base and head could not be compared, and a maintainer accepted it; no case was judged"
    accepted = any(held.get("note") for held in files)
    return "✅ **passed**: no case regressed" + ("; a change a maintainer accepted is below" if accepted else "")


def changed_lines(files: list[dict]) -> list[str]:
    changed = [(held, row) for held in files for row in held["rows"] if row["verdict"] in CHANGED]
    changed.sort(key=lambda pair: (not pair[1]["verdict"].fails, pair[1]["verdict"] is not Verdict.IMPROVED,
                                   -abs(pair[1].get("change_pct") or 0.0)))
    if not changed:
        return ["None: every case compared is unchanged." if any(held["rows"] for held in files) else "None compared."]
    lines = ["| gate | phase | implementation | device | base | head | change | threshold | verdict |",
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
        word = row["verdict"].value + (f" ({escape(row['detail'])})" if row.get("detail") else "")
        lines.append(f"| {gate_name(held)} | {escape(phase)} | {escape(impl or '')} | {escape(device or held['device'])} "
                     f"| {quantity(row.get('base'), unit)} | {quantity(row.get('head'), unit)} | {change} | "
                     f"{threshold} | {'**' + word + '**' if row['verdict'].fails else word} |")
    return lines


def not_compared_lines(files: list[dict]) -> list[str]:
    lines = []
    for held in files:
        if held.get("note"):
            accepted = held.get("accepted")
            lines.append(f"- {gate_name(held)} on {escape(held['device'])}: not comparable: "
                         f"{escape(held['note'], 4 * MAX_TEXT)}"
                         + (f"; **accepted by a maintainer**: {escape(accepted)}" if accepted else "; the gate fails"))
    lines += [f"- {gate_name(h)} on {escape(h['device'])}: `{escape(row['case'].rpartition('::')[2])}`: "
              f"{NOT_COMPARED[row['verdict']]}" for h in files for row in h["rows"] if row["verdict"] in NOT_COMPARED]
    return lines


def capped(lines: list[str], tail: list[str], limit: int) -> list[str]:
    """`lines` then `tail`, whole lines of `lines` left out from the end where the text would exceed `limit`
    characters, with a line that says how many."""
    room = limit - sum(len(line) + 1 for line in tail) - 200
    kept, used = [], 0
    for line in lines:
        if used + len(line) + 1 > room:
            left = len(lines) - len(kept)
            return [*kept, "", f"… {left} more line(s) left out: the comment is capped at {limit:,} characters "
                                f"(the run's job summary has every case).", *tail]
        kept.append(line)
        used += len(line) + 1
    return [*kept, *tail]


def render(files: list[dict], history_url: str | None = None, run_url: str | None = None,
           limit: int = MAX_COMMENT) -> str:
    """The comment's Markdown, at most `limit` characters."""
    lines = [MARKER, f"## phasebench: {headline(files)}", "", "| gate | device | verdict | cases |", "|---|---|---|---:|"]
    for held in files:
        verdict = verdict_of(held)
        lines.append(f"| {gate_name(held)} | {escape(held['device'])} | "
                     f"{'**' + verdict + '**' if verdict.startswith('FAILED') else verdict} | {len(held['rows'])} |")
    lines += ["", "### Cases that changed", "", *changed_lines(files)]
    missing = not_compared_lines(files)
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
    tail = ["", "See " + " and ".join(links) + "."] if links else []
    return "\n".join(capped(lines, tail, limit)) + "\n"


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

"""Every figure the README and docs/ take from a saved result is the one that result holds.

A block of a page (a paragraph, a list item, a table row) that cites files under results/ (a link or a path: a
saved run's JSON, a study's summary, a log) takes its figures from them: each number with a unit (×, %, s, ms, µs,
GB, MB, GiB; a range a–b counts both ends) must be found in what it cites, rounded to the decimals it is written
with. A cited JSON file offers each of its numbers as saved and every line that `python -m phasebench.report`
prints for it (its ratios, shares, totals, medians in ms); a text file offers its numbers. A section's own tables also
offer theirs to its prose, which sums them up (the largest spread of a column). Code
spans are examples of output, not figures, and a figure of a block that cites nothing is not checked here (the
answer's tables are, cell by cell: tests/test_docs.py).

A figure that a page derives from the cited numbers (the largest of a column, a difference) is listed in DERIVED with
how it is derived, so that a figure that is neither found nor explained fails."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from phasebench.repository import ROOT
from tests import docs_text

PAGES = docs_text.pages(ROOT)
CITED = re.compile(r"(?:\.\./)?(results/[\w./-]+?\.(?:md|txt|log|json))(?![\w/])")
FIGURE = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)(?:\s?[–-]\s?(\d+(?:\.\d+)?))?\s?(×|%|ms|µs|s|GB|MB|GiB)(?![\w])")
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?")
CODE = re.compile(r"`[^`]*`")
SCALES = (1,)  # as saved; the report's lines hold the rest (ms, percent)

# (page, figure as written): how the page derives it from what the block cites.
DERIVED = {
    ("README.md", "2.36×"): "C++'s images/s over Python's, one job each, in the report's concurrent-jobs table",
    ("README.md", "1.76×"): "C++'s images/s over Python's, two jobs each, in the report's concurrent-jobs table",
    ("docs/history.md", "50 %"): "a step the study plants (its parameter: 5, 10, 20 and 50 %), not a measurement",
}


def sections(text: str) -> list[str]:
    """The page cut at its headings."""
    return re.split(r"(?m)^(?=#{1,6} )", text)


def table_rows(section: str) -> str:
    return "\n".join(line for line in section.splitlines() if line.lstrip().startswith("|"))


def blocks(text: str) -> list[str]:
    """The page's paragraphs, list items and table rows, each joined into one line; headings and fenced code left out."""
    found, current, fenced = [], [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            line = ""
        if fenced:
            continue
        starts = (not line.strip() or line.startswith("#") or line.lstrip().startswith(("- ", "* ", "|"))
                  or re.match(r"\s*\d+\. ", line))
        if starts:
            if current:
                found.append(" ".join(current))
            current = [line] if line.strip() and not line.startswith("#") else []
        else:
            current.append(line)
    if current:
        found.append(" ".join(current))
    return found


def numbers_in(text: str) -> list[float]:
    return [float(match.replace(",", "")) for match in NUMBER.findall(text)]


def json_numbers(value) -> list[float]:
    if isinstance(value, dict):
        return [number for item in value.values() for number in json_numbers(item)]
    if isinstance(value, list):
        return [number for item in value for number in json_numbers(item)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value) * scale for scale in SCALES]
    return []


@cache
def offered(path: Path) -> tuple[float, ...]:
    """The numbers a cited file offers its figures."""
    if path.suffix != ".json":
        return tuple(numbers_in(path.read_text(encoding="utf8", errors="replace")))
    from phasebench.report.cli import render
    from phasebench.saved import SavedResult

    raw = json.loads(path.read_text(encoding="utf8"))
    printed = ""
    if isinstance(raw, dict) and "benchmarks" in raw:  # a saved run: what the report prints of it
        printed, _ = render(path, SavedResult.read(path, "tests"), "text", None)
    return tuple(json_numbers(raw) + numbers_in(printed))


def holds(written: str, numbers) -> bool:
    """Whether a number as written (its decimals) is one of `numbers` rounded to them."""
    decimals = len(written.split(".")[1]) if "." in written else 0
    value = float(written)
    return any(round(number, decimals) == value for number in numbers)


def checked_figures(pages=PAGES, root: Path = ROOT) -> int:
    """How many figures the pages write beside a citation of a saved result."""
    return sum(len(FIGURE.findall(CODE.sub("", block)))
               for page in pages for block in blocks(page.read_text(encoding="utf8"))
               if any((root / path).is_file() for path in CITED.findall(block)))


def unfound_figures(pages=PAGES, root: Path = ROOT) -> list[str]:
    problems = []
    for page in pages:
        name = page.relative_to(root).as_posix()
        for section in sections(page.read_text(encoding="utf8")):
            problems += unfound_in_section(name, section, root)
    return problems


def unfound_in_section(name: str, section: str, root: Path) -> list[str]:
    """A section's blocks' figures: each from what its block cites, or from the section's own tables, which the
    block sums up (the largest spread of a column, a row's cell)."""
    problems = []
    tabled = numbers_in(table_rows(section))
    for block in blocks(section):
        cited = sorted({root / path for path in CITED.findall(block) if (root / path).is_file()})
        if not cited:
            continue
        numbers = [number for path in cited for number in offered(path)] + tabled
        for figure in FIGURE.finditer(CODE.sub("", block)):
            if (name, figure.group(0)) in DERIVED:
                continue
            ends = [end for end in figure.group(1, 2) if end]
            if not all(holds(end, numbers) for end in ends):
                problems.append(f"{name}: {figure.group(0)!r} is in none of "
                                f"{', '.join(path.relative_to(root).as_posix() for path in cited)}: {block[:100]}…")
    return problems


def test_every_figure_a_page_takes_from_a_saved_result_is_the_one_it_holds():
    assert unfound_figures() == []
    # The pages cite their results beside their figures: a pattern that stopped finding them would check nothing.
    assert checked_figures() >= 60


def test_a_figure_that_its_result_does_not_hold_is_found(tmp_path):
    """A page that cites a study's summary with a figure the summary does not hold (another machine's, a rounding
    the other way) fails; the one it holds, and one derived and listed, pass."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results/summary.md").write_text("| forward | 1.04 | 2.63 |\nwall 244.59 s\n", encoding="utf8")
    (tmp_path / "results/run.json").write_text(json.dumps({"ratio": {"estimate": 23.7441}}), encoding="utf8")
    page = tmp_path / "page.md"
    page.write_text("Forward is 1.04× and the run took 245 s ([results/summary.md](results/summary.md)).\n\n"
                    "Data loading took 23.74× (`results/run.json`), the `7.5×` in code is an example.\n\n"
                    "- It took 28–29 s on another machine (results/summary.md).\n\n"
                    "Uncited: 99 s.\n", encoding="utf8")
    assert unfound_figures([page], tmp_path) == [
        "page.md: '28–29 s' is in none of results/summary.md: - It took 28–29 s on another machine "
        "(results/summary.md).…"]

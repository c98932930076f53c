"""The manual is in the present tense and machine-independent; the code's comments explain the code. Outside the
results page (docs/results.md) and results/, no page under docs/ nor the README holds a commit hash, a date, a time
of day or "this machine" (a reader has neither the night nor the machine); the provenance of a figure is the results
page's. No comment or docstring of the code, requirements.txt or pyproject.toml holds an issue number, a date or a
note of what held up to which commit (a reader cannot follow the first, and the others are history). Each finding
reads file:line."""

from __future__ import annotations

from pathlib import Path

from phasebench.worker.client import ROOT
from tests import docs_text

PAGE_FINDERS = (docs_text.commits, docs_text.dates, docs_text.times_of_day, docs_text.this_machine)
CODE_FINDERS = (docs_text.issues, docs_text.dates, docs_text.until_commit)
RESULTS_PAGE = Path("docs") / "results.md"


def manual_pages(root: Path) -> list[Path]:
    return [path for path in docs_text.pages(root) if path.relative_to(root) != RESULTS_PAGE]


def test_no_page_holds_a_commit_a_date_a_time_of_day_or_this_machine():
    found = docs_text.findings(ROOT, manual_pages(ROOT), PAGE_FINDERS)
    assert found == [], "\n".join(found)


def test_no_code_comment_holds_an_issue_number_a_date_or_until_commit():
    found = docs_text.findings(ROOT, docs_text.code_files(ROOT), CODE_FINDERS)
    assert found == [], "\n".join(found)


def test_the_page_checker_finds_each_kind(tmp_path):
    (tmp_path / "docs" / "guide").mkdir(parents=True)
    (tmp_path / "README.md").write_text(
        "# phasebench\n\n"
        "The step takes 2.65× as long ([results](docs/results.md), commit 555f3ce of the run).\n"
        "Measured on 1 December, and again December 2 and 2 Dec 2026; saved 2026-12-01.\n"
        "The run started at 01:55 and ended 17:04 UTC on this machine.\n")
    (tmp_path / "docs" / "guide" / "nested.md").write_text("This machine has 2 cores.\n")
    (tmp_path / "docs" / "results.md").write_text("Commit e677c9f, 1 December, at 01:55, this machine.\n")
    assert docs_text.findings(tmp_path, manual_pages(tmp_path), PAGE_FINDERS) == [
        "README.md:3: commit hash 555f3ce",
        "README.md:4: date '1 December'",
        "README.md:4: date 'December 2'",
        "README.md:4: date '2 Dec'",
        "README.md:4: date '2026-12-01'",
        "README.md:5: time of day 'at 01:55'",
        "README.md:5: time of day '17:04 UTC'",
        "README.md:5: 'this machine'",
        "docs" + "/guide/nested.md:1: 'This machine'"]  # built, so that the path checker reads no citation


def test_the_page_checker_passes_what_only_looks_like_it(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "usage.md").write_text(
        "A `--rounds 20` run takes 1:30 of your machine's time; the ratio is 2.65× (3.1 s against 1.17 s).\n"
        "Install torch 2.14.1 from https://github.com/pytorch/pytorch/commit/555f3ce4a1b2 or deadbeef feed.\n"
        "The digest sha256:0123456789abcdef and the file times-b96ed3c.json; a 1234567 s total; May I?\n"
        "`--benchmark-columns=min,median` and 12 Decembers are neither.\n")
    assert docs_text.findings(tmp_path, manual_pages(tmp_path), PAGE_FINDERS) == []


def test_the_code_checker_reads_comments_and_docstrings_only(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "cpp").mkdir()
    (tmp_path / "bench" / "code.py").write_text(
        '"""The layering of issue 22."""\n'
        'URL = "https://github.com/o/r/issues/36"  # kept as it is until commit 555f3ce\n'
        'TEXT = "issue 36, 1 December"  # a string is the code\'s, not a comment\n'
        "def f():\n"
        '    """Measured on 2 December (see #36); pytest-dev/pytest-xdist#1386 is upstream\'s."""\n')
    (tmp_path / "cpp" / "code.cpp").write_text(
        '// route (a) of issue 24\nconst char *s = "// issue 25";  /* since commit abc1234 */\n')
    (tmp_path / "requirements.txt").write_text("# pinned on 2026-12-01 (PR 40)\ntorch==2.14.1  # #41\n")
    assert docs_text.findings(tmp_path, docs_text.code_files(tmp_path), CODE_FINDERS) == [
        "bench/code.py:1: issue number 'issue 22'",
        "bench/code.py:2: history 'until commit'",
        "bench/code.py:5: issue number '#36'",
        "bench/code.py:5: date '2 December'",
        "cpp/code.cpp:1: issue number 'issue 24'",
        "cpp/code.cpp:2: history 'since commit'",
        "requirements.txt:1: issue number 'PR 40'",
        "requirements.txt:1: date '2026-12-01'",
        "requirements.txt:2: issue number '#41'"]

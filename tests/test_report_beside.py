"""The report of a counted result beside a timed one (`python -m phasebench.report COUNTED --beside TIMED`,
docs/instruction-counts.md): without an intervention study's account (the lab's, lab/account.py), the report as it was
saved but for one note."""

from __future__ import annotations

from phasebench.report import cli
from phasebench.repository import ROOT
from phasebench.saved import SavedResult

# --count instructions on a clean tree, at the commit of times-b96ed3c.json below
COUNTED = ROOT / "results" / "instruction-counts" / "spread" / "01.json"
TIMED = ROOT / "tests" / "fixtures" / "method-3-default-run.json"  # a default run of method 3 (3779c89)
TIMED_BESIDE_COUNTS = ROOT / "results" / "instruction-counts" / "times-b96ed3c.json"
SAVED_REPORT = ROOT / "results" / "instruction-counts" / "report-01.md"  # 01.json --beside times-b96ed3c.json


def test_without_a_study_the_report_is_as_it_was_but_for_one_note():
    """Without a study nothing of the gap is accounted for: the report of a count beside a time is what it
    was (results/instruction-counts/report-01.md, that command's saved output), with one note after the table of counts
    beside times saying so, and no figure of an unexplained part."""
    named = COUNTED.relative_to(ROOT)  # as the saved output names it
    text, notes = cli.render(named, SavedResult.load(COUNTED), "markdown", SavedResult.load(TIMED_BESIDE_COUNTS))
    note = ("time / instructions is the gap the account breaks down; no intervention study given, "
            "so none of it is accounted for here.")
    assert text.count(note) == 1 and "unexplained" not in text and notes == []
    assert text.replace(f"\n{note}\n", "") == SAVED_REPORT.read_text(encoding="utf8")
    table_end = text.index("| train_step | 1.215 | 2.111 | 1.74 |")
    assert table_end < text.index(note)
    # A timed result alone is not touched at all.
    timed_text, _ = cli.render(TIMED, SavedResult.load(TIMED), "markdown")
    assert "intervention" not in timed_text and "account" not in timed_text

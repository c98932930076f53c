"""The README fits on a few screens and its answer is the saved result's (results/answer/README.md says how it was
made): every row of its answer table is the row `python -m phasebench.report`'s answer prints for that result."""

import json
import re

from phasebench import report
from phasebench.worker.client import ROOT

README = ROOT / "README.md"
RESULT = ROOT / "results" / "answer" / "default-run-3.json"


def test_the_readme_fits_on_a_few_screens():
    assert len(README.read_text(encoding="utf8").splitlines()) <= 250


def test_the_readme_answer_is_the_saved_results():
    text = README.read_text(encoding="utf8")
    assert f"`{RESULT.relative_to(ROOT)}`" in text, "the README names the result its answer comes from"
    lines = dict(report.answer(json.loads(RESULT.read_text())["benchmarks"]))["phasebench: the answer on cpu"]
    printed = {}
    for line in lines:
        cells = [cell for cell in re.split(r"\s{2,}", line.strip()) if cell]
        if cells:
            printed.setdefault(cells[0], cells[1:4])
    table = [[cell.strip() for cell in row.strip("|").split("|")] for row in text.splitlines()
             if row.startswith("| ") and "the network's phases together" not in row]
    rows = [row for row in table if row[0] in printed]
    assert len(rows) >= 6, table
    for label, *cells in rows:
        assert cells == printed[label], label

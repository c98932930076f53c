"""The pull request's comment (phasebench.gate.comment), rendered from the gates' saved verdict files of a pass, a
regression, an improvement, a run that cannot be compared and one whose change a maintainer accepted
(tests/fixtures/gate-comment/, made by its make.py from real saved results), cpu and cuda joined in one; the
wall-time gate's own --json; and every verdict file the docs cite. tests/test_gate_post.py posts it,
tests/test_gate_workflows.py reads the workflows that do."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest

from phasebench.gate import comment
from phasebench.repository import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "gate-comment"
WORKFLOWS = ROOT / ".github" / "workflows"
OUTCOMES = ("pass", "regression", "improvement", "incomparable", "accepted")


def rendered(outcome: str, *extra: Path) -> str:
    files = sorted((FIXTURES / outcome).glob("*.json")) + list(extra)
    assert len(files) >= 2  # both gates' verdicts
    return comment.render([comment.load(path) for path in files], "https://example.github.io/repo/")


def changed_rows(text: str) -> list[list[str]]:
    """The rows of the table of cases that changed, as cells."""
    section = text.split("### Cases that changed", 1)[1].split("###", 1)[0]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| gate")]


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_every_comment_opens_with_its_marker_and_links_the_history(outcome):
    text = rendered(outcome)
    assert text.splitlines()[0] == comment.MARKER
    assert "](https://example.github.io/repo/)" in text
    assert text.count(comment.MARKER) == 1


def test_a_pass_lists_no_changed_case():
    text = rendered("pass")
    assert "✅ **passed**" in text.splitlines()[1]
    assert changed_rows(text) == [] and "None: every case compared is unchanged." in text
    assert "could not be compared" not in text


def test_a_regression_fails_and_names_the_case_with_base_head_change_and_threshold():
    text = rendered("regression")
    assert "❌ **FAILED**" in text.splitlines()[1]
    rows = changed_rows(text)
    assert rows[0][:4] == ["wall time", "loss", "python", "cpu"] and rows[0][-1] == "**regressed**"
    count = next(row for row in rows if row[0] == "instruction count")
    assert count[1:4] == ["loss", "python", "cpu"] and count[6] == "+5.0 %" and count[-1] == "**regressed**"
    base, head = (float(v.replace(",", "")) for v in count[4:6])
    assert head / base == pytest.approx(1.05, rel=1e-3)
    assert re.fullmatch(r"\+50\.0 % \[[+-][\d.]+, \+[\d.]+\]", rows[0][6])  # the paired estimate, its interval
    assert all(row[7].endswith("%") for row in rows)  # each with its threshold


def test_an_improvement_passes_and_is_reported():
    text = rendered("improvement")
    assert "✅ **passed**" in text.splitlines()[1]
    rows = changed_rows(text)
    assert {(row[0], row[1], row[2], row[-1]) for row in rows if row[-1] == "improved"} == {
        ("wall time", "loss", "python", "improved"), ("instruction count", "loss", "python", "improved")}
    assert all(not row[-1].startswith("**") for row in rows)


def test_a_run_that_cannot_be_compared_fails_and_says_why():
    text = rendered("incomparable")
    assert text.splitlines()[1] == "## phasebench: ❌ **FAILED**: 2 gate(s) could not compare base and head"
    reasons = text.split("### Cases that could not be compared", 1)[1]
    assert "the count bracket changed" in reasons and comment.escape("method: base 6, head 5") in reasons
    assert reasons.count("; the gate fails") == 2
    assert changed_rows(text) == []


def test_a_change_a_maintainer_accepted_passes_and_is_stated():
    text = rendered("accepted")
    assert text.splitlines()[1].startswith("## phasebench: ⚪ **change accepted**")
    reasons = text.split("### Cases that could not be compared", 1)[1]
    assert reasons.count("; **accepted by a maintainer**: the label benchmark-change-accepted") == 2, reasons
    assert "| passed, change accepted, no case judged |" in text


def test_cpu_and_cuda_join_in_one_comment(tmp_path):
    held = json.loads((FIXTURES / "regression" / "time.json").read_text())
    held["device"] = "cuda"
    for row in held["rows"]:
        row["case"] = row["case"].replace("-cpu]", "-cuda]").replace(" on cpu", " on cuda")
        if row.get("device"):
            row["device"] = "cuda"
    cuda = tmp_path / "cuda.json"
    cuda.write_text(json.dumps(held))
    text = rendered("pass", cuda)
    assert text.count(comment.MARKER) == 1 and "❌ **FAILED**" in text.splitlines()[1]
    summary = [line for line in text.split("### Cases")[0].splitlines() if line.startswith("| ") and "gate" not in line]
    assert sorted(line.split(" | ")[1] for line in summary) == ["cpu", "cpu", "cuda"]
    assert {row[3] for row in changed_rows(text)} == {"cuda"}


def test_the_command_writes_the_comment_and_refuses_what_is_no_verdict_file(tmp_path, capsys):
    out = tmp_path / "body.md"
    files = [str(p) for p in sorted((FIXTURES / "regression").glob("*.json"))]
    assert comment.main([*files, "--history-url", "https://h/", "--run-url", "https://r/", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf8")
    assert text.startswith(comment.MARKER) and "(https://h/)" in text and "(https://r/)" in text
    broken = tmp_path / "broken.json"
    broken.write_text('{"rows": [{"case": "x", "verdict": "exploded"}]}')
    assert comment.main([str(broken)]) == 2
    assert "not a gate's verdict file" in capsys.readouterr().err
    assert "no gate ran" in comment.render([])


def test_the_case_names_of_both_gates_are_read():
    assert comment.case_parts("bench/test_phases.py::test_phase[data_loading-python-compile-cuda]") == (
        "data_loading", "python-compile", "cuda")
    assert comment.case_parts("loss python/cpp on cpu") == ("loss", "python/cpp", "cpu")


def test_the_wall_time_gates_verdict_file_holds_what_its_table_says():
    held = json.loads((FIXTURES / "regression" / "time.json").read_text())
    assert held["gate"] == "time" and held["device"] == "cpu" and held["outcome"].startswith("FAILED")
    loss = next(row for row in held["rows"] if row["case"].endswith("test_phase[loss-python-cpu]"))
    assert (loss["phase"], loss["implementation"], loss["verdict"]) == ("loss", "python", "regressed")
    assert loss["head"] / loss["base"] == pytest.approx(1.5, rel=1e-6)
    assert loss["low_pct"] < loss["change_pct"] < loss["high_pct"]


def test_paired_json_holds_the_reruns_verdicts_and_the_first_runs(tmp_path, capsys):
    from phasebench.gate import paired
    from tests.test_gate_headlines import SLOWED, paired_runs

    first = ["--base", *paired_runs(tmp_path / "first", "base"),
             "--head", *paired_runs(tmp_path / "first", "head", SLOWED, seed=1)]
    cleared = ["--confirm-base", *paired_runs(tmp_path / "cleared", "base", seed=2),
               "--confirm-head", *paired_runs(tmp_path / "cleared", "head", seed=3)]
    out = tmp_path / "gate.json"
    assert paired.main([*first, *cleared, "--json", str(out)]) == 0
    held = json.loads(out.read_text())
    assert held["outcome"] == "passed" and capsys.readouterr().out.startswith("**Gate: passed**")
    assert not any(row["verdict"] == "regressed" for row in held["rows"])
    assert sum(row["verdict"] == "regressed" for row in held["first_rows"]) == 2
    assert "❌" not in comment.render([comment.load(out)]).splitlines()[1]


def test_older_verdict_words_are_read_as_todays(tmp_path):
    """The count gate's verdict files from before the gates shared one vocabulary ("regression", "improvement")."""
    old = tmp_path / "gate.json"
    old.write_text(json.dumps({"note": None, "rows": [
        {"case": "bench/test_phases.py::test_phase[forward-python-cpu]", "base": 100, "head": 103, "change_pct": 3.0,
         "threshold_pct": 0.5, "spread_pct": 0.01, "verdict": "regression"},
        {"case": "bench/test_phases.py::test_phase[loss-python-cpu]", "base": 100, "head": 90, "change_pct": -10.0,
         "threshold_pct": 0.5, "spread_pct": 0.01, "verdict": "improvement"}]}))
    held = comment.load(old)
    assert [row["verdict"] for row in held["rows"]] == [comment.Verdict.REGRESSED, comment.Verdict.IMPROVED]
    assert held["gate"] == "instructions"
    assert comment.render([held]).splitlines()[1] == "## phasebench: ❌ **FAILED**: 1 case(s) regressed"


CITED = re.compile(r"results/[\w./-]+?(?:gate\.json|\.tar\.xz|\.tar\.gz)")


def cited_verdict_files() -> dict[str, list[tuple[str, bytes]]]:
    """{each verdict file the docs cite, or archive holding some: [(its name, its bytes)]}."""
    found: dict[str, list[tuple[str, bytes]]] = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for cited in set(CITED.findall(page.read_text(encoding="utf8"))):
            path = ROOT / cited
            if cited.endswith("gate.json"):
                found[cited] = [(cited, path.read_bytes())]
            elif path.is_file():
                with tarfile.open(path) as archive:
                    members = [m for m in archive.getmembers() if m.isfile() and m.name.endswith("/gate.json")]
                    if members:
                        found[cited] = [(m.name, archive.extractfile(m).read()) for m in members]
    return found


def test_every_verdict_file_the_docs_cite_renders(tmp_path):
    found = cited_verdict_files()
    assert "results/instruction-counts/study-e677c9f/gated.tar.xz" in found  # docs/results.md's count gate study
    for cited, files in found.items():
        for name, data in files:
            path = tmp_path / "gate.json"
            path.write_bytes(data)
            text = comment.render([comment.load(path)])
            assert text.startswith(comment.MARKER), f"{cited}: {name}"

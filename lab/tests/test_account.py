"""The account of `python -m lab.account COUNTED --beside TIMED --interventions STUDY`
(lab/account.py, docs/results.md#the-account-where-the-gap-between-time-and-instructions-goes): its
figures for a known case, the study's file refused in one line when it is of another kind or version, and the
published account (results/interventions/account.md) reproduced byte for byte. The timed and counted inputs are
copies of saved results in results/; the study's file is synthetic, made by the same writer lab/studies/interventions.py uses (lab/study.py)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from lab import account as lab_account
from lab import study
from phasebench.repository import ROOT

# --count instructions on a clean tree, at the commit of times-b96ed3c.json below
COUNTED = ROOT / "results" / "instruction-counts" / "spread" / "01.json"
TIMED = ROOT / "tests" / "fixtures" / "method-3-default-run.json"  # a default run of method 3 (3779c89)
PUBLISHED = ROOT / "results" / "interventions"  # counted.json, timed.json, interventions.json, account.md
Z = 1.959964


def effect(change: float, low: float, high: float, pairs: int = 40, **control) -> dict:
    return {"pairs": pairs, "change": change, "low": low, "high": high, "ratio_baseline": 1.2,
            "ratio_switched": 1.2 * (1 + change), "spread_log": 0.03} | control


def study_fields(**changes) -> dict:
    """A study of four interventions. forward: the checks −5 % (−7 % to −3 %, excluding 0), the threads +2 % (−1 % to
    +5 %, holding 0), the wait policy −3 % (within the threads switch), a control whose runs' ratio spreads by 5 %
    between fresh processes. backward: the order −4 % (−6 % to −2 %, weight ½), the checks on 5 pairs only, no
    control."""
    fields = {
        "device": "cpu", "pair": ["python", "cpp"], "phases": ["forward", "backward"], "confidence": 0.95,
        "interventions": ["processes", "order", "threads", "wait-policy", "checks"],
        "switches": {"processes": "the same run twice", "order": "C++ first → Python first", "threads": "2 → 1",
                     "wait-policy": "default → passive", "checks": "on → off"},
        "account": {"processes": {"weight": 0, "within": None}, "order": {"weight": 0.5, "within": None},
                    "threads": {"weight": 1, "within": None}, "wait-policy": {"weight": 1, "within": "threads"},
                    "checks": {"weight": 1, "within": None}},
        "effects": {"processes": {"forward": effect(0.004, -0.02, 0.03, ratio_spread_log=0.05,
                                                    process_spread={"python": 0.06, "cpp": 0.04},
                                                    processes_for_3pct=31)},
                    "order": {"backward": effect(-0.04, -0.06, -0.02)},
                    "threads": {"forward": effect(0.02, -0.01, 0.05)},
                    "wait-policy": {"forward": effect(-0.03, -0.05, -0.01)},
                    "checks": {"forward": effect(-0.05, -0.07, -0.03), "backward": effect(-0.05, -0.07, -0.03, 5)}},
        "machine": {"cpu": "a study's CPU"}, "commit": "0" * 40, "dirty": False,
    }
    return fields | changes


def set_ratio(result: dict, phase: str, ratio: float, counted: bool) -> None:
    """Make a saved result's python/cpp ratio of `phase` on cpu `ratio` exactly: python's median (its instruction
    median, counted) set to cpp's times `ratio`."""
    cases = {bench["extra_info"]["implementation"]: bench for bench in result["benchmarks"]
             if (bench["extra_info"]["phase"], bench["extra_info"]["device"]) == (phase, "cpu")}
    holder, key = (lambda bench: bench["extra_info"], "instructions_median") if counted else \
        (lambda bench: bench["stats"], "median")
    holder(cases["python"])[key] = holder(cases["cpp"])[key] * ratio


def inputs(tmp_path: Path, **changes) -> list[str]:
    """The command's arguments for forward at a time ratio of 1.20 and an instruction ratio of 1.01, backward at
    1.15 and 1.00, and the study of study_fields."""
    for name, path, counted, ratios in (("timed.json", TIMED, False, (1.20, 1.15)),
                                        ("counted.json", COUNTED, True, (1.01, 1.00))):
        result = json.loads(path.read_text(encoding="utf8"))
        for phase, ratio in zip(("forward", "backward"), ratios):
            set_ratio(result, phase, ratio, counted)
        (tmp_path / name).write_text(json.dumps(result), encoding="utf8")
    study.write(tmp_path / "interventions.json", study.study_file(**study_fields(**changes)))
    return [str(tmp_path / "counted.json"), "--beside", str(tmp_path / "timed.json"), "--interventions",
            str(tmp_path / "interventions.json"), "--out", str(tmp_path / "out")]


def csv_tables(text: str) -> dict[str, list[dict]]:
    """The CSV blocks of the output by their second column's header, each as a list of rows by header."""
    blocks = [list(csv.DictReader(io.StringIO(block))) for block in text.strip().split("\n\n")]
    found = {}
    for rows in blocks:
        if rows:
            found.setdefault(list(rows[0])[2], rows)
    return found


def test_the_account_of_a_known_case(tmp_path, capsys):
    assert lab_account.main([*inputs(tmp_path), "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    tables = csv_tables(out)
    account = {row["Phase"]: row for row in tables["time"]}
    assert set(account) == {"forward", "backward"}  # the phases all three inputs hold
    forward = {key: float(value) for key, value in account["forward"].items() if key not in ("device", "Phase")}
    # forward: the gap 1.20 / 1.01; the checks (−5 %, interval excluding 0) counted, the threads (interval holding
    # 0) and the wait policy (within the threads) not: unexplained 1.20 × 0.95 / 1.01.
    remainder = math.log(1.20 / 1.01) + math.log(0.95)
    half = math.hypot(Z * 0.05, (math.log(0.97) - math.log(0.93)) / 2)  # the control's spread, the checks' interval
    assert forward["time"] == pytest.approx(1.20) and forward["instructions"] == pytest.approx(1.01)
    assert forward["gap: time / instructions (%)"] == pytest.approx(100 * (1.20 / 1.01 - 1))
    assert forward["accounted for (%)"] == pytest.approx(100 * (1 / 0.95 - 1))
    assert forward["unexplained (%)"] == pytest.approx(100 * (1.20 * 0.95 / 1.01 - 1)) == pytest.approx(12.871, 1e-4)
    assert forward["unexplained 95 % low (%)"] == pytest.approx(100 * math.expm1(remainder - half), 1e-5)
    assert forward["unexplained 95 % high (%)"] == pytest.approx(100 * math.expm1(remainder + half), 1e-5)
    assert forward["unexplained share of the gap (%)"] == pytest.approx(100 * remainder / math.log(1.20 / 1.01))
    # backward: the order's −4 % counts by half (its switch reverses the order), the checks' 5 pairs are too few;
    # no control, so the interval is the order's alone.
    backward = {key: float(value) for key, value in account["backward"].items() if value and key not in ("device", "Phase")}
    remainder = math.log(1.15 / 1.00) + 0.5 * math.log(0.96)
    half = 0.5 * (math.log(0.98) - math.log(0.94)) / 2
    assert backward["unexplained (%)"] == pytest.approx(100 * math.expm1(remainder))
    assert backward["unexplained 95 % low (%)"] == pytest.approx(100 * math.expm1(remainder - half), 1e-5)

    each = {(row["Phase"], row["intervention"]): row for row in tables["intervention"]}
    assert {key: row["in the account"] for key, row in each.items()} == {
        ("forward", "processes"): "a control: switches no cause",
        ("forward", "threads"): "left out: its interval holds 0",
        ("forward", "wait-policy"): "within threads: shown, not added",
        ("forward", "checks"): "counted",
        ("backward", "order"): "counted, weight 0.5",
        ("backward", "checks"): "left out: 5 pairs, its interval needs 10"}
    checks = each["forward", "checks"]
    assert [float(checks[key]) for key in ("effect (%)", "low (%)", "high (%)")] == pytest.approx([-5.0, -7.0, -3.0])
    assert float(checks["its part of the gap (%)"]) == pytest.approx(100 * (1 / 0.95 - 1))
    assert each["forward", "threads"]["its part of the gap (%)"] == ""
    # The notes: the definition, the interval's parts, the conditions of the timed run and the study's other CPU.
    assert "ln(time) − ln(instructions) + Σ weight · ln(1 + effect)" in err and "need not add" in err
    assert "forward 5.0 %" in err and "backward: the interval holds the counted effects' uncertainty alone" in err
    assert "The study timed on a study's CPU, the timed result on Intel" in err


def test_the_account_in_markdown_labels_the_remainder_unexplained(tmp_path, capsys):
    assert lab_account.main(inputs(tmp_path)) == 0
    out = capsys.readouterr().out
    title = "**The account on cpu: python/cpp in time beside instructions"
    assert out.count(title) == 1 and "**Each intervention's effect on the python/cpp time ratio on cpu" in out
    block = out.split(title, 1)[1].split("\n\n", 2)[1].splitlines()
    header = [cell.strip() for cell in block[0].strip("|").split("|")]
    rows = {cells[0]: dict(zip(header, cells)) for cells in
            ([cell.strip() for cell in line.strip("|").split("|")] for line in block[2:])}
    assert rows["forward"]["unexplained (%)"] == "+12.9" and rows["forward"]["time"] == "1.200"
    assert rows["forward"]["instructions"] == "1.010" and rows["forward"]["unexplained share of the gap (%)"] == "70"
    # The tables are written beside the report, as every table is.
    assert (tmp_path / "out" / "counted.md").read_text() + "\n" == out


def test_an_effect_whose_interval_holds_zero_or_a_control_changes_nothing(tmp_path, capsys):
    """The threads' +2 % holds 0 and the control switches nothing: moving either leaves the account as it was."""
    assert lab_account.main([*inputs(tmp_path), "--format", "csv"]) == 0
    before = csv_tables(capsys.readouterr().out)["time"]
    fields = study_fields()
    fields["effects"]["threads"]["forward"] = effect(0.04, -0.001, 0.09)
    fields["effects"]["processes"]["forward"] |= {"change": 0.02, "low": 0.01, "high": 0.03}
    assert lab_account.main([*inputs(tmp_path, effects=fields["effects"]), "--format", "csv"]) == 0
    assert csv_tables(capsys.readouterr().out)["time"] == before


def write_json(tmp_path: Path, data, name: str = "study.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf8")
    return path


@pytest.mark.parametrize("make, message", [
    (lambda: json.loads(TIMED.read_text()), "a pytest-benchmark result, not an intervention study's file"),
    (lambda: {"study": "interventions (issue 36)", "effects": {}}, "written before its format had a name"),
    (lambda: {"format": "something-else", "version": 1}, "format 'something-else', not an intervention study's file"),
    (lambda: study.study_file(**study_fields()) | {"version": 2},
     "phasebench-interventions version 2; this phasebench reads version 1"),
    (lambda: {k: v for k, v in study.study_file(**study_fields()).items() if k != "effects"}, "no 'effects'"),
    (lambda: "{not json", "cannot read it as JSON"),
])
def test_a_study_file_of_another_kind_or_version_is_refused_in_one_line(tmp_path, make, message):
    path = write_json(tmp_path, make())
    with pytest.raises(SystemExit) as refused:
        lab_account.main([str(COUNTED), "--beside", str(TIMED), "--interventions", str(path), "--out", str(tmp_path)])
    text = str(refused.value)
    assert text.startswith(f"lab.account: {path}: ") and message in text and "\n" not in text, text


def test_the_writer_refuses_what_the_format_does_not_have():
    with pytest.raises(study.StudyFileError, match="unknown key 'luck'"):
        study.study_file(**study_fields(), luck=7)
    fields = study_fields()
    fields["effects"]["checks"]["forward"]["low"] = -0.01  # low above high
    fields["effects"]["checks"]["forward"]["high"] = -0.02
    with pytest.raises(study.StudyFileError, match="effects.checks.forward"):
        study.study_file(**fields)
    with pytest.raises(study.StudyFileError, match="account.order"):
        study.study_file(**study_fields(account=study_fields()["account"] | {"order": {"weight": 2, "within": None}}))


def test_the_account_needs_a_count_beside_a_time(tmp_path, capsys):
    path = write_json(tmp_path, study.study_file(**study_fields()))
    with pytest.raises(SystemExit):
        lab_account.main([str(COUNTED), "--interventions", str(path), "--out", str(tmp_path)])
    assert "the following arguments are required: --beside" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="holds times; COUNTED is a counted result"):
        lab_account.main([str(TIMED), "--beside", str(TIMED), "--interventions", str(path), "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="holds instruction counts; --beside takes a timed result"):
        lab_account.main([str(COUNTED), "--beside", str(COUNTED), "--interventions", str(path), "--out", str(tmp_path)])


def test_a_cause_the_timed_run_already_lacks_is_shown_and_not_added(tmp_path, capsys):
    """A timed run with its round checks off (the switched side of the checks intervention): the checks' effect is
    no part of its gap, so forward's remainder is the whole gap and its row says why."""
    arguments = inputs(tmp_path)
    timed = tmp_path / "timed.json"
    result = json.loads(timed.read_text(encoding="utf8"))
    result["machine_info"].setdefault("phasebench", {})["round_checks"] = "off"
    timed.write_text(json.dumps(result), encoding="utf8")
    assert lab_account.main([*arguments, "--format", "csv"]) == 0
    tables = csv_tables(capsys.readouterr().out)
    forward = next(row for row in tables["time"] if row["Phase"] == "forward")
    assert float(forward["unexplained (%)"]) == pytest.approx(100 * (1.20 / 1.01 - 1))
    assert float(forward["accounted for (%)"]) == pytest.approx(0.0, abs=1e-9)
    each = {(row["Phase"], row["intervention"]): row for row in tables["intervention"]}
    assert each["forward", "checks"]["in the account"] == "the timed run has it switched already: shown, not added"


def test_the_published_account_is_reproduced_byte_for_byte(tmp_path, capsys, monkeypatch):
    """results/interventions/account.md is what the command prints for the saved inputs beside it, run from the
    repository's root as results/README.md gives it."""
    monkeypatch.chdir(ROOT)
    published = PUBLISHED.relative_to(ROOT)
    assert lab_account.main([str(published / "counted.json"), "--beside", str(published / "timed.json"),
                             "--interventions", str(published / "interventions.json"), "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (PUBLISHED / "account.md").read_text(encoding="utf8")

"""The gates' studies (lab/studies/gate_study.py, count_study.py): what they count of gated runs, and how they read
the gates' words."""

from __future__ import annotations

import random

import pytest

from lab.studies import gate_study
from lab.studies.count_study import verdict_of
from phasebench.gate.verdict import Verdict
from tests.test_paired import save_run


def test_gate_study_counts_alarms_and_detections(tmp_path):
    """lab.studies.gate_study over lab/studies/gate-study's folders, made up here: one unchanged gated run that passed, one
    that raised an alarm, one slowed run that named the slowed case and one that did not."""
    assert gate_study.wilson(0, 10)[0] == 0 and gate_study.wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-3)
    assert gate_study.wilson(10, 10)[0] == pytest.approx(0.7225, abs=1e-3)
    rows = ["label\tindex\tstatus\tseconds", "unchanged\t1\t0\t300", "slowed\t1\t1\t500", "unchanged\t2\t1\t320",
            "slowed\t2\t0\t310"]
    (tmp_path / "runs.tsv").write_text("\n".join(rows) + "\n")
    for label, index in (("unchanged", 1), ("unchanged", 2), ("slowed", 1), ("slowed", 2)):
        storage = tmp_path / f"{label}-{index}" / "storage" / "machine"
        storage.mkdir(parents=True)
        rng = random.Random(index)
        for pair in range(1, 4):
            for side in ("base", "head"):
                save_run(storage / f"{pair:04d}_first-{side}-{pair}.json", rng, 0.05)
    (tmp_path / "slowed-1" / "confirm-failing.txt").write_text("bench/test_phases.py::test_phase[forward-python-cpu]\n"
                                                               "bench/test_phases.py::test_phase[forward-cpp-cpu]\n")
    result = gate_study.study(tmp_path, "python/forward:0.5ms", 10)
    assert result["false_alarms"][:2] == [1, 2] and result["detections"][:2] == [1, 2]
    assert result["other_alarms_in_slowed"][:2] == [0, 2]  # forward's ratio names cpp's forward too: not another case
    (tmp_path / "slowed-1" / "confirm-failing.txt").write_text("bench/test_phases.py::test_phase[loss-cpp-cpu]\n")
    result = gate_study.study(tmp_path, "python/forward:0.5ms", 10)
    assert result["other_alarms_in_slowed"][:2] == [1, 2]
    assert result["detections"][:2] == [0, 2]
    (tmp_path / "slowed-1" / "confirm-failing.txt").write_text("bench/test_phases.py::test_phase[forward-python-cpu]\n")
    result = gate_study.study(tmp_path, "python/forward:0.5ms", 10)
    assert result["pairs"] == 3 and result["seconds"]["slowed"] == [310, 500]
    forward = result["mde"]["bench/test_phases.py::test_phase[forward-python-cpu]"]
    assert forward["spread_log"] > 0 and forward["mde"] > 0.1  # never below the threshold
    assert "| test_phase[forward-python-cpu] |" in gate_study.markdown(result)


def test_the_count_study_reads_the_committed_studies_words_and_the_gates():
    assert verdict_of({"verdict": "regression"}) is verdict_of({"verdict": "regressed"}) is Verdict.REGRESSED
    assert verdict_of({"verdict": "improvement"}) is verdict_of({"verdict": "improved"}) is Verdict.IMPROVED
    assert verdict_of({"verdict": "only in head"}) is Verdict.ONLY_IN_HEAD


def test_gate_verdicts_count_the_ratio_gates_verdicts_per_pair(tmp_path):
    """lab.studies.paired.gate_verdicts over gate_recipe.sh's files, made up here: a baseline at 1.10×, a run of the same
    code whose interval lies within 10 % of it (unchanged), and a planted one whose interval lies wholly beyond
    (moved); a second baseline whose planted run's interval straddles the limit (undecided)."""
    import json

    from lab.studies.paired import gate_verdicts
    from phasebench.method import METHOD_VERSION

    def write(name: str, estimate: float, low: float, high: float, status: int | None = None) -> None:
        benchmarks = [{"fullname": f"bench/test_phases.py::test_phase[forward-{impl}-cpu]", "stats": {"median": median},
                       "extra_info": {"phase": "forward", "implementation": impl, "device": "cpu",
                                      **({"ratio": {"to": "cpp", "estimate": estimate, "low": low, "high": high}}
                                         if impl == "python" else {})}}
                      for impl, median in (("python", estimate * 1e-3), ("cpp", 1e-3))]
        (tmp_path / f"{name}.json").write_text(json.dumps({"machine_info": {"phasebench": {"method": METHOD_VERSION}},
                                                           "benchmarks": benchmarks}))
        (tmp_path / f"{name}.time").write_text("before: 1.00 1 1 1/1 1\nafter: 1.20 1 1 1/1 1; 20.0 s\n")
        if status is not None:
            (tmp_path / f"{name}.rc").write_text(f"{status}\n")

    write("base-01", 1.10, 1.08, 1.12)
    write("unchanged-01", 1.11, 1.06, 1.16, 0)
    write("planted-01", 1.32, 1.27, 1.37, 1)
    write("base-02", 1.10, 1.08, 1.12)
    write("planted-02", 1.25, 1.15, 1.35, 6)
    kept = gate_verdicts.recipe_pairs(tmp_path, 10)
    assert [pair["verdicts"]["forward"]["verdict"] for pair in kept["unchanged"]] == ["unchanged"]
    assert [pair["verdicts"]["forward"]["verdict"] for pair in kept["planted"]] == ["moved", "undecided"]
    assert [pair["exit_status"] for pair in kept["planted"]] == [1, 6]
    lines = gate_verdicts.table(kept["planted"], "Planted")
    assert "| forward | 2 | 1 | 1 | 1 |" in lines and "| all | 2 | 1 (50%) | 1 | 1 |" in lines
    assert "Pairs the ratio gate fails (a ratio moved): 1 of 2." in lines

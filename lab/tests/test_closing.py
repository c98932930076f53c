"""What closes the gap (lab/closing.py): each setting's effect on each language's time and on the
ratio, from an intervention study's paired runs."""

from __future__ import annotations

import math

import pytest

from lab import study
from lab.closing import closing_table, paired_medians
from lab.paired_stats import paired_change
from lab.tests.test_account import study_fields


def run(intervention: str, pair: int, arm: str, python_ms: float, cpp_ms: float, phase: str = "forward") -> dict:
    return {"intervention": intervention, "pair": pair, "arm": arm, "position": 0, "order_seed": 1,
            "medians": {phase: {"median": {"python": python_ms / 1e3, "cpp": cpp_ms / 1e3}, "order": {},
                                "round_checks": {}, "threads": 2}}}


def a_study(runs: list[dict]) -> study.Study:
    return study.parse(study.study_file(**study_fields(runs=runs)))


def rows_of(table) -> dict[tuple[str, str, str], list]:
    return {(row[0], row[1].split(":")[0], row[2]): row for row in table.rows}


def test_each_language_and_the_ratio_before_and_after_a_setting():
    # threads: python 3.0 → 2.4 ms (−20 %), cpp 2.5 → 2.5 ms, in each of four pairs; the ratio 1.2 → 0.96.
    runs = [run("threads", pair, arm, *((3.0, 2.5) if arm == "baseline" else (2.4, 2.5)))
            for pair in range(1, 5) for arm in ("baseline", "switched")]
    rows = rows_of(closing_table(a_study(runs)))
    python = rows[("forward", "threads", "python")]
    assert python[3] == 4 and python[4] == pytest.approx(3.0) and python[5] == pytest.approx(2.4)
    assert python[6] == pytest.approx(-20.0)
    assert rows[("forward", "threads", "cpp")][6] == pytest.approx(0.0, abs=1e-9)
    ratio = rows[("forward", "threads", "python / cpp")]
    assert ratio[4] == pytest.approx(1.2) and ratio[5] == pytest.approx(0.96) and ratio[6] == pytest.approx(-20.0)


def test_a_control_a_reversal_and_an_unpaired_run_are_left_out():
    runs = [run(name, pair, arm, 3.0, 2.5) for name in ("processes", "order", "checks") for pair in (1, 2)
            for arm in ("baseline", "switched")]
    runs.append(run("threads", 1, "baseline", 3.0, 2.5))  # its switched run never ran
    runs.append({**run("threads", 2, "baseline", 3.0, 2.5), "medians": None})  # a run with no result
    found = a_study(runs)
    assert paired_medians(found, "threads", "forward") == []
    settings = {key[1] for key in rows_of(closing_table(found))}
    assert settings == {"checks"}  # processes is a control (weight 0), order a reversal (½)


def test_no_runs_no_rows_and_a_note_saying_why():
    table = closing_table(a_study([]))
    assert table.rows == [] and any("no paired runs" in note for note in table.notes)


def test_the_paired_change_and_its_interval():
    change, low, high = paired_change([1.0, 2.0, 4.0], [0.9, 1.8, 3.6])
    assert change == pytest.approx(-0.1) and low == pytest.approx(-0.1) and high == pytest.approx(-0.1)
    change, low, high = paired_change([1.0] * 6, [1.1, 0.9, 1.2, 0.8, 1.05, 0.95])
    assert low < change < high and low < 0 < high
    with pytest.raises(ValueError, match="paired"):
        paired_change([1.0], [1.0, 2.0])
    assert math.isclose(paired_change([2.0, 2.0], [3.0, 3.0])[0], 0.5)

"""The paired studies' summaries (lab/studies/paired): what they compute from a study's runs, against made-up runs
whose answer is known."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lab.studies.paired import spread_floor


def made_up_runs(rng: np.random.Generator, runs: int, between: float, within: float, units: int = 6) -> dict:
    """Runs whose units (log ratios) are a run's offset, drawn with sd `between`, plus each unit's own draw with sd
    `within`; every saved interval is the run's estimate ± 5 %."""
    kept = {}
    for index in range(runs):
        offset = rng.normal(0.1, between)
        ratios = {}
        for phase in spread_floor.RATIOS:
            logs = list(rng.normal(offset, within, units))
            estimate = math.exp(float(np.mean(logs)))
            ratios[phase] = {"units": logs, "saved": {"estimate": estimate, "low": estimate / 1.05,
                                                      "high": estimate * 1.05, "half_width": 0.05, "decided": True}}
        kept[f"new-{index + 1}"] = {"commit": "0000000", "load": [1.0, 1.0], "wall_s": 100.0, "ratios": ratios}
    return kept


@pytest.mark.parametrize("between", [0.0, 0.03])
def test_the_floor_is_the_spread_between_runs_that_no_runs_units_show(between):
    """400 runs of 6 units with a within-run sd of 0.05: the floor is 1.96 times the between-run sd, as a relative
    half-width (±6.1 % at 0.03), and about none where the runs differ only by their units' draws."""
    runs = made_up_runs(np.random.default_rng(7), 400, between, 0.05)
    units = [run["ratios"]["forward"]["units"] for run in runs.values()]
    estimates = np.array([np.mean(u) for u in units])
    squared_errors = np.array([np.var(u, ddof=1) / len(u) for u in units])
    floor = spread_floor.floor_of(estimates, squared_errors)
    assert floor == pytest.approx(math.exp(1.959964 * between) - 1, abs=0.012)


def test_the_table_reads_what_runs_json_kept(tmp_path):
    """--from FILE prints a row per ratio from the kept figures: the runs, their draws, the floor with its bootstrap
    interval and how many saved intervals hold the runs' median."""
    kept = tmp_path / "spread-floor.json"
    kept.write_text(json.dumps(made_up_runs(np.random.default_rng(3), 12, 0.0, 0.05)))
    table = spread_floor.table(spread_floor.read_kept(kept))
    rows = [line for line in table.splitlines() if line.startswith("| forward |")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1:3] == ["12", "6"] and cells[6] == "±5.0%"
    assert cells[5].startswith("±") and "[" in cells[5]
    assert int(cells[7].split("/")[0]) >= 6  # ±5 % around estimates spread by ~2 %: most hold the median

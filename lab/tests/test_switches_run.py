"""One real child run with a switch of the lab's plugin (`-p lab.plugin --omp-wait-policy passive`): the product's
plugin resolves it, hands it to the workers, names it in the header and records it in what it saves
(phasebench/plugin/switches.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phasebench import results, schema
from tests.child_runs import _data_options, run_suite


def test_a_timed_run_leaves_the_checks_out_and_says_so_in_what_it_saves(pytestconfig, tmp_path):
    """loss in Python and in C++, 2 rounds after none, without --round-checks: each case passes with nothing checked
    (a timed run's default), the header names only the switch given, and the saved result says the checks were off
    in the run and in each language's worker, and the wait policy its workers ran with."""
    out = tmp_path / "result.json"
    run = run_suite("bench/test_phases.py", "--benchmark-only", "-k", "loss", "--impl", "python,cpp",
                    "--device", "cpu", "--rounds", "2", "--warmup-rounds", "0",
                    "-p", "lab.plugin", "--omp-wait-policy", "passive", "--no-utilization", f"--benchmark-json={out}",
                    *_data_options(pytestconfig))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "phasebench: switches: OMP_WAIT_POLICY passive in the workers\n" in run.stdout
    saved = json.loads(out.read_text())
    machine = schema.machine_of(saved)
    assert (machine.round_checks, machine.omp_wait_policy, machine.pins) == ("off", "passive", None)
    infos = [schema.info_of(bench) for bench in saved["benchmarks"]]
    assert sorted((info.phase, info.implementation, info.round_checks) for info in infos) == [
        ("loss", "cpp", "off"), ("loss", "python", "off")]
    assert results.switched(machine) == {"round checks": "off", "OMP_WAIT_POLICY": "passive"}
    assert Path(out).stat().st_size > 0


@pytest.mark.parametrize("option, value, valid", [
    ("--omp-wait-policy", "spin", "passive, active, default"),
    ("--pins", "all", "none, count"),
])
def test_an_unknown_switch_value_is_a_usage_error(option, value, valid):
    run = run_suite("-p", "lab.plugin", option, value)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert f"{option} '{value}': valid values are {valid}" in run.stderr


def test_without_the_lab_plugin_its_switches_are_unknown():
    """Plain pytest loads the product's plugin alone: the lab's switches are not options there."""
    run = run_suite("--pins", "count", "--collect-only", "-q")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "unrecognized arguments: --pins" in run.stderr

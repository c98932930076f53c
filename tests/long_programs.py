"""Another program benchmarked end to end (docs/architecture.md#adding-a-program). A long check: its child benchmark
run takes about 15 s of the test command's time, so the module is named outside test_*.py and the README's test
command does not collect it; the job `recipe` of .github/workflows/recipes.yml runs it on every push and pull request,
and tests/test_docs_recipes.py checks that it does. The test command's tests/test_programs.py checks the cases, their
names, places and product checks, and tests/test_regression_equivalence.py the training."""

from __future__ import annotations

import json
import time

from phasebench.programs import PROGRAMS, case_phase
from tests.child_runs import _data_options, run_suite


def test_a_program_run_times_every_phase_and_its_training_run_in_both_languages(pytestconfig, tmp_path):
    """One short child benchmark run of the regression program alone (about 20 s): every phase is a paired case in
    python and cpp, keyed PROGRAM:PHASE with its program recorded and a ratio to its partner; its training run trains
    the declared steps in both, with a ratio; the seed's cases are left out; the answer tables both."""
    started = time.monotonic()
    run = run_suite("bench/", "--benchmark-only", "--program", "regression", "--device", "cpu", "--rounds", "10",
                    "--warmup-rounds", "2", "--run-rounds", "2", "--benchmark-json", str(tmp_path / "result.json"),
                    *_data_options(pytestconfig))
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    declared = PROGRAMS["regression"]
    benchmarks = {bench["name"]: bench for bench in json.loads((tmp_path / "result.json").read_text())["benchmarks"]}
    expected = {f"test_phase[{case_phase('regression', phase)}-{impl}-cpu]": (case_phase("regression", phase), impl)
                for phase in declared.phases for impl in ("python", "cpp")}
    expected |= {f"test_program_run[regression-{impl}-cpu]": (case_phase("regression", "training_run"), impl)
                 for impl in ("python", "cpp")}
    assert set(benchmarks) == set(expected), sorted(benchmarks)
    for name, (phase, impl) in expected.items():
        info = benchmarks[name]["extra_info"]
        assert (benchmarks[name]["group"], info["phase"], info["program"]) == (phase, phase, "regression"), name
        ratio = info["ratio"]
        assert ratio["to"] == {"python": "cpp", "cpp": "python"}[impl] and ratio["estimate"] > 0, (name, ratio)
        # The worker's CPU, as every benchmark saves it (tests/test_utilization_recorded.py), and no gpu on cpu.
        assert isinstance(info["cpu"], dict) and info["gpu"] is None, (name, info["cpu"], info["gpu"])
    for impl in ("python", "cpp"):
        assert benchmarks[f"test_program_run[regression-{impl}-cpu]"]["extra_info"]["steps"] == declared.run_steps
    assert "regression:forward_loss" in run.stdout and "regression: Total Time" in run.stdout, run.stdout[-3000:]
    assert elapsed < 90, f"{elapsed:.0f} s"

"""The other programs benchmarked end to end (docs/architecture.md#adding-a-program). A long check: its child
benchmark run takes about 2 minutes, so the module is named outside test_*.py and the README's test
command does not collect it; the job `recipe` of .github/workflows/recipes.yml runs it on every push and pull request,
and tests/test_docs_recipes.py checks that it does. The test command's tests/test_programs.py checks the cases, their
names, places and product checks, and tests/test_regression_equivalence.py and tests/test_dcgan_equivalence.py the
training."""

from __future__ import annotations

import json
import time

from phasebench.programs import PROGRAMS, case_phase
from tests.child_runs import _data_options, run_suite

OTHERS = [name for name, declared in PROGRAMS.items() if not declared.is_default]


def test_the_programs_runs_time_every_phase_and_their_training_runs_in_both_languages(pytestconfig, tmp_path):
    """One short child benchmark run of the programs beside the seed's (about 2 minutes, the DCGAN's steps most of
    it): every phase is a paired case in python and cpp, keyed PROGRAM:PHASE with its program recorded and a ratio to
    its partner; each training run trains its declared steps in both, with a ratio; the seed's cases are left out;
    the header states each program's lengths; the answer tables every program."""
    started = time.monotonic()
    run = run_suite("bench/", "--benchmark-only", "--program", ",".join(OTHERS), "--device", "cpu", "--rounds", "10",
                    "--warmup-rounds", "2", "--run-rounds", "2", "--benchmark-json", str(tmp_path / "result.json"),
                    *_data_options(pytestconfig))
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    benchmarks = {bench["name"]: bench for bench in json.loads((tmp_path / "result.json").read_text())["benchmarks"]}
    expected = {}
    for name in OTHERS:
        declared = PROGRAMS[name]
        expected |= {f"test_phase[{case_phase(name, phase)}-{impl}-cpu]": (name, case_phase(name, phase), impl)
                     for phase in declared.phases for impl in ("python", "cpp")}
        expected |= {f"test_program_run[{name}-{impl}-cpu]": (name, case_phase(name, "training_run"), impl)
                     for impl in ("python", "cpp")}
        for impl in ("python", "cpp"):
            assert benchmarks[f"test_program_run[{name}-{impl}-cpu]"]["extra_info"]["steps"] == declared.run_steps
        # --rounds given: the command's rounds, not the program's own
        assert (f"phasebench: program {name} (after pytorch/examples' {declared.source}): its phases 10 rounds after "
                f"2 warm-up calls each; its training run {declared.run_steps} steps a round") in run.stdout
        assert f"{case_phase(name, declared.phases[0])} " in run.stdout and f"{name}: Total Time" in run.stdout
    assert set(benchmarks) == set(expected), sorted(benchmarks)
    for bench_name, (name, phase, impl) in expected.items():
        info = benchmarks[bench_name]["extra_info"]
        assert (benchmarks[bench_name]["group"], info["phase"], info["program"]) == (phase, phase, name), bench_name
        ratio = info["ratio"]
        assert ratio["to"] == {"python": "cpp", "cpp": "python"}[impl] and ratio["estimate"] > 0, (bench_name, ratio)
        # The worker's CPU, as every benchmark saves it (tests/test_utilization_recorded.py), and no gpu on cpu.
        assert isinstance(info["cpu"], dict) and info["gpu"] is None, (bench_name, info["cpu"], info["gpu"])
    assert elapsed < 300, f"{elapsed:.0f} s"

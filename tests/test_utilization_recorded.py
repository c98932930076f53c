"""Every benchmark of the suite asks for the utilization samplers and records what they measured: the CPU of the
worker(s) it measured, never null, and no gpu object on cpu. A timed default run's (the training run's rounds
included) is the long check tests/long_utilization.py."""

import ast
import json

import pytest

from phasebench.repository import ROOT
from tests.child_runs import _data_options, run_suite
from tests.utilization_fakes import CPU_KEYS


def benchmark_tests() -> dict[str, list[str]]:
    """{test function: its parameters} of every test of the suite that takes pytest-benchmark's fixture."""
    found = {}
    for path in sorted((ROOT / "bench").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                arguments = [argument.arg for argument in node.args.args]
                if "benchmark" in arguments:
                    found[f"{path.name}::{node.name}"] = arguments
    return found


def test_every_benchmark_asks_for_utilization():
    tests = benchmark_tests()
    assert "test_concurrent_jobs.py::test_concurrent_jobs" in tests and len(tests) >= 6, tests
    assert not [name for name, arguments in tests.items() if "utilization_of" not in arguments]


# The xdist group of the python cpu bench cases (tests/conftest.py shared_fixture_group): on their xdist worker, after
# them, this test reads what they saved instead of running them again.
@pytest.mark.xdist_group("worker python cpu")
def test_every_benchmark_records_the_worker_cpu(pytestconfig, saved_extra_info, tmp_path):
    """Each benchmark of the suite on cpu, as the test command runs it: each saves the CPU of the worker(s) it
    measured, never null (test_concurrent_jobs and test_loss_item saved null), and no gpu object on cpu. What
    pytest-benchmark's own fixture held after the real cases: those of this session where it ran every benchmark
    function on cpu with 2 concurrent jobs (the test command), else a child suite (python; about 15 s here)."""
    # Another program's benchmarks (they take `program`) run with --program only: tests/long_programs.py's child run
    # checks what they save.
    plain = {name: arguments for name, arguments in benchmark_tests().items()
             if "world_size" not in arguments and "program" not in arguments}
    functions = {name.split("::")[1] for name in plain}
    # Under --dist loadgroup a node id ends with "@" and its xdist group.
    ran_here = {nodeid.split("::")[-1].partition("@")[0]: info for nodeid, info in saved_extra_info.items()
                if "-cpu" in nodeid}
    if {name.split("[")[0] for name in ran_here} >= functions and "test_concurrent_jobs[python-cpu-2]" in ran_here:
        saved = ran_here
    else:
        saved = _child_suite_extra_info(pytestconfig, tmp_path, plain)
    assert {name.split("[")[0] for name in saved} == functions, sorted(saved)
    nulls = [name for name, entry in saved.items() if not isinstance(entry.get("cpu"), dict) or entry.get("gpu", "absent") is not None]
    assert not nulls, {name: saved[name] for name in nulls}
    assert len(saved["test_concurrent_jobs[python-cpu-2]"]["cpu"]["processes"]) == 2
    # The training run's are its round's; its free-running run (checked here, left out of a default run) keeps its own.
    free_running = saved["test_training_run[python-cpu]"]["free_running"]
    assert free_running["gpu"] is None and set(free_running["cpu"]) == CPU_KEYS, free_running


def _child_suite_extra_info(pytestconfig, tmp_path, plain: dict) -> dict[str, dict]:
    """{test: its extra_info's cpu and gpu} of every plain benchmark function run once on cpu (python; 2 concurrent
    jobs) in a child pytest."""
    recorded = tmp_path / "extra_info.jsonl"  # tests/recorder.py writes each benchmark's extra_info there
    # bench/test_distributed.py is collected only under --world-size (docs/distributed.md): not in this run.
    run = run_suite(*sorted({f"bench/{name.split('::')[0]}" for name in plain}),
                    "-k", "not test_phase or data_loading", "--impl", "python", "--device", "cpu", "--jobs", "2",
                    "--models", "2", "--rounds", "2", "--warmup-rounds", "0", "--run-rounds", "1",
                    "--benchmark-disable", "-p", "tests.recorder", *_data_options(pytestconfig),
                    env={"PHASEBENCH_TEST_EXTRA_INFO": str(recorded)}, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return {entry["test"].split("::")[-1]: entry for entry in map(json.loads, recorded.read_text().splitlines())}

"""Every benchmark of the suite asks for the utilization samplers and records what they measured: the CPU of the
worker(s) it measured, never null, and no gpu object on cpu; in a default run, timed, too (the training run's rounds
included)."""

import ast
import json

import pytest

from phasebench.repository import ROOT
from phasebench.saved import SavedResult
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


def test_every_benchmark_of_a_default_run_saves_its_utilization(pytestconfig, cpp_library, tmp_path):
    """A default run on cpu, timed as a user runs it (the test command above watches the training run's free-running
    run, which a default run leaves out, and its rounds were watched in none): every benchmark it saves, each phase
    case and the training run, holds a gpu object, null as on cpu, and the cpu object of the worker(s) it measured,
    with the fields docs/utilization.md names. The training run's covers its round's train request, sampled from
    pytest: at least the worker's training loop, at most its process's time from trainer ready to the stop request.
    C++, its smallest run: 2 rounds a phase, one round of one epoch (the samplers are pytest's, alike for either
    language, and a C++ worker starts and trains its epoch sooner than a Python worker)."""
    out = tmp_path / "result.json"
    # bench alone of the testpaths: tests/ holds no benchmark, and collecting it would take seconds more.
    # --unpaired: C++ alone, without its Python partner; a paired case records its blocks' windows through the same
    # Monitor.window and record_windows that a training run's rounds use here.
    run = run_suite("bench", "--benchmark-only", "--impl", "cpp", "--unpaired", "--device", "cpu", "--rounds", "2",
                    "--warmup-rounds", "0", "--run-rounds", "1", "--epochs", "1", f"--benchmark-json={out}",
                    *_data_options(pytestconfig), timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    saved = json.loads(out.read_text())
    SavedResult.load(out)  # it reads back through the schema
    infos = {bench["name"]: bench["extra_info"] for bench in saved["benchmarks"]}
    assert {name.split("[")[0] for name in infos} == {"test_phase", "test_training_run"}, sorted(infos)
    for name, info in infos.items():
        assert "gpu" in info and info["gpu"] is None, (name, info.get("gpu", "absent"))
        assert isinstance(info.get("cpu"), dict) and set(info["cpu"]) == CPU_KEYS, (name, info.get("cpu"))
        assert info["cpu"]["cpu_s"] > 0 and 0 < info["cpu"]["cores"] <= info["cpu"]["cores_available"], (name, info)
    run_info = infos["test_training_run[cpp-cpu]"]
    cpu, free_running = run_info["cpu"], run_info["free_running"]
    ready_to_stop = run_info["total_median_s"] - run_info["startup_median_s"] - run_info["stopping_median_s"]
    assert run_info["loop_median_s"] - 1e-6 <= cpu["wall_s"] <= ready_to_stop + 1e-6, (cpu, run_info)
    assert free_running is None, "a default run trains no free-running run"
    assert "training_run: cpp-cpu CPU " in run.stdout, run.stdout[-3000:]

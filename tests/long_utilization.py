"""A timed default run's utilization end to end (docs/utilization.md): every benchmark it saves records the CPU of
the worker(s) it measured and no gpu object on cpu, the training run's rounds included. A long check: it runs in CI's
recipe job (.github/workflows/recipes.yml), not in the test command, where tests/test_utilization_recorded.py checks
every benchmark function's record from the test command's own cases.)"""

from __future__ import annotations

import json

from phasebench.saved import SavedResult
from tests.child_runs import _data_options, run_suite
from tests.utilization_fakes import CPU_KEYS


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

"""What pytest's own process and a worker's start do before any clock (docs/architecture.md): pytest imports no
torch and touches no CUDA while it starts and collects; each worker's set-up clock starts after its language's
libraries are loaded, in both languages alike, and each worker reports where its start went, in parts."""

import subprocess
import sys
import time

import pytest

from phasebench import registry, spec
from phasebench.repository import ROOT


def child(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_collecting_the_whole_suite_imports_no_torch():
    """torch's import costs about 1.5 s of CPU here, and `import torch` plus a CUDA query in the pytest process
    would create CUDA state in the process that samples the GPU it measures."""
    out = child("import sys, pytest; code = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider']); "
                "print(code, 'torch' in sys.modules, 'torchvision' in sys.modules)")
    assert out[-3:] == ["0", "False", "False"], out[-20:]


def test_the_report_and_the_gate_import_no_torch():
    out = child("import sys; import phasebench.report, phasebench.gate, phasebench.registry, phasebench.spec, "
                "phasebench.plugin; print('torch' in sys.modules)")
    assert out == ["False"]


def test_the_python_set_up_starts_with_its_imports_done():
    """The C++ set-up's clock starts after LibTorch is loaded; the Python set-up's after torchvision is imported, as
    the published Python program imports it at its top: neither set-up's clock holds a library's import."""
    out = child("import sys\n"
                "from phasebench.worker import server\n"
                "import phasebench.train.trainer as trainer\n"
                "seen = []\n"
                "class Fake:\n"
                "    def __init__(self, **options): seen.append('torchvision' in sys.modules)\n"
                "trainer.Trainer = Fake\n"
                "server.PythonAdapter({})\n"
                "print(seen)\n")
    assert out == ["[True]"]


def test_what_follows_from_the_pieces_is_derived():
    """An implementation's phases, devices and split placement follow from its step and loader."""
    graphs, compiled = registry.get("python-graphs"), registry.get("python-compile")
    assert graphs.phases == ("data_loading", "copy_to_device", "graph_capture", "train_step")
    assert graphs.absent == {"cpu": spec.CUDA_ONLY_GRAPHS} and not graphs.split_on_device  # static input buffers
    assert compiled.phases == spec.TRAINING_PHASES + ("compile",) and compiled.split_on_device
    assert graphs.run_phases[-1] == spec.STEP_IN_RUN and "train_step" not in graphs.run_phases


@pytest.mark.parametrize("totals, expected", [({"step_in_run": 5}, 5), ({"train_step": 7}, 7), ({}, None)],
                         ids=["new-key", "saved-before-the-rename", "none"])
def test_the_run_total_of_a_whole_step_reads_both_names(totals, expected):
    assert spec.run_total(totals, spec.STEP_IN_RUN) == expected


def test_a_probe_answer_is_handed_on_only_under_its_own_key(monkeypatch):
    """A pytest the tests start takes its parent's probe answer from the environment rather than starting torch
    again, but only where the answer was given under the same interpreter, GPUs, CPUs, threads and libraries."""
    import json

    from phasebench.plugin import machine

    asked = []

    def fake_run(command, **kwargs):
        asked.append(command)
        return subprocess.CompletedProcess(command, 0, json.dumps({"threads": len(asked)}) + "\n", "")

    monkeypatch.setattr(machine.subprocess, "run", fake_run)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.delenv(machine.PROBE_ENV, raising=False)
    machine.probe.cache_clear()
    try:
        assert machine.probe() == {"threads": 1} and len(asked) == 1  # asked once, and handed on
        machine.probe.cache_clear()
        assert machine.probe() == {"threads": 1} and len(asked) == 1  # a child under the same key: not asked
        for name, value in (("CUDA_VISIBLE_DEVICES", ""), ("OMP_NUM_THREADS", "1")):
            monkeypatch.setenv(name, value)
            machine.probe.cache_clear()
            assert machine.probe() == {"threads": len(asked)} and len(asked) > 1  # another key: asked again
        monkeypatch.setenv(machine.PROBE_ENV, "not json")
        machine.probe.cache_clear()
        assert machine.probe() == {"threads": len(asked)}
    finally:
        machine.probe.cache_clear()


@pytest.mark.parametrize("impl", ["python", "cpp"])
def test_a_workers_start_reports_its_parts(new_worker, settings, tmp_path, impl):
    """Each worker's Started reply says where its start went (docs/method.md#a-workers-start-up-in-parts): on cpu its
    imports, its trainer's construction and its timer floor, with no CUDA initialization and no bus id; each part is
    non-negative, the set-up clock holds the trainer's, and together they fit in the start as pytest saw it, from
    just before the spawn to the reply. A restart in the same process counts no imports from the process's creation."""
    from phasebench.spec import DEFAULT
    from phasebench.worker import protocol

    worker = new_worker(impl, "cpu")()
    ready_ns = time.perf_counter_ns()
    try:
        parts = worker.info.startup_parts_ns
        assert sorted(parts) == ["imports", "timer_floor", "trainer"], parts
        assert all(isinstance(ns, int) and ns >= 0 for ns in parts.values()), parts
        assert parts["imports"] > 0 and parts["trainer"] <= worker.info.setup_ns, (parts, worker.info.setup_ns)
        assert sum(parts.values()) <= ready_ns - worker.started_ns, (parts, ready_ns - worker.started_ns)
        options = settings.worker_options("cpu", str(tmp_path / "restarted.log"), impl, DEFAULT)
        again = worker.request(protocol.Start(options)).startup_parts_ns
        assert sorted(again) == sorted(parts) and again["imports"] < parts["imports"], (again, parts)
    finally:
        worker.stop()

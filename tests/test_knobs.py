"""The tests' knobs (tests/knobs.py, tests/knobs_worker.py) act in the testing worker only: the slow knob slows its
phase in a C++ worker that loads the testing build, and a worker given the production library refuses it."""

from __future__ import annotations

import pytest

from phasebench.worker.client import Worker, WorkerError
from tests import knobs

SLOW_NS = 50_000_000


def test_the_slow_knob_slows_a_cpp_workers_phase_in_the_testing_build(new_worker, cpp_library, testing_library,
                                                                      monkeypatch):
    monkeypatch.setenv(knobs.SLOW_PHASE_ENV, f"cpp/loss:{SLOW_NS // 1_000_000}ms")
    impl, device, options, timeout, _ = new_worker("cpp", "cpu").args  # the session's worker, another library

    def spawn(library: str) -> Worker:
        return Worker(impl, device, options, timeout, library, module=knobs.WORKER_MODULE)

    worker = spawn(testing_library)
    try:
        assert worker.run_phase("loss").ns >= SLOW_NS
        assert worker.run_phase("noop").ns < SLOW_NS
    finally:
        worker.stop()
    with pytest.raises(WorkerError, match="not the testing build"):
        spawn(cpp_library)


def test_the_knobs_are_checked_once_with_their_names():
    with pytest.raises(ValueError, match="unknown phase 'lossy'"):
        knobs.parse_slow_phase("cpp/lossy:5ms", ("loss",), ("cpp",))
    with pytest.raises(ValueError, match="unknown fault 'explode'"):
        knobs.parse_faults("cpp/loss:explode", ("cpp",))
    assert knobs.parse_faults("python-allreduce@1/grad_sync:kill,loss:hang", ("python-allreduce",)) == [
        ("python-allreduce", "1", "grad_sync", "kill"), ("", None, "loss", "hang")]
    assert knobs.faults_for("cpp/loss:abort,python@1/loss:kill", "python") == {}
    assert knobs.faults_for("cpp/loss:abort,python@1/loss:kill", "python", 1) == {"loss": "kill"}

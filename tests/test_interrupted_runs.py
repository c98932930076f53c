"""An interrupted suite run (docs/faults.md#faults-and-bad-input; docs/gating.md): SIGTERM stops the run at once,
keeps the results of the finished cases and not the cut-short one, and leaves no worker behind; Ctrl-C and a
cancelled CI job, which end the same way, are long checks (tests/long_interrupted_runs.py). The case running when the signal comes hangs on purpose (the testing plugin's PHASEBENCH_TEST_FAULT,
tests/knobs.py)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

import pytest

from phasebench.plugin.cases import run_order
from tests.child_runs import _autosaved, _data_options, _saved, child_suite


def test_sigterm_keeps_the_results_of_the_finished_cases(pytestconfig, cpp_library, tmp_path):
    """SIGTERM to pytest alone (as `kill`, `timeout` and a cancelled CI job send it) while a case is running:
    as with Ctrl-C, the finished cases are saved and the cut-short one is not; pytest stops its workers itself,
    the idle python one too, and exits non-zero, within the 10 s a cancelled GitHub job leaves. A second
    SIGTERM, sent while pytest is most likely stopping the python worker, changes nothing."""

    def terminate_twice(child):
        os.kill(child.pid, signal.SIGTERM)
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGTERM)  # a zombie until communicate() reaps it: never ProcessLookupError

    child, text = _interrupted_run(pytestconfig, tmp_path, "python,cpp", terminate_twice, within=10)
    assert child.returncode == pytest.ExitCode.INTERRUPTED, text
    assert "KeyboardInterrupt: SIGTERM" in text
    # loss's paired measurement, run by python's case (its first), hangs in cpp's block: neither loss case finished.
    expected = {"test_phase[forward-python-cpu]": 2, "test_phase[forward-cpp-cpu]": 2}
    assert _saved(tmp_path / "results.json") == expected, text
    assert _saved(_autosaved(tmp_path / "storage")) == expected


# Each phase's implementations run in an order drawn from the run's seed (docs/method.md#order): a seed that runs
# python's loss case first, whose paired measurement times python's block before the hanging cpp one
# (docs/method.md#paired-in-time), so that the run hangs in its last group.
CPP_LOSS_LAST = next(seed for seed in range(100) if run_order(seed, "loss", "cpu", "", ["python", "cpp"],
                                                               ("python", "cpp"))[0] == "python")


def _interrupted_run(pytestconfig, tmp_path, impls: str, interrupt, within: float = 60):
    """A child run of forward and loss on cpu (2 rounds, saved in tmp_path), whose cpp loss hangs and runs last,
    interrupted by interrupt(child) once that case is running; checked to end within `within` seconds and to leave
    nothing of its process group. Returns the child and its output."""
    with child_suite("bench/test_phases.py", "-v", "-k", "forward or loss", "--impl", impls, "--device", "cpu",
                     "--order-seed", str(CPP_LOSS_LAST),
                     "--rounds", "2", "--warmup-rounds", "0", "--benchmark-json", str(tmp_path / "results.json"),
                     "--benchmark-autosave", "--benchmark-storage", f"file://{tmp_path / 'storage'}",
                     *_data_options(pytestconfig), env={"PHASEBENCH_TEST_FAULT": "cpp/loss:hang"},
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as child:
        output = _read_until(child, b"test_phase[loss-", timeout=120)  # the first loss case measures the pair
        time.sleep(0.5)  # most likely the loss request is in flight by now, and its worker hangs
        interrupt(child)
        interrupted = time.monotonic()
        output += child.communicate(timeout=60)[0]
        took = time.monotonic() - interrupted
        with pytest.raises(ProcessLookupError):  # nothing of the run's process group is left
            os.killpg(child.pid, 0)
    text = output.decode(errors="replace")
    assert took < within, f"the run took {took:.1f} s to end:\n{text}"
    return child, text


def _read_until(child: subprocess.Popen, marker: bytes, timeout: float) -> bytes:
    """The child's output until `marker` appears (pytest -v writes a test's name when it starts)."""
    output, deadline = b"", time.monotonic() + timeout
    while marker not in output:
        ready, _, _ = select.select([child.stdout], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(child.stdout.fileno(), 1 << 16) if ready else b""
        if not chunk:
            pytest.fail(f"the child run never reached {marker.decode()}:\n{output.decode(errors='replace')}")
        output += chunk
    return output

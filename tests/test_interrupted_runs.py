"""An interrupted suite run (docs/faults.md#faults-and-bad-input; docs/gating.md): Ctrl-C, SIGTERM and a cancelled
CI job stop the run at once, keep the results of the finished cases and not the cut-short one, and leave no worker
behind. The case running when the signal comes hangs on purpose (the testing plugin's PHASEBENCH_TEST_FAULT,
tests/knobs.py)."""

from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from phasebench.plugin.cases import run_order
from phasebench.repository import ROOT
from tests.child_runs import _autosaved, _data_options, _saved, child_process, child_suite


def test_ctrl_c_keeps_the_results_of_the_finished_cases(pytestconfig, cpp_library, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while a case is running:
    the run stops at once, the finished cases are saved, the cut-short one is not, no worker is left."""
    child, text = _interrupted_run(pytestconfig, tmp_path, "cpp", lambda child: os.killpg(child.pid, signal.SIGINT))
    assert child.returncode == pytest.ExitCode.INTERRUPTED, text
    assert "KeyboardInterrupt" in text
    expected = {"test_phase[forward-cpp-cpu]": 2}
    assert _saved(tmp_path / "results.json") == expected, text
    assert _saved(_autosaved(tmp_path / "storage")) == expected


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


def test_a_cancelled_ci_job_keeps_the_results_of_the_finished_cases(pytestconfig, cpp_library, tmp_path):
    """A cancelled GitHub job signals the step's shell alone: SIGINT, SIGTERM about 7.5 s later, and about
    2.5 s after that it kills the whole process tree. .ci/bench-pr, which the step runs with exec, passes the
    signal on to its pytest, which saves the finished cases of base and stops; head never runs. Here SIGTERM
    follows sooner, while pytest is still saving, where it must spoil nothing."""
    trees = tmp_path / "base", tmp_path / "head"
    for tree in trees:  # this checkout, run by this interpreter, on the suite's data, with its C++ build
        tree.mkdir()
        # phasebench too: where the venv's editable install is another checkout's (a clone with a borrowed venv),
        # the child would import that one and build that checkout's library from cold (238 s here).
        for entry in ("bench", "cpp", "phasebench", "tests", "conftest.py", "pytest.ini", "requirements.txt"):
            (tree / entry).symlink_to(ROOT / entry)
        (tree / "data").symlink_to(Path(pytestconfig.getoption("mnist_root")).resolve())
        # Not a link to this venv: torch would be found under another path, and the library built again.
        python = tree / ".venv" / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        python.chmod(0o755)
    out = tmp_path / "out"
    command = ["bash", str(ROOT / ".ci" / "bench-pr"), *map(str, trees), str(out), "bench/test_phases.py", "-v",
               "-p", "no:cacheprovider", "-p", "tests.knobs", "-k", "forward or loss", "--impl", "cpp", "--device", "cpu",
               "--rounds", "2", "--warmup-rounds", "0", _data_options(pytestconfig)[0]]
    env = {"PHASEBENCH_NO_INSTALL": "1", "PHASEBENCH_TEST_FAULT": "cpp/loss:hang", "PYTHONUNBUFFERED": "1"}
    with child_process(command, env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as child:
        output = _read_until(child, b"test_phase[loss-cpp-cpu]", timeout=300)
        time.sleep(0.5)  # most likely the loss request is in flight by now, and its worker hangs
        os.kill(child.pid, signal.SIGINT)
        cancelled = time.monotonic()
        time.sleep(0.5)
        os.kill(child.pid, signal.SIGTERM)
        output += child.communicate(timeout=60)[0]
        took = time.monotonic() - cancelled
        with pytest.raises(ProcessLookupError):  # nothing of the run's process group is left
            os.killpg(child.pid, 0)
    text = output.decode(errors="replace")
    assert child.returncode == 130 and took < 10, f"exit status {child.returncode} after {took:.1f} s:\n{text}"
    assert "KeyboardInterrupt: SIGTERM" in text
    (saved,) = (out / "storage").rglob("*.json")  # base's, and no head
    assert saved.name == "0001_first-base-1.json"
    assert _saved(saved) == {"test_phase[forward-cpp-cpu]": 2}, text


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

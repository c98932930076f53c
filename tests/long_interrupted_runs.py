"""Interrupted suite runs end to end (docs/faults.md#faults-and-bad-input; docs/gating.md): Ctrl-C to the whole
process group, and a cancelled CI job through .ci/bench-pr, stop the run at once, keep the results of the finished
cases and not the cut-short one, and leave no worker behind. A long check: it runs in CI's recipe job
(.github/workflows/recipes.yml), not in the test command, which holds SIGTERM's case
(tests/test_interrupted_runs.py)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from phasebench.repository import ROOT
from tests.child_runs import _autosaved, _data_options, _saved, child_process
from tests.test_interrupted_runs import _interrupted_run, _read_until


def test_ctrl_c_keeps_the_results_of_the_finished_cases(pytestconfig, cpp_library, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while a case is running:
    the run stops at once, the finished cases are saved, the cut-short one is not, no worker is left."""
    child, text = _interrupted_run(pytestconfig, tmp_path, "cpp", lambda child: os.killpg(child.pid, signal.SIGINT))
    assert child.returncode == pytest.ExitCode.INTERRUPTED, text
    assert "KeyboardInterrupt" in text
    expected = {"test_phase[forward-cpp-cpu]": 2}
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

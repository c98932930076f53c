"""Child runs of this suite, as a user running it sees them: a child pytest (with the testing plugin,
tests/knobs.py), any command in a process group of its own that is killed on the way out with whatever it left
behind, and what such a run saved (its --benchmark-json, its autosave, its --junitxml)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from phasebench.repository import ROOT

# What pytest-xdist tells its workers through the environment. The child pytests the tests start inherit the
# environment, and pytest-benchmark disables itself in what it takes for an xdist worker.
XDIST_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


def forget_xdist() -> None:
    """Each child pytest a test starts is a run of its own, not an xdist worker: called by the tests' conftest
    files (tests/, lab/tests/) when pytest configures."""
    for name in XDIST_ENV:
        os.environ.pop(name, None)


def run_suite(*options: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """This suite in a child pytest, as a user running it with these options sees it."""
    with child_suite(*options, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        stdout, stderr = child.communicate(timeout=timeout)
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def child_suite(*options: str, env: dict | None = None, **popen):
    """A child pytest of this suite in a process group of its own, killed on the way out with any
    worker it left behind."""
    return child_process([sys.executable, "-u", "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.knobs", *options],
                         env, **popen)


@contextlib.contextmanager
def child_process(command: list[str], env: dict | None = None, **popen):
    """`command` in a process group of its own, killed on the way out with anything it left behind."""
    # SIGINT back to its default: a run started in the background by a non-interactive shell (as CI may
    # be) inherits it ignored, and a child that ignores Ctrl-C cannot show what Ctrl-C does.
    child = subprocess.Popen(command, cwd=ROOT, env=os.environ | (env or {}), start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **popen)
    try:
        yield child
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def _data_options(config) -> list[str]:
    """The child runs on the data this run uses. (Written OPTION=VALUE: pytest reads a separate value of
    an option that conftest.py adds as a path, and would look for the suite there.)"""
    return [f"--dataset={config.getoption('dataset')}", f"--mnist-root={config.getoption('mnist_root')}"]


def _saved(path: Path) -> dict[str, int]:
    """Benchmark name -> rounds, from a saved result (--benchmark-json or --benchmark-autosave)."""
    return {bench["name"]: bench["stats"]["rounds"] for bench in json.loads(path.read_text())["benchmarks"]}


def _autosaved(storage: Path) -> Path:
    (saved,) = storage.rglob("*.json")
    return saved


def junit_outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """Test name -> (passed, failure, error or skipped; its message), from a child run's --junitxml."""
    outcomes = {}
    for case in ElementTree.parse(path).iter("testcase"):
        verdict = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        outcomes[case.get("name")] = ("passed", "") if verdict is None else (verdict.tag, verdict.get("message"))
    return outcomes

"""--count instructions (docs/instruction-counts.md): the one-line refusals of what the mode cannot count, the rounds
it takes, the heap pad of the count study. The mode end to end under Valgrind, a minute of two cores, is a long
check: tests/long_count_mode.py, which the job `recipe` of .github/workflows/recipes.yml runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from phasebench.repository import ROOT

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")


def pytest_run(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=timeout)


def test_what_cannot_be_counted_is_refused_in_one_line(tmp_path):
    args = ("bench/test_phases.py", "--collect-only", "-q", "--count", "instructions")
    cuda = pytest_run(*args, "--device", "cuda")
    workers = pytest_run(*args, "--impl", "python-workers")
    no_valgrind = pytest_run(*args, env=os.environ | {"PATH": str(tmp_path)})
    assert cuda.returncode == 4 and "--count instructions counts on cpu only" in cuda.stderr, cuda.stderr
    assert workers.returncode == 4 and "cannot count python-workers" in workers.stderr, workers.stderr
    assert no_valgrind.returncode == 4 and "--count instructions needs valgrind" in no_valgrind.stderr


@needs_valgrind
def test_rounds_given_anywhere_reach_the_count_mode():
    """--rounds in PYTEST_ADDOPTS is the command's as much as on its line: the count mode keeps it, and its own
    3 counted rounds stand only where nothing names the rounds (the header says which)."""
    args = ("bench/test_phases.py", "--collect-only", "--count", "instructions", "--impl", "python")
    unset = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}
    given = pytest_run(*args, env=unset | {"PYTEST_ADDOPTS": "--rounds 7"})
    default = pytest_run(*args, env=unset)
    assert given.returncode == 0 and " 7 counted rounds after 1 warm-up" in given.stdout, given.stdout + given.stderr
    assert default.returncode == 0 and " 3 counted rounds after 1 warm-up" in default.stdout, default.stderr


def test_the_heap_pad_leaves_another_heap_for_each_n(monkeypatch):
    """The count study's C-heap perturbation (PHASEBENCH_TEST_HEAP_PAD) keeps every other block of its N and does
    nothing without N."""
    from tests import knobs_worker as count_server

    monkeypatch.setattr(count_server, "_KEPT", [])
    monkeypatch.delenv("PHASEBENCH_TEST_HEAP_PAD", raising=False)
    count_server.perturb_heap()
    assert count_server._KEPT == []
    for n, kept in ((1, 8), (3, 24 + 8)):
        monkeypatch.setenv("PHASEBENCH_TEST_HEAP_PAD", str(n))
        count_server.perturb_heap()
        assert len(count_server._KEPT) == kept and all(count_server._KEPT)

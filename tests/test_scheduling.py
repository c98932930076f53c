"""The test command on pytest-xdist (tests/conftest.py): tests that share a fixture narrower than the session run on
one xdist worker, so that it is made once; the others spread."""

from __future__ import annotations

import re
import subprocess
import sys

from phasebench.repository import ROOT


def test_tests_sharing_a_module_fixture_run_on_one_xdist_worker():
    """tests/test_schema.py's two tests of its module-scoped saved run (a child pytest) land on one worker, under
    the group tests/conftest.py gives them; its tests without it are free. Fails where --dist loadgroup stops
    grouping (pytest 9.2 with pytest-xdist 3.8 renames nothing: requirements.txt)."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-disable", "-n", "2", "--dist",
         "loadgroup", "-v", "tests/test_schema.py", "-k", "saved_result or on_reading or on_writing"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ran = {test: worker for worker, test in re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED (\S+) *$", run.stdout, re.MULTILINE)}
    grouped = {test: worker for test, worker in ran.items() if test.endswith("@tests/test_schema.py")}
    assert len(grouped) == 2 and len(set(grouped.values())) == 1, ran
    assert [test for test in ran if "on_writing" in test and "@" not in test], ran  # shares nothing: free

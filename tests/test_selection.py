"""What the default benchmark run holds (docs/usage.md#what-the-default-run-leaves-out): the published table's cases
and nothing more; everything else by option; the test command checks everything."""

import subprocess
import sys

import pytest

from bench.conftest import SELECTIONS
from phasebench.plugin.cases import PLUGIN_SELECTIONS, left_out_line
from phasebench.repository import ROOT

EXTRA_TESTS = {"test_concurrent_jobs", "test_ensemble", "test_worker_overhead", "test_loss_item"}


def collected(*options: str) -> set[str]:
    """The test functions a collection keeps (pytest in a child: no torch, about half a second)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "bench",
                           *options], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {line.split("::")[1].split("[")[0] for line in done.stdout.splitlines() if "::" in line}


def test_the_default_run_holds_the_published_table_only():
    assert collected("--benchmark-only") == {"test_phase", "test_training_run"}


@pytest.mark.parametrize("options, expected", [
    (("--benchmark-only", "--extra", "all"), EXTRA_TESTS),
    (("--benchmark-only", "--jobs", "2"), {"test_concurrent_jobs"}),
    (("--benchmark-only", "--models", "4"), {"test_ensemble"}),
    (("--benchmark-only", "--extra", "worker-overhead,loss-item"), {"test_worker_overhead", "test_loss_item"}),
    (("--benchmark-disable",), EXTRA_TESTS),
], ids=["extra-all", "jobs", "models", "extra-named", "the-test-command"])
def test_what_is_asked_for_is_run(options, expected):
    assert expected <= collected(*options)


def test_the_left_out_line_names_each_selection_and_how_to_ask_for_it():
    named = SELECTIONS | PLUGIN_SELECTIONS
    line = left_out_line(named, frozenset())
    assert all(selection.what in line and selection.how in line for selection in named.values())
    assert left_out_line(named, frozenset(named)) is None


def test_an_unknown_selection_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                           "--extra", "jbos"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 4 and "--extra 'jbos': valid values are jobs, ensembles" in done.stderr


FOREIGN_TESTS = """
def test_concurrent_jobs(impl, device):
    pass


def test_own_extra(impl, device):
    pass


def test_plain():
    pass
"""
FOREIGN_CONFTEST = """
from phasebench.plugin.cases import Selection


def pytest_phasebench_selections(config):
    return {"own": Selection("test_own_extra", "its own extra", "--extra own")}
"""


def test_the_plugin_serves_a_suite_that_is_not_this_one(tmp_path):
    """A suite of its own, with the plugin (installed, or by -p) and none of this suite's names: a test called
    test_concurrent_jobs is no selection there, a bench/test_distributed.py of its own is collected, and the selection
    its conftest.py names is left out of a benchmark run unless asked for, as this suite's are."""
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_distributed.py").write_text(FOREIGN_TESTS)
    (tmp_path / "conftest.py").write_text(FOREIGN_CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")

    def names(*options: str) -> set[str]:
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "phasebench.plugin", "-p", "no:cacheprovider",
                               "--collect-only", "-q", "--impl", "python", "--device", "cpu", *options],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return {line.split("::")[1] for line in done.stdout.splitlines() if "::" in line}

    assert names() == {"test_concurrent_jobs[python-cpu]", "test_plain"}
    assert names("--extra", "own") == {"test_concurrent_jobs[python-cpu]", "test_own_extra[python-cpu]", "test_plain"}

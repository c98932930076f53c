"""What the default benchmark run holds (docs/usage.md#what-the-default-run-leaves-out): the published table's cases
and nothing more; everything else by option; the test command checks everything."""

import subprocess
import sys

import pytest

from phasebench.plugin.cases import SELECTIONS, left_out_line
from phasebench.worker.client import ROOT

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
    line = left_out_line(frozenset())
    assert all(what in line and how in line for _, what, how in SELECTIONS.values())
    assert left_out_line(frozenset(SELECTIONS)) is None


def test_an_unknown_selection_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                           "--extra", "jbos"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 4 and "--extra 'jbos': valid values are jobs, ensembles" in done.stderr

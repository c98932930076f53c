"""phasebench's pytest plugin, as pytest-benchmark's is: its options, one session object built from them
(`config.phasebench`, phasebench/plugin/session.py), its fixtures, how the cases are made, and what every saved result
records (docs/reference/saved-results.md).

Installed as a `pytest11` entry point named "phasebench.plugin" (pyproject.toml; `pip install -e .`, which
requirements.txt does), so pytest knows the options wherever it is started, before it parses the command line. The
root conftest.py lists this module in pytest_plugins for a checkout that was not installed; under the entry point's
name that listing does nothing.

Its parts, each a plugin module of its own: options, session, fixtures, cases (the collection hooks), terminal (the
header and the answer), gating (baselines and --phase-ratio-fail), counting (--count instructions), switches
(--round-checks, and the resolution of the lab's --omp-wait-policy and --pins), pairing (paired timing); and hooks, the hooks a suite's
conftest.py implements to name its own tests (bench/conftest.py does).
"""

from __future__ import annotations

import signal

import pytest

from phasebench import provenance, schema
from phasebench.plugin.session import COMMIT_ENV, DIRTY_ENV, ERRORED, ORDER_SEED_INPUT, PhasebenchSession

pytest_plugins = ["phasebench.plugin.options", "phasebench.plugin.fixtures", "phasebench.plugin.cases",
                  "phasebench.plugin.terminal", "phasebench.plugin.gating", "phasebench.plugin.counting",
                  "phasebench.plugin.switches", "phasebench.plugin.pairing"]


def pytest_addhooks(pluginmanager):
    """The hooks a suite's conftest.py implements (phasebench/plugin/hooks.py: its selections)."""
    from phasebench.plugin import hooks

    pluginmanager.add_hookspecs(hooks)


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark makes its session from the options
def pytest_configure(config):
    config.addinivalue_line("markers", "needs_data: the test reads the workload's data")
    config.phasebench = PhasebenchSession.from_config(config)
    config.add_cleanup(config.phasebench.close)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist: each worker collects the cases in the controller's order, so it runs with the controller's order
    seed (phasebench/plugin/session.py order_seed): workers that drew their own would collect different orders."""
    node.workerinput[ORDER_SEED_INPUT] = node.config.phasebench.order_seed


def pytest_benchmark_update_commit_info(config, commit_info):
    """Whether the tree that ran was clean, from git status (untracked files included: pytest-benchmark's
    `git describe --dirty` ignores them), and a hash of the sources it ran. A copy without git history (a borrowed
    GPU machine's) names its commit and whether that tree was clean in PHASEBENCH_COMMIT and PHASEBENCH_DIRTY
    (docs/reference/saved-results.md#commit_info)."""
    commit_info.update(provenance.commit_info(COMMIT_ENV, DIRTY_ENV))


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["phasebench"] = config.phasebench.machine_info()


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """Every record a run saves is one the schema knows (phasebench/schema.py): an unknown key fails the save."""
    schema.check_saved(output_json)


def _mark_error(item) -> None:
    """Marks the item's pytest-benchmark benchmark as an error: pytest-benchmark leaves it out of the saved file
    (its pytest_benchmark_generate_json), and phasebench out of the answer and the gates (terminal.py, gating.py)."""
    benchmark = (getattr(item, "funcargs", None) or {}).get("benchmark")
    if benchmark is not None:
        benchmark.has_error = True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Ctrl-C or SIGTERM in the middle of a benchmark: pytest-benchmark would save its cut-short rounds as a
    result, or, with none yet, fail to save anything. Marked as an error, it is left out, as failed ones are,
    and the cases that finished are saved (--benchmark-json, --benchmark-autosave)."""
    try:
        return (yield)
    except KeyboardInterrupt:
        _mark_error(item)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A case that failed in its call or its teardown is no result: pytest-benchmark marks a benchmark as an error
    only where its own pedantic raised, so a check that fails after the timing (a round's product, a leftover
    tensor, the training run's steps) would leave the timings in. Marked here, the case is left out of the answer,
    the gates, the saved file and so the history, and the run's summary names it (terminal.py). A skip (xfail
    included) is no failure."""
    report = yield
    if report.failed and report.when in ("call", "teardown"):
        _mark_error(item)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)  # around pytest-benchmark's own, which compares and saves
def pytest_sessionfinish(session):
    """pytest-benchmark leaves an error benchmark out of its saved file, but still compares it with the baseline and
    judges it by --benchmark-compare-fail: a failed case could fail, or pass, its gate. Taken out of its session
    before that, an error is judged by no gate; the run's summary names it (terminal.py)."""
    bs = getattr(session.config, "_benchmarksession", None)
    if bs is not None and bs.benchmarks:
        session.config.stash[ERRORED] = [bench.name for bench in bs.benchmarks if bench and bench.has_error]
        bs.benchmarks[:] = [bench for bench in bs.benchmarks if not (bench and bench.has_error)]
    return (yield)


def _ignore_sigterm(signum, frame):
    pass


def pytest_sessionstart(session):
    """SIGTERM (`kill`, `timeout`, a cancelled CI job) ends the run as Ctrl-C does: the finished cases are
    saved, the workers stopped, the exit status 2 (docs/faults.md#faults-and-bad-input)."""

    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, _ignore_sigterm)  # only the first one interrupts
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    session.config.add_cleanup(lambda: signal.signal(signal.SIGTERM, previous))


@pytest.hookimpl(tryfirst=True)  # before pytest's report of the interrupt, which takes a while
def pytest_keyboard_interrupt(excinfo):
    # The run is ending and saving: a later SIGTERM (CI sends SIGINT, then SIGTERM) must not cut that short.
    signal.signal(signal.SIGTERM, _ignore_sigterm)

"""The pytest side of regression gating (phasebench/gate/compare.py; docs/gating.md#baselines-and-ci-gating), loaded by
phasebench/plugin/__init__.py.

pytest-benchmark compares and fails on its own (--benchmark-compare, --benchmark-compare-fail). This adds:
- --phase-ratio-fail=X%: fail when the ratio of an implementation to its reference (python/cpp for the published
  pair) moved more than X% from the baseline's, per phase, device and workload; a paired ratio only when its interval
  lies wholly beyond, and one whose interval straddles the limit is undecided (exit status UNDECIDED_EXIT);
- a baseline that is missing or unreadable, or was measured by another method (phasebench/results.py), stops the
  run before it starts, in one line naming the file
  (pytest-benchmark only warns, runs everything, then fails with a traceback, or compares nothing);
- a run that compared none of its benchmarks, or ran none (every case skipped), fails instead of passing the
  gate by default;
- a compared run runs its cases in its baseline's order (its order seed), unless --order-seed says otherwise;
- machine_info is compared without what each run draws anew (the order seed), so that pytest-benchmark's "machine_info
  is different" warns of another machine or another torch, not of every run.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from pytest_benchmark.logger import PytestBenchmarkWarning
from pytest_benchmark.session import PerformanceRegression
from pytest_benchmark.storage.file import FileStorage

from phasebench import results, schema
from phasebench.gate.compare import gate_failures, machine_info_differences, undecided_ratios, without_per_run
from phasebench.gate.options import parse_percent
from phasebench.method import METHOD_VERSION
from phasebench.saved import SavedResult, SavedResultError

_FAILURES = pytest.StashKey[list]()
_UNDECIDED = pytest.StashKey[list]()
# The exit status of a compared run whose ratio gate decided no regression but left some ratio undecided: neither a
# pass (0) nor a regression (1), nor any of pytest's own (2-5).
UNDECIDED_EXIT = 6
_WARNING_FILTERS = pytest.StashKey[list]()


def pytest_addoption(parser):
    parser.getgroup("phasebench").addoption(
        "--phase-ratio-fail", type=parse_percent, metavar="X%",
        help="with --benchmark-compare: fail when the ratio of an implementation to its reference "
             "(python/cpp for the published pair) moved more than X%% from the baseline's, per phase, device and "
             "workload, either way (the figure varies less across machines than the medians); a paired ratio fails "
             "only when its 95%% interval lies wholly beyond that, and one whose interval straddles it is undecided: "
             "the run ends with exit status 6 (default: not given: no ratio gate)")


def _benchmark_session(config):
    return config.pluginmanager.getplugin("pytest-benchmark")


def pytest_configure(config):
    # Runs before pytest-benchmark loads the baseline: a path of three or more parts that is not a file
    # makes it raise ValueError there (an INTERNALERROR traceback, pytest-benchmark 5.3.1).
    compare = config.getoption("benchmark_compare", None)
    if isinstance(compare, str) and len(Path(compare).parts) > 2 and not Path(compare).is_file():
        raise pytest.UsageError(f"--benchmark-compare={compare}: baseline {compare} does not exist")
    # While it loads the baselines, before pytest captures warnings, pytest-benchmark warns that none matches or
    # that one failed to load: an internal source line on stderr. pytest_sessionstart stops the run with one line
    # that says it better; the filters are restored there.
    config.stash[_WARNING_FILTERS] = warnings.filters[:]
    # Those two only: its machine_info comparison warns here too, and that warning must show.
    warnings.filterwarnings("ignore", message="(Can't compare|Failed to load)", category=PytestBenchmarkWarning)


def pytest_sessionstart(session):
    saved = session.config.stash.get(_WARNING_FILTERS, None)
    if saved is not None:
        warnings.filters[:] = saved
    settings = getattr(session.config, "phasebench", None)
    metric = settings and settings.machine.get("metric")
    # The switches this run changed (phasebench/plugin/switches.py): a baseline timed with others is refused.
    switched = settings and results.switched(schema.MachineInfo(**settings.machine))
    error = _comparison_error(_benchmark_session(session.config), session.config.getoption("phase_ratio_fail"),
                              metric or "time", switched)
    if error:
        raise pytest.UsageError(error)


def _comparison_error(bs, ratio_fail, metric: str = "time", switched: dict | None = None) -> str | None:
    """Why the comparison asked for cannot happen, in one line naming the file; None when it can."""
    if bs is None:
        return None
    if not bs.compare:
        if bs.compare_fail or ratio_fail is not None:
            return "--benchmark-compare-fail and --phase-ratio-fail need --benchmark-compare=BASELINE"
        return None
    if not isinstance(bs.storage, FileStorage):  # elasticsearch: pytest-benchmark's own checks
        return None
    option = "--benchmark-compare" if bs.compare is True else f"--benchmark-compare={bs.compare}"
    # The files pytest-benchmark looked at: those the value matches, or the newest numbered run.
    if bs.compare is True:
        candidates = bs.storage.query("[0-9][0-9][0-9][0-9]_")[-1:]
    else:
        candidates = bs.storage.query(bs.compare)
    if not candidates:
        machine = bs.storage.default_machine_id  # the folder of this machine's saved runs
        saved = sorted(path.name for path in (bs.storage.path / machine).glob("*.json"))
        there = f"{', '.join(saved[:5])}{', …' if len(saved) > 5 else ''}" if saved else "nothing"
        if bs.compare is True:
            return f"{option}: no saved run in {bs.storage.path / machine} to compare against"
        named = [name[:4] for name in saved if name[5:].removesuffix(".json") == bs.compare]
        # pytest-benchmark reads a value as the start of a file's name: the name a run was saved under is no start.
        hint = (f"; a saved name is a glob here: --benchmark-compare='*{bs.compare}', or its number "
                f"{' or '.join(named)}" if named else "")
        return (f"{option}: no baseline in {bs.storage.path} matches '{bs.compare}' (saved runs are named "
                f"NNNN_NAME.json); {machine}/ holds {there}{hint}")
    loaded = {bs.storage.path / path for path in bs.compared_mapping}  # relative to the storage, or as given
    for candidate in candidates:
        path = bs.storage.path / candidate
        try:
            baseline = SavedResult.load(path)
        except SavedResultError as error:
            return f"{option}: baseline {path} is unreadable: {error.reason}"
        if path not in loaded:
            return f"{option}: baseline {path} is unreadable: pytest-benchmark could not load it"
        different = results.mismatch(baseline, METHOD_VERSION, metric, switched)
        if different:
            return f"{option}: {different}"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    # pytest-benchmark warns of any difference in machine_info, printing both whole (about 6 KB): while it compares,
    # both sides' per-run values (the order seed, the CPU's momentary clock: phasebench.gate.compare.PER_RUN_KEYS) are
    # set aside, so that a run on the same machine compares quietly and one on another machine still warns.
    baseline_machine = compared_benchmark.get("machine_info")
    if isinstance(baseline_machine, dict) and getattr(config, "phasebench", None) is not None:
        config.phasebench.take_baseline_order(baseline_machine)
    sides = [side for side in (machine_info, baseline_machine) if isinstance(side, dict)]
    originals = [dict(side) for side in sides]
    for side in sides:
        side.update(without_per_run(side))
    try:
        return (yield)
    except ValueError:
        # pytest-benchmark's warning names the storage relative to the working directory and raises ValueError when
        # it lies elsewhere (a tmp or CI folder; 5.3.1). Warn here instead: a slowed test run or another machine
        # must show.
        current = json.loads(json.dumps(machine_info))  # as saved: tuples become lists
        differences = machine_info_differences(current, compared_benchmark["machine_info"])
        benchmarksession.logger.warning(f"Benchmark machine_info differs from the baseline's: {'; '.join(differences)}")
    finally:
        for side, original in zip(sides, originals):
            side.clear()
            side.update(original)


def pytest_sessionfinish(session):
    bs = _benchmark_session(session.config)
    limit = session.config.getoption("phase_ratio_fail")
    if bs is None or not bs.compared_mapping or not (bs.compare_fail or limit is not None):
        return
    # A case that failed or was cut short (Ctrl-C, SIGTERM) is not a result: it gates nothing.
    current = SavedResult.from_benchmarks(
        [bench.as_dict(include_data=False) for bench in bs.benchmarks if bench and not bench.has_error],
        {"phasebench": session.config.phasebench.machine_info()})
    # The baselines pytest-benchmark compared with, read again here: an older format is migrated (phasebench/saved.py).
    baselines = {path: SavedResult.load(bs.storage.path / path) for path in bs.compared_mapping}
    failures = gate_failures(baselines, current, limit)
    undecided = undecided_ratios(baselines, current, limit)
    session.config.stash[_FAILURES] = failures
    session.config.stash[_UNDECIDED] = undecided
    # pytest-benchmark reports its own --benchmark-compare-fail verdict (performance_regressions) below.
    if (failures or bs.performance_regressions) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif undecided and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = UNDECIDED_EXIT


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter, config):
    try:
        return (yield)  # pytest-benchmark's tables and its "Performance has regressed" lines
    except PerformanceRegression:
        pass  # pytest-benchmark raises it out of pytest (a traceback); the exit status says it already
    finally:
        failures = config.stash.get(_FAILURES, [])
        undecided = config.stash.get(_UNDECIDED, [])
        if undecided:
            terminalreporter.section(f"phasebench: ratio gate undecided (exit status {UNDECIDED_EXIT})", sep="-",
                                     yellow=True, bold=True)
            for line in undecided:
                terminalreporter.write_line(line, yellow=True)
        if failures:
            terminalreporter.section("phasebench: regression gate failed", sep="-", red=True, bold=True)
            for line in failures:
                terminalreporter.write_line(line, red=True)

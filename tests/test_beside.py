"""The lane beside the tests (tests/beside.py): who does which work, and when; and that it runs only where nothing is
timed (tests/conftest.py's nothing_timed). In-process, with a lane of each test's own."""

from __future__ import annotations

import threading
import time
import types
from pathlib import Path

import pytest

from tests import conftest
from tests.beside import Lane

MAIN = threading.current_thread().name


class Item:
    """A test marked beside(start, **kwargs), as the lane sees one."""

    def __init__(self, nodeid: str, start, **kwargs):
        self.nodeid = nodeid
        self.marker = types.SimpleNamespace(args=(start,), kwargs=kwargs)

    def get_closest_marker(self, name: str):
        return self.marker if name == "beside" else None


def recorder(done: list, release: threading.Event | None = None):
    """A start whose work notes (test, thread, library) in `done`, after `release` where one is given."""
    def start(item, folder, library):
        def work():
            if release is not None:
                assert release.wait(10)
            done.append((item.nodeid, threading.current_thread().name, library))
            return item.nodeid

        return work

    return start


@pytest.fixture
def lane():
    made = Lane()
    yield made
    made.stop()


def test_without_a_lane_each_test_does_its_own_work(lane):
    done = []
    items = [Item(f"t{i}", recorder(done)) for i in range(3)]
    lane.start(items, "lib", lane=False)
    assert lane.thread is None
    assert lane.result_for(items[1]).result() == "t1"
    assert done == [("t1", MAIN, "lib")]


def test_the_lane_takes_the_near_end_and_a_waiting_test_the_far_end(lane):
    done, release = [], threading.Event()
    items = [Item("t0", recorder(done, release))] + [Item(f"t{i}", recorder(done)) for i in (1, 2, 3)]
    lane.start(items, None)
    deadline = time.monotonic() + 10
    while not lane.work["t0"].taken:  # the lane took the near end
        assert time.monotonic() < deadline
        time.sleep(0.01)
    threading.Timer(0.3, release.set).start()
    assert lane.result_for(items[0]).result(timeout=10) == "t0"
    # While the lane did t0, this test did the rest from the far end, then awaited t0.
    assert done == [("t3", MAIN, None), ("t2", MAIN, None), ("t1", MAIN, None), ("t0", "phasebench-beside", None)]
    assert lane.result_for(items[2]).result(timeout=0) == "t2"


def test_tests_marked_once_share_one_work_and_its_failure(lane):
    calls = []

    def start(item, folder, library):
        calls.append(item.nodeid)
        pytest.skip("no such thing here")

    items = [Item("a", start, once=True), Item("b", start, once=True)]
    lane.start(items, None, lane=False)
    assert len(lane.work) == 1
    for item in reversed(items):
        with pytest.raises(pytest.skip.Exception, match="no such thing here"):
            lane.result_for(item).result()
    assert calls == ["a"]  # started once, for the first test it was queued for


def test_work_goes_beside_only_where_nothing_is_timed():
    def session(disabled: bool, *fixtures: tuple[str, ...]):
        config = types.SimpleNamespace(getoption=lambda name: disabled if name == "benchmark_disable" else None)
        return types.SimpleNamespace(config=config, items=[types.SimpleNamespace(fixturenames=f) for f in fixtures])

    def nothing_timed(disabled: bool, *fixtures: tuple[str, ...]) -> bool:
        run = session(disabled, *fixtures)
        return conftest.nothing_timed(run.config, run.items)

    assert nothing_timed(True, ("benchmark", "worker_for"), ("started_beside",))
    assert nothing_timed(False, ("settings",), ("started_beside",))
    assert not nothing_timed(False, ("benchmark", "worker_for"), ("started_beside",))


def test_the_python_bench_cases_go_before_the_cpp_ones():
    """library_free_first: bench cases of C++ implementations after the others, each group in its order; the
    tests/ items after them untouched; an order in which the bench cases are not all first is left alone."""
    def item(where: str, impl: str | None = None):
        params = {"impl": impl} if impl else {}
        return types.SimpleNamespace(path=Path(conftest.__file__).parents[1] / where, callspec=types.SimpleNamespace(params=params),
                                     name=f"{where}[{impl}]")

    jobs_py, jobs_cpp, jobs_batched = (item("bench/test_concurrent_jobs.py", impl)
                                       for impl in ("python", "cpp", "cpp-batched"))
    phase_cpp, phase_py, leftover = item("bench/test_phases.py", "cpp"), item("bench/test_phases.py", "python"), \
        item("bench/test_phases.py")
    data_cpp, data_py = item("tests/test_data.py", "cpp"), item("tests/test_data.py", "python")
    items = [jobs_py, jobs_cpp, jobs_batched, phase_cpp, phase_py, leftover, data_cpp, data_py]
    assert conftest.library_free_first(items) == [jobs_py, phase_py, leftover, jobs_cpp, jobs_batched, phase_cpp,
                                                  data_cpp, data_py]
    mixed = [data_cpp, jobs_cpp, jobs_py]
    assert conftest.library_free_first(mixed) == mixed


def test_the_marked_tests_run_last_longest_work_first():
    """conftest's order: unmarked tests in their order, then the marked ones by their marker's cost_s, the largest
    first, those of equal cost (a once=True piece of work's tests) in their order."""
    def item(name: str, **marker):
        found = types.SimpleNamespace(args=(None,), kwargs=marker) if marker else None
        return types.SimpleNamespace(name=name, fixturenames=("benchmark",), path=Path(conftest.__file__).parents[1] / "conftest.py",
                                     get_closest_marker=lambda name: found if name == "beside" else None)

    config = types.SimpleNamespace(getoption=lambda name: False)  # a timed run: the bench order is left alone
    items = [item("a"), item("short", cost_s=8), item("gate-1", cost_s=25), item("b"), item("count", cost_s=55),
             item("gate-2", cost_s=25), item("unknown", once=True)]
    conftest.pytest_collection_modifyitems(config, items)
    assert [found.name for found in items] == ["a", "b", "count", "gate-1", "gate-2", "short", "unknown"]

"""The lane beside the tests (tests/beside.py): who does which work, and when; and that it runs only where nothing is
timed (conftest.py's nothing_timed). In-process, with a lane of each test's own."""

from __future__ import annotations

import threading
import time
import types

import pytest

import conftest
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

    assert conftest.nothing_timed(session(True, ("benchmark", "worker_for"), ("started_beside",)))
    assert conftest.nothing_timed(session(False, ("settings",), ("started_beside",)))
    assert not conftest.nothing_timed(session(False, ("benchmark", "worker_for"), ("started_beside",)))

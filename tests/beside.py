"""Work a test starts beside the rest of the run (conftest.py's `beside` marker): child processes or a function in a
thread that need only the built C++ library. As soon as it is built, one lane runs the marked tests' work one after
the other, in the order of the tests, and each test awaits its own. The test command keeps this machine's two cores
about 1.4 busy on average, and its three slowest checks are each a minute of one or two processes that need nothing
from the tests before them (docs/options.md#the-test-command); started all at once, they slowed the tests beside
them as much as they saved.

A marker's start(item, folder, library) returns {name: (output file, process)} (the lane waits for the processes)
or a function (the lane runs it); the test gets a Future of the processes or of the function's result."""

from __future__ import annotations

import queue
import shutil
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

# A test's node id: the Future of what its beside(start) marker started, until the test awaits it.
STARTED: dict[str, Future] = {}
_FOLDERS: list[Path] = []
_LANE: queue.Queue = queue.Queue()
_RUNNING: list[dict] = []  # the processes the lane waits on now, killed if the session ends first
_lane_started = threading.Lock()
_lane: threading.Thread | None = None


def start(items, library: str | None) -> None:
    """Queue the work of every item marked beside that is not queued yet, in the items' order."""
    global _lane
    for item in items:
        marker = item.get_closest_marker("beside")
        if marker is not None and item.nodeid not in STARTED:
            _FOLDERS.append(Path(tempfile.mkdtemp(prefix="phasebench-beside-")))
            STARTED[item.nodeid] = Future()
            _LANE.put((marker.args[0], item, _FOLDERS[-1], library, STARTED[item.nodeid]))
    with _lane_started:
        if _lane is None:
            _lane = threading.Thread(target=_run_lane, name="phasebench-beside", daemon=True)
            _lane.start()


def _run_lane() -> None:
    while True:
        begin, item, folder, library, future = _LANE.get()
        try:
            started = begin(item, folder, library)
            if callable(started):
                future.set_result(started())
                continue
            _RUNNING.append(started)
            for _, process in started.values():
                process.wait()
            _RUNNING.remove(started)
            future.set_result(started)
        except BaseException as error:  # noqa: BLE001  (pytest's skip and fail are BaseExceptions; result() raises them)
            future.set_exception(error)


def stop_all() -> None:
    """Kill the processes the lane still waits on (the lane, a daemon thread, ends with the session) and remove the
    folders."""
    for started in list(_RUNNING):
        for _, process in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    STARTED.clear()
    for folder in _FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)

"""Work a test hands to a second lane (conftest.py's `beside` marker): child processes, or a function, that need
only the built C++ library and nothing from the tests before them. Run one after the other, the test command's
tests kept this machine's two cores about 1.4 busy, and its slowest checks are such work
(docs/options.md#the-test-command).

conftest.py runs the marked tests last, in their order. As soon as the library is built, their work is queued in
that order and one lane thread takes it from the near end, while the other tests run; by the time the tests reach
the marked ones most of their work is done. A marked test whose work the lane has not taken does it itself; one
whose work the lane is doing meanwhile does the work at the far end of the queue, then awaits its own. (One lane,
not one thread per piece of work: started all at once, three such checks slowed the tests beside them as much as
they saved.)

A marker's start(item, folder, library) returns {name: (output file, process)} (whoever took the work waits for the
processes) or a function (whoever took the work runs it); the test gets a Future of the processes or of the
function's result. With once=True, the tests marked with the same start share one piece of work, started for the
first of them (a child run that several tests check)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Work:
    start: Callable
    item: Any  # the first test it was queued for
    folder: Path
    library: str | None
    future: Future = field(default_factory=Future)
    taken: bool = False


WORK: dict[str, Work] = {}  # by key(item)
_QUEUED: list[Work] = []  # in test order, not taken yet
_CHANGED = threading.Condition()
_RUNNING: list[dict] = []  # the processes being waited on now, killed if the session ends first
GROUPS: set[int] = set()  # process groups of child runs (tests/test_faults.py child_process), killed so too
_lane: threading.Thread | None = None


def key(item) -> str | None:
    """The key of the item's work: the test's node id, or its start function's name where the marker says once=True."""
    marker = item.get_closest_marker("beside")
    if marker is None:
        return None
    start = marker.args[0]
    return f"{start.__module__}.{start.__qualname__}" if marker.kwargs.get("once") else item.nodeid


def start(items, library: str | None) -> None:
    """Queue the work of every item marked beside that is not queued yet, in the items' order, and start the lane."""
    global _lane
    with _CHANGED:
        for item in items:
            name = key(item)
            if name is not None and name not in WORK:
                folder = Path(tempfile.mkdtemp(prefix="phasebench-beside-"))
                WORK[name] = Work(item.get_closest_marker("beside").args[0], item, folder, library)
                _QUEUED.append(WORK[name])
        if _lane is None:
            _lane = threading.Thread(target=_run_lane, name="phasebench-beside", daemon=True)
            _lane.start()
        _CHANGED.notify()


def result_for(item) -> Future:
    """The Future of the item's work, done: by this thread where the lane has not taken it; while the lane does it,
    this thread does the work at the far end of the queue."""
    work = WORK[key(item)]
    while True:
        with _CHANGED:
            if not work.taken:
                mine = work
            elif work.future.done() or not _QUEUED:
                mine = None
            else:
                mine = _QUEUED[-1]
            if mine is not None:
                mine.taken = True
                _QUEUED.remove(mine)
        if mine is None:
            work.future.exception()  # waits until it is done
            return work.future
        _do(mine)


def _run_lane() -> None:
    while True:
        with _CHANGED:
            while not _QUEUED:
                _CHANGED.wait()
            work = _QUEUED.pop(0)
            work.taken = True
        _do(work)


def _do(work: Work) -> None:
    try:
        started = work.start(work.item, work.folder, work.library)
        if callable(started):
            work.future.set_result(started())
            return
        _RUNNING.append(started)
        for _, process in started.values():
            process.wait()
        _RUNNING.remove(started)
        work.future.set_result(started)
    except BaseException as error:  # noqa: BLE001  (pytest's skip and fail are BaseExceptions; result() raises them)
        work.future.set_exception(error)


def stop_all() -> None:
    """Kill the processes still waited on (the lane, a daemon thread, ends with the session) and remove the
    folders."""
    for started in list(_RUNNING):
        for _, process in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    for group in list(GROUPS):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    with _CHANGED:
        _QUEUED.clear()
    for work in WORK.values():
        shutil.rmtree(work.folder, ignore_errors=True)
    WORK.clear()

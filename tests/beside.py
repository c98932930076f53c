"""Work a test hands to a second lane (tests/conftest.py's `beside` marker): child processes, or a function, that need
only the built C++ library and nothing from the tests before them. Run one after the other, the test command's
tests kept this machine's two cores about 1.4 busy, and its slowest checks are such work
(docs/options.md#the-test-command).

tests/conftest.py runs the marked tests last, the longest work first (the marker's cost_s, its rough seconds here). Their
work is queued in that order as soon as the library is built, and one lane thread takes it from the near end, while
the other tests run; by the time the tests reach the marked ones most of their work is done, and the lane ends on
short work, which is what the last tests wait on.
Only where the run times nothing (the test command, tests/conftest.py's nothing_timed): beside a timed case the work
would be inside its clock, so there each test does its own. A marked test whose work the lane has not taken does it itself; one
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


GROUPS: set[int] = set()  # process groups of child runs (tests/test_faults.py child_process), killed at the end


def key(item) -> str | None:
    """The key of the item's work: the test's node id, or its start function's name where the marker says once=True."""
    marker = item.get_closest_marker("beside")
    if marker is None:
        return None
    start = marker.args[0]
    return f"{start.__module__}.{start.__qualname__}" if marker.kwargs.get("once") else item.nodeid


class Lane:
    """The queue of marked tests' work and the thread that takes it from the near end (the module's LANE serves the
    session; tests/test_beside.py makes its own)."""

    def __init__(self):
        self.work: dict[str, Work] = {}  # by key(item)
        self.queued: list[Work] = []  # in test order, not taken yet
        self.changed = threading.Condition()
        self.running: list[dict] = []  # the processes being waited on now, killed if the session ends first
        self.thread: threading.Thread | None = None

    def start(self, items, library: str | None, lane: bool = True) -> None:
        """Queue the work of every item marked beside that is not queued yet, in the items' order, and start the
        lane where `lane` says so (else each test does its own work)."""
        with self.changed:
            for item in items:
                name = key(item)
                if name is None or name in self.work:
                    continue
                folder = Path(tempfile.mkdtemp(prefix="phasebench-beside-"))
                self.work[name] = Work(item.get_closest_marker("beside").args[0], item, folder, library)
                self.queued.append(self.work[name])
            if self.thread is None and lane:
                self.thread = threading.Thread(target=self._run, name="phasebench-beside", daemon=True)
                self.thread.start()
            self.changed.notify()

    def result_for(self, item) -> Future:
        """The Future of the item's work, done: by this thread where the lane has not taken it; while the lane does
        it, this thread does the work at the far end of the queue."""
        work = self.work[key(item)]
        while True:
            with self.changed:
                if not work.taken:
                    mine = work
                elif work.future.done() or not self.queued:
                    mine = None
                else:
                    mine = self.queued[-1]
                if mine is not None:
                    mine.taken = True
                    self.queued.remove(mine)
            if mine is None:
                work.future.exception()  # waits until it is done
                return work.future
            self._do(mine)

    def _run(self) -> None:
        while True:
            with self.changed:
                while not self.queued:
                    self.changed.wait()
                work = self.queued.pop(0)
                work.taken = True
            self._do(work)

    def _do(self, work: Work) -> None:
        try:
            started = work.start(work.item, work.folder, work.library)
            if callable(started):
                work.future.set_result(started())
                return
            self.running.append(started)
            for _, process in started.values():
                process.wait()
            self.running.remove(started)
            work.future.set_result(started)
        except BaseException as error:  # noqa: BLE001  (pytest's skip and fail are BaseExceptions; result() raises them)
            work.future.set_exception(error)

    def stop(self) -> None:
        """Kill the processes still waited on (the lane, a daemon thread, ends with the session), forget the work not
        taken, and remove the folders."""
        for started in list(self.running):
            for _, process in started.values():
                if process.poll() is None:
                    process.kill()
                    process.wait()
        with self.changed:
            self.queued.clear()
        for work in self.work.values():
            shutil.rmtree(work.folder, ignore_errors=True)
        self.work.clear()


LANE = Lane()
WORK = LANE.work
start = LANE.start
result_for = LANE.result_for


def stop_all() -> None:
    """The session's end: the lane stopped, and the child runs still going killed."""
    LANE.stop()
    for group in list(GROUPS):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)

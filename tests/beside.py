"""Work a test starts beside the rest of the run (conftest.py's `beside` marker): child processes or a function in a
thread that need only the built C++ library start as soon as it is built, and the test awaits them. The test
command keeps this machine's two cores about half busy (a load average of about 1 while it runs), and its three
slowest checks are each a minute of one or two processes that need nothing from the tests before them
(docs/options.md#the-test-command)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

# A test's node id: what its beside(start) marker's start(item, folder, library) returned, until the test awaits it:
# {name: (output file, process)} or a Future.
STARTED: dict[str, object] = {}
_FOLDERS: list[Path] = []


def start(items, library: str) -> None:
    for item in items:
        marker = item.get_closest_marker("beside")
        if marker is not None and item.nodeid not in STARTED:
            _FOLDERS.append(Path(tempfile.mkdtemp(prefix="phasebench-beside-")))
            STARTED[item.nodeid] = marker.args[0](item, _FOLDERS[-1], library)


def in_thread(function) -> Future:
    """function() in a thread of its own; its result, or what it raised (a failed assertion, a skip), from the
    Future. The thread is a daemon: a session that ends first does not wait for it."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(function())
        except BaseException as error:  # noqa: BLE001  (pytest's skip and fail are BaseExceptions; result() raises them)
            future.set_exception(error)

    threading.Thread(target=run, name=f"phasebench-beside-{function.__name__}", daemon=True).start()
    return future


def stop(started) -> None:
    """Kill what is still running of what start returned (a thread ends with the session)."""
    if isinstance(started, dict):
        for _, process in started.values():
            if isinstance(process, subprocess.Popen) and process.poll() is None:
                process.kill()
                process.wait()


def stop_all() -> None:
    for started in STARTED.values():
        stop(started)
    STARTED.clear()
    for folder in _FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)

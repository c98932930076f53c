"""Faults of one worker (docs/faults.md#faults-and-bad-input): a worker that dies or hangs is reported with the
signal or the timeout, a request interrupted by Ctrl-C kills its worker, the pool replaces a dead worker,
releases one no later case needs and starts no worker again whose start failed, a request the worker does not know
is an error reply, and a sanitizer report is reported in full.

Faults are made on purpose with the testing worker's knob (tests/knobs_worker.py): the "fault" request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import types
import typing
from pathlib import Path

import pytest

from phasebench.phase_round import CountDump, PhaseRound
from phasebench.spec import Workload
from phasebench.worker import protocol, server
from phasebench.worker.client import WorkerDied, WorkerError, WorkerPool
from tests.knobs_worker import Fault

KNOBS = {"module": "tests.knobs_worker"}  # a worker that answers the fault request


@pytest.mark.parametrize("kind, signal_name", [("segfault", "SIGSEGV"), ("abort", "SIGABRT"), ("kill", "SIGKILL")])
def test_a_dead_worker_is_reported_with_its_signal(new_worker, kind, signal_name):
    worker = new_worker("cpp", "cpu")(**KNOBS)
    try:
        with pytest.raises(WorkerDied, match=f"cpp worker on cpu died with signal {signal_name} during 'fault'"):
            worker.request(Fault(kind))
    finally:
        worker.stop()


def test_a_hung_worker_is_killed_at_the_timeout(new_worker):
    worker = new_worker("cpp", "cpu")(**KNOBS)
    try:
        with pytest.raises(WorkerDied, match=r"did not answer within 0\.5 s \(--round-timeout\) and was killed"):
            worker.request(Fault("hang"), timeout=0.5)
        assert not worker.alive()
    finally:
        worker.stop()


def test_an_interrupted_request_kills_its_worker(new_worker):
    """Ctrl-C while waiting for a reply (here from a timer, to this process only): the reply would come
    out of turn, so the worker is killed rather than left running or asked again."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    worker = new_worker("cpp", "cpu")(**KNOBS)
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            worker.request(Fault("hang"), timeout=60)
        assert not worker.alive()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        worker.stop()


def test_the_pool_replaces_a_dead_worker(new_worker):
    spawn = new_worker("cpp", "cpu")
    pool = WorkerPool(lambda impl, device, workload, library, slot: spawn(**KNOBS))
    try:
        first = pool.get("cpp", "cpu")
        with pytest.raises(WorkerDied):
            first.request(Fault("kill"))
        second = pool.get("cpp", "cpu")
        assert second.pid != first.pid and second.alive()
        second.run_phase("forward")
    finally:
        pool.stop_all()


@protocol.request_type("no_such_command", protocol.Ok)
class NoSuchCommand(protocol.Request):
    pass


@protocol.request_type("train", protocol.Run)
class TrainWithoutEpochs(protocol.Request):
    synchronize: bool


@protocol.request_type("phase", PhaseRound)
class PhaseWithRounds(protocol.Request):
    name: str
    rounds: int


def test_requests_the_worker_does_not_know_are_error_replies(new_worker):
    """An unknown command, a missing, unknown or mistyped field: each a WorkerError saying so, and the worker goes on."""
    worker = new_worker("cpp", "cpu")()
    try:
        for request, says in ((NoSuchCommand(), "unknown command 'no_such_command' (this worker knows: "),
                              (TrainWithoutEpochs(True), "'train': missing field 'epochs'"),
                              (PhaseWithRounds("noop", 2), "'phase': unknown field(s) rounds (it takes: name, checks)"),
                              (protocol.Phase(5), "'phase': field 'name' must be str, got int 5"),
                              (protocol.Train(1.5, True), "'train': field 'epochs' must be int, got float 1.5")):
            with pytest.raises(WorkerError) as refused:
                worker.request(request)
            assert says in str(refused.value)
        assert worker.run_phase("noop").ns >= 0
    finally:
        worker.stop()
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.decode_request("{", {})


def test_the_pool_releases_a_worker_no_later_case_needs(new_worker):
    spawn = new_worker("cpp", "cpu")
    pool = WorkerPool(lambda impl, device, workload, library, slot: spawn())
    try:
        first = pool.get("cpp", "cpu")
        pool.release("cpp", "cpu")
        assert not first.alive() and first.process.returncode == 0 and not pool.workers
        pool.release("cpp", "cpu")  # nothing to stop: no error
        assert pool.get("cpp", "cpu").pid != first.pid
    finally:
        pool.stop_all()


USE_AFTER_FREE = "#include <cstdio>\nint main() { int* p = new int[4]; delete[] p; std::printf(\"%d\", p[1]); }\n"


def test_a_sanitizer_report_is_reported_in_full(new_worker, tmp_path):
    """A worker whose log holds a sanitizer report fails with the whole report, whose cause is at its top, far
    more than the last lines of the log. The report is a real one, which a program built with AddressSanitizer
    writes into the worker's log (where a sanitized worker's own would go) before the worker dies."""
    program = tmp_path / "use-after-free"
    built = subprocess.run([os.environ.get("CXX", "g++"), "-fsanitize=address", "-g", "-x", "c++", "-",
                            "-o", str(program)], input=USE_AFTER_FREE, capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"no AddressSanitizer build here: {built.stderr.strip()}")
    worker = new_worker("cpp", "cpu")(**KNOBS)
    try:
        with open(worker.log.name, "a") as log:
            print("output before the report", file=log, flush=True)
            subprocess.run([str(program)], stdout=log, stderr=log, env=os.environ | {"ASAN_OPTIONS": ""})
        report = Path(worker.log.name).read_text().split("output before the report\n", 1)[1].strip()
        lines = report.splitlines()
        assert len(lines) > 30 and "ERROR: AddressSanitizer: heap-use-after-free" in lines[1], report
        assert lines[-1].endswith("==ABORTING")
        with pytest.raises(WorkerDied) as died:
            worker.request(Fault("abort"))
        message = str(died.value)
        assert message.startswith("cpp worker on cpu died with signal SIGABRT during 'fault'; its last output:\n")
        assert message.endswith("\n" + "\n".join(lines[1:])), message  # from its ERROR line to its last
    finally:
        worker.stop()


def test_a_replacement_that_fails_to_start_leaves_nothing_closed_twice():
    """A dead worker's replacement that dies during 'start' (a loaded machine past --round-timeout) fails its own
    case; the pool's teardown must not close the dead one a second time (its log is gone: FileNotFoundError)."""
    closes = []

    class DeadWorker:
        name, pid = "cpp worker on cpu", 4242  # what a replacement records of the worker it replaced
        process = types.SimpleNamespace(returncode=-9)

        def alive(self):
            return False

        def close(self):
            closes.append(self)

        def stop(self):
            self.close()

    def make(impl, device, workload, library, slot):
        if closes or made:
            raise WorkerDied("cpp worker on cpu did not answer within 6 s (--round-timeout) and was killed during 'start'")
        made.append(DeadWorker())
        return made[-1]

    made = []
    pool = WorkerPool(make)
    pool.get("cpp", "cpu")  # a worker that has died since
    with pytest.raises(WorkerDied):
        pool.get("cpp", "cpu")  # closes the dead one; its replacement fails to start
    pool.stop_all()
    assert closes == made


def test_a_worker_that_failed_to_start_is_not_started_again(new_worker):
    """A start that fails (here the C++ trainer refusing a loader it does not know) is remembered by the pool: the
    next case that asks for that worker fails at once with the first start's message, and no process is spawned for
    it. Another workload's worker is that worker's own, started when asked for."""
    spawn = new_worker("cpp", "cpu", loader="no-such-loader")
    spawned = []

    def make(impl, device, workload, library, slot):
        spawned.append(workload)
        return spawn()

    pool = WorkerPool(make)
    try:
        with pytest.raises(WorkerError) as first:
            pool.get("cpp", "cpu")
        assert "no-such-loader" in str(first.value)
        with pytest.raises(RuntimeError) as again:
            pool.get("cpp", "cpu")
        assert len(spawned) == 1, f"a failed start was started again: {len(spawned)} processes for one worker"
        assert str(first.value) in str(again.value) and "not started again" in str(again.value), str(again.value)
        with pytest.raises(WorkerError):
            pool.get("cpp", "cpu", Workload(2, 64))
        assert len(spawned) == 2
    finally:
        pool.stop_all()


def test_every_request_type_is_registered_with_its_handler_and_its_reply_type():
    """protocol.py declares each request with its reply's type; the worker answers each with the one method that says
    so (server.answers), and that method returns the reply's type."""
    def descendants(kind):  # a request may extend another (PhaseCalls is a Phase with a count)
        return [sub for child in kind.__subclasses__() for sub in (child, *descendants(child))]

    declared = {kind.cmd: kind for kind in descendants(protocol.Request) if kind.__module__ == protocol.__name__}
    handlers = server.Server.handlers()
    assert {cmd: kind for cmd, (kind, _) in handlers.items()} == declared
    for kind, name in handlers.values():
        assert typing.get_type_hints(getattr(server.Server, name))["return"] is kind.reply, (kind.cmd, name)


def test_a_reply_decodes_to_its_type_nested_records_included_and_nothing_else():
    """What the worker encodes the client decodes to the same typed reply (the count mode's dumps as CountDump), and a
    line with a field its reply type lacks, or without one it needs, is refused by name."""
    timed = PhaseRound(5, 6, 7, {"leftovers": 0}, dump=CountDump("/tmp/callgrind.out.1", "python/forward/1"))
    assert protocol.decode_reply(PhaseRound, json.loads(json.dumps(protocol.encode_reply(timed)))) == timed
    started = protocol.Started(1, ["forward"], 2, 30, 40, None, {}, {"trainer": 40},
                               count_floor_dumps=[CountDump("/tmp/callgrind.out.2", "python/noop/2")])
    assert protocol.decode_reply(protocol.Started, json.loads(json.dumps(protocol.encode_reply(started)))) == started
    with pytest.raises(protocol.ProtocolError, match="unknown field.* dump"):
        protocol.decode_reply(protocol.EnsembleReply, {"ns": 1, "cpu_ns": 1, "thread_cpu_ns": 1, "losses": [], "dump": ""})
    with pytest.raises(protocol.ProtocolError, match="lacks losses"):
        protocol.decode_reply(protocol.EnsembleReply, {"ns": 1, "cpu_ns": 1, "thread_cpu_ns": 1})


def test_a_world_that_replaces_a_broken_one_says_what_it_replaced():
    """A data-parallel world whose rank died is replaced on next use, and the replacement says which rank died and
    how, once (the case that takes it records it), as a pooled worker's does; a world replaced because another key
    was asked for replaced nothing."""
    from phasebench.worker.world import WorldPool

    class FakeWorld:
        def __init__(self, key):
            self.key, self.broken, self.replaced, self.stopped = key, False, None, False
            self.name = f"{key[0]} world of {key[2]} on {key[1]}"
            self.workers = [types.SimpleNamespace(pid=100 + rank, process=types.SimpleNamespace(returncode=None),
                                                  alive=lambda: True) for rank in range(key[2])]

        def alive(self):
            return all(worker.alive() for worker in self.workers)

        def stop(self):
            self.stopped = True

    pool = WorldPool(lambda *key: FakeWorld(key))
    key = ("cpp", "cpu", 2, None, None)
    first = pool.get(key)
    assert pool.take_replaced(first) is None
    first.workers[1] = types.SimpleNamespace(pid=101, process=types.SimpleNamespace(returncode=-11), alive=lambda: False)
    second = pool.get(key)
    assert second is not first
    assert pool.take_replaced(second) == "cpp world of 2 on cpu rank 1 (pid 101) had died with signal SIGSEGV"
    assert pool.take_replaced(second) is None
    other = pool.get(("python", "cpu", 2, None, None))
    assert second.stopped and pool.take_replaced(other) is None

"""Whether the machine could measure a paired case (phasebench/fitness.py; docs/method.md#a-machine-unfit-to-measure):
the scheduler's run and wait of a process's threads, a side's record across its blocks, and the worker's block of
calls (phase_calls), whose reads leave out the wait to be woken for the request."""

from __future__ import annotations

import argparse
import os
import time
from types import SimpleNamespace

import pytest

from phasebench.fitness import UNFIT_WAIT_SHARE, Fitness, run_and_wait_ns
from phasebench.phase_round import PhaseRound
from phasebench.worker import protocol, server

schedstat = pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/schedstat"), reason="no schedstat here")


@schedstat
def test_a_busy_thread_adds_its_run_time():
    ran_before, _ = run_and_wait_ns(os.getpid())
    deadline = time.thread_time() + 0.05
    while time.thread_time() < deadline:
        pass
    ran_after, _ = run_and_wait_ns(os.getpid())
    assert ran_after - ran_before >= 40e6  # 50 ms of this thread's CPU time, less the scheduler's rounding


def test_a_side_that_waited_a_quarter_as_long_as_it_ran_is_unfit():
    fit, unfit = Fitness(), Fitness()
    for side, waits in ((fit, (10, 20)), (unfit, (30, 40))):
        for wait in waits:
            side.begin()
            side.add(100, wait)
    assert fit.as_info()["fit"] and fit.wait_share == 0.15 and fit.as_info()["why"] is None
    assert unfit.wait_share == 0.35 > UNFIT_WAIT_SHARE
    assert not unfit.as_info()["fit"] and "waited for a core 35% as long as they ran" in unfit.as_info()["why"]
    assert len(unfit.load) == 2  # load per core at the first block's start and the last block's end
    # A thread that ended between a block's reads takes its time away from the sum: nothing negative is counted.
    ended = Fitness()
    ended.begin()
    ended.add(-5, -1)
    assert (ended.run_ns, ended.wait_ns, ended.wait_share) == (0, 0, None)


class StandInTrainer:
    def __init__(self):
        self.calls = []

    def run_phase(self, name: str) -> PhaseRound:
        self.calls.append(name)
        time.sleep(0.002)
        return PhaseRound(1000 * len(self.calls), 1000, 1000, {"leftovers": 0}, 0, 0)


def stand_in_worker() -> server.Server:
    worker = server.Server(argparse.Namespace(impl="python", language="python", library=None, count_out=None))
    worker.adapter = SimpleNamespace(trainer=StandInTrainer())
    return worker


def test_a_block_runs_its_calls_back_to_back_in_one_request():
    worker, replies = stand_in_worker(), []
    worker.serve([protocol.PhaseCalls("forward", calls=3).encode()], replies.append)
    assert replies[0].pop("ok"), replies
    block = protocol.decode_reply(protocol.PhaseBlock, replies[0])
    assert [timed.ns for timed in block.rounds] == [1000, 2000, 3000]
    assert block.wall_ns >= 3 * 2e6  # each call's untimed part included
    assert block.run_ns >= 0 and block.wait_ns >= 0


def test_a_block_of_no_calls_and_a_block_in_the_count_mode_are_refused():
    worker, replies = stand_in_worker(), []
    worker.serve([protocol.PhaseCalls("forward", calls=0).encode()], replies.append)
    assert not replies[0]["ok"] and "at least one" in replies[0]["error"]
    worker.counter = object()  # the instruction-count mode: one counted round a request
    worker.serve([protocol.PhaseCalls("forward", calls=2).encode()], replies.append)
    assert not replies[1]["ok"] and "one round a request" in replies[1]["error"]
    assert worker.adapter.trainer.calls == []


def test_the_worker_reads_run_and_wait_around_its_calls(monkeypatch):
    """The reads are the worker's own, once its thread runs the request: the first just before the first call, the
    second just after the last, so that the block's wait holds its calls' and not the wait to be woken for it."""
    worker, replies, events = stand_in_worker(), [], []
    readings = iter([(100, 10), (600, 35)])

    def read(pid):
        assert pid == os.getpid()
        events.append("read")
        return next(readings)

    monkeypatch.setattr(server, "run_and_wait_ns", read)
    trainer = worker.adapter.trainer
    trainer.run_phase = lambda name, run=trainer.run_phase: events.append("call") or run(name)
    worker.serve([protocol.PhaseCalls("forward", calls=2).encode()], replies.append)
    assert events == ["read", "call", "call", "read"] and replies[0].pop("ok")
    block = protocol.decode_reply(protocol.PhaseBlock, replies[0])
    assert (block.run_ns, block.wait_ns) == (500, 25)

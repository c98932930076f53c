"""What a case's counted rounds went through (docs/method.md#what-the-rounds-went-through;
phasebench/worker/threads.py), and the order they ran in (docs/method.md#what-is-measured; phasebench/plugin/cases.py
run_order): the readers on this process, the worker's two requests on a stand-in trainer, the run order drawn from a
seed, and one real short case per implementation in a child run that saves them."""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from phasebench.phase_round import PhaseRound
from phasebench.plugin import cases
from phasebench.plugin.cases import RUN_ORDER
from phasebench.repository import ROOT
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import TRAINING_PHASES
from phasebench.worker import protocol, server, threads
from tests.child_runs import _data_options, run_suite

PAIR = ("python", "cpp")


# -- the readers, on this process ---------------------------------------------------------------------------------

def test_the_clock_of_a_tid_is_that_threads_cpu_clock():
    """The per-thread CPU clock read by TID is the calling thread's own CPU clock (CLOCK_THREAD_CPUTIME_ID): read in
    turn, each reading lies between its neighbours, within a millisecond."""
    tid = threading.get_native_id()
    before = threads.thread_cpu_ns(tid)
    own = time.clock_gettime_ns(time.CLOCK_THREAD_CPUTIME_ID)
    after = threads.thread_cpu_ns(tid)
    assert before <= own <= after and after - before < 1_000_000, (before, own, after)


def test_a_thread_burning_cpu_shows_its_cpu_time_and_its_context_switches():
    go, burned, leave = threading.Event(), threading.Event(), threading.Event()

    def burn():
        go.wait()
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass
        for _ in range(5):
            time.sleep(0.001)  # a voluntary context switch each
        burned.set()
        leave.wait()

    burner = threading.Thread(target=burn, name="burner")
    burner.start()
    window = threads.Window()
    window.open()
    go.set()
    burned.wait(timeout=30)
    figures = window.close()
    leave.set()
    burner.join()
    by_tid = {thread["tid"]: thread for thread in figures["threads"]}
    burnt = by_tid[burner.native_id]
    assert 0.05 <= burnt["cpu_s"] < 5, burnt
    assert burnt["voluntary_ctxt_switches"] >= 5, burnt
    assert isinstance(burnt["nonvoluntary_ctxt_switches"], int) and burnt["nonvoluntary_ctxt_switches"] >= 0, burnt
    assert not burnt["started"] and not burnt["ended"] and burnt["pid"] == os.getpid() and burnt["name"]
    here = by_tid[threading.get_native_id()]
    assert here["cpu_s"] >= 0 and here["voluntary_ctxt_switches"] >= 1, here  # it waited for the burner


def test_a_thread_that_starts_or_ends_inside_the_window_says_so():
    ending, staying = threading.Event(), threading.Event()
    old = threading.Thread(target=ending.wait)
    old.start()
    window = threads.Window()
    window.open()
    # The new thread starts while the old one still lives: Linux reuses an ended thread's id at once.
    new = threading.Thread(target=staying.wait)
    new.start()
    ending.set()
    old.join()
    # join() returns when the thread's Python state is released, a moment before the kernel removes the thread.
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/self/task/{old.native_id}") and time.monotonic() < deadline:
        time.sleep(0.001)
    figures = window.close()
    staying.set()
    new.join()
    by_tid = {thread["tid"]: thread for thread in figures["threads"]}
    ended, started = by_tid[old.native_id], by_tid[new.native_id]
    assert ended["ended"] and ended["cpu_s"] is None and ended["voluntary_ctxt_switches"] is None, ended
    assert started["started"] and started["cpu_s"] >= 0 and started["voluntary_ctxt_switches"] >= 0, started


def test_the_steal_time_never_goes_back():
    first = threads.steal_s()
    time.sleep(0.02)
    assert 0 <= first <= threads.steal_s()


def test_the_migrations_readers_give_a_number_or_a_reason():
    tid = threading.get_native_id()
    counted = threads.sched_migrations(tid)
    assert counted is None or (isinstance(counted, int) and counted >= 0)
    counter = threads.perf_migrations_counter(tid)
    if isinstance(counter, str):
        assert counter.startswith("perf_event_open"), counter
    else:
        try:
            time.sleep(0.001)
            assert threads.read_counter(counter) >= 0
        finally:
            os.close(counter)


@pytest.mark.parametrize("reader", ["as found", "perf", "refused"])
def test_a_window_counts_migrations_or_says_why_not(monkeypatch, reader):
    """The scheduler's count where the kernel shows it, else a perf counter per thread, else null and the reason."""
    if reader != "as found":
        monkeypatch.setattr(threads, "sched_migrations", lambda tid: None)
    if reader == "refused":
        monkeypatch.setattr(threads, "perf_migrations_counter", lambda tid: "perf_event_open refused (EACCES: ...)")
    window = threads.Window()
    window.open()
    time.sleep(0.001)
    figures = window.close()
    counted = threads.migrations(figures["threads"], figures["cpu_migrations_source"])
    if counted is None:
        assert figures["cpu_migrations_source"] is None and figures["cpu_migrations_unavailable"], figures
        assert all(thread["cpu_migrations"] is None for thread in figures["threads"])
    else:
        assert counted >= 0 and figures["cpu_migrations_unavailable"] is None, figures
        assert figures["cpu_migrations_source"] in (("perf",) if reader == "perf" else ("sched", "perf")), figures
        assert all(isinstance(thread["cpu_migrations"], int) for thread in figures["threads"]), figures
    if reader == "refused":
        assert figures["cpu_migrations_unavailable"] == "perf_event_open refused (EACCES: ...)"
    assert window.counters == {}  # every perf counter closed


def test_the_hardware_counters_are_absent_without_a_cpu_pmu(monkeypatch, tmp_path):
    for name in ("software", "tracepoint"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(threads, "PMU_DEVICES", tmp_path)
    state, why = threads.hardware_counters()
    assert state == "absent" and "software, tracepoint" in why, why
    (tmp_path / "cpu").mkdir()
    assert threads.hardware_counters()[0] == "present"
    monkeypatch.setattr(threads, "PMU_DEVICES", tmp_path / "none")
    assert threads.hardware_counters()[0] == "absent"


def test_the_gc_counts_are_the_collections_gc_callbacks_see_start():
    starts = []

    def seen(phase, info):
        if phase == "start":
            starts.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        before = threads.gc_collections()
        for generation in (0, 1, 2):
            gc.collect(generation)
        for _ in range(5000):  # cycles: their allocations start collections of their own
            cycle = []
            cycle.append(cycle)
        after = threads.gc_collections()
    finally:
        gc.callbacks.remove(seen)
    assert [b - a for a, b in zip(before, after)] == [starts.count(generation) for generation in (0, 1, 2)]
    assert len(starts) >= 3


def test_the_canary_takes_time():
    assert threads.canary_ns() > 0


# -- the worker's requests --------------------------------------------------------------------------------------

class StandInTrainer:
    """A trainer whose every round runs one collection of generation 0."""

    def run_phase(self, name: str) -> PhaseRound:
        gc.collect(0)
        return PhaseRound(1000, 1000, 1000, {"leftovers": 0}, 0, 0)


def test_the_worker_reads_its_rounds_in_requests_of_their_own():
    worker = server.Server(argparse.Namespace(impl="python", language="python", library=None, count_out=None))
    worker.adapter = SimpleNamespace(trainer=StandInTrainer())
    replies = []
    # A window a failed case left open (the first RoundsOpen) is discarded by the next case's.
    lines = [protocol.RoundsClose(), protocol.Phase("forward"), protocol.RoundsOpen(), protocol.Phase("forward"),
             protocol.RoundsOpen(), protocol.Phase("forward"), protocol.Phase("forward"), protocol.RoundsClose(),
             protocol.Phase("forward")]
    worker.serve([request.encode() for request in lines], replies.append)
    assert [reply.pop("ok") for reply in replies] == [False] + [True] * 8, replies
    assert "'rounds_close' before 'rounds_open'" in replies[0]["error"]
    assert protocol.decode_reply(protocol.RoundsOpened, replies[4]).canary_ns > 0
    closed = protocol.decode_reply(protocol.RoundsClosed, replies[7])
    assert closed.canary_ns > 0 and closed.gc_collections[0] >= 2, closed  # the two rounds', at least
    assert threading.get_native_id() in {thread["tid"] for thread in closed.threads}
    assert worker.window is None  # the round after the close counts nothing


# -- the run order ------------------------------------------------------------------------------------------------

def orders(seed: int, impls: tuple[str, ...] = PAIR) -> dict[str, list[str]]:
    return {phase: cases.run_order(seed, phase, "cpu", "", list(impls), impls) for phase in TRAINING_PHASES}


def test_a_seed_draws_one_order_and_another_seed_another():
    assert orders(1) == orders(1)
    assert any(orders(1)[phase] != orders(2)[phase] for phase in TRAINING_PHASES)
    assert all(sorted(order) == sorted(PAIR) for order in orders(2).values())


def test_over_the_phases_each_implementation_runs_first_about_as_often():
    """What the fixed rotation guaranteed and the random order keeps: neither always runs first, or after the other."""
    three = ("python", "cpp", "python-tensor")
    for seed in range(30):
        for impls in (PAIR, three):
            firsts = [order[0] for order in orders(seed, impls).values()]
            counts = [firsts.count(impl) for impl in impls]
            assert max(counts) - min(counts) <= 1, (seed, impls, firsts)


def phase_items(phases=TRAINING_PHASES) -> list:
    """test_phase items as the collection makes them (implementation outermost), with a test of another kind between."""
    items = [SimpleNamespace(originalname="test_phase", stash={}, name=f"{phase}-{impl}",
                             callspec=SimpleNamespace(params={"phase": phase, "impl": impl, "device": "cpu",
                                                              "workload": DEFAULT_WORKLOAD}))
             for impl in PAIR for phase in phases]
    items.insert(3, SimpleNamespace(originalname="test_training_run", stash={}, name="run",
                                    callspec=SimpleNamespace(params={"impl": "python", "device": "cpu"})))
    return items


def test_the_order_moves_a_phases_cases_only_between_their_places():
    items = phase_items()
    places = {item.name: index for index, item in enumerate(items)}
    cases.run_orders(items, PAIR, seed=5)
    assert items[3].name == "run" and RUN_ORDER not in items[3].stash
    for phase, order in orders(5).items():
        slots = sorted(places[f"{phase}-{impl}"] for impl in PAIR)
        assert [items[slot].name for slot in slots] == [f"{phase}-{impl}" for impl in order]
        assert [items[slot].stash[RUN_ORDER] for slot in slots] == [0, 1]
    alone = phase_items(("loss",))  # a -k selection of one phase: its order is the same
    cases.run_orders(alone, PAIR, seed=5)
    assert [item.name for item in alone if item.name != "run"] == [f"loss-{impl}" for impl in orders(5)["loss"]]


def test_pytest_xdist_workers_take_their_controllers_seed():
    from phasebench.plugin import pytest_configure_node
    from phasebench.plugin.session import order_seed

    node = SimpleNamespace(workerinput={}, config=SimpleNamespace(phasebench=SimpleNamespace(order_seed=1234)))
    pytest_configure_node(node)
    assert order_seed(SimpleNamespace(getoption=lambda name: None, workerinput=node.workerinput)) == 1234
    assert order_seed(SimpleNamespace(getoption=lambda name: 7, workerinput=node.workerinput)) == 7
    assert 0 <= order_seed(SimpleNamespace(getoption=lambda name: None)) < 2**32


def collected(seed: int) -> list[str]:
    """The test_phase cases of the published pair on cpu, in the order a run with --order-seed `seed` runs them (a
    collection in a child pytest: no torch, no worker)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                           "bench/test_phases.py", "-k", "test_phase", "--impl", "python,cpp", "--device", "cpu",
                           "--order-seed", str(seed)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::test_phase[" in line]


def test_runs_with_one_seed_run_one_order_and_with_another_seed_another():
    first, again, other = collected(1), collected(1), collected(2)
    assert first == again and len(first) == 2 * len(TRAINING_PHASES)
    assert other != first and sorted(other) == sorted(first)


# -- one real short case per implementation, saved -----------------------------------------------------------------

SEED = 11
SAVED_PAIR = ("python", "python-foreach")  # two implementations of one phase that need no C++ library


@pytest.fixture(scope="module")
def saved(pytestconfig, tmp_path_factory) -> dict:
    """A child run of data_loading on cpu in two Python implementations (3 rounds after 1 warm-up, --order-seed
    SEED), as its --benchmark-json saved it."""
    out = tmp_path_factory.mktemp("round-records") / "result.json"
    run = run_suite("bench/test_phases.py", "-k", "test_phase and data_loading", "--impl", ",".join(SAVED_PAIR),
                    "--device", "cpu", "--rounds", "3", "--warmup-rounds", "1", "--order-seed", str(SEED),
                    f"--benchmark-json={out}", *_data_options(pytestconfig))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_case_saves_what_its_rounds_went_through(saved):
    infos = {bench["name"]: bench["extra_info"] for bench in saved["benchmarks"]}
    assert set(infos) == {f"test_phase[data_loading-{impl}-cpu]" for impl in SAVED_PAIR}, sorted(infos)
    for name, info in infos.items():
        live = [thread for thread in info["worker_threads"] if not thread["ended"]]
        (main,) = [thread for thread in live if thread["tid"] == thread["pid"]]
        assert main["cpu_s"] > 0, (name, main)
        for thread in live:
            for count in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                assert isinstance(thread[count], int) and thread[count] >= 0, (name, thread)
            assert thread["cpu_s"] >= 0 and thread["name"], (name, thread)
        assert info["canary_start_s"] > 0 and info["canary_end_s"] > 0, name
        assert isinstance(info["gc_collections"], int) and info["gc_collections"] >= 0, name
        assert len(info["gc_collections_by_generation"]) == 3
        assert sum(info["gc_collections_by_generation"]) == info["gc_collections"]
        assert info["steal_s"] >= 0 and info["rounds_window_s"] > 0, name
        if info["cpu_migrations"] is None:
            assert info["cpu_migrations_unavailable"], name
        else:
            assert info["cpu_migrations"] >= 0 and info["cpu_migrations_source"] in ("sched", "perf"), name
        assert info["hardware_counters"] in ("absent", "present") and info["hardware_counters_reason"], name
    assert len({info["worker_threads"][0]["pid"] for info in infos.values()}) == 2  # a worker each


def test_the_saved_order_is_the_seeds(saved):
    assert saved["machine_info"]["phasebench"]["order_seed"] == SEED
    places = {bench["extra_info"]["implementation"]: bench["extra_info"]["order"] for bench in saved["benchmarks"]}
    drawn = cases.run_order(SEED, "data_loading", "cpu", "", list(SAVED_PAIR), SAVED_PAIR)
    assert places == {impl: place for place, impl in enumerate(drawn)}

"""A session's lifetime through the C ABI (cpp/include/phasebench.h): the library keeps none of the caller's strings
once a call has returned, a session that a call is using cannot be destroyed under it (refcounted sessions), and a
session's round checks (pb_set_round_checks) are on until it turns them off, and on again when it says so.

The call in flight is held open by the testing build's hold (pb_testing_hold_phase, cpp/include/phasebench_testing.h):
pb_train waits inside its first phase until the test releases it, and the test knows it waits (pb_testing_await_hold)
before it calls pb_destroy. No sleep orders the two threads. The calls run in a child process (this file run as a
script), so that a crash fails the tests instead of taking the suite down."""

from __future__ import annotations

import ctypes
import json
import sys
import threading

import pytest

from phasebench.worker import cpp_lib
from tests.c_abi_calls import PB_ERROR, get_batch, last_error, options, run_child, trainer_of, with_fields

SLOW_NS = 100_000_000  # the slow knob's spin if the library read a changed phase name: far above 3 forward passes
HOLD_TIMEOUT_MS = 120_000  # how long the test waits for pb_train to reach its held phase: a bound, not a pace
HELD_STEPS = 3
CHECKED_PHASES = ("data_loading", "forward", "backward", "param_update")


def _round(lib, handle, phase: str) -> dict:
    """One pb_run_phase round, its pb_result as the bindings read it, with ndim and finite as the library set them."""
    ns, result = ctypes.c_int64(), cpp_lib.Result()
    status = lib.pb_run_phase(handle, phase.encode(), ctypes.byref(ns), ctypes.byref(result))
    assert status == cpp_lib.PB_OK, last_error(lib)
    return cpp_lib._product(result) | {"ndim": result.ndim, "finite": result.finite, "cpu_ns": result.cpu_ns,
                                       "thread_cpu_ns": result.thread_cpu_ns, "ns": ns.value}


def round_checks(lib, root: str) -> dict:
    """A session's rounds with its checks on (a new session's), off, and on again; and the bindings' run_phase,
    which switches them as a phase request asks."""
    trainer = cpp_lib.CppTrainer(lib, root, log_path="/dev/null")
    handle = trainer.handle
    seen = {"on": {phase: _round(lib, handle, phase) for phase in CHECKED_PHASES}}
    seen["set_off"] = lib.pb_set_round_checks(handle, 0)
    seen["off"] = {phase: _round(lib, handle, phase) for phase in CHECKED_PHASES}
    seen["set_on"] = lib.pb_set_round_checks(handle, 1)
    seen["on_again"] = {phase: _round(lib, handle, phase) for phase in CHECKED_PHASES}
    # The bindings: a round asked without its checks turns them off first, the next one with them back on.
    seen["binding"] = [trainer.run_phase("forward", checks=False).product, trainer.run_phase("forward").product]
    trainer.close()
    return seen


def session_checks(library: str, root: str) -> None:
    """The child process (`library`: the testing build): one JSON line of what it saw."""
    lib = cpp_lib.load_testing(library)
    seen = {}
    # The caller's strings: pb_options.loader says "published" at pb_create, and the slow knob's phase names no
    # phase when pb_testing_slow_phase is called; the caller then writes "prefetch" and "forward" into the same
    # memory. A library that kept either pointer would fail pb_get_batch (an unknown loader) or slow forward in
    # pb_train.
    loader = ctypes.create_string_buffer(b"published", 32)
    name = ctypes.create_string_buffer(b"no_such_phase", 32)
    opts = with_fields(options(f"{root}/MNIST/raw"), loader=ctypes.cast(loader, ctypes.c_char_p))
    handle = cpp_lib._SESSION()
    assert lib.pb_create(ctypes.byref(opts), ctypes.byref(handle)) == cpp_lib.PB_OK, last_error(lib)
    assert lib.pb_testing_slow_phase(handle, name, SLOW_NS, 0.0) == cpp_lib.PB_OK, last_error(lib)
    loader.value, name.value = b"prefetch", b"forward"
    status = get_batch(lib, handle, 0, 64)
    seen["batch_after_the_loader_string_changed"] = (status, last_error(lib) if status else "")
    trainer = trainer_of(lib, handle)
    seen["forward_ns_for_3_steps"] = trainer.train(1, True, max_steps=3)[0]["forward"]

    # A session in use: pb_train on another thread (ctypes releases the GIL for the call) waits inside its first
    # phase; pb_destroy from this thread is refused while it does, and succeeds once the run has returned.
    assert lib.pb_testing_hold_phase(handle, b"optimizer_init") == cpp_lib.PB_OK, last_error(lib)
    outcome = {}

    def train():
        try:
            outcome["steps"] = trainer.train(1, False, max_steps=HELD_STEPS)[1]
        except cpp_lib.CppError as error:
            outcome["error"] = str(error)

    runner = threading.Thread(target=train)
    runner.start()
    waiting = ctypes.c_int32()
    assert lib.pb_testing_await_hold(handle, HOLD_TIMEOUT_MS, ctypes.byref(waiting)) == cpp_lib.PB_OK, last_error(lib)
    seen["held_inside_train"] = bool(waiting.value)
    seen["destroy_during_train"] = (lib.pb_destroy(handle), last_error(lib))
    assert lib.pb_testing_release_hold(handle) == cpp_lib.PB_OK, last_error(lib)
    runner.join()
    seen["train_outcome"] = outcome
    seen["destroy_after_train"] = (lib.pb_destroy(handle), last_error(lib))
    seen["round_checks"] = round_checks(lib, root)
    print(json.dumps(seen), flush=True)


@pytest.fixture(scope="module")
def session_seen(testing_library, settings) -> dict:
    # One intra-op thread: with two, on this 2-core machine at load 5-6, 3 steps' forward took 180-580 ms (spinning
    # OpenMP threads) against the 3 × SLOW_NS that a library keeping the phase's pointer would add; with one, 18-34 ms.
    return run_child("tests.test_c_abi_sessions", testing_library, settings.source.root, env={"OMP_NUM_THREADS": "1"})


def test_the_library_keeps_no_caller_string(session_seen):
    seen = session_seen
    assert seen["batch_after_the_loader_string_changed"] == [cpp_lib.PB_OK, ""], (
        f"pb_get_batch after the caller changed pb_options.loader: {seen['batch_after_the_loader_string_changed']}: "
        f"the library read it after pb_create returned")
    assert seen["forward_ns_for_3_steps"] < 3 * SLOW_NS, (
        f"forward took {seen['forward_ns_for_3_steps']} ns in 3 steps: the library read pb_testing_slow_phase's "
        f"phase after the call returned, from memory the caller had changed since")


def test_a_session_in_use_is_not_destroyed_under_its_call(session_seen):
    seen = session_seen
    assert seen["held_inside_train"], f"pb_train did not reach its held phase in {HOLD_TIMEOUT_MS} ms"
    status, message = seen["destroy_during_train"]
    assert status == PB_ERROR and "session busy" in message, f"pb_destroy during pb_train: {status}, {message!r}"
    assert seen["train_outcome"] == {"steps": HELD_STEPS}, seen["train_outcome"]
    assert seen["destroy_after_train"][0] == cpp_lib.PB_OK, seen["destroy_after_train"]


def _checks_of(product: dict) -> dict:
    return {name: product[name] for name in cpp_lib._CHECKS}


def _proves_its_work(phase: str, product: dict) -> None:
    from bench.test_phases import work_problems  # what test_phase checks of each round

    assert work_problems(phase, product) == [], (phase, product)
    assert product["leftovers"] == 0 and product["finite"] == 1, (phase, product)
    assert phase != "data_loading" or product["batch"] is not None, product


def test_a_sessions_round_checks_turn_off_and_on_again(session_seen):
    """pb_set_round_checks: a new session's rounds prove their work; with the checks off a round runs and reports no
    product and no leftovers (every check unset: -1 or NaN, no shape, finite -1), only its CPU times; turned on
    again, the rounds prove their work as before (what the first rounds after it left is released all the same)."""
    seen = session_seen["round_checks"]
    assert seen["set_off"] == seen["set_on"] == cpp_lib.PB_OK, seen
    for phase in CHECKED_PHASES:
        _proves_its_work(phase, seen["on"][phase])
        _proves_its_work(phase, seen["on_again"][phase])
        off = seen["off"][phase]
        assert _checks_of(off) == dict.fromkeys(cpp_lib._CHECKS), (phase, off)
        assert (off["shape"], off["ndim"], off["finite"], off["loss"]) == ([], 0, -1, None), (phase, off)
        assert off["ns"] > 0 and off["cpu_ns"] > 0 and off["thread_cpu_ns"] > 0, (phase, off)
    without, again = seen["binding"]
    assert without == {"checks": "off"} and again["leftovers"] == 0, seen["binding"]
    _proves_its_work("forward", again)


if __name__ == "__main__":
    session_checks(*sys.argv[1:])

"""The C ABI (cpp/include/phasebench.h, and the testing build's cpp/include/phasebench_testing.h) never crashes its
caller (docs/faults.md#faults-and-bad-input).

A null, made-up or destroyed handle, an unknown phase, a wrong buffer length and bad options each
give PB_ERROR and a message, and the session still works afterwards. The destroyed handle is probed
while a newer session lives where it lived (in its slot; with plain pointers, most likely at its
address): a stale handle must be refused even then, and must not reach the newer session. The calls
go through ctypes, as the C++ worker makes them, in a child process (this file run as a script): a
crash there fails these tests with its signal instead of taking the suite down. The other tests check that every
function of the headers is bound, probed and wrapped in guarded(), and that the library builds
without warnings under -Wall -Wextra.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from phasebench.worker import build, cpp_lib
from phasebench.worker.client import ROOT, describe_exit
from tests.knobs_worker import slow_cpp

PB_ERROR = 1  # cpp/include/phasebench.h
PARAM_COUNT = 21840  # the Net's parameters
EPOCH_BATCHES = 938
ALL_SIGNATURES = cpp_lib._SIGNATURES | cpp_lib.TESTING_SIGNATURES
SESSION_FUNCTIONS = [name for name in cpp_lib._SIGNATURES if name not in ("pb_create", "pb_abi_version")]
CPP = ROOT / "cpp"
BATCH = 64


def _call_with_nulls(lib, name: str, handle) -> int:
    """`name` with this handle and every other argument null or zero."""
    argtypes = ALL_SIGNATURES[name][1:]
    numbers = (ctypes.c_int32, ctypes.c_int64, ctypes.c_double)
    return getattr(lib, name)(handle, *(0 if t in numbers else None for t in argtypes))


def _create(lib, options, out=True) -> int:
    return lib.pb_create(options and ctypes.byref(options), ctypes.byref(ctypes.c_void_p()) if out else None)


def _options(raw_dir: str, device=b"cpu", log_path=None) -> cpp_lib.Options:
    return cpp_lib.Options(raw_dir and raw_dir.encode(), device, log_path, 0, 1, 0.5, 1, BATCH, b"published")


def _with(options: cpp_lib.Options, **fields) -> cpp_lib.Options:
    for name, value in fields.items():
        setattr(options, name, value)
    return options


def _run_phase(lib, handle, phase) -> int:
    return lib.pb_run_phase(handle, phase, ctypes.byref(ctypes.c_int64()), ctypes.byref(cpp_lib.Result()))


def _get_batch(lib, handle, index: int, capacity: int) -> int:
    images = (ctypes.c_float * (BATCH * cpp_lib.IMAGE_FLOATS))()
    labels = (ctypes.c_int64 * BATCH)()
    return lib.pb_get_batch(handle, index, images, labels, capacity, ctypes.byref(ctypes.c_int64()))


def _ensemble_step(lib, handle, capacity: int, losses=True) -> int:
    out = [ctypes.c_int64() for _ in range(3)]
    return lib.pb_ensemble_step(handle, *map(ctypes.byref, out), (ctypes.c_double * max(capacity, 1))() if losses else None,
                                capacity)


def _train(lib, handle, capacity: int) -> int:
    totals, steps, loop_ns, cpu_ns = (ctypes.c_int64 * capacity)(), ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
    return lib.pb_train(handle, 1, 1, 0, totals, capacity, ctypes.byref(steps), ctypes.byref(loop_ns), ctypes.byref(cpu_ns))


@dataclass(frozen=True)
class Context:
    lib: ctypes.CDLL
    live: ctypes.c_void_p  # a working session
    dead: ctypes.c_void_p  # a destroyed one
    newer: ctypes.c_void_p  # the session made right after `dead` was destroyed, in its place
    raw_dir: str  # the suite's data


def _probes() -> dict:
    """name -> (probe(context) -> status, what the message must say; None: the call must succeed)."""
    probes = {}
    for name in SESSION_FUNCTIONS:
        probes[f"{name}-null-handle"] = (lambda c, name=name: _call_with_nulls(c.lib, name, None),
                                         "null session handle")
    # pb_destroy last: a stale handle that reached the newer session would destroy it.
    for name in sorted(SESSION_FUNCTIONS, key=lambda name: name == "pb_destroy"):
        probes[f"{name}-destroyed-handle"] = (lambda c, name=name: _call_with_nulls(c.lib, name, c.dead),
                                              "unknown or destroyed session handle")
    floats = ctypes.c_float * (PARAM_COUNT + 1)
    probes |= {
        "made-up-handle": (lambda c: _run_phase(c.lib, ctypes.c_void_p(0xDEADBEEF), b"forward"),
                           "unknown or destroyed session handle"),
        "made-up-handle-near-a-live-one": (lambda c: _run_phase(c.lib, ctypes.c_void_p(c.live.value + (1 << 32)),
                                                                b"forward"), "unknown or destroyed session handle"),
        "abi-version": (lambda c: c.lib.pb_abi_version(ctypes.byref(ctypes.c_int32())), None),
        "abi-version-null-output": (lambda c: c.lib.pb_abi_version(None), "null version output"),
        "create-null-options": (lambda c: _create(c.lib, None), "null options"),
        # Options as a caller built from other sources would pass them.
        "create-other-struct-size": (lambda c: _create(c.lib, _with(_options(c.raw_dir), struct_size=8)),
                                     "pb_options of 8 bytes, this library's has"),
        "create-unknown-loader": (lambda c: _create(c.lib, _with(_options(c.raw_dir), loader=b"prefetch")),
                                  "unknown loader 'prefetch': published or batched"),
        "create-zero-width": (lambda c: _create(c.lib, _with(_options(c.raw_dir), width=0)),
                              "width and batch size must be at least 1, got 0 and 64"),
        "create-null-output": (lambda c: _create(c.lib, _options(c.raw_dir), out=False), "null output handle"),
        "create-null-data-root": (lambda c: _create(c.lib, _options(None)), "null data_root"),
        "create-missing-data": (lambda c: _create(c.lib, _options("/nonexistent")),
                                "/nonexistent/train-images-idx3-ubyte: cannot read (No such file or directory)"),
        "create-unknown-device": (lambda c: _create(c.lib, _options(c.raw_dir, device=b"tpu9")),
                                  "Invalid device string: 'tpu9'"),
        "create-unwritable-log": (lambda c: _create(c.lib, _options(c.raw_dir, log_path=b"/nonexistent/x.log")),
                                  "/nonexistent/x.log: cannot open log file"),
        "unknown-phase": (lambda c: _run_phase(c.lib, c.live, b"warp_drive"), "unknown phase 'warp_drive'"),
        "null-phase-name": (lambda c: _run_phase(c.lib, c.live, None), "null phase name"),
        "get-params-short-buffer": (lambda c: c.lib.pb_get_params(c.live, floats(), PARAM_COUNT - 1),
                                    f"parameter buffer holds {PARAM_COUNT - 1} floats, the model has {PARAM_COUNT}"),
        "set-params-long-buffer": (lambda c: c.lib.pb_set_params(c.live, floats(), PARAM_COUNT + 1),
                                   f"parameter buffer holds {PARAM_COUNT + 1} floats, the model has {PARAM_COUNT}"),
        "phase-names-short-buffer": (lambda c: c.lib.pb_phase_names(c.live, ctypes.create_string_buffer(8), 8),
                                     "buffer of 8 bytes"),
        "run-phase-names-short-buffer": (
            lambda c: c.lib.pb_run_phase_names(c.live, ctypes.create_string_buffer(8), 8), "buffer of 8 bytes"),
        "layout-zero-buffer": (lambda c: c.lib.pb_param_layout(c.live, ctypes.create_string_buffer(1), 0),
                               "buffer of 0 bytes"),
        "train-short-phase-buffer": (lambda c: _train(c.lib, c.live, 2), "phase time buffer of 2"),
        "batch-short-buffer": (lambda c: _get_batch(c.lib, c.live, 0, 10), "batch of 64 images, room for 10"),
        "batch-past-the-epoch": (lambda c: _get_batch(c.lib, c.live, EPOCH_BATCHES, 64),
                                 f"batch {EPOCH_BATCHES} of an epoch of {EPOCH_BATCHES} batches"),
        # Ensembles, in this order on the live session: before one exists, bad sizes, then one of 2 members.
        "ensemble-step-before-create": (lambda c: _ensemble_step(c.lib, c.live, 4),
                                        "no ensemble: call pb_ensemble_create first"),
        "ensemble-params-before-create": (lambda c: c.lib.pb_ensemble_get_params(c.live, 0, floats(), PARAM_COUNT),
                                          "member 0 of an ensemble of 0"),
        "ensemble-create-zero-models": (lambda c: c.lib.pb_ensemble_create(c.live, 0),
                                        "an ensemble of 0 models: from 1 to 4096"),
        "ensemble-create-too-many-models": (lambda c: c.lib.pb_ensemble_create(c.live, 1 << 40),
                                            f"an ensemble of {1 << 40} models: from 1 to 4096"),
        "ensemble-create": (lambda c: c.lib.pb_ensemble_create(c.live, 2), None),
        "ensemble-step-short-loss-buffer": (lambda c: _ensemble_step(c.lib, c.live, 1), "loss buffer of 1, 2 needed"),
        "ensemble-step-null-losses": (lambda c: _ensemble_step(c.lib, c.live, 2, losses=False), "null loss buffer"),
        "ensemble-params-past-the-last-member": (
            lambda c: c.lib.pb_ensemble_get_params(c.live, 2, floats(), PARAM_COUNT), "member 2 of an ensemble of 2"),
        "ensemble-params-short-buffer": (lambda c: c.lib.pb_ensemble_get_params(c.live, 1, floats(), PARAM_COUNT - 1),
                                         f"parameter buffer holds {PARAM_COUNT - 1} floats, the model has {PARAM_COUNT}"),
        "ensemble-step": (lambda c: _ensemble_step(c.lib, c.live, 2), None),
        "ensemble-destroy": (lambda c: c.lib.pb_ensemble_destroy(c.live), None),
        "ensemble-step-after-destroy": (lambda c: _ensemble_step(c.lib, c.live, 2),
                                        "no ensemble: call pb_ensemble_create first"),
        # After all of the above (pb_destroy with the stale handle among them), both sessions still train.
        "session-still-works": (lambda c: _run_phase(c.lib, c.live, b"train_step"), None),
        "newer-session-still-works": (lambda c: _run_phase(c.lib, c.newer, b"train_step"), None),
    }
    return probes


PROBES = _probes()


def run_probes(library: str, root: str) -> None:
    """The child process: one JSON line before and one after each probe, so a crash names its probe."""
    lib = cpp_lib.load(library)
    live = cpp_lib.CppTrainer(lib, root)
    destroyed = cpp_lib.CppTrainer(lib, root)  # made while `live` lives, so it cannot have live's address
    dead = ctypes.c_void_p(destroyed.handle.value)
    destroyed.close()
    newer = cpp_lib.CppTrainer(lib, root)  # takes what `destroyed` freed
    context = Context(lib, live.handle, dead, newer.handle, f"{root}/MNIST/raw")
    for name, (probe, _) in PROBES.items():
        print(json.dumps({"probe": name}), flush=True)
        status = probe(context)
        print(json.dumps({"probe": name, "status": status, "message": lib.pb_last_error().decode()}), flush=True)
    live.close()
    newer.close()


@pytest.fixture(scope="module")
def probe_results(cpp_library, settings) -> tuple[dict, str | None]:
    """({probe: (status, message)}, how the child died or None)."""
    child = subprocess.run([sys.executable, "-m", "tests.test_c_abi", cpp_library, settings.source.root],
                           cwd=ROOT, env=os.environ | build.sanitizer_runtime_env(), capture_output=True, text=True,
                           timeout=300)
    results, last = {}, None
    for line in child.stdout.splitlines():
        record = json.loads(line)
        last = record["probe"]
        if "status" in record:
            results[last] = (record["status"], record["message"])
    death = None
    if child.returncode != 0:
        tail = "\n".join(child.stderr.strip().splitlines()[-15:])
        death = f"the probe process died with {describe_exit(child.returncode)} in probe '{last}':\n{tail}"
    return results, death


@pytest.mark.parametrize("probe", PROBES)
def test_c_abi_refuses_bad_calls(probe, probe_results):
    results, death = probe_results
    if probe not in results:
        pytest.fail(death or f"probe '{probe}' did not run")
    status, message = results[probe]
    expected = PROBES[probe][1]
    if expected is None:
        assert status == cpp_lib.PB_OK, f"{probe}: PB_ERROR: {message}"
    else:
        assert status == PB_ERROR, f"{probe}: PB_OK, expected an error saying {expected!r}"
        assert expected in message, f"{probe}: message {message!r} does not say {expected!r}"


def _declared(header: str) -> set[str]:
    return set(re.findall(r"^(?:int|const char\*) (pb_\w+)\(", (CPP / "include" / header).read_text(), re.M))


def test_every_header_function_is_bound_and_probed():
    """The production ABI and the testing build's, each bound by its own table: no test knob in phasebench.h."""
    assert _declared("phasebench.h") == set(cpp_lib._SIGNATURES) | {"pb_last_error"}
    assert _declared("phasebench_testing.h") == set(cpp_lib.TESTING_SIGNATURES)


def test_every_extern_c_function_catches_everything():
    """Each C ABI function, in whichever source of cpp/src defines it, runs its body inside guarded(), which turns
    every exception into PB_ERROR; pb_last_error only returns a thread-local string's c_str(). No function of the
    ABI is defined outside an extern "C" block."""
    definitions, starts = {}, {}
    for path in sorted((CPP / "src").glob("*.cpp")):
        source = path.read_text()
        outside, *blocks = source.split('extern "C" {')
        for name in re.findall(r"^\w[\w\s*]*\b(pb_\w+)\([^)]*\)\s*\{", outside, re.M):
            starts[name] = f"{path.name}, outside extern \"C\""
        for block in blocks:
            for name, start in re.findall(r"^int (pb_\w+)\([^)]*\)\s*\{\s*(\w+ \w+)", block, re.M):
                assert name not in definitions, f"{name} defined twice"
                definitions[name], starts[name] = start, path.name
    # The instruction-count bracket (phasebench_count.h) holds no session and throws nothing: Valgrind's client
    # requests and a label's copy, outside guarded() so that the bracket adds as few instructions as it can.
    count = set(re.findall(r"^(?:int|void) (pb_count_\w+)\(", (CPP / "include" / "phasebench_count.h").read_text(), re.M))
    assert count and {name for name in starts if name.startswith("pb_count_")} <= count
    starts = {name: where for name, where in starts.items() if name not in count}
    assert set(starts) == set(ALL_SIGNATURES), f"C ABI functions this test cannot find, or misplaced: {starts}"
    unguarded = [f"{name} ({starts[name]})" for name in ALL_SIGNATURES if definitions.get(name) != "return guarded"]
    assert not unguarded, f"not wrapped in guarded(): {unguarded}"


def test_the_library_builds_without_warnings(cpp_library):
    """phasebench/worker/build.py compiles with -Wall -Wextra and keeps whatever the compiler printed beside the library."""
    warnings = Path(cpp_library).parent / "warnings.txt"
    assert not warnings.exists(), f"the C++ build printed warnings:\n{warnings.read_text()}"


SLOW_NS = 100_000_000  # the slow knob's spin in session_checks: far above three forward passes here
BUSY_STEPS = 400  # a training run that is still going when pb_destroy is called from another thread


def session_checks(library: str, root: str) -> None:
    """The child process for the tests of session_seen (`library`: the testing build): one JSON line of what it saw."""
    lib = cpp_lib.load_testing(library)
    seen = {}
    # The caller's strings: pb_options.loader says "published" at pb_create, and the slow knob's phase names no
    # phase when pb_testing_slow_phase is called; the caller then writes "prefetch" and "forward" into the same
    # memory. A library that kept either pointer would fail pb_get_batch (an unknown loader) or slow forward in
    # pb_train.
    loader = ctypes.create_string_buffer(b"published", 32)
    name = ctypes.create_string_buffer(b"no_such_phase", 32)
    options = _with(_options(f"{root}/MNIST/raw"), loader=ctypes.cast(loader, ctypes.c_char_p))
    handle = ctypes.c_void_p()
    assert lib.pb_create(ctypes.byref(options), ctypes.byref(handle)) == cpp_lib.PB_OK, lib.pb_last_error()
    assert lib.pb_testing_slow_phase(handle, name, SLOW_NS, 0.0) == cpp_lib.PB_OK, lib.pb_last_error()
    loader.value, name.value = b"prefetch", b"forward"
    status = _get_batch(lib, handle, 0, BATCH)
    seen["batch_after_the_loader_string_changed"] = (status, lib.pb_last_error().decode() if status else "")
    trainer = cpp_lib.CppTrainer.__new__(cpp_lib.CppTrainer)
    trainer.lib, trainer.handle = lib, handle
    totals, steps, _, _ = trainer.train(1, True, max_steps=3)
    seen["forward_ns_for_3_steps"] = totals["forward"]
    seen["phase_names"], seen["run_totals"] = trainer.phase_names(), totals
    # The slow knob as the testing worker sets it (tests/knobs_worker.py's slow_cpp), through pb_testing_slow_phase;
    # then its bad calls: bad values, a null, destroyed or made-up handle (the last call costs nothing: noop, 0 ns).
    slowed = cpp_lib.CppTrainer(lib, root, log_path="/dev/null")
    slow_cpp(library, slowed, "loss", slow_ns=SLOW_NS)
    seen["slowed_loss_ns"] = slowed.run_phase("loss").ns
    seen["slowed_run_loss_ns"] = slowed.train(1, True, max_steps=2)[0]["loss"]
    live = slowed.handle
    calls = {"null-handle": (None, b"noop", 0, 0.0), "null-phase": (live, None, 0, 0.0), "negative-ns": (live, b"forward", -1, 0.0),
             "negative-fraction": (live, b"forward", 0, -0.5), "accepted": (live, b"noop", 0, 0.0)}
    seen["testing_probes"] = {}
    for probe, args in calls.items():
        seen["testing_probes"][probe] = [lib.pb_testing_slow_phase(*args), lib.pb_last_error().decode()]
    status = lib.pb_testing_slow_work(live, b"forward", -1)
    seen["testing_probes"]["negative-work"] = [status, lib.pb_last_error().decode()]
    slowed.close()
    # A session in use: pb_destroy from this thread while another thread is inside pb_train (ctypes releases the
    # GIL for the call) is refused, and the run finishes; once it has returned, pb_destroy succeeds.
    started = threading.Event()
    outcome = {}

    def train():
        started.set()
        outcome["train"] = trainer.train(1, False, max_steps=BUSY_STEPS)[1]

    runner = threading.Thread(target=train)
    runner.start()
    started.wait()
    time.sleep(0.3)
    seen["destroy_during_train"] = (lib.pb_destroy(handle), lib.pb_last_error().decode(), runner.is_alive())
    runner.join()
    seen["steps_trained"] = outcome.get("train")
    seen["destroy_after_train"] = (lib.pb_destroy(handle), lib.pb_last_error().decode())
    print(json.dumps(seen), flush=True)


@pytest.fixture(scope="module")
def session_seen(cpp_library, testing_library, settings) -> dict:
    # One intra-op thread: with two, on this 2-core machine at load 5-6, 3 steps' forward took 180-580 ms (spinning
    # OpenMP threads) against the 3 × SLOW_NS that a library keeping the phase's pointer would add; with one, 18-34 ms.
    child = subprocess.run([sys.executable, "-m", "tests.test_c_abi", "--session", testing_library, settings.source.root],
                           cwd=ROOT, env=os.environ | build.sanitizer_runtime_env() | {"OMP_NUM_THREADS": "1"},
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, f"the child died with {describe_exit(child.returncode)}:\n{child.stderr[-3000:]}"
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_the_library_keeps_no_caller_string_and_refuses_to_destroy_a_session_in_use(session_seen):
    seen = session_seen
    assert seen["batch_after_the_loader_string_changed"] == [cpp_lib.PB_OK, ""], (
        f"pb_get_batch after the caller changed pb_options.loader: {seen['batch_after_the_loader_string_changed']}: "
        f"the library read it after pb_create returned")
    assert seen["forward_ns_for_3_steps"] < 3 * SLOW_NS, (
        f"forward took {seen['forward_ns_for_3_steps']} ns in 3 steps: the library read pb_testing_slow_phase's "
        f"phase after the call returned, from memory the caller had changed since")
    status, message, still_training = seen["destroy_during_train"]
    assert still_training, "the training run ended before pb_destroy was tried: make BUSY_STEPS larger"
    assert status == PB_ERROR and "session busy" in message, f"pb_destroy during pb_train: {status}, {message!r}"
    assert seen["steps_trained"] == BUSY_STEPS
    assert seen["destroy_after_train"][0] == cpp_lib.PB_OK, seen["destroy_after_train"]


def test_the_run_totals_a_whole_step_as_step_in_run(session_seen):
    """pb_train's totals follow pb_run_phase_names: the phases' names, with step_in_run (the run's step replayed
    whole and its log line) where the phase train_step (which also loads and copies) stands; 0 for an eager step."""
    phases, totals = session_seen["phase_names"], session_seen["run_totals"]
    assert list(totals) == ["step_in_run" if name == "train_step" else name for name in phases]
    assert totals["step_in_run"] == 0 and totals["forward"] > 0


def test_the_slow_knob_slows_its_phase_and_its_run_total(session_seen):
    """The testing build's knob (phasebench_testing.h), set as the testing worker sets it: the loss phase, and
    the training run's loss total (two steps), each spin the slowdown inside their clocks."""
    assert session_seen["slowed_loss_ns"] >= SLOW_NS
    assert session_seen["slowed_run_loss_ns"] >= 2 * SLOW_NS


def test_the_testing_entry_points_refuse_bad_calls(session_seen):
    expected = {"null-handle": "null session handle", "null-phase": "null phase name",
                "negative-ns": "neither may be negative", "negative-fraction": "neither may be negative",
                "negative-work": "neither may be negative", "accepted": None}
    for probe, (status, message) in session_seen["testing_probes"].items():
        if expected[probe] is None:
            assert status == cpp_lib.PB_OK, f"{probe}: {message}"
        else:
            assert status == PB_ERROR and expected[probe] in message, f"{probe}: {status}, {message!r}"


if __name__ == "__main__":
    if sys.argv[1] == "--session":
        session_checks(*sys.argv[2:])
    else:
        run_probes(*sys.argv[1:])

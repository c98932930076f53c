"""Every call of the C ABI (cpp/include/phasebench.h) refuses bad input without crashing its caller
(docs/faults.md#faults-and-bad-input).

A null, made-up or destroyed handle, an unknown phase, a wrong buffer length and bad options each give PB_ERROR and a
message, and the session still works afterwards. The destroyed handle is probed while a newer session lives where it
lived (in its slot): a stale handle must be refused even then, and must not reach the newer session. Options are
checked before any data is read. The calls go through ctypes, as the C++ worker makes them, in a child process (this
file run as a script): a crash there fails these tests with its signal instead of taking the suite down.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from phasebench.repository import ROOT
from phasebench.worker import build, cpp_lib
from phasebench.worker.client import describe_exit
from tests.c_abi_calls import ALL_SIGNATURES, PB_ERROR, create, get_batch, options, with_fields

PARAM_COUNT = 21840  # the Net's parameters
EPOCH_BATCHES = 938
SESSION_FUNCTIONS = [name for name in cpp_lib._SIGNATURES if not name.startswith(("pb_regression_", "pb_dcgan_"))
                     and name not in ("pb_create", "pb_abi_version", "pb_read_numerics")]
# The regression program's trainer: handles of a table of their own.
REGRESSION_FUNCTIONS = [name for name in cpp_lib._SIGNATURES
                        if name.startswith("pb_regression_") and name != "pb_regression_create"]
REGRESSION_PARAMS = 5  # Linear(4, 1)


def _call_with_nulls(lib, name: str, handle) -> int:
    """`name` with this handle and every other argument null or zero."""
    argtypes = ALL_SIGNATURES[name][1:]
    numbers = (ctypes.c_int32, ctypes.c_int64, ctypes.c_double)
    return getattr(lib, name)(handle, *(0 if t in numbers else None for t in argtypes))


def _run_phase(lib, handle, phase) -> int:
    return lib.pb_run_phase(handle, phase, ctypes.byref(ctypes.c_int64()), ctypes.byref(cpp_lib.Result()))


def _regression_phase(lib, handle, phase, checks=1) -> int:
    return lib.pb_regression_run_phase(handle, phase, checks, ctypes.byref(ctypes.c_int64()),
                                       ctypes.byref(cpp_lib.Result()))


def _regression_create(lib, **fields) -> int:
    regression_options = with_fields(cpp_lib.RegressionOptions(b"cpu", 0, 1, 32), **fields)
    return lib.pb_regression_create(ctypes.byref(regression_options), ctypes.byref(cpp_lib._REGRESSION()))


def _regression_batch(lib, handle, capacity: int) -> int:
    return lib.pb_regression_get_batch(handle, (ctypes.c_float * (4 * 32))(), (ctypes.c_float * 32)(), capacity,
                                       ctypes.byref(ctypes.c_int64()))


def _ensemble_step(lib, handle, capacity: int, losses=True) -> int:
    out = [ctypes.c_int64() for _ in range(3)]
    return lib.pb_ensemble_step(handle, *map(ctypes.byref, out), (ctypes.c_double * max(capacity, 1))() if losses else None,
                                capacity)


def _train(lib, handle, capacity: int, run_options=None, totals=True) -> int:
    run_options = run_options or cpp_lib.TrainOptions(1, 1, 0)
    return lib.pb_train(handle, ctypes.byref(run_options), (ctypes.c_int64 * capacity)(), capacity,
                        ctypes.byref(cpp_lib.TrainTotals()) if totals else None)


@dataclass(frozen=True)
class Context:
    lib: ctypes.CDLL
    live: int  # a working session's handle
    dead: int  # a destroyed one's
    newer: int  # the session made right after `dead` was destroyed, in its place
    raw_dir: str  # the suite's data
    regression: int  # a working regression trainer's handle
    dead_regression: int  # a destroyed one's, a newer one in its place


def _probes() -> dict:
    """name -> (probe(context) -> status, what the message must say; None: the call must succeed)."""
    probes = {}
    for name in SESSION_FUNCTIONS:
        probes[f"{name}-null-handle"] = (lambda c, name=name: _call_with_nulls(c.lib, name, 0),
                                         "null session handle")
    # pb_destroy last: a stale handle that reached the newer session would destroy it.
    for name in sorted(SESSION_FUNCTIONS, key=lambda name: name == "pb_destroy"):
        probes[f"{name}-destroyed-handle"] = (lambda c, name=name: _call_with_nulls(c.lib, name, c.dead),
                                              "unknown or destroyed session handle")
    for name in REGRESSION_FUNCTIONS:
        probes[f"{name}-null-handle"] = (lambda c, name=name: _call_with_nulls(c.lib, name, 0),
                                         "null regression handle")
    for name in sorted(REGRESSION_FUNCTIONS, key=lambda name: name == "pb_regression_destroy"):
        probes[f"{name}-destroyed-handle"] = (lambda c, name=name: _call_with_nulls(c.lib, name, c.dead_regression),
                                              "unknown or destroyed regression handle")
    floats = ctypes.c_float * (PARAM_COUNT + 1)
    probes |= {
        "made-up-handle": (lambda c: _run_phase(c.lib, 0xDEADBEEF, b"forward"), "unknown or destroyed session handle"),
        "made-up-handle-near-a-live-one": (lambda c: _run_phase(c.lib, c.live + (1 << 32), b"forward"),
                                           "unknown or destroyed session handle"),
        "abi-version": (lambda c: c.lib.pb_abi_version(ctypes.byref(ctypes.c_int32())), None),
        "abi-version-null-output": (lambda c: c.lib.pb_abi_version(None), "null version output"),
        "read-numerics": (lambda c: c.lib.pb_read_numerics(ctypes.byref(cpp_lib.NumericsFlags())), None),
        "read-numerics-null-output": (lambda c: c.lib.pb_read_numerics(None), "null numerics flags output"),
        "read-numerics-other-struct-size": (
            lambda c: c.lib.pb_read_numerics(ctypes.byref(with_fields(cpp_lib.NumericsFlags(), struct_size=8))),
            "pb_numerics_flags of 8 bytes, this library's has"),
        "create-null-options": (lambda c: create(c.lib, None), "null options"),
        # Options as a caller built from other sources would pass them.
        "create-other-struct-size": (lambda c: create(c.lib, with_fields(options(c.raw_dir), struct_size=8)),
                                     "pb_options of 8 bytes, this library's has"),
        "create-unknown-loader": (lambda c: create(c.lib, with_fields(options(c.raw_dir), loader=b"prefetch")),
                                  "unknown loader 'prefetch': published or batched"),
        "create-zero-width": (lambda c: create(c.lib, with_fields(options(c.raw_dir), width=0)),
                              "width and batch size must be at least 1, got 0 and 64"),
        # The options are checked before any data is read: with no data at all, the bad option is what is named.
        "create-zero-batch-before-reading-data": (
            lambda c: create(c.lib, with_fields(options("/nonexistent"), batch_size=0)),
            "width and batch size must be at least 1, got 1 and 0"),
        "create-unknown-loader-before-reading-data": (
            lambda c: create(c.lib, with_fields(options("/nonexistent"), loader=b"prefetch")), "unknown loader"),
        "create-unknown-step-before-reading-data": (
            lambda c: create(c.lib, with_fields(options("/nonexistent"), step=b"warp")), "unknown step 'warp'"),
        "create-deterministic-two-before-reading-data": (
            lambda c: create(c.lib, with_fields(options("/nonexistent"), deterministic=2)),
            "deterministic 2: 1 (on) or 0 (off)"),
        "create-unknown-device-before-reading-data": (
            lambda c: create(c.lib, options("/nonexistent", device=b"tpu9")), "Invalid device string: 'tpu9'"),
        "create-null-output": (lambda c: create(c.lib, options(c.raw_dir), out=False), "null output handle"),
        "create-null-data-root": (lambda c: create(c.lib, options(None)), "null data_root"),
        "create-missing-data": (lambda c: create(c.lib, options("/nonexistent")),
                                "/nonexistent/train-images-idx3-ubyte: cannot read (No such file or directory)"),
        "create-unknown-device": (lambda c: create(c.lib, options(c.raw_dir, device=b"tpu9")),
                                  "Invalid device string: 'tpu9'"),
        "create-unwritable-log": (lambda c: create(c.lib, options(c.raw_dir, log_path=b"/nonexistent/x.log")),
                                  "/nonexistent/x.log: cannot open log file"),
        "unknown-phase": (lambda c: _run_phase(c.lib, c.live, b"warp_drive"), "unknown phase 'warp_drive'"),
        "null-phase-name": (lambda c: _run_phase(c.lib, c.live, None), "null phase name"),
        "round-checks-two": (lambda c: c.lib.pb_set_round_checks(c.live, 2), "round checks 2: 1 (on) or 0 (off)"),
        "round-checks-negative": (lambda c: c.lib.pb_set_round_checks(c.live, -1),
                                  "round checks -1: 1 (on) or 0 (off)"),
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
        "train-other-struct-size": (lambda c: _train(c.lib, c.live, 16, with_fields(cpp_lib.TrainOptions(1, 1, 0),
                                                                                    struct_size=8)),
                                    "pb_train_options of 8 bytes, this library's has"),
        "train-null-options": (lambda c: c.lib.pb_train(c.live, None, (ctypes.c_int64 * 16)(), 16,
                                                        ctypes.byref(cpp_lib.TrainTotals())), "null run options"),
        "train-null-totals": (lambda c: _train(c.lib, c.live, 16, totals=False), "null totals output"),
        "batch-short-buffer": (lambda c: get_batch(c.lib, c.live, 0, 10), "batch of 64 images, room for 10"),
        "batch-past-the-epoch": (lambda c: get_batch(c.lib, c.live, EPOCH_BATCHES, 64),
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
        # The regression program's trainer: its own handles, options and buffers.
        "regression-call-with-a-session-handle": (lambda c: _regression_phase(c.lib, c.live, b"update"),
                                                  "unknown or destroyed regression handle"),
        "session-call-with-a-regression-handle": (lambda c: _run_phase(c.lib, c.regression, b"forward"),
                                                  "unknown or destroyed session handle"),
        "regression-create-null-options": (lambda c: c.lib.pb_regression_create(None, ctypes.byref(
            cpp_lib._REGRESSION())), "null options"),
        "regression-create-null-output": (lambda c: c.lib.pb_regression_create(ctypes.byref(
            cpp_lib.RegressionOptions(b"cpu", 0, 1, 32)), None), "null output handle"),
        "regression-create-other-struct-size": (lambda c: _regression_create(c.lib, struct_size=8),
                                                "pb_regression_options of 8 bytes, this library's has"),
        "regression-create-zero-batch": (lambda c: _regression_create(c.lib, batch_size=0),
                                         "batch size must be at least 1, got 0"),
        "regression-create-negative-threads": (lambda c: _regression_create(c.lib, threads=-2), "threads -2: 0 or more"),
        "regression-create-unknown-device": (lambda c: _regression_create(c.lib, device=b"tpu9"),
                                             "Invalid device string: 'tpu9'"),
        "regression-unknown-phase": (lambda c: _regression_phase(c.lib, c.regression, b"warp_drive"),
                                     "unknown phase 'warp_drive' of the regression program: get_batch, zero_grad"),
        "regression-mnist-phase": (lambda c: _regression_phase(c.lib, c.regression, b"param_update"),
                                   "unknown phase 'param_update' of the regression program"),
        "regression-null-phase-name": (lambda c: _regression_phase(c.lib, c.regression, None), "null phase name"),
        "regression-round-checks-two": (lambda c: _regression_phase(c.lib, c.regression, b"update", checks=2),
                                        "round checks 2: 1 (on) or 0 (off)"),
        "regression-negative-steps": (lambda c: c.lib.pb_regression_train_steps(c.regression, -1,
                                                                                (ctypes.c_double * 1)()),
                                      "a negative number of steps"),
        "regression-params-short-buffer": (
            lambda c: c.lib.pb_regression_get_params(c.regression, floats(), REGRESSION_PARAMS - 1),
            f"parameter buffer holds {REGRESSION_PARAMS - 1} floats, the model has {REGRESSION_PARAMS}"),
        "regression-phase-names-short-buffer": (
            lambda c: c.lib.pb_regression_phase_names(c.regression, ctypes.create_string_buffer(8), 8),
            "buffer of 8 bytes"),
        "regression-step": (lambda c: c.lib.pb_regression_train_steps(c.regression, 1, (ctypes.c_double * 1)()), None),
        "regression-batch-short-buffer": (lambda c: _regression_batch(c.lib, c.regression, 10),
                                          "batch of 32 rows, room for 10"),
        "regression-still-works": (lambda c: _regression_phase(c.lib, c.regression, b"update"), None),
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
    dead = destroyed.handle.value
    destroyed.close()
    newer = cpp_lib.CppTrainer(lib, root)  # takes the slot `destroyed` freed
    regression = cpp_lib.CppRegressionTrainer(lib)
    destroyed_regression = cpp_lib.CppRegressionTrainer(lib)
    dead_regression = destroyed_regression.handle.value
    destroyed_regression.close()
    newer_regression = cpp_lib.CppRegressionTrainer(lib)  # takes the slot the destroyed one freed
    context = Context(lib, live.handle.value, dead, newer.handle.value, f"{root}/MNIST/raw", regression.handle.value,
                      dead_regression)
    for name, (probe, _) in PROBES.items():
        print(json.dumps({"probe": name}), flush=True)
        status = probe(context)
        print(json.dumps({"probe": name, "status": status, "message": lib.pb_last_error().decode()}), flush=True)
    live.close()
    newer.close()
    regression.close()
    newer_regression.close()


@pytest.fixture(scope="module")
def probe_results(cpp_library, settings) -> tuple[dict, str | None]:
    """({probe: (status, message)}, how the child died or None)."""
    child = subprocess.run([sys.executable, "-m", "tests.test_c_abi_probes", cpp_library, settings.source.root],
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


if __name__ == "__main__":
    run_probes(*sys.argv[1:])

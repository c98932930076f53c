"""pb_train's totals through the C ABI (cpp/include/phasebench.h), and the testing build's slow knob inside them
(cpp/include/phasebench_testing.h): the totals follow pb_run_phase_names, the knob slows its phase and its run total,
and the knob's entry points refuse bad calls. The calls run in a child process (this file run as a script), so that a
crash fails the tests instead of taking the suite down."""

from __future__ import annotations

import json
import sys

import pytest

from phasebench.worker import cpp_lib
from tests.c_abi_calls import PB_ERROR, last_error, run_child
from tests.knobs_worker import slow_cpp

SLOW_NS = 100_000_000  # the slow knob's spin: far above a loss phase here


def run_checks(library: str, root: str) -> None:
    """The child process (`library`: the testing build): one JSON line of what it saw."""
    lib = cpp_lib.load_testing(library)
    seen = {}
    plain = cpp_lib.CppTrainer(lib, root, log_path="/dev/null")
    totals, steps, _, _ = plain.train(1, True, max_steps=3)
    seen["phase_names"], seen["run_totals"], seen["steps"] = plain.phase_names(), totals, steps
    plain.close()
    # The slow knob as the testing worker sets it (tests/knobs_worker.py's slow_cpp), through pb_testing_slow_phase;
    # then its bad calls: bad values, a null, destroyed or made-up handle (the last call costs nothing: noop, 0 ns).
    slowed = cpp_lib.CppTrainer(lib, root, log_path="/dev/null")
    slow_cpp(library, slowed, "loss", slow_ns=SLOW_NS)
    seen["slowed_loss_ns"] = slowed.run_phase("loss").ns
    seen["slowed_run_loss_ns"] = slowed.train(1, True, max_steps=2)[0]["loss"]
    live = slowed.handle
    calls = {"null-handle": (0, b"noop", 0, 0.0), "null-phase": (live, None, 0, 0.0),
             "negative-ns": (live, b"forward", -1, 0.0), "negative-fraction": (live, b"forward", 0, -0.5),
             "accepted": (live, b"noop", 0, 0.0)}
    probes = {probe: [lib.pb_testing_slow_phase(*args), last_error(lib)] for probe, args in calls.items()}
    probes["negative-work"] = [lib.pb_testing_slow_work(live, b"forward", -1), last_error(lib)]
    probes["release-without-hold"] = [lib.pb_testing_release_hold(live), last_error(lib)]
    probes["await-null-output"] = [lib.pb_testing_await_hold(live, 0, None), last_error(lib)]
    probes["hold-null-phase"] = [lib.pb_testing_hold_phase(live, None), last_error(lib)]
    seen["testing_probes"] = probes
    slowed.close()
    print(json.dumps(seen), flush=True)


@pytest.fixture(scope="module")
def run_seen(testing_library, settings) -> dict:
    return run_child("tests.test_c_abi_run", testing_library, settings.source.root, env={"OMP_NUM_THREADS": "1"})


def test_the_run_totals_a_whole_step_as_step_in_run(run_seen):
    """pb_train's totals follow pb_run_phase_names: the phases' names, with step_in_run (the run's step replayed
    whole and its log line) where the phase train_step (which also loads and copies) stands; 0 for an eager step."""
    phases, totals = run_seen["phase_names"], run_seen["run_totals"]
    assert list(totals) == ["step_in_run" if name == "train_step" else name for name in phases]
    assert totals["step_in_run"] == 0 and totals["forward"] > 0 and run_seen["steps"] == 3


def test_the_slow_knob_slows_its_phase_and_its_run_total(run_seen):
    """The testing build's knob, set as the testing worker sets it: the loss phase, and the training run's loss
    total (two steps), each spin the slowdown inside their clocks."""
    assert run_seen["slowed_loss_ns"] >= SLOW_NS
    assert run_seen["slowed_run_loss_ns"] >= 2 * SLOW_NS


def test_the_testing_entry_points_refuse_bad_calls(run_seen):
    expected = {"null-handle": "null session handle", "null-phase": "null phase name",
                "negative-ns": "neither may be negative", "negative-fraction": "neither may be negative",
                "negative-work": "neither may be negative", "accepted": None,
                "release-without-hold": "no hold: call pb_testing_hold_phase first",
                "await-null-output": "null waiting output", "hold-null-phase": "null phase name"}
    assert set(run_seen["testing_probes"]) == set(expected)
    for probe, (status, message) in run_seen["testing_probes"].items():
        if expected[probe] is None:
            assert status == cpp_lib.PB_OK, f"{probe}: {message}"
        else:
            assert status == PB_ERROR and expected[probe] in message, f"{probe}: {status}, {message!r}"


if __name__ == "__main__":
    run_checks(*sys.argv[1:])

"""The regression program trains alike in both languages (docs/method.md#the-regression-program).

One child process (phasebench/worker/program_steps.py; the pytest process never imports torch) runs 60 steps of
three trainers from seed 1: C++ (cpp/src/regression.cpp: torch::optim::SGD), Python as regression/main.py writes
it (the hand-written update `param.data.add_(-0.1 * param.grad)`), and Python with the update in SGD's form
(`add_(grad, alpha=-0.1)`, the test-only update="sgd"). The two updates run different kernels: a multiply and an add
(two roundings) against one fused multiply-add (one rounding). So C++ and the SGD form are held to the bit (the same
initial weights, batches, losses and final weights), and the example's own form to rounding: one update within
2 ulp, the first 10 losses within a relative 1e-5. Each run also times one round of every phase on a fresh trainer
and of a phase the program lacks, whose products and error are checked here.
"""

from __future__ import annotations

import base64

import numpy as np
import pytest

from phasebench.programs import PROGRAMS, program
from phasebench.spec import TRAINING_PHASES
from tests.c_abi_calls import run_child

STEPS = 60
PHASES = program("regression").phases
RUNS = ("python", "cpp", "python:update=sgd")
UNKNOWN_PHASE = "warp_drive"
EMPTY_PHASE = "noop"  # the empty body beside the program's phases: the count mode's floor


@pytest.fixture(scope="module")
def runs(cpp_library) -> dict:
    return run_child("phasebench.worker.program_steps", "regression", "--steps", str(STEPS), "--library", cpp_library,
                     *(f"--run={run}" for run in RUNS), "--phases", ",".join(PHASES + (EMPTY_PHASE, UNKNOWN_PHASE)))["runs"]


def floats(hexes: list[str]) -> list[float]:
    return [float.fromhex(value) for value in hexes]


PACKED = ("after_first",)  # program_steps' parameters after one step: the base64 of their float32 bytes


def float32s(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4")


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many float32 steps apart a and b are, element by element: their bits as integers that grow with the
    value, subtracted."""
    def ordered(values):
        bits = values.view("<i4").astype(np.int64)
        return np.where(bits >= 0, bits, -(bits & 0x7FFFFFFF))
    return np.abs(ordered(a) - ordered(b))


def differences(one: dict, other: dict, what: str) -> list:
    """Where two runs' records of `what` differ bit for bit: indices, the first few with their values."""
    if what in PACKED:
        a, b = float32s(one[what]), float32s(other[what])
        assert a.shape == b.shape, f"{what}: {a.shape} values against {b.shape}"
        where = np.flatnonzero(a.view("<i4") != b.view("<i4"))
        return [(int(i), float(a[i]), float(b[i])) for i in where[:5]]
    assert len(one[what]) == len(other[what]), f"{what}: {len(one[what])} against {len(other[what])}"
    return [(i, a, b) for i, (a, b) in enumerate(zip(one[what], other[what])) if a != b][:5]


def test_the_registry_declares_each_programs_phases_once():
    assert PROGRAMS["mnist"].phases is TRAINING_PHASES
    assert PHASES == ("get_batch", "zero_grad", "forward_loss", "loss_item", "backward", "update")
    assert all(program(name).label(phase) for name in PROGRAMS for phase in program(name).phases)
    with pytest.raises(ValueError, match="unknown program 'dcgan0': mnist, regression, dcgan"):
        program("dcgan0")
    with pytest.raises(ValueError, match="program 'mnist' has no cpp trainer that runs steps by itself"):
        program("mnist").step_trainer("cpp")


def test_cpp_and_python_with_sgds_update_train_to_the_bit(runs):
    cpp, python = runs["cpp"], runs["python:update=sgd"]
    assert STEPS >= 50 and len(cpp["losses"]) == STEPS
    for what in ("initial", "batches", "losses", "after_first", "final"):
        differ = differences(python, cpp, what)
        assert not differ, f"{what} differ at (index, Python, C++) {differ}"
    losses = floats(cpp["losses"])
    assert losses[-1] < losses[0] / 10, f"the fit does not learn: loss {losses[0]} -> {losses[-1]}"
    assert cpp["last_loss"] == python["last_loss"] == losses[-1]
    assert len(set(cpp["batches"])) == STEPS, "a batch repeats: the draws do not move on"


def test_the_examples_hand_written_update_is_sgds_within_rounding(runs):
    cpp, hand = runs["cpp"], runs["python"]
    assert hand["initial"] == cpp["initial"] and hand["batches"] == cpp["batches"]
    one_update = ulps(float32s(hand["after_first"]), float32s(cpp["after_first"]))
    assert one_update.max() <= 2, f"one update apart by {one_update} ulp"
    for step, (a, b) in enumerate(zip(floats(hand["losses"][:10]), floats(cpp["losses"][:10]), strict=True)):
        assert abs(a - b) <= 1e-5 * abs(b), f"step {step}: loss {a} (the hand-written update) against {b} (SGD's)"


@pytest.mark.parametrize("run", RUNS)
def test_every_phase_proves_its_work_and_an_unknown_one_is_refused(runs, run):
    done = runs[run]
    assert tuple(done["phase_names"]) == PHASES
    products = done["phases"]
    assert all(products[phase]["finite"] is True for phase in PHASES), products
    assert products["get_batch"]["shape"] == [32, 4] and products["get_batch"]["batch"] == 0
    # zero_grad's round zeroes gradients a backward left; backward's starts from none and sets both.
    assert (products["zero_grad"]["zero_before"], products["zero_grad"]["nonzero_grads"]) == (False, 0)
    assert (products["backward"]["zero_before"], products["backward"]["nonzero_grads"]) == (True, 2)
    assert products["backward"]["shape"] == [1, 4]
    for phase in ("forward_loss", "loss_item"):
        assert products[phase]["shape"] == [] and products[phase]["loss"] > 0, products[phase]
    assert products["forward_loss"]["recompute_error"] == 0
    assert products["update"]["update_error"] == 0 and products["update"]["moved"] > 0
    assert products[EMPTY_PHASE]["shape"] == [0] and products[EMPTY_PHASE]["finite"] is True, products[EMPTY_PHASE]
    assert products[UNKNOWN_PHASE] == {"error": f"unknown phase '{UNKNOWN_PHASE}' of the regression program: "
                                                f"{', '.join(PHASES)}"}


def test_both_languages_phases_make_the_same_products(runs):
    """Every product's values, the losses and the update's movement included, from the same seed."""
    assert runs["python:update=sgd"]["phases"] == runs["cpp"]["phases"]

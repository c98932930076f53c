"""The DCGAN program trains alike in both languages (docs/method.md#the-dcgan-program).

One child process (phasebench/worker/program_steps.py; the pytest process never imports torch) runs three trainers
from seed 1 at batch 4 on the seed's data, 50 steps each (the third 10): C++ (cpp/src/dcgan.cpp: torch::optim::Adam), Python as its
users write it (torch.optim.Adam), and Python with a test-only Adam in LibTorch's form (tests/libtorch_adam.py). The
two Adams run different kernels for the first moment: torch.optim.Adam's exp_avg.lerp_(grad, 1 - beta1) against
LibTorch's exp_avg.mul_(beta1).add_(grad, 1 - beta1). Everything else (the initial weights, the images, the labels
and noise drawn each step, the convolutions, batch norms and losses) is the same kernels in both languages. So C++
and LibTorch's form are held to the bit (the same initial weights and buffers, batches and labels, losses, and
final weights and running statistics), and torch.optim.Adam to rounding: one update within 2 ulp, the first 10
losses within a relative 1e-5. The two held to the bit also time one round of every phase on a fresh trainer and of
a phase the program lacks, whose products and error are checked here.
"""

from __future__ import annotations

import pytest

from phasebench.programs import program
from phasebench.train import dcgan_checks
from tests.c_abi_calls import run_child
from tests.test_regression_equivalence import differences, float32s, floats, ulps

STEPS = 50
BATCH = 4  # the network is the example's; a small batch keeps 3 × 50 steps within seconds
PHASES = program("dcgan").phases
LIBTORCH_FORM = "python:optimizer=tests.libtorch_adam:LibTorchAdam"
RUNS = ("cpp", "python", LIBTORCH_FORM)
# torch.optim.Adam's run is held to rounding over its first steps only, and its phases are LibTorch's form's.
OWN = {"python": ",steps=10,phases=0"}
UNKNOWN_PHASE = "warp_drive"
EMPTY_PHASE = "noop"  # the empty body beside the program's phases: the count mode's floor


@pytest.fixture(scope="module")
def runs(cpp_library, pytestconfig) -> dict:
    """Each of RUNS's results, run on the seed's data at batch BATCH."""
    options = f"batch_size={BATCH},data_root={pytestconfig.phasebench.source.root}"
    texts = {run: f"{run}{',' if ':' in run else ':'}{options}{OWN.get(run, '')}" for run in RUNS}
    done = run_child("phasebench.worker.program_steps", "dcgan", "--steps", str(STEPS), "--library", cpp_library,
                     *(f"--run={text}" for text in texts.values()), "--phases", ",".join(PHASES + (EMPTY_PHASE, UNKNOWN_PHASE)))
    return {run: done["runs"][text] for run, text in texts.items()}


@pytest.mark.needs_data
def test_cpp_and_python_with_libtorchs_adam_train_to_the_bit(runs):
    cpp, python = runs["cpp"], runs[LIBTORCH_FORM]
    assert STEPS >= 50 and len(cpp["losses"]) == STEPS
    for what in ("initial", "batches", "losses", "after_first", "final"):
        differ = differences(python, cpp, what)
        assert not differ, f"{what} differ at (index, Python, C++) {differ}"
    assert cpp["final"] != cpp["initial"], "the networks did not train"
    assert cpp["last_loss"] == python["last_loss"] == floats(cpp["losses"])[-1]
    assert len(set(cpp["batches"])) == STEPS, "a batch repeats: the data or the labels' draws do not move on"


@pytest.mark.needs_data
def test_torchs_adam_is_libtorchs_within_rounding(runs):
    cpp, python = runs["cpp"], runs["python"]
    assert python["initial"] == cpp["initial"] and python["batches"][:1] == cpp["batches"][:1]
    one_update = ulps(float32s(python["after_first"]), float32s(cpp["after_first"]))
    assert one_update.max() <= 2, f"one update apart by up to {one_update.max()} ulp"
    # The first update agrees to the bit (from a zero first moment both forms halve the gradient exactly); later
    # ones round apart, which is what this test allows for.
    assert python["losses"] != cpp["losses"][:len(python["losses"])], "the two Adams' losses agree to the bit"
    for step, (a, b) in enumerate(zip(floats(python["losses"][:10]), floats(cpp["losses"][:10]), strict=True)):
        assert abs(a - b) <= 1e-5 * abs(b), f"step {step}: loss {a} (torch.optim.Adam) against {b} (LibTorch's)"


@pytest.mark.needs_data
@pytest.mark.parametrize("run", [run for run in RUNS if "phases=0" not in OWN.get(run, "")])
def test_every_phase_proves_its_work_and_an_unknown_one_is_refused(runs, run):
    done = runs[run]
    assert tuple(done["phase_names"]) == PHASES
    products = done["phases"]
    for phase in PHASES:
        assert dcgan_checks.problems(phase, products[phase]) == [], (phase, products[phase])
    assert products["data_loading"]["shape"] == [BATCH, 1, 28, 28] and products["data_loading"]["batch"] == 0
    assert products["copy_to_device"]["resident"] is True  # on cpu the batch is the loader's
    assert products["d_step"]["shape"] == [64, 1, 4, 4] and products["g_step"]["shape"] == [100, 256, 4, 4]
    assert products[EMPTY_PHASE]["shape"] == [0] and products[EMPTY_PHASE]["finite"] is True, products[EMPTY_PHASE]
    assert products[UNKNOWN_PHASE] == {"error": f"unknown phase '{UNKNOWN_PHASE}' of the dcgan program: "
                                                f"{', '.join(PHASES)}"}


@pytest.mark.needs_data
def test_both_languages_phases_make_the_same_products(runs):
    """Every product's values, the losses and the updates' movements included, from the same seed."""
    assert runs[LIBTORCH_FORM]["phases"] == runs["cpp"]["phases"]


@pytest.mark.parametrize("step, broken, says", [  # "step": a parameter named phase would be a benchmark case's
    ("data_loading", {"shape": [4, 3, 28, 28]}, "shape"),
    ("copy_to_device", {"matches_host": False}, "equal to the host batch"),
    ("d_real", {"nonzero_grads": 7}, "7 of 8 gradients"),
    ("d_fake", {"loss": -0.5}, "positive"),
    ("g_loss", {"nonzero_grads": 0}, "0 of 10 gradients"),
    ("g_step", {"moved": 0.0}, "did not move"),
    ("d_step", {"update_error": 1e-3}, "away from Adam's update"),
    ("progress_print", {"loss": None}, "loss None"),
])
def test_the_dcgan_products_are_checked(step, broken, says):
    good = {"shape": [BATCH, 1, 28, 28], "finite": True, "loss": None, "batch": 0, "on_device": True,
            "matches_host": True, "nonzero_grads": None, "moved": None, "update_error": None}
    good |= {"d_real": {"shape": [BATCH], "loss": 0.7, "nonzero_grads": 8},
             "d_fake": {"shape": [BATCH], "loss": 0.7, "nonzero_grads": 8},
             "g_loss": {"shape": [BATCH], "loss": 2.0, "nonzero_grads": 10},
             "d_step": {"shape": [64, 1, 4, 4], "moved": 2e-4, "update_error": 0.0},
             "g_step": {"shape": [100, 256, 4, 4], "moved": 2e-4, "update_error": 1e-9},
             "progress_print": {"shape": [], "loss": 2.0}}.get(step, {})
    assert dcgan_checks.problems(step, good) == []
    assert any(says in problem for problem in dcgan_checks.problems(step, good | broken))

"""What proves that one round of a DCGAN phase did its work (docs/method.md#the-dcgan-program): its product, as
phasebench/train/dcgan.py and cpp/src/dcgan.cpp make it, checked in the pytest process (so no torch here).
phasebench/programs.py names this function as the program's product checks; bench/test_phases.py asks it of every
round."""

from __future__ import annotations

IMAGE = [1, 28, 28]  # an MNIST image, the generator's output too
GENERATOR_TENSORS = 10  # four transposed convolutions' weights, three batch norms' weights and biases
DISCRIMINATOR_TENSORS = 8  # four convolutions' weights, two batch norms' weights and biases
# The first weight against Adam's update written out from the optimizer's state, relative to its largest move: the
# optimizer's own kernels (torch.optim.Adam's lerp_, LibTorch's mul_ and add_) and the written-out form round apart.
UPDATE_TOLERANCE = 1e-3

# phase: (the main tensor's shape, "images" or "batch" for [rows, 1, 28, 28] or [rows]; whether it has a loss; the
# network whose gradients it makes, with its count of parameter tensors)
EXPECTED = {
    "data_loading": ("images", False, None),
    "copy_to_device": ("images", False, None),
    "d_real": ("batch", True, DISCRIMINATOR_TENSORS),
    "g_forward": ("images", False, None),
    "d_fake": ("batch", True, DISCRIMINATOR_TENSORS),
    "d_step": (None, False, None),
    "g_loss": ("batch", True, GENERATOR_TENSORS),
    "g_step": (None, False, None),
    "progress_print": ([], True, None),
}


def _shape_problem(expected, found: list) -> str | None:
    if expected == "images":
        fits = len(found) == 4 and found[0] >= 1 and found[1:] == IMAGE
    elif expected == "batch":
        fits = len(found) == 1 and found[0] >= 1
    elif expected is None:  # a weight: any non-empty shape
        fits = len(found) >= 1
    else:
        fits = found == expected
    return None if fits else f"shape {found}, expected {expected if expected is not None else 'a weight'}"


def problems(phase: str, product: dict) -> list[str]:
    """What is wrong with one round's product of `phase`."""
    if phase not in EXPECTED:
        return [f"no checks for a phase '{phase}' of the dcgan program"]
    shape, has_loss, grads = EXPECTED[phase]
    wrong = [problem for problem in [_shape_problem(shape, list(product["shape"]))] if problem]
    if not product["finite"]:
        wrong.append("non-finite values")
    if (product["loss"] is not None) != has_loss:
        wrong.append(f"loss {product['loss']}")
    elif has_loss and phase != "progress_print" and not 0 < product["loss"]:
        wrong.append(f"loss {product['loss']}: a binary cross-entropy of a sigmoid is positive")
    if phase == "data_loading" and not (isinstance(product["batch"], int) and product["batch"] >= 0):
        wrong.append(f"batch {product['batch']}: not the index of a batch loaded")
    if phase == "copy_to_device" and not (product["on_device"] and product["matches_host"]):
        wrong.append(f"on the device: {product['on_device']}; equal to the host batch: {product['matches_host']}")
    if grads is not None and product["nonzero_grads"] != grads:
        wrong.append(f"{product['nonzero_grads']} of {grads} gradients non-zero after the backward pass")
    if phase in ("d_step", "g_step"):
        moved, error = product["moved"], product["update_error"]
        if not (moved or 0) > 0:
            wrong.append("the weight did not move")
        elif error is None or not error <= UPDATE_TOLERANCE * moved:
            wrong.append(f"the weight is {error} away from Adam's update, which moved it by {moved}")
    return wrong

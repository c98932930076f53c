"""What proves that one round of a regression phase did its work (docs/method.md#the-regression-program): its product,
as phasebench/train/regression.py and cpp/src/regression.cpp make it, checked in the pytest process (so no torch here).
phasebench/programs.py names this function as the program's product checks; bench/test_phases.py asks it of every
round."""

from __future__ import annotations

FEATURES = 4  # the columns x, x^2, x^3, x^4 of a batch
WEIGHT = [1, FEATURES]  # nn.Linear(4, 1)'s weight, the product of the phases that touch the parameters
PARAMETER_TENSORS = 2  # the weight and the bias
RECOMPUTE_TOLERANCE = 1e-5  # forward_loss's loss against the model run again on the same batch: the same kernels
UPDATE_TOLERANCE = 1e-6  # the weight against its own form of weight - lr * grad, relative to its largest move

# phase: the main tensor's shape (None: a batch's, [rows, FEATURES]) and whether the product has a loss.
EXPECTED = {"get_batch": (None, False), "zero_grad": (WEIGHT, False), "forward_loss": ([], True),
            "loss_item": ([], True), "backward": (WEIGHT, False), "update": (WEIGHT, False)}


def problems(phase: str, product: dict) -> list[str]:
    """What is wrong with one round's product of `phase`."""
    if phase not in EXPECTED:
        return [f"no checks for a phase '{phase}' of the regression program"]
    shape, has_loss = EXPECTED[phase]
    found, wrong = list(product["shape"]), []
    if (found != shape) if shape is not None else (len(found) != 2 or found[1] != FEATURES or found[0] < 1):
        wrong.append(f"shape {found}, expected {shape or ['rows', FEATURES]}")
    if not product["finite"]:
        wrong.append("non-finite values")
    if (product["loss"] is not None) != has_loss:
        wrong.append(f"loss {product['loss']}")
    if phase == "get_batch" and not (isinstance(product["batch"], int) and product["batch"] >= 0):
        wrong.append(f"batch {product['batch']}: not the index of a batch drawn")
    if phase == "forward_loss" and not (product["recompute_error"] or 0) <= RECOMPUTE_TOLERANCE:
        wrong.append(f"the loss differs by {product['recompute_error']:.3g} from the model run again on the batch")
    if phase == "forward_loss" and product["recompute_error"] is None:
        wrong.append("the loss was not recomputed")
    if phase == "zero_grad" and product["nonzero_grads"] != 0:
        wrong.append(f"{product['nonzero_grads']} of {PARAMETER_TENSORS} gradients non-zero after zero_grad")
    if phase == "backward" and not (product["zero_before"] and product["nonzero_grads"] == PARAMETER_TENSORS):
        wrong.append(f"gradients zero before the clock: {product['zero_before']}; non-zero after it in "
                     f"{product['nonzero_grads']} of {PARAMETER_TENSORS} parameters")
    if phase == "update":
        moved, error = product["moved"], product["update_error"]
        if not (moved or 0) > 0:
            wrong.append("the weight did not move")
        elif error is None or not error <= UPDATE_TOLERANCE * max(moved, 1.0):
            wrong.append(f"the weight is {error} away from weight - lr * grad")
    return wrong

"""pytorch/examples' regression program (regression/main.py) as the suite times it (docs/method.md#the-regression-program):
a polynomial of degree 4 with random coefficients, batches of its values at random points, nn.Linear(4, 1) fitted by
F.smooth_l1_loss and the example's hand-written update, its step cut into the phases phasebench/programs.py declares.
Its C++ twin is cpp/src/regression.cpp, which draws the same numbers in the same order from the same seed.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from phasebench.train.products import all_finite, product
from phasebench.train.program_phases import Phase, PhaseTable, ProgramTrainer
from phasebench.train.timing import timer_for

POLY_DEGREE = 4  # the features x, x^2, x^3, x^4
BATCH_SIZE = 32
LEARNING_RATE = 0.1
# The update's form: "hand", the example's `param.data.add_(-0.1 * param.grad)` (a multiply, then an add: two
# roundings); "sgd", torch.optim.SGD's and LibTorch's `add_(grad, alpha=-0.1)`, whose CPU kernel is one fused
# multiply-add (one rounding). Only the equivalence tests ask for "sgd": with it the two languages train to the bit.
UPDATES = ("hand", "sgd")


def make_features(x: torch.Tensor) -> torch.Tensor:
    """The columns [x, x^2, x^3, x^4] of a batch of points."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


class RegressionTrainer(ProgramTrainer):
    def __init__(self, device: str = "cpu", seed: int = 1, threads: int = 0, batch_size: int = BATCH_SIZE,
                 update: str = "hand"):
        if update not in UPDATES:
            raise ValueError(f"unknown update '{update}': {', '.join(UPDATES)}")
        self.set_up(device, threads, batch_size)
        self.update_form = update
        # One seed, then the example's draws in its order: the target's coefficients, its constant, the model.
        torch.manual_seed(seed)
        self.w_target = torch.randn(POLY_DEGREE, 1, device=self.device) * 5
        self.b_target = torch.randn(1, device=self.device) * 5
        self.fc = torch.nn.Linear(self.w_target.size(0), 1).to(self.device)
        self.timed = timer_for(self.device)
        self.batch_x = self.batch_y = self.output = None
        self.loss: float | None = None  # what the last loss_item read
        self.batches = 0  # batches drawn since the trainer was made
        self.weight_before = self.grad_before = self.zero_before = None

    # -- the phases' bodies, as regression/main.py's loop writes them ------------------------------------------
    def f(self, x: torch.Tensor) -> torch.Tensor:
        return x.mm(self.w_target) + self.b_target.item()

    def get_batch(self) -> None:
        random = torch.randn(self.batch_size, device=self.device)
        self.batch_x = make_features(random)
        self.batch_y = self.f(self.batch_x)
        self.batches += 1

    def zero_grad(self) -> None:
        self.fc.zero_grad()

    def forward_loss(self) -> None:
        self.output = F.smooth_l1_loss(self.fc(self.batch_x), self.batch_y)

    def loss_item(self) -> None:
        self.loss = self.output.item()

    def backward(self) -> None:
        self.output.backward()

    def update(self) -> None:
        if self.update_form == "hand":
            for param in self.fc.parameters():
                param.data.add_(-LEARNING_RATE * param.grad)
        else:
            for param in self.fc.parameters():
                param.data.add_(param.grad, alpha=-LEARNING_RATE)

    # -- what the suite drives --------------------------------------------------------------------------------
    def parameters(self) -> list[float]:
        """The weight's 4 values, then the bias, as pb_regression_get_params gives the C++ trainer's."""
        return [value for param in self.fc.parameters() for value in param.detach().cpu().flatten().tolist()]

    def last_loss(self) -> float | None:
        return self.loss

    def batch(self) -> tuple[list[float], list[float]]:
        """The last batch drawn: its features (row by row) and targets; empty where none is held."""
        if self.batch_x is None:
            return [], []
        return self.batch_x.detach().cpu().flatten().tolist(), self.batch_y.detach().cpu().flatten().tolist()

    def close(self) -> None:
        """Nothing to free beyond what the garbage collector frees (the worker's stop calls every trainer's)."""

    def step(self) -> float:
        """One whole step, every phase in order; the loss it read."""
        for phase in PHASES:
            phase.body(self)
        return self.loss

    def train_steps(self, steps: int) -> list[float]:
        if steps < 0:
            raise ValueError("a negative number of steps")
        return [self.step() for _ in range(steps)]

    def release(self) -> None:
        """What the last round left, freed before the next one's preparation, as a training loop frees its last
        step's."""
        self.batch_x = self.batch_y = self.output = None
        self.weight_before = self.grad_before = self.zero_before = None


# -- products that prove each phase's work (docs/method.md#the-regression-program); cpp/src/regression.cpp has the
# same ---------------------------------------------------------------------------------------------------------------
def _gradients(t: RegressionTrainer) -> list:
    return [param.grad for param in t.fc.parameters()]


def _gradients_to_zero(t: RegressionTrainer, name: str) -> None:
    """zero_grad zeroes the gradients the step before left: a trainer without them gets some first."""
    if name == "zero_grad" and any(grad is None for grad in _gradients(t)):
        t.get_batch()
        t.forward_loss()
        t.backward()


def _nonzero(tensors) -> int:
    return sum(tensor is not None and bool(tensor.ne(0).any()) for tensor in tensors)


def _remember_zero(t: RegressionTrainer) -> None:
    t.zero_before = _nonzero(_gradients(t)) == 0


def _drawn(t: RegressionTrainer) -> dict:
    return product(t.batch_x, all_finite([t.batch_x, t.batch_y]), batch=t.batches - 1)


def _zeroed(t: RegressionTrainer) -> dict:
    return product(t.fc.weight, all_finite(t.fc.parameters()), zero_before=t.zero_before,
                   nonzero_grads=_nonzero(_gradients(t)))


def _forwarded(t: RegressionTrainer) -> dict:
    with torch.no_grad():
        again = F.smooth_l1_loss(t.fc(t.batch_x), t.batch_y)
    loss = t.output.item()
    return product(t.output, all_finite([t.output]), loss,
                   recompute_error=(again - t.output.detach()).abs().max().item())


def _read(t: RegressionTrainer) -> dict:
    return product(t.output, all_finite([t.output]) and math.isfinite(t.loss), t.loss)


def _backward(t: RegressionTrainer) -> dict:
    grads = _gradients(t)
    return product(t.fc.weight.grad, all_finite(grads), zero_before=t.zero_before, nonzero_grads=_nonzero(grads))


def _remember_weight(t: RegressionTrainer) -> None:
    t.weight_before, t.grad_before = t.fc.weight.detach().clone(), t.fc.weight.grad.clone()


def _updated(t: RegressionTrainer) -> dict:
    """The weight against the trainer's own form of weight - lr * grad."""
    before, grad = t.weight_before, t.grad_before
    expected = before + (-LEARNING_RATE * grad) if t.update_form == "hand" else before.add(grad, alpha=-LEARNING_RATE)
    weight = t.fc.weight.detach()
    return product(weight, all_finite(t.fc.parameters()), update_error=(weight - expected).abs().max().item(),
                   moved=(weight - before).abs().max().item())


PHASES = (
    Phase("get_batch", RegressionTrainer.get_batch, _drawn),
    Phase("zero_grad", RegressionTrainer.zero_grad, _zeroed, _remember_zero),
    Phase("forward_loss", RegressionTrainer.forward_loss, _forwarded),
    Phase("loss_item", RegressionTrainer.loss_item, _read),
    Phase("backward", RegressionTrainer.backward, _backward, _remember_zero),
    Phase("update", RegressionTrainer.update, _updated, _remember_weight),
)
RegressionTrainer.table = PhaseTable("regression", PHASES)
RegressionTrainer.prepare = staticmethod(_gradients_to_zero)


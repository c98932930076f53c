"""The one Python table of phases (docs/method.md#what-is-measured): what each prepares (untimed), times, and produces
for the plain tests to check, and what the training run times under its name. Its C++ twin is
Trainer::make_phases in cpp/src/phases.cpp. Names and labels come from phasebench/spec.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from phasebench.spec import GRAD_SYNC, LABELS, ONE_SHOT_PHASES, STEP_IN_RUN, TRAINING_PHASES
from phasebench.train.model import LEARNING_RATE, MOMENTUM
from phasebench.train.products import all_finite, product
from phasebench.train.state import TrainingState

SAME = object()  # a run body that is the phase's own body


@dataclass(frozen=True)
class Phase:
    name: str
    prepare: Callable[[TrainingState], None] | None  # untimed, after TrainingState.release()
    body: Callable[[TrainingState], None] | None  # timed by its per-phase case; None: the training run's only
    product: Callable[[TrainingState], dict] | None
    run_body: object = SAME  # what the training run times under this name (None: the run has no such total)
    continues_itself: bool = False  # its rounds follow one another as training steps do
    # Untimed, after prepare: what the product is checked against, taken before the body (the generator's state, the
    # gradients, conv1's weight); left out with the product when a round skips its checks (--round-checks off).
    check_before: Callable[[TrainingState], None] | None = None

    @property
    def label(self) -> str:  # the published table's row
        return LABELS[self.name]

    @property
    def in_run(self) -> Callable[[TrainingState], None] | None:
        return self.body if self.run_body is SAME else self.run_body


# -- products that prove the work (docs/method.md#what-is-measured) ---------------------------------

def _loaded(t: TrainingState) -> dict:
    return product(t.host[0], all_finite([t.host[0]]), batch=t.host_index)


def _copied(t: TrainingState) -> dict:
    on_device = t.data.device == t.device and t.target.device == t.device
    matches = torch.equal(t.data.cpu(), t.host[0].cpu()) and torch.equal(t.target.cpu(), t.host[1].cpu())
    # Nothing was copied: the batch already lived where it was asked for (always on cpu; on cuda when the
    # whole split lives on the device).
    resident = t.data.data_ptr() == t.host[0].data_ptr() and t.target.data_ptr() == t.host[1].data_ptr()
    return product(t.data, all_finite([t.data]), batch=t.host_index, on_device=on_device, matches_host=matches,
                   resident=resident)


def _remember_rng(t: TrainingState):
    t.rng_before = t.rng_state()


def _forwarded_product(t: TrainingState) -> dict:
    """The output against the model run again on the same input with the same dropout draws."""
    after = t.rng_state()
    t.set_rng_state(t.rng_before)
    module = t.step_piece.module(t)
    # A compiled model is run again as it was run, with gradients on: under no_grad it would compile anew.
    with torch.no_grad() if module is t.model else torch.enable_grad():
        again = module(t.data).detach()
    t.set_rng_state(after)
    error = (again - t.output.detach()).abs().max().item()
    return product(t.output, all_finite([t.output]), recompute_error=error)


def _remember_zero_grads(t: TrainingState):
    t.zero_before = all(p.grad is None or not bool(p.grad.any()) for p in t.model.parameters())


def _backward_product(t: TrainingState) -> dict:
    nonzero = sum(p.grad is not None and bool(p.grad.any()) for p in t.model.parameters())
    return product(t.model.conv1.weight.grad, all_finite(p.grad for p in t.model.parameters()),
                   zero_before=t.zero_before, nonzero_grads=nonzero)


def _prepare_update(t: TrainingState):
    t.forwarded()
    t.backward()


def _remember_update(t: TrainingState):
    weight = t.model.conv1.weight
    momentum = t.optimizer.state.get(weight, {}).get("momentum_buffer")
    t.update_check = (weight.detach().clone(), weight.grad.clone()) + (() if momentum is None else (momentum.clone(),))


def _updated_product(t: TrainingState) -> dict:
    """conv1.weight against SGD with momentum: buf = momentum * buf + grad (grad on the first step),
    weight -= lr * buf."""
    before, grad, *momentum = t.update_check
    buffer = grad if not momentum else momentum[0] * MOMENTUM + grad
    expected = before.add(buffer, alpha=-LEARNING_RATE)
    weight = t.model.conv1.weight.detach()
    return product(weight, all_finite(t.model.parameters()),
                   update_error=(weight - expected).abs().max().item(), moved=(weight - before).abs().max().item())


def _prepare_sync(t: TrainingState):
    if not (t.sync == "allreduce" and t.group_attached):
        raise ValueError(f"'{GRAD_SYNC}' is a phase of a data-parallel trainer that all-reduces after backward only")
    t.forwarded()
    t.backward()


def _remember_grad(t: TrainingState):
    t.update_check = (t.model.conv1.weight.grad.clone(),)


def _synced_product(t: TrainingState) -> dict:
    """Every gradient finite and non-zero, and conv1's moved from this rank's own (the shards differ)."""
    grad, (before,) = t.model.conv1.weight.grad, t.update_check
    nonzero = sum(p.grad is not None and bool(p.grad.any()) for p in t.model.parameters())
    return product(grad, all_finite(p.grad for p in t.model.parameters()), nonzero_grads=nonzero,
                   moved=(grad - before).abs().max().item())


def _fresh_product(t: TrainingState) -> dict:
    fresh, live = list(t.fresh[0].parameters()), list(t.model.parameters())
    shared = {p.data_ptr() for p in fresh} & {p.data_ptr() for p in live}
    distinct = not shared and not all(torch.equal(a, b) for a, b in zip(fresh, live))
    return product(torch.empty(sum(p.numel() for p in fresh)), all_finite(fresh), distinct=distinct)


def _loss_product(t: TrainingState, main: torch.Tensor, **checks) -> dict:
    loss = t.loss.item()
    return product(main, bool(torch.isfinite(main).all()) and math.isfinite(loss), loss, **checks)


def _one_shot_product(t: TrainingState) -> dict:
    return t.step_piece.one_shot_product(t)


PHASES = (
    Phase("data_loading", None, TrainingState.load_batch, _loaded, run_body=TrainingState.load_in_epoch),
    Phase("copy_to_device", TrainingState.load_batch, TrainingState.copy_batch, _copied),
    Phase("optimizer_init", None, TrainingState.fresh_model, _fresh_product, run_body=TrainingState.build_model),
    Phase("forward", TrainingState.on_device, TrainingState.forward, _forwarded_product, check_before=_remember_rng),
    Phase("loss", lambda t: (t.on_device(), t.forward()), TrainingState.compute_loss, lambda t: _loss_product(t, t.loss)),
    Phase("backward", TrainingState.forwarded, TrainingState.backward, _backward_product,
          check_before=_remember_zero_grads),
    Phase("param_update", _prepare_update, TrainingState.update, _updated_product, check_before=_remember_update),
    Phase("progress_print", TrainingState.forwarded, TrainingState.print_progress, lambda t: _loss_product(t, t.loss)),
    # The per-phase train_step holds the batch's loading and copying; the training run times those apart, and
    # a step replayed whole under step_in_run.
    Phase("train_step", None, TrainingState.train_step, lambda t: _loss_product(t, t.output, batch=t.host_index),
          run_body=None, continues_itself=True),
)
assert tuple(phase.name for phase in PHASES) == TRAINING_PHASES
# Timed once per worker (phasebench/spec.py's ONE_SHOT_PHASES); which one a trainer has is its step's.
ONE_SHOT = tuple(Phase(name, TrainingState.one_shot_prepare, TrainingState.run_one_shot, _one_shot_product)
                 for name in ONE_SHOT_PHASES)
# The training run's total of a step replayed whole, with its log line when due.
RUN_ONLY = (Phase(STEP_IN_RUN, None, None, None, run_body=TrainingState.whole_step_in_run),)
# Not training phases: the empty timed region (the timer floor, worker_overhead), and the C++ example's
# per-step loss.item() (docs/method.md#how-our-trainers-differ-from-pytorchexamples-and-why).
NOOP = Phase("noop", None, lambda t: None, lambda t: product(torch.empty(0), True))
LOSS_ITEM = Phase("loss_item", TrainingState.forwarded, TrainingState.read_loss, lambda t: _loss_product(t, t.loss))
# Data parallel only (phasebench/train/distributed.py): the all-reduce after backward, timed alone.
GRAD_SYNC_PHASE = Phase(GRAD_SYNC, _prepare_sync, TrainingState.grad_sync, _synced_product, check_before=_remember_grad)
EXTRA_PHASES = (LOSS_ITEM, GRAD_SYNC_PHASE)

PHASE_NAMES = TRAINING_PHASES
# What a per-phase round can time, and what the training run times, by name.
PHASE_BY_NAME = {phase.name: phase for phase in PHASES + EXTRA_PHASES + ONE_SHOT + (NOOP,)}
RUN_BODIES = {phase.name: phase.in_run for phase in PHASES + ONE_SHOT + RUN_ONLY + (GRAD_SYNC_PHASE,) if phase.in_run}
# Phases that use no step: they never trigger the one-shot phase (capture or compile) before their clock.
NEEDS_NO_STEP = ("data_loading", "optimizer_init", "noop") + ONE_SHOT_PHASES
# Phases a step replayed whole does not have.
STEP_PARTS = ("forward", "loss", "backward", "param_update", "progress_print", "loss_item", GRAD_SYNC)

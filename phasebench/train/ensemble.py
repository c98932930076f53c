"""Ensembles: M independent models trained on the same batches (docs/gpu.md#concurrent-jobs-and-ensembles).

Member k (1-based) is the Net built right after torch.manual_seed(k), so member 1 starts from the published
model's weights and each other member from its own seed's; each has its own SGD. Two ways to train them,
each one step at a time on a batch already on the device (Trainer.ensemble_step times the step):

- LoopEnsemble ("loop"): one model after another, each step exactly Trainer.step's forward, loss, backward
  and update. Member k trains as model k trained alone would, to the bit (tests/equivalence/test_ensembles.py);
  cpp/src/ensemble.cpp's Trainer::start_ensemble is its C++ twin.
- VmapEnsemble ("vmap", python-vmap): the M models as one, with torch.func: their parameters stacked
  (stack_module_state), the Net run on them through functional_call under vmap, one SGD over the stacked
  parameters. vmap runs the M convolutions as one convolution (conv1, whose input is shared) or one grouped
  convolution (conv2) and the linear layers as batched matrix products, which sum in another order: member
  k matches model k within a tolerance (tests/equivalence/test_ensembles.py says which and why). Its dropout draws
  one mask per member in one call (randomness="different"), so with dropout on its members train like the
  loop's, on other masks.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

MAX_MODELS = 4096  # far above any ensemble that fits a device; a typo's 10**9 models is refused at once


def seeded_models(models: int, make_model) -> list[torch.nn.Module]:
    if not 1 <= models <= MAX_MODELS:
        raise ValueError(f"an ensemble of {models} models: from 1 to {MAX_MODELS}")
    members = []
    for seed in range(1, models + 1):
        torch.manual_seed(seed)
        members.append(make_model())
    return members


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).float().cpu() for t in tensors])


def checked_member(member: int, models: int) -> int:
    if not 0 <= member < models:
        raise IndexError(f"member {member} of an ensemble of {models} (members are numbered from 0)")
    return member


class LoopEnsemble:
    def __init__(self, models: int, make_model, make_optimizer):
        self.members = [(model, make_optimizer(model.parameters())) for model in seeded_models(models, make_model)]

    def step(self, data: torch.Tensor, target: torch.Tensor) -> list[torch.Tensor]:
        losses = []
        for model, optimizer in self.members:
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.detach())
        return losses

    def member_params(self, member: int) -> torch.Tensor:
        model, _ = self.members[checked_member(member, len(self.members))]
        return flat(model.parameters())


class VmapEnsemble:
    def __init__(self, models: int, make_model, make_optimizer):
        members = seeded_models(models, make_model)
        self.models = models
        # Leaves of their own, [M, ...] each, in named_parameters() order; the members are not used again.
        self.params, self.buffers = stack_module_state(members)
        skeleton = copy.deepcopy(members[0]).to("meta")  # the Net's code without storage of its own

        def loss_of(params, buffers, data, target):
            return F.nll_loss(functional_call(skeleton, (params, buffers), (data,)), target)

        # Every member sees the same batch (in_dims None); each draws its own dropout masks.
        self.losses_of = vmap(loss_of, in_dims=(0, 0, None, None), randomness="different")
        self.optimizer = make_optimizer(self.params.values())

    def step(self, data: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        losses = self.losses_of(self.params, self.buffers, data, target)
        # Member k's parameters appear in loss k alone, so the sum's gradient is each member's own.
        losses.sum().backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return losses.detach()

    def member_params(self, member: int) -> torch.Tensor:
        member = checked_member(member, self.models)
        return flat(stacked[member] for stacked in self.params.values())


KINDS = {"loop": LoopEnsemble, "vmap": VmapEnsemble}

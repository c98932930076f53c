"""A test-only Adam written in LibTorch's form (torch/csrc/api/src/optim/adam.cpp: exp_avg.mul_(beta1).add_(grad,
1 - beta1), where torch.optim.Adam writes exp_avg.lerp_(grad, 1 - beta1)), so that the equivalence tests can train
the Python DCGAN to the bit against the C++ one (tests/test_dcgan_equivalence.py; phasebench/train/dcgan.py's
`optimizer` option names it)."""

from __future__ import annotations

import math

import torch


class LibTorchAdam(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad, state = param.grad, self.state[param]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["step"] += 1
                bias_correction1 = 1 - beta1 ** state["step"]
                bias_correction2 = 1 - beta2 ** state["step"]
                state["exp_avg"].mul_(beta1).add_(grad, alpha=1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denominator = (state["exp_avg_sq"].sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
                param.addcdiv_(state["exp_avg"], denominator, value=-group["lr"] / bias_correction1)

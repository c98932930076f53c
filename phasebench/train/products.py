"""What a phase produced, for the plain tests to check that it did real work (docs/method.md#what-is-measured); the
C++ side reports the same fields (pb_result)."""

from __future__ import annotations

import torch

# The checks a phase's product may carry (docs/method.md#what-is-measured); None where a phase has none.
CHECKS = ("batch", "on_device", "matches_host", "resident", "recompute_error", "zero_before", "nonzero_grads",
          "update_error", "moved", "distinct", "leftovers")


def product(main: torch.Tensor, finite: bool, loss: float | None = None, **checks) -> dict:
    """What a phase produced, for plain tests to check (the C++ side reports the same fields)."""
    unknown = checks.keys() - set(CHECKS)
    assert not unknown, f"unknown product checks {unknown}"
    return {"shape": list(main.shape), "finite": bool(finite), "loss": loss} | dict.fromkeys(CHECKS) | checks


def all_finite(tensors) -> bool:
    return all(t is not None and bool(torch.isfinite(t).all()) for t in tensors)


# The empty body every trainer runs by this name beside its phases: the instruction-count mode's floor
# (phasebench/worker/count_server.py). A program's trainers run it with nothing before it (their run_phase).
NOOP = "noop"


def empty_product() -> dict:
    return product(torch.empty(0), True)

"""A device name made definite: every `torch.cuda.set_device`, `steps.make`, `device_id=`, `device_ids=` and rank's
device takes a `torch.device` with its index from here, so that a bare "cuda" means one GPU everywhere. The C++
trainer maps a bare "cuda" the same way (cpp/src/trainer.cpp `resolve_device`). torch is imported on the first call:
the pytest process and the C++ worker import this module without loading torch."""

from __future__ import annotations


def with_index(device):
    """`device` (a name or a torch.device) as a torch.device with an index: a bare "cuda" becomes the current CUDA
    device (cuda:0 in a fresh process). Raises RuntimeError where cuda is asked for and CUDA is not available."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return device
    if not torch.cuda.is_available():
        raise RuntimeError(f"device {device} requested but CUDA is not available")
    if device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def rank_device(device: str, rank: int) -> str:
    """One GPU a rank, named with its index without touching CUDA (the pytest process): rank r of a world on a bare
    "cuda" trains on cuda:r, a world of one included (NCCL's device_id needs an index)."""
    return f"cuda:{rank}" if device == "cuda" else device

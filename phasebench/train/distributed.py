"""Data parallel in the Python trainer (docs/distributed.md): what a rank of python-ddp or python-allreduce does once
its worker has joined the process group (phasebench/worker/group.py). Its C++ twin is cpp/src/distributed.cpp.

- Sharding: of each global batch (the published 64, the epoch's last 32), rank r of W trains the images r, r + W,
  ...: DistributedSampler(num_replicas=W, rank=r, shuffle=False)'s order with a batch of batch / W
  (phasebench/train/loaders.py's SplitBatches). A step is one update of the global batch on every rank.
- "ddp": the model in DistributedDataParallel as users write it; its bucketed all-reduce runs inside backward.
- "allreduce": after backward, each gradient all-reduced (summed) in turn and divided by W, as
  pytorch/examples' cpp/distributed/dist-mnist.cpp does: the same algorithm as cpp-allreduce.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from phasebench.spec import SYNCS, Workload


def attach(t, bucket_mb: float | None = None) -> None:
    """Trainer `t` becomes a rank of the default process group: its batches its shard, its model wrapped where
    its sync is DDP."""
    if t.sync not in SYNCS:
        raise ValueError(f"a trainer with sync {t.sync!r} cannot join a process group: {', '.join(SYNCS)}")
    if t.world > 1 or t.group_attached:
        raise ValueError("this trainer already belongs to a process group")
    rank, world = dist.get_rank(), dist.get_world_size()
    problem = Workload(t.workload.width, t.batch_size).shard_problem(world)
    if problem:
        raise ValueError(problem)
    t.rank, t.world, t.group_attached, t.bucket_mb = rank, world, True, bucket_mb
    t.shard(rank, world)
    # The model the trainer built (seed 1, as C++'s), wrapped in DDP where its sync is DDP (its constructor broadcasts
    # rank 0's parameters); build_model wraps every later one.
    t.ddp = wrap(t, t.model)


def wrap(t, model: torch.nn.Module) -> torch.nn.Module | None:
    """The module the forward runs: DDP around the model for "ddp" once attached, else None (the model itself)."""
    if t.sync != "ddp" or not t.group_attached:
        return None
    from torch.nn.parallel import DistributedDataParallel

    devices = [t.device] if t.device.type == "cuda" else None
    options = {} if t.bucket_mb is None else {"bucket_cap_mb": t.bucket_mb}
    return DistributedDataParallel(model, device_ids=devices, **options)


def grad_sync(t) -> None:
    """dist-mnist.cpp's step after backward: each gradient all-reduced, waited for, then divided by the world size."""
    for parameter in t.model.parameters():
        dist.all_reduce(parameter.grad)
        parameter.grad.div_(t.world)


def barrier() -> None:
    dist.barrier()

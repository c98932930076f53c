"""A worker's process group (docs/distributed.md): made through torch.distributed in both workers, Python's and
C++'s (the C++ library then takes it from c10d's group registry by its name and calls it
through the abstract ProcessGroup interface; cpp/src/distributed.cpp).

The per-phase cases' worlds: rank 0 opens the TCPStore on 127.0.0.1 port 0 (the kernel picks a free port, so there
is no pick-then-bind race) and reports the port it got; the pytest process hands it to the other ranks. Gloo is bound
to the loopback interface (GLOO_SOCKET_IFNAME=lo) on cpu, NCCL on cuda. Under torchrun
(phasebench/worker/torchrun_rank.py) the group comes from the agent's store (env://), where every rank, rank 0
included, is a store client.

Imported by the workers only, and torch.distributed only when a group is made: the C++ worker imports torch for
this alone (the price of route (a), weighed in docs/distributed.md).
"""

from __future__ import annotations

import datetime
import os

HOST = "127.0.0.1"


def one_line(error: BaseException) -> str:
    """An error's message on one line: c10d's carry a C++ backtrace and the file and line they were raised at."""
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__).strip()


class StoreFailed(RuntimeError):
    """The store or the rendezvous failed: one line that says why."""


def backend_for(device: str) -> str:
    return "nccl" if device.startswith("cuda") else "gloo"


def open_store(world: int, timeout_s: float):
    """Rank 0's TCPStore, bound to port 0 on 127.0.0.1: (the store, the port the kernel gave it)."""
    import torch.distributed as dist

    try:
        store = dist.TCPStore(HOST, 0, world, is_master=True, timeout=datetime.timedelta(seconds=timeout_s),
                              wait_for_workers=False)
    except Exception as error:  # noqa: BLE001  (c10d raises several kinds; one line says which)
        raise StoreFailed(f"rank 0 could not open the store on {HOST}: {one_line(error)}") from None
    return store, store.port


def join(rank: int, world: int, device: str, timeout_s: float, port: int, store=None) -> str:
    """This process becomes rank `rank` of the default group; returns the group's name in c10d's registry."""
    import torch.distributed as dist

    if dist.is_initialized():  # a trainer started again in this process (World.restart) joins the group it is in
        if (dist.get_rank(), dist.get_world_size()) != (rank, world):
            raise ValueError(f"this worker is rank {dist.get_rank()} of {dist.get_world_size()}, not {rank} of {world}")
        return dist.group.WORLD.group_name
    timeout = datetime.timedelta(seconds=timeout_s)
    if store is None:
        try:
            store = dist.TCPStore(HOST, port, world, is_master=False, timeout=timeout)
        except Exception as error:  # noqa: BLE001
            raise StoreFailed(f"rank {rank} could not reach the store at {HOST}:{port} within {timeout_s:g} s: "
                              f"{one_line(error)}") from None
    backend = backend_for(device)
    if backend == "gloo":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return _init(dist, backend, rank, world, timeout, store=store, device=device)


def join_env(device: str, timeout_s: float) -> str:
    """Under torchrun: the default group from the agent's store (env://); every rank is a store client."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return _init(dist, backend_for(device), rank, world, datetime.timedelta(seconds=timeout_s), device=device)


def _init(dist, backend, rank, world, timeout, device, **where) -> str:
    from phasebench.devices import with_index

    extra = {"device_id": with_index(device)} if backend == "nccl" else {}
    try:
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout, **where, **extra)
    except Exception as error:  # noqa: BLE001
        raise StoreFailed(f"rank {rank} of {world} could not join the {backend} group (rendezvous): "
                          f"{one_line(error)}") from None
    return dist.group.WORLD.group_name


def leave() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()

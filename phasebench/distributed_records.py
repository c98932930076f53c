"""The data-parallel cases' records (bench/test_distributed.py, docs/distributed.md): part of the saved-result format,
which phasebench/schema.py re-exports and reads and writes as it does every case kind's. A leaf: it imports nothing of
the suite beyond phasebench.record (tests/test_layers.py)."""

from __future__ import annotations

from dataclasses import dataclass

from phasebench.record import Case


@dataclass
class DataParallel(Case):
    """What every data-parallel case records (bench/test_distributed.py, docs/distributed.md)."""
    language: str | None = None
    reference: str | None = None
    world_size: int | None = None
    sync: str | None = None
    threads: int | None = None
    threads_per_rank: int | None = None
    threads_split: str | None = None


@dataclass
class DistPhaseInfo(DataParallel):
    """test_dist_phase: one phase on every rank; the round's value is the slowest rank's."""
    note: str | None = None
    sync_how: str | None = None
    backend: str | None = None
    clock: str | None = None
    dist_timeout_s: float | None = None
    rank_median_s: list | None = None
    rank_cpu_cores: list | None = None
    slowest_rank_rounds: list | None = None


@dataclass
class DistRunParts(DataParallel):
    """What both data-parallel training runs record: the slowest rank's Total Time and the scaling."""
    epochs: int | None = None
    steps: int | None = None
    images: int | None = None
    total_median_s: float | None = None
    summed_median_s: float | None = None
    loop_median_s: float | None = None
    ranks: list | None = None
    step_p50_s: float | None = None
    step_p95_s: float | None = None
    images_per_s: float | None = None
    single_rank_images_per_s: float | None = None
    scaling_efficiency: float | None = None


@dataclass
class DistTrainingRunInfo(DistRunParts):
    """test_dist_training_run: a fresh world trains the same steps each round."""
    trained: str | None = None
    total_s: list | None = None
    scaling_unavailable: str | None = None


@dataclass
class TorchrunInfo(DistRunParts):
    """test_torchrun: the training run launched by torchrun, two agents."""
    nodes: int | None = None
    nproc_per_node: int | None = None
    network: str | None = None
    namespaces: object = None
    rendezvous: object = None
    command: object = None

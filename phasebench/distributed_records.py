"""The data-parallel cases' records (bench/test_distributed.py, docs/distributed.md): part of the saved-result format,
which phasebench/schema.py re-exports and reads and writes as it does every case kind's. A leaf: it imports nothing of
the suite beyond phasebench.record (tests/test_layers.py)."""

from __future__ import annotations

from dataclasses import dataclass

from phasebench.record import Case, saved_field


@dataclass
class DataParallel(Case):
    """What every data-parallel case records (bench/test_distributed.py, docs/distributed.md)."""
    language: str | None = saved_field("text", "`python` or `cpp`")
    reference: str | None = saved_field("text", "the implementation it is compared with")
    world_size: int | None = saved_field("count", "ranks in the process group (`--world-size`)")
    sync: str | None = saved_field("text", "how the gradients are synchronized (the registry's `sync`: "
                                           "docs/distributed.md)")
    threads: int | None = saved_field("count", "the run's intra-op threads")
    threads_per_rank: int | None = saved_field("count", "each rank's intra-op threads: on cpu the run's split between "
                                                        "the ranks")
    threads_split: str | None = saved_field("text", "how the threads were shared, in words")


@dataclass
class DistPhaseInfo(DataParallel):
    """test_dist_phase: one phase on every rank; the round's value is the slowest rank's."""
    note: str | None = saved_field("text", "the registry's note for this device, or null")
    sync_how: str | None = saved_field("text", "the synchronization in words")
    backend: str | None = saved_field("text", "the process group's backend: `gloo` on cpu, `nccl` on cuda")
    clock: str | None = saved_field("text", "what the clock holds: every rank leaves an untimed barrier just before "
                                            "its clock starts")
    dist_timeout_s: float | None = saved_field("s", "the process group's timeout (`--dist-timeout`)")
    rank_median_s: list | None = saved_field("list of s", "each rank's median phase time")
    rank_cpu_cores: list | None = saved_field("list of cores", "each rank's CPU time over its timed wall time")
    slowest_rank_rounds: list | None = saved_field("list of count", "how many rounds each rank was the slowest; a "
                                                                    "round's value is the slowest rank's")


@dataclass
class DistRunParts(DataParallel):
    """What both data-parallel training runs record: the slowest rank's Total Time and the scaling."""
    epochs: int | None = saved_field("count", "epochs trained each round (`--epochs`)")
    steps: int | None = saved_field("count", "global steps each round")
    images: int | None = saved_field("count", "images trained each round, all ranks together")
    total_median_s: float | None = saved_field("s", "the median of the slowest rank's Total Time: set-up, joining the "
                                                    "group and loop")
    summed_median_s: float | None = saved_field("s", "the median of the slowest rank's summed step times")
    loop_median_s: float | None = saved_field("s", "the median of the slowest rank's training loop")
    ranks: list | None = saved_field("list of objects", "each rank's figures: `rank`, `total_s`, `join_s` and, as each "
                                                        "kind has them, `summed_s`, `setup_s`, `steps`, `step_p50_s`, "
                                                        "`step_p95_s`, or torchrun's `group_rank`, `local_rank`, "
                                                        "`master`, `agent_store`, `threads`")
    step_p50_s: float | None = saved_field("s", "the median step, each step the slowest rank's")
    step_p95_s: float | None = saved_field("s", "the 95th percentile step, each step the slowest rank's")
    images_per_s: float | None = saved_field("images/s", "`images` over the median loop")
    single_rank_images_per_s: float | None = saved_field("images/s", "the world-size-1 case's rate in the same "
                                                                     "session; null where it did not run first")
    scaling_efficiency: float | None = saved_field("ratio", "`images_per_s` over `world_size` × "
                                                            "`single_rank_images_per_s`; 1 is perfect scaling")


@dataclass
class DistTrainingRunInfo(DistRunParts):
    """test_dist_training_run: a fresh world trains the same steps each round."""
    trained: str | None = saved_field("text", "what each round trained, in words")
    total_s: list | None = saved_field("list of s", "each round's slowest rank's Total Time")
    scaling_unavailable: str | None = saved_field("text", "why `scaling_efficiency` is null")


@dataclass
class TorchrunInfo(DistRunParts):
    """test_torchrun: the training run launched by torchrun, two agents."""
    nodes: int | None = saved_field("count", "torchrun agents (`--nnodes`): 2")
    nproc_per_node: int | None = saved_field("count", "ranks per agent")
    network: str | None = saved_field("text", "how the agents reached each other: network namespaces where the machine "
                                              "allows")
    namespaces: object = saved_field("flag", "whether the agents ran in network namespaces of their own")
    rendezvous: object = saved_field("text", "the c10d rendezvous the agents used: its address, port and id")
    command: object = saved_field("text", "the torchrun command line")

"""The saved-result format's base (phasebench/schema.py holds the rest and re-exports these): a saved dict's typed
form (Record), the error every refused record raises (SchemaError), and the records every case shares: what the
utilization samplers record (Utilization) and what every case records of itself (Case). A leaf: it imports nothing of
the suite (tests/test_layers.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


class SchemaError(ValueError):
    """A saved or written record with a key its kind does not have, or of a method this code cannot read."""


@dataclass
class Record:
    """A saved dict's typed form: every field a key (saved_field: its unit and meaning), None where it was not
    recorded."""

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(field.name for field in dataclasses.fields(cls))

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.keys()}

    @classmethod
    def required(cls) -> tuple[str, ...]:
        """The keys every saved record of this kind holds (saved_field's `required`): a record without one is
        refused."""
        return tuple(found.name for found in dataclasses.fields(cls) if found.metadata.get("required"))

    def missing(self) -> list[str]:
        """The required keys this record holds no value for."""
        return [name for name in self.required() if getattr(self, name) is None]


def saved_field(unit: str, meaning: str, required: bool = False):
    """A saved key: its unit and what it means, which docs/reference/saved-results.md renders
    (phasebench/reference/saved.py), and whether every saved record of its kind holds it (Record.required; None
    only while a case is being written). Units: s (seconds), ns (nanoseconds), bytes, cores (CPU time over wall
    time), count (a whole number of things), a list or object of those where the value is one, "text" for words,
    "flag" for a boolean."""
    return field(default=None, metadata={"unit": unit, "meaning": meaning, "required": required})


# -- what every case's extra_info holds ---------------------------------------------------------------------------

@dataclass
class Utilization(Record):
    """What phasebench/utilization.py records while the rounds run: the GPU's sampled use (null on cpu, without
    NVML, or with --no-utilization) and the worker processes' CPU (null where no worker is the case's own)."""
    gpu: dict | None = saved_field("object", "the GPU's use while the rounds ran, sampled through NVML: `source`, "
                                             "`interval_s`, `samples`, `gaps` (each sampling error with its `at_s`) "
                                             "and, for `utilization_pct`, `memory_utilization_pct`, `memory_used_mib`, "
                                             "`power_w`, `sm_clock_mhz` and `temperature_c`, each its `mean`, `median` "
                                             "and `max`; null on cpu, without NVML, or with `--no-utilization`")
    cpu: dict | None = saved_field("object", "the case's worker processes' CPU across the rounds: `cores` (their CPU "
                                             "time over the wall time), `cpu_s`, `user_s`, `system_s`, "
                                             "`cores_available`, `wall_s`, `machine_other_cores` (what the rest of the "
                                             "machine used meanwhile, in cores; null for a short window), and with "
                                             "several processes each one's figures in `processes`; null where no "
                                             "worker is the case's own, or with `--no-utilization`")


@dataclass
class Case(Utilization):
    """What every case records of itself: its record kind, which implementation, device, phase and workload, and its
    rounds."""
    kind: str | None = saved_field("text", "the record's kind, written with it: `PhaseInfo`, `CountedPhaseInfo`, "
                                           "`TrainingRunInfo`, `ConcurrentJobsInfo`, `EnsembleInfo`, `LossItemInfo`, "
                                           "`WorkerOverheadInfo`, `DistPhaseInfo`, `DistTrainingRunInfo` or "
                                           "`TorchrunInfo` (the sections below)", required=True)
    implementation: str | None = saved_field("text", "the registered implementation that ran (`python`, `cpp`, a "
                                                     "variant: docs/implementations.md)", required=True)
    device: str | None = saved_field("text", "`cpu` or `cuda`", required=True)
    phase: str | None = saved_field("text", "what was timed: a training phase (another program's named "
                                            "`PROGRAM:PHASE`), `training_run`, `concurrent_jobs-N`, `ensemble-M`, "
                                            "`loss_item`, `worker_overhead` or `torchrun`", required=True)
    program: str | None = saved_field("text", "the program whose case it is, where that is not the default program "
                                              "(`--program`; phasebench/programs.py): its `phase` is then "
                                              "`PROGRAM:PHASE` or `PROGRAM:training_run`; absent for the default "
                                              "program's")
    width: int | None = saved_field("count", "the workload's multiplier of the Net's hidden sizes (`--width`)")
    batch_size: int | None = saved_field("count", "the workload's images per batch (`--batch-size`)")
    workload: str | None = saved_field("text", "the workload's id suffix: empty for the published workload, else e.g. "
                                               "`w4-b256`")
    rounds: int | None = saved_field("count", "the counted rounds (`--rounds`; a training run's: `--run-rounds`)")
    warmup_rounds: int | None = saved_field("count", "the uncounted rounds before them (`--warmup-rounds`; 0 for a "
                                                     "training run)")
    # Paired timing (docs/method.md#paired-in-time): absent from a case that is not paired, and from results saved
    # before it existed.
    paired_with: list | None = saved_field("list of text", "the implementations measured side by side with it in "
                                                           "alternating blocks, in the first sweep's order; null where "
                                                           "the case was timed unpaired (`unpaired` says why)")
    pair_block_rounds: int | None = saved_field("count", "counted rounds per block of the paired measurement (a "
                                                         "training run's block is one fresh worker's run)")
    block_medians_s: list | None = saved_field("list of s", "each of its blocks' median (per call), in the order "
                                                            "measured: what the ratio's pairs are made of")
    block_workers: list | None = saved_field("list of count", "each of its blocks' worker slot (`--pair-workers`): "
                                                              "the blocks of one slot ran in one worker process a side")
    ratio: dict | None = saved_field("object", "its time over its reference's, from the paired blocks: `to` (the "
                                               "reference), `statistic` (`median`: the median of the worker pairs' "
                                               "ratios, each the median of its blocks' ratios, or of the blocks' ratios "
                                               "where they ran in one worker a side, with its rank interval, null below "
                                               "6 pairs; `mean`: a training run's, the geometric mean of its pairs of "
                                               "rounds' ratios with its t interval), `estimate`, `low` and `high` (its "
                                               "interval), `confidence`, `pairs` (worker pairs, block pairs or pairs of "
                                               "rounds), "
                                               "`half_width` (a fraction), `decided` (`half_width` within "
                                               "phasebench/stats.py's `DECIDED_HALF_WIDTH`), `undecided` (why not, "
                                               "or null), `leaves_out` (what spread the interval does not hold)")
    unpaired: str | None = saved_field("text", "why the case, or its reference, was timed unpaired; null where paired")
    machine_fit: dict | None = saved_field("object", "paired cases: whether the machine could measure it "
                                                     "(docs/method.md#a-machine-unfit-to-measure): "
                                                     "`run_queue_wait_share` (its worker's threads' time waiting for a "
                                                     "core over their time on one, across its blocks), `load_per_core` "
                                                     "(the load average per core at the first block's start and the "
                                                     "last block's end), `fit`, and `why` not")
    worker_replaced: str | None = saved_field("text", "where the case's pooled worker (or data-parallel world) "
                                                      "replaced one that had died in an earlier case "
                                                      "(docs/faults.md#faults-and-bad-input): the dead worker (or "
                                                      "world's ranks), its pid and how it died; null where it "
                                                      "replaced none")

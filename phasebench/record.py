"""The saved-result format's base (phasebench/schema.py holds the rest and re-exports these): a saved dict's typed
form (Record), the error every refused record raises (SchemaError), and the records every case shares: what the
utilization samplers record (Utilization) and what every case records of itself (Case). A leaf: it imports nothing of
the suite (tests/test_layers.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


class SchemaError(ValueError):
    """A saved or written record with a key its kind does not have, or of a method this code cannot read."""


@dataclass
class Record:
    """A saved dict's typed form: every field a key, None where it was not recorded."""

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(field.name for field in dataclasses.fields(cls))

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.keys()}


# -- what every case's extra_info holds ---------------------------------------------------------------------------

@dataclass
class Utilization(Record):
    """What phasebench/utilization.py records while the rounds run: the GPU's sampled use (null on cpu, without
    NVML, or with --no-utilization) and the worker processes' CPU (null where no worker is the case's own)."""
    gpu: dict | None = None
    cpu: dict | None = None


@dataclass
class Case(Utilization):
    """What every case records of itself: which implementation, device, phase and workload, and its rounds."""
    implementation: str | None = None
    device: str | None = None
    phase: str | None = None
    width: int | None = None
    batch_size: int | None = None
    workload: str | None = None  # the workload's id suffix ('' for the published workload)
    rounds: int | None = None
    warmup_rounds: int | None = None

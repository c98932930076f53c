"""A saved result (SavedResult): pytest-benchmark's JSON of a phasebench run, parsed once into the run's typed
machine info (schema.MachineInfo) and its benchmarks (SavedCase), each phasebench case under its key (CaseKey).

The one module that parses a saved result (tests/test_one_reader.py): the report, both gates, the history and the
plugin's gating read results through SavedResult.load (a file) or SavedResult.from_benchmarks (a run still in the
pytest session). It owns the format's versions: a result saved in an older format (schema.FORMAT_VERSION; before the
format was recorded, its method's version) is brought to the current one by one migration per version (MIGRATIONS);
what cannot be read is refused (SavedResultError) in one line naming the file and the benchmark or the key.

A leaf beside phasebench.schema: it imports no torch and nothing of the suite beyond phasebench.schema (with its
records and phasebench.spec) and phasebench.method (tests/test_saved.py, tests/test_layers.py).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from phasebench import schema, spec
from phasebench.method import METHOD_VERSION
from phasebench.record import Case, SchemaError


class SavedResultError(SchemaError):
    """A saved result that cannot be read: `reason` says why, the message names the file too."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"{source}: {reason}")
        self.source, self.reason = source, reason


class NotASavedResult(SavedResultError):
    """A file that is JSON but no pytest-benchmark result (a study's data, a gate's rows, a history series)."""

    def __init__(self, source: str):
        super().__init__(source, "not a pytest-benchmark result (no 'benchmarks' list)")


class CaseKey(NamedTuple):
    """What names a phasebench case across results: a data-parallel case's workload id ends in its world size
    ('world2', 'w4-b256-world2'), so that world sizes never collide; the published workload's id is ''."""
    phase: str
    implementation: str
    device: str
    workload: str


def _described(key: CaseKey) -> str:
    return f"{key.phase}, {key.implementation}, {key.device}, workload {key.workload or 'published'}"


def case_key_of(info: Case) -> CaseKey:
    workload = spec.of_info({"width": info.width, "batch_size": info.batch_size}).id
    world_size = getattr(info, "world_size", None)
    if world_size:
        workload = "-".join(filter(None, (workload, f"world{world_size}")))
    return CaseKey(info.phase, info.implementation, info.device, workload)


@dataclass(frozen=True)
class SavedCase:
    """One benchmark of a saved result: its names, pytest-benchmark's statistics (seconds; a counted result's are
    instructions read as 1e-9 s each), its record (None for a benchmark that is no phasebench case) and its key."""
    name: str
    fullname: str
    stats: dict
    info: Case | None
    key: CaseKey | None

    @property
    def median(self) -> float:
        return self.stats["median"]

    @property
    def distributed(self) -> bool:
        return bool(getattr(self.info, "world_size", None))


# -- the format's versions -------------------------------------------------------------------------------------

# Keys that older formats saved and the current records no longer have, with the last format that saved each: the
# migrations drop them (or move them), and a newer file that holds one is refused with this said.
RETIRED = {
    schema.TrainingRunInfo: {"setup_holds": 3},  # a sentence saying what set-up held; the method says it
    schema.DistTrainingRunInfo: {"setup_holds": 3},
    schema.MachineInfo: {"test_slow_phase": 3},  # the slowed phase of a testing run; now in `testing`
}


def _machine(result: dict) -> dict:
    info = result.setdefault("machine_info", {})
    if not isinstance(info.get("phasebench"), dict):
        info["phasebench"] = {}
    return info["phasebench"]


def _extra_infos(result: dict):
    for bench in result["benchmarks"]:
        if isinstance(bench.get("extra_info"), dict):
            yield bench["extra_info"]


def _method_recorded(result: dict) -> None:
    """Format 1 recorded no method: `method` 1 is set."""
    _machine(result).setdefault("method", 1)


def _unchanged(result: dict) -> None:
    """The format gained keys only (each a record field that older results leave null)."""


def _retired_keys_dropped(result: dict) -> None:
    """`setup_holds` (what a training run's set-up held, in words) is dropped; a testing run's `test_slow_phase` moves
    into `testing` as `slow_phase`."""
    machine = _machine(result)
    slow = machine.pop("test_slow_phase", None)
    if slow:
        machine["testing"] = (machine.get("testing") or {}) | {"slow_phase": slow}
    for info in _extra_infos(result):
        info.pop("setup_holds", None)


def kind_by_phase(info: dict) -> type[Case] | None:
    """The record kind formats 1 to 5 left unsaved, from what the case recorded: its phase, a world size, a metric."""
    phase = info.get("phase")
    if not isinstance(phase, str):
        return None
    if phase == "torchrun":
        return schema.TorchrunInfo
    if info.get("world_size"):
        return schema.DistTrainingRunInfo if phase == "training_run" else schema.DistPhaseInfo
    if phase == "training_run":
        return schema.TrainingRunInfo
    if phase.startswith("concurrent_jobs-"):
        return schema.ConcurrentJobsInfo
    if phase.startswith("ensemble-"):
        return schema.EnsembleInfo
    if phase in ("loss_item", "worker_overhead"):
        return schema.LossItemInfo if phase == "loss_item" else schema.WorkerOverheadInfo
    return schema.CountedPhaseInfo if info.get("metric") == "instructions" else schema.PhaseInfo


def _kinds_saved(result: dict) -> None:
    """Each record gets its `kind`, told from what the case recorded (kind_by_phase), which format 6 saves."""
    for info in _extra_infos(result):
        kind = kind_by_phase(info)
        if kind is not None:
            info["kind"] = kind.__name__


# MIGRATIONS[n] brings a result of format n to format n + 1, in place.
MIGRATIONS: dict[int, Callable[[dict], None]] = {
    1: _method_recorded,
    2: _unchanged,  # method 2 added the timer floors
    3: _retired_keys_dropped,
    4: _unchanged,  # method 4 added method_sources
    5: _kinds_saved,
}  # one for every format before schema.FORMAT_VERSION (tests/test_saved.py)


def format_of(result: dict) -> int:
    """The format a saved result was written in: the one it records, else its method's version (1 where it records
    none), up to the last format that was not recorded: a result of a later method records its format."""
    machine = (result.get("machine_info") or {}).get("phasebench") or {}
    unrecorded = machine.get("method") or 1
    return machine.get("format") or (min(unrecorded, schema.LAST_UNRECORDED_FORMAT)
                                     if isinstance(unrecorded, int) else unrecorded)


def migrated(result: dict) -> dict:
    """A copy of `result` in the current format; ValueError naming the key for a format newer than this code."""
    found = format_of(result)
    if not isinstance(found, int) or found > schema.FORMAT_VERSION:
        raise ValueError(f"machine_info.phasebench.format {found!r}: this code reads formats up to "
                         f"{schema.FORMAT_VERSION} (phasebench/schema.py): read it with the code that made it")
    result = copy.deepcopy(result)
    for version in range(found, schema.FORMAT_VERSION):
        MIGRATIONS[version](result)
    _machine(result)["format"] = schema.FORMAT_VERSION
    return result


def _retired_hint(kind: type, error: SchemaError) -> str:
    return "".join(f" ('{key}' was last saved by format {last})" for key, last in RETIRED.get(kind, {}).items()
                   if repr(key) in str(error))


# -- the result ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SavedResult:
    """One saved result, in the current format: where it came from, the run's machine info typed, and every benchmark
    (`benchmarks`, in saved order), the phasebench cases of one process by key (`cases`) and the data-parallel ones
    (`distributed_cases`). `platform` is pytest-benchmark's own machine_info (node, cpu, release, python_version),
    `commit_info` its commit_info with what phasebench adds (phasebench/provenance.py)."""
    source: str
    machine: schema.MachineInfo
    benchmarks: tuple[SavedCase, ...]
    saved_format: int = schema.FORMAT_VERSION  # the format it was saved in, before any migration
    platform: dict = field(default_factory=dict)
    commit_info: dict = field(default_factory=dict)
    datetime: str | None = None
    cases: dict[CaseKey, SavedCase] = field(init=False, repr=False)
    distributed_cases: dict[CaseKey, SavedCase] = field(init=False, repr=False)

    def __post_init__(self):
        keyed: dict[CaseKey, SavedCase] = {}
        for case in self.benchmarks:
            if case.key is None:
                continue
            first = keyed.setdefault(case.key, case)
            if first is not case:  # one would hide the other in every table and gate
                raise SavedResultError(self.source, f"{first.fullname} and {case.fullname} are one case "
                                                    f"({_described(case.key)}): a result holds each case once")
        object.__setattr__(self, "cases", {key: case for key, case in keyed.items() if not case.distributed})
        object.__setattr__(self, "distributed_cases", {key: case for key, case in keyed.items() if case.distributed})

    # -- reading -------------------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path) -> SavedResult:
        """The saved result in the file at `path` (SavedResultError naming the file and why it cannot be read)."""
        try:
            text = Path(path).read_text(encoding="utf8")
        except OSError as error:
            raise SavedResultError(str(path), error.strerror or str(error)) from None
        try:
            data = json.loads(text)
        except ValueError as error:  # JSONDecodeError
            raise SavedResultError(str(path), f"not JSON ({error})") from None
        return cls.from_json(data, str(path))

    @classmethod
    def read(cls, path, prog: str) -> SavedResult:
        """load(), or SystemExit naming `prog` and the file: for the commands."""
        try:
            return cls.load(path)
        except SavedResultError as error:
            raise SystemExit(f"{prog}: {error}") from None

    @classmethod
    def from_json(cls, data, source: str) -> SavedResult:
        """A saved result from pytest-benchmark's JSON, already parsed (a file's, or pytest-benchmark's own load of a
        baseline); `source` names it in errors."""
        benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
        if not isinstance(benchmarks, list):
            raise NotASavedResult(source)
        for index, bench in enumerate(benchmarks):
            stats = bench.get("stats") if isinstance(bench, dict) else None
            if not isinstance(stats, dict) or "median" not in stats or "fullname" not in bench:
                raise SavedResultError(source, f"benchmark #{index} has no fullname or stats.median")
        try:
            saved_format = format_of(data)
            current = migrated(data)
        except ValueError as error:
            raise SavedResultError(source, str(error)) from None
        machine_info = current.get("machine_info") or {}
        return cls._typed(source, machine_info, current["benchmarks"], saved_format, current.get("commit_info"),
                          current.get("datetime"))

    @classmethod
    def from_benchmarks(cls, benchmarks: list[dict], machine_info: dict, source: str = "this run") -> SavedResult:
        """The run still in the pytest session: its benchmarks as pytest-benchmark saves them
        (`Metadata.as_dict(include_data=False)`) and its machine_info (the current format's)."""
        return cls._typed(source, json.loads(json.dumps(machine_info)), benchmarks, schema.FORMAT_VERSION)

    @classmethod
    def _typed(cls, source: str, machine_info: dict, benchmarks: list[dict], saved_format: int,
               commit_info: dict | None = None, datetime: str | None = None) -> SavedResult:
        try:
            machine = schema.machine_of({"machine_info": machine_info}, source)
        except SchemaError as error:
            raise SavedResultError(source, f"machine_info: {str(error).split(': ')[-1]}"
                                           f"{_retired_hint(schema.MachineInfo, error)}") from None
        if machine.missing():
            raise SavedResultError(source, f"machine_info.phasebench has no {', '.join(map(repr, machine.missing()))}")
        if machine.method > METHOD_VERSION:
            raise SavedResultError(source, f"measured by phasebench method {machine.method}; this code knows methods "
                                           f"up to {METHOD_VERSION} (phasebench/method.py): read it with the code "
                                           f"that made it")
        cases = []
        for bench in benchmarks:
            name = schema.bench_name(bench)
            try:
                info = schema.info_of(bench)
            except SchemaError as error:
                kind = schema.KINDS.get((bench.get("extra_info") or {}).get("kind"))
                raise SavedResultError(source, f"{str(error).removeprefix(f'{source}: ')}"
                                               f"{_retired_hint(kind, error)}") from None
            if info is None and "phase" in (bench.get("extra_info") or {}):
                raise SavedResultError(source, f"{name}: its extra_info has a phase but no 'kind' (a required key)")
            if info is not None and info.missing():
                raise SavedResultError(source, f"{name}: {type(info).__name__} has no "
                                               f"{', '.join(map(repr, info.missing()))} (a required key)")
            cases.append(SavedCase(bench.get("name") or name, bench.get("fullname") or name, bench["stats"], info,
                                   case_key_of(info) if info is not None else None))
        platform = {key: value for key, value in machine_info.items() if key != "phasebench"}
        return cls(source, machine, tuple(cases), saved_format, platform, commit_info or {}, datetime)

    # -- what it holds -------------------------------------------------------------------------------------------

    @property
    def method(self) -> int:
        """The measurement method that made it (phasebench/method.py)."""
        return self.machine.method

    @property
    def metric(self) -> str:
        """What its statistics hold: "time" (seconds), or "instructions" (1e-9 per instruction)."""
        return self.machine.metric or "time"

    @property
    def counted(self) -> bool:
        """Whether it holds instruction counts (`--count instructions`), by its metric or by its records."""
        return self.metric == "instructions" or any(
            isinstance(case.info, schema.CountedPhaseInfo) for case in self.benchmarks)

    def published(self) -> dict[tuple[str, str, str], SavedCase]:
        """(phase, implementation, device) -> case of the published workload: what the published tables read."""
        return {key[:3]: case for key, case in self.cases.items() if not key.workload}

"""Saved results read into points: one per benchmark of a result, with what its series is keyed on and what it
is ordered by.

A series never joins results of different metrics, methods or machines. A time series is keyed on the CPU model,
its cores, the kernel, the torch build and the threads (and the GPU, on cuda); a count series on the count mode's
pins, the Valgrind and glibc versions and the pinned CPU capability (phasebench/plugin/counting.py's machine_info),
since a count does not depend on the clock speed of the CPU that ran it, and on the simulated caches' geometry and
the branch simulation where a count ran with them (a count without keeps the key it always had); either kind on the
intervention study's switches where a run changed one (--round-checks off, --omp-wait-policy, --pins count: a run
without keeps its key); and a time series on the case's calls per round where a round held more than one call
(pytest-benchmark's stats.iterations: a median per call of one call a round and of many is not the same statistic,
docs/method.md#calls-per-round; one call a round keeps the key it always had). Ordered by torch
version, the torch build leaves the key and only its kind (a CUDA build or a cpu one) stays.

A long history is kept as compact series (`append`, `python -m phasebench.history --append DIR`): one small file per
series, DIR/<metric>/<device>-<workload>-<phase>-<implementation>-<hash of the key>.json, holding its key once and one
line per run (commit, torch, value, a count's rounds, the context), instead of each run's full result. `read` reads
these files beside pytest-benchmark's own.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from phasebench import results, schema
from phasebench.saved import NotASavedResult, SavedResult, SavedResultError


@dataclass(frozen=True)
class Point:
    """One benchmark of one saved result."""

    source: str  # the file
    key: tuple  # SeriesKey.fields(): the series it belongs to
    commit: str | None  # the full hash of the commit it ran (commit_info["id"]), None where none was recorded
    torch: str | None
    value: float  # the median: seconds, or instructions
    rounds: tuple[float, ...]  # each round's value (a count's instructions)
    fullname: str
    language: str | None = None
    reference: str | None = None  # the implementation, of the other language, it is compared with
    context: dict = field(default_factory=dict)  # what is not keyed on but may explain a step
    run: str | None = None  # the run's identity (its result's datetime): a run appended twice is kept once
    commit_time: str | None = None  # the commit's time as the run recorded it (commit_info["time"], ISO 8601)


@dataclass(frozen=True)
class SeriesKey:
    """What a series is keyed on; `machine` is (name, value) pairs, in the order they are shown."""

    machine: tuple[tuple[str, str], ...]
    method: int
    metric: str
    device: str
    workload: str
    implementation: str
    phase: str

    def group(self) -> tuple:
        """Everything but the implementation and the phase: the series shown together."""
        return self.machine, self.method, self.metric, self.device, self.workload

    def machine_label(self) -> str:
        return ", ".join(f"{name} {value}" for name, value in self.machine)


def platform_of(result: SavedResult) -> dict:
    """pytest-benchmark's own machine_info keys the series need (the CPU's cores, the kernel, Python): phasebench's
    schema types machine_info["phasebench"] only, so these are read here, in this one place."""
    info = result.platform
    cpu = info.get("cpu") if isinstance(info.get("cpu"), dict) else {}
    return {"cores": cpu.get("count"), "kernel": info.get("release"), "python": info.get("python_version"),
            "cpu_brand": cpu.get("brand_raw")}


def torch_kind(torch: str | None) -> str:
    """A torch build's kind: 'cuda' for a CUDA wheel (local version +cuNNN), 'rocm', else 'cpu'."""
    local = (torch or "").partition("+")[2]
    return "cuda" if local.startswith("cu") else "rocm" if local.startswith("rocm") else "cpu"


def machine_key(machine: schema.MachineInfo, platform: dict, device: str, threads, by: str,
                count_glibc: str | None = None) -> tuple:
    """The (name, value) pairs a series of this result is keyed on (the module's docstring); `count_glibc` stands
    for the glibc of a count that does not record its own (one counted before the count mode recorded it)."""
    torch = ("torch build", torch_kind(machine.torch)) if by == "torch" else ("torch", machine.torch)
    # The intervention study's switches a run changed (results.switched): none for a run without them, which keeps
    # the key it always had.
    switched = tuple(results.switched(machine).items())
    if (machine.metric or "time") == "instructions":
        count = machine.count or {}
        pins = " ".join(f"{name}={value}" for name, value in sorted((count.get("pins") or {}).items()))
        pairs = (("valgrind", count.get("valgrind")), ("glibc", count.get("glibc") or count_glibc or "unrecorded"),
                 ("CPU capability", count.get("cpu_capability")), torch, ("pins", pins or None))
        caches = count.get("caches") or {}  # --count-i1/-d1/-ll: "I1=32768,8,64 D1=32768,8,64 LL=8388608,16,64"
        if caches:
            pairs += (("caches", " ".join(f"{name}={','.join(map(str, caches[name]))}"
                                          for name in ("I1", "D1", "LL") if name in caches)),)
        if count.get("branch_sim"):
            pairs += (("branches", "simulated"),)
        return pairs + switched
    pairs = [("CPU", machine.cpu or platform["cpu_brand"]), ("cores", platform["cores"]),
             ("kernel", platform["kernel"]), torch, ("threads", threads)]
    if device == "cuda":
        pairs.append(("GPU", (machine.gpu or {}).get("name")))
    return tuple((name, "unrecorded" if value is None else str(value)) for name, value in pairs) + switched


def calls_per_round(stats: dict) -> tuple:
    """The key's pair for a case timed as more than one call a round (stats.iterations), else none."""
    calls = stats.get("iterations")
    return (("calls per round", str(calls)),) if isinstance(calls, int) and calls > 1 else ()


def context_of(machine: schema.MachineInfo, platform: dict, by: str) -> dict:
    """What a series is not keyed on that a step between two points may come from (by torch version, the torch
    version is the axis itself and not named)."""
    context = {"count bracket": (machine.count or {}).get("bracket"), "method sources": machine.method_sources,
               "python": platform["python"], "torchvision": machine.torchvision, "rounds": machine.rounds}
    return context if by == "torch" else context | {"torch": machine.torch}


@dataclass
class Reading:
    """What the results read: their points and what was left out, each with its reason."""

    points: list[Point] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def result_files(paths: list[str]) -> list[Path]:
    """The files named, and every .json under the folders named (pytest-benchmark's storage: .benchmarks/MACHINE/
    NNNN_*.json), in a stable order."""
    found = []
    for name in paths:
        path = Path(name)
        found += sorted(path.rglob("*.json")) if path.is_dir() else [path]
    return found


def read(paths: list[str], by: str = "commit", dirty: bool = False, count_glibc: str | None = None) -> Reading:
    """The points of every saved result under `paths`; what cannot be read, a testing run (its knobs slow phases on
    purpose) and, unless `dirty`, a run of a tree with changes not committed (its code is no commit's) are left
    out, each said why. `count_glibc`: the glibc version of counts that record none (machine_key)."""
    reading = Reading()
    for path in result_files(paths):
        try:
            result = SavedResult.load(path)
        except NotASavedResult:
            held = read_compact(path)
            if held is not None:
                reading.points += compact_points(held, str(path), by)
            continue  # else a JSON file that is no pytest-benchmark result (a study's data, a gate's rows)
        except SavedResultError as error:
            reading.left_out.append(str(error))
            continue
        machine, commit_info = result.machine, result.commit_info
        if machine.testing is not None:
            reading.left_out.append(f"{path}: a testing run (knobs {machine.testing}), not a measurement")
            continue
        if commit_info.get("dirty") and not dirty:
            reading.left_out.append(f"{path}: run on a tree with uncommitted changes (--dirty keeps it)")
            continue
        reading.points += points_of(result, by, count_glibc)
    return reading


def points_of(result: SavedResult, by: str, count_glibc: str | None = None) -> list[Point]:
    machine = result.machine
    platform = platform_of(result)
    metric = result.metric
    commit = result.commit_info.get("id")
    commit_time = result.commit_info.get("time")
    context = context_of(machine, platform, by)
    found = []
    for case in result.benchmarks:
        info, stats = case.info, case.stats
        if case.key is None or not isinstance(stats.get("median"), (int, float)):
            continue
        phase, implementation, device, workload = case.key
        threads = getattr(info, "threads", None) or machine.threads
        counted = getattr(info, "instructions", None)
        if metric == "instructions" and counted:
            value, rounds = float(statistics.median(counted)), tuple(float(c) for c in counted)
        else:
            value, rounds = float(stats["median"]), tuple(float(v) for v in stats.get("data") or ())
        pairs = machine_key(machine, platform, device, threads, by, count_glibc) + calls_per_round(stats)
        key = SeriesKey(pairs, machine.method, metric, device, workload, implementation, phase)
        found.append(Point(result.source, key, commit if commit and commit != "unknown" else None, machine.torch,
                           value, rounds, case.fullname, getattr(info, "language", None),
                           getattr(info, "reference", None), context, result.datetime,
                           commit_time if isinstance(commit_time, str) else None))
    return found


COMPACT_FORMAT = "phasebench-history-series"
COMPACT_VERSION = 1


def key_fields(key: SeriesKey) -> dict:
    """A series key as a compact file holds it."""
    return {"machine": [list(pair) for pair in key.machine], "method": key.method, "metric": key.metric,
            "device": key.device, "workload": key.workload, "implementation": key.implementation, "phase": key.phase}


def series_file(key: SeriesKey) -> Path:
    """Where a series lies under a compact folder: <metric>/<device>-<workload>-<phase>-<implementation>-<hash>.json,
    the hash over the whole key (the machine and the method), so that series of other machines lie apart."""
    fields = key_fields(key)
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]
    name = "-".join(part for part in (key.device, key.workload or "default", key.phase, key.implementation) if part)
    return Path(key.metric, f"{re.sub(r'[^A-Za-z0-9_.=+-]+', '_', name)}-{digest}.json")


def compact_entry(point: Point) -> dict:
    """One run of a series as a compact file holds it; a count keeps its rounds (its threshold may come from
    them), a time its median alone."""
    entry = {"commit": point.commit, "run": point.run, "torch": point.torch, "value": point.value}
    if point.key.metric == "instructions":
        entry["rounds"] = list(point.rounds)
    return entry | {"context": point.context}


def compact_text(header: dict, entries: list[dict]) -> str:
    """The file's text: its key and what every run shares first, then one line per run (oldest appended first)."""
    head = json.dumps(header, sort_keys=True, default=str)[:-1]
    if not entries:
        return head + ', "points": []}\n'
    lines = [json.dumps(entry, sort_keys=True, default=str) for entry in entries]
    return head + ', "points": [\n' + ",\n".join(lines) + "\n]}\n"


def append(found: list[Point], folder: Path) -> dict[Path, int]:
    """The points (read by commit) appended to their compact series under `folder`: {file: runs added}. A run
    already there (its commit and its identity) is not added again."""
    by_file: dict[Path, list[Point]] = {}
    for point in found:
        if any(name == "torch build" for name, _ in point.key.machine):
            raise ValueError("compact series hold points keyed by commit (read with by='commit')")
        by_file.setdefault(folder / series_file(point.key), []).append(point)
    folder.mkdir(parents=True, exist_ok=True)
    # Two history runs may append to one folder at once (each file is read, extended and replaced).
    with open(folder / ".append.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _append_locked(by_file, folder)


def _append_locked(by_file: dict[Path, list[Point]], folder: Path) -> dict[Path, int]:
    added = {}
    for path, points in by_file.items():
        first = points[0]
        header = {"format": COMPACT_FORMAT, "version": COMPACT_VERSION, "key": key_fields(first.key),
                  "fullname": first.fullname, "language": first.language, "reference": first.reference}
        entries = []
        if path.exists():
            held = json.loads(path.read_text(encoding="utf8"))
            if held.get("format") != COMPACT_FORMAT or held.get("key") != json.loads(json.dumps(header["key"])):
                raise ValueError(f"{path}: not a compact series of {header['key']}")
            entries = held.get("points") or []
        seen = {(entry.get("commit"), entry.get("run")) for entry in entries}
        count = 0
        for point in points:
            if (point.commit, point.run) in seen:
                continue
            seen.add((point.commit, point.run))
            entries.append(json.loads(json.dumps(compact_entry(point), default=str)))
            count += 1
        if count or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.partial")
            partial.write_text(compact_text(header, entries), encoding="utf8")
            partial.replace(path)
        added[path] = count
    return added


def read_compact(path: Path) -> dict | None:
    """A compact series file's content; None for any other JSON file."""
    held = json.loads(path.read_text(encoding="utf8"))
    return held if isinstance(held, dict) and held.get("format") == COMPACT_FORMAT else None


def compact_points(held: dict, source: str, by: str) -> list[Point]:
    """The points of a compact series file. Its key is the one of a reading by commit; by torch version, the torch
    version leaves the key for the build's kind and leaves the context (it is the axis), as points_of does."""
    key = held["key"]
    machine = tuple((name, value) for name, value in key["machine"])
    found = []
    for entry in held.get("points") or []:
        pairs, context = machine, dict(entry.get("context") or {})
        if by == "torch":
            pairs = tuple(("torch build", torch_kind(value)) if name == "torch" else (name, value)
                          for name, value in machine)
            context.pop("torch", None)
        series_key = SeriesKey(pairs, key["method"], key["metric"], key["device"], key["workload"],
                               key["implementation"], key["phase"])
        found.append(Point(source, series_key, entry.get("commit"), entry.get("torch"), float(entry["value"]),
                           tuple(float(v) for v in entry.get("rounds") or ()), held.get("fullname") or "",
                           held.get("language"), held.get("reference"), context, entry.get("run")))
    return found

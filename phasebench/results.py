"""Saved results: where they are (find_results: the one resolver of every command that takes saved runs), the pairs
of implementations compared in them, the switches a run ran with, and when a baseline cannot be compared with a run.

A saved result itself is phasebench/saved.py's SavedResult (it parses the file, once). Results measured by different
methods are not compared (`--benchmark-compare`, `python -m phasebench.gate` and `python -m phasebench.gate.paired`
refuse them in one line), nor a count with a time (machine_info["phasebench"]["metric"]: "time", or "instructions"
for `--count instructions`, docs/instruction-counts.md; none recorded is time). It imports no torch
(tests/test_layers.py).
"""

from __future__ import annotations

from pathlib import Path

from phasebench import registry, schema
from phasebench.repository import ROOT
from phasebench.saved import SavedResult

DEFAULT_STORAGE = f"file://{ROOT / '.benchmarks'}"  # phasebench/plugin/__init__.py's default for --benchmark-storage


# -- the method -------------------------------------------------------------------------------------------

def switched(machine: schema.MachineInfo) -> dict[str, str]:
    """The intervention study's switches a run's timed workers ran with that a run without them does not have
    (phasebench/plugin/switches.py): {"round checks": "off", "OMP_WAIT_POLICY": "passive", "pins": "count"}, each
    only where it applied, and the CUDA settings the run's environment set (CUBLAS_WORKSPACE_CONFIG,
    PYTORCH_CUDA_ALLOC_CONF); {} for a run that changed none, and for one saved before they existed."""
    changed = {}
    if machine.round_checks == "off":
        changed["round checks"] = "off"
    if machine.omp_wait_policy not in (None, "default"):
        changed["OMP_WAIT_POLICY"] = machine.omp_wait_policy
    if machine.pins:
        changed["pins"] = str(machine.pins.get("conditions") or "count")
    # CUDA settings from the environment: unset (and unrecorded, in a result saved before they were) adds nothing.
    if machine.cublas_workspace_config is not None:
        changed["CUBLAS_WORKSPACE_CONFIG"] = machine.cublas_workspace_config
    if machine.pytorch_cuda_alloc_conf is not None:
        changed["PYTORCH_CUDA_ALLOC_CONF"] = machine.pytorch_cuda_alloc_conf
    return changed


def switched_text(changed: dict[str, str]) -> str:
    return ", ".join(f"{name} {value}" for name, value in changed.items()) or "no switch"


def mismatch(baseline: SavedResult, current_method: int, current_metric: str = "time",
             current_switched: dict[str, str] | None = None) -> str | None:
    """One line when a baseline was measured by another method or metric than this run's, or, where
    `current_switched` (switched()) is given, with other switches, else None."""
    method, metric = baseline.method, baseline.metric
    if metric != current_metric:
        return (f"{baseline.source} holds {metric}, this run {current_metric} (see phasebench/schema.py): a count is "
                f"never compared with a time; measure a baseline of the same metric")
    if method != current_method:
        return (f"{baseline.source} was measured by phasebench method {method}, this run by method {current_method} "
                f"(see phasebench/method.py): their timings are not comparable; measure a new baseline")
    before = switched(baseline.machine)
    if current_switched is not None and before != current_switched:
        return (f"{baseline.source} was timed with {switched_text(before)}, this run with "
                f"{switched_text(current_switched)} (docs/method.md#switches-for-the-intervention-study): their "
                f"timings are not comparable; measure a baseline under the same switches")
    return None


# -- finding them ---------------------------------------------------------------------------

GLOB_CHARACTERS = "*?["


def _storage(storage_url: str):
    """pytest-benchmark's storage at `storage_url`, looking in this machine's folder first, as its own commands do."""
    from pytest_benchmark.logger import Logger  # imports pytest: only those who look for results pay for it
    from pytest_benchmark.utils import get_machine_id, load_storage

    return load_storage(storage_url, logger=Logger(), default_machine_id=get_machine_id(), netrc=None)


def _query(storage, glob: str) -> list[Path]:
    try:
        return storage.query(glob)
    except (ValueError, NotImplementedError):  # a path of 3 or more parts, or an absolute one, to no file
        return []


def _matches(storage, name: str) -> list[Path]:
    """The saved runs `name` names: what --benchmark-compare=NAME loads (a file; a run number or the start of a saved
    run's file name, 0001, 0001_before; a glob, *before; in this machine's folder of the storage unless it names
    one, MACHINE/0001), else the runs saved under that name (before: NNNN_before.json) or that file name."""
    found = _query(storage, name)
    if found or any(character in name for character in GLOB_CHARACTERS):
        return found
    folder, _, saved_as = name.rpartition("/")
    saved_as, within = saved_as.removesuffix(".json"), f"{folder}/" if folder else ""
    candidates = _query(storage, within + saved_as) + _query(storage, f"{within}[0-9][0-9][0-9][0-9]_{saved_as}")
    return sorted({path for path in candidates if saved_as in (path.stem, path.stem[5:])},
                  key=lambda path: (path.name, path.parent))


def _listed(paths: list[Path], storage) -> str:
    def shown(path: Path) -> str:
        try:
            return str(path.relative_to(storage.path))
        except ValueError:
            return str(path)
    return ", ".join(shown(path) for path in paths)


def _not_found(prog: str, name: str, storage) -> SystemExit:
    folder = storage.path / storage.default_machine_id
    saved = sorted(path.name for path in folder.glob("*.json"))
    earlier = f"{len(saved) - 5} earlier runs and " if len(saved) > 5 else ""
    there = f"{earlier}{', '.join(saved[-5:])}" if saved else "nothing"
    return SystemExit(f"{prog}: {name}: no such file, nor a saved result of that name in {storage} (a saved run is "
                      f"named by its number, 0001, its name, before for 0001_before.json, or a glob, '*before'; "
                      f"{storage.default_machine_id}/ holds {there})")


def find_results(names: list[str], storage_url: str, prog: str = "phasebench.report") -> list[Path]:
    """The saved runs named, each as `--benchmark-compare` finds it, or by the name it was saved under
    (_matches): a path, a run number (0001), a name (before, saved by --benchmark-save=before as 0001_before.json),
    a glob ('*before', every run it matches). With no name, the newest run saved for this machine. The one
    resolver of every command that takes saved runs (phasebench.gate, .gate.paired, .gate.counts, .report,
    .history). A number or a name that matches more than one run, or nothing, is SystemExit naming `prog`, the
    name, and the candidates or what the storage holds."""
    storage = _storage(storage_url)
    if not names:
        newest = storage.query("[0-9][0-9][0-9][0-9]_")[-1:]
        if not newest:
            raise SystemExit(f"{prog}: no saved result in {storage}/{storage.default_machine_id}: run pytest with "
                             "--benchmark-autosave first, or name a result file")
        return newest
    paths = []
    for name in names:
        found = _matches(storage, name)
        if not found:
            raise _not_found(prog, name, storage)
        if len(found) > 1 and not any(character in name for character in GLOB_CHARACTERS):
            raise SystemExit(f"{prog}: {name} names {len(found)} saved results ({_listed(found, storage)}); name one "
                             f"by its number or path")
        paths += found
    return paths


def find_result(name: str, storage_url: str, prog: str) -> Path:
    """The one saved run `name` names (find_results); a glob that matches more than one is SystemExit naming them."""
    found = find_results([name], storage_url, prog)
    if len(found) > 1:
        raise SystemExit(f"{prog}: {name} matches {len(found)} saved results ({_listed(found, _storage(storage_url))}); "
                         f"name one")
    return found[0]


# -- what is in them --------------------------------------------------------------------------------------

def ratio_pairs(names) -> list[tuple[str, str]]:
    """(implementation, the one it is compared with) for every registered implementation among `names` whose
    counterpart is there too: each variant with its reference, the published pair once as python/cpp."""
    present = set(names)
    return [(impl.name, impl.pair) for impl in registry.REGISTRY
            if impl.name in present and impl.pair in present and (impl.reference or impl.language == "python")]

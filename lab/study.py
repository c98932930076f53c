"""The intervention study's file, interventions.json: `python -m lab.studies.interventions OUT_DIR` writes it, and
`python -m lab.account COUNTED --beside TIMED --interventions FILE` reads it for the account
(lab.account). Both sides use this module, so that the product never imports lab/studies/
(tests/test_layers.py): the format's name and version, its fields, the writer, and the reader, which refuses a file of
another kind or version in one line.

Format "phasebench-interventions", version 1: one JSON object with
- `format`, `version`: FORMAT and VERSION, first;
- `device` (where the study timed, "cpu"), `pair` (["python", "cpp"]: every ratio is the first's median over the
  second's), `phases` (those measured), `confidence` (the intervals' level, 0.95);
- `interventions`: their names, in the study's order; `switches`: {name: what it switches, baseline → switched};
- `account`: {name: {"weight": w, "within": other or null}}, how each effect enters the report's account: w is the
  share of the switch's change (on the log scale) that the cause it switches makes of a run at the baseline: 1 where
  the switch takes the cause away (the checks off), ½ where it reverses it (the order: a randomized order's ratio lies
  midway between the two), 0 for a control that switches nothing (the processes intervention); `within` names the
  switch whose effect already holds this one's (the wait policy acts on the idle second thread, which the threads
  switch takes away), and such an effect is shown, never added;
- `effects`: {name: {phase: effect}}; an effect is {"pairs": n} and, where n ≥ 2, "change", "low", "high" (fractions,
  0.05 is +5 %: the change of the ratio from baseline to switched and its interval), "ratio_baseline" and
  "ratio_switched" (each arm's geometric mean ratio) and "spread_log" (the spread of the paired log changes); a
  control's also "process_spread" ({language: log spread between fresh processes}), "ratio_spread_log" (the spread of
  one run's ratio between fresh processes) and "processes_for_3pct";
- the study's provenance, each optional: PROVENANCE (commit, dirty, sources_hash, machine, command, seed, pairs,
  rounds, warmup_rounds, resamples, statistic, runs).
A key the format does not name is refused, by the writer and by the reader; a new key is a new version.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

FORMAT = "phasebench-interventions"
VERSION = 1
REQUIRED = ("format", "version", "device", "pair", "phases", "confidence", "interventions", "switches", "account",
            "effects")
PROVENANCE = ("commit", "dirty", "sources_hash", "machine", "command", "seed", "pairs", "rounds", "warmup_rounds",
              "resamples", "statistic", "runs")
EFFECT_KEYS = ("pairs", "change", "low", "high", "ratio_baseline", "ratio_switched", "spread_log")
CONTROL_KEYS = ("process_spread", "ratio_spread_log", "processes_for_3pct")
ACCOUNT_KEYS = ("weight", "within")
HOW_TO_WRITE = "python -m lab.studies.interventions OUT_DIR"


class StudyFileError(ValueError):
    """What is wrong with a study's file, in a few words."""


@dataclass(frozen=True)
class Effect:
    """One intervention's effect on one phase's ratio, as the account reads it."""

    intervention: str
    phase: str
    switch: str  # "baseline → switched"
    weight: float
    within: str | None
    pairs: int
    change: float | None = None  # None: fewer than 2 pairs
    low: float | None = None
    high: float | None = None
    ratio_spread_log: float | None = None  # a control's: one run's ratio's spread between fresh processes

    @property
    def excludes_zero(self) -> bool:
        return self.change is not None and (self.low > 0 or self.high < 0)


@dataclass(frozen=True)
class Study:
    path: Path | None
    device: str
    pair: tuple[str, str]
    phases: tuple[str, ...]
    confidence: float
    interventions: tuple[str, ...]
    effects: dict[str, list[Effect]]  # phase -> its effects, in the study's order
    commit: str | None = None
    dirty: bool | None = None
    machine: dict | None = None
    command: str | None = None
    runs: tuple = ()  # each run's record (its plan and per-phase, per-language medians), where the file holds them
    account: dict | None = None  # {intervention: {"weight": w, "within": other or None}}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def problem(data) -> str | None:
    """Why `data` is not a study's file of this format and version, in a few words; None where it is."""
    if not isinstance(data, dict):
        return f"not an intervention study's file (a JSON {type(data).__name__}, not an object)"
    if "format" not in data:
        if isinstance(data.get("benchmarks"), list):
            return f"a pytest-benchmark result, not an intervention study's file ({HOW_TO_WRITE} writes one)"
        if str(data.get("study", "")).startswith("interventions"):
            return (f"an intervention study's file written before its format had a name: write it again from its "
                    f"runs with `{HOW_TO_WRITE} --summarize` and the study's other options")
        return f"not an intervention study's file (no 'format'; {HOW_TO_WRITE} writes one)"
    if data["format"] != FORMAT:
        return f"format {data['format']!r}, not an intervention study's file ({FORMAT!r})"
    if data.get("version") != VERSION:
        return f"{FORMAT} version {data.get('version')!r}; this phasebench reads version {VERSION}"
    missing = [key for key in REQUIRED if key not in data]
    unknown = sorted(set(data) - set(REQUIRED) - set(PROVENANCE))
    if missing or unknown:
        return "; ".join(filter(None, [missing and f"no {', '.join(map(repr, missing))}",
                                       unknown and f"unknown key {', '.join(map(repr, unknown))}"]))
    names, phases = data["interventions"], data["phases"]
    if not (isinstance(data["pair"], list) and len(data["pair"]) == 2 and isinstance(names, list)
            and isinstance(phases, list) and _number(data["confidence"]) and 0 < data["confidence"] < 1):
        return "'pair' must be two names, 'interventions' and 'phases' lists, 'confidence' between 0 and 1"
    for field in ("switches", "account", "effects"):
        if not isinstance(data[field], dict) or set(data[field]) != set(names):
            return f"'{field}' must hold each of the interventions ({', '.join(names)}), no other"
    for name in names:
        account = data["account"][name]
        if not isinstance(account, dict) or set(account) != set(ACCOUNT_KEYS) or not _number(account["weight"]) \
                or not 0 <= account["weight"] <= 1 or account["within"] not in (None, *names):
            return f"account.{name}: must be {{'weight': 0 to 1, 'within': null or an intervention}}"
        effects = data["effects"][name]
        if not isinstance(effects, dict) or not set(effects) <= set(phases):
            return f"effects.{name}: must be {{phase: effect}} of the phases ({', '.join(phases)})"
        for phase, effect in effects.items():
            where = f"effects.{name}.{phase}"
            if not isinstance(effect, dict) or not isinstance(effect.get("pairs"), int):
                return f"{where}: no 'pairs'"
            unknown = sorted(set(effect) - set(EFFECT_KEYS) - set(CONTROL_KEYS))
            if unknown:
                return f"{where}: unknown key {', '.join(map(repr, unknown))}"
            if effect["pairs"] >= 2:
                bounds = [effect.get(key) for key in ("change", "low", "high")]
                if not all(_number(value) and value > -1 for value in bounds) or bounds[1] > bounds[2]:
                    return f"{where}: 'change', 'low' and 'high' must be fractions above -1, low <= high"
    return None


def study_file(**fields) -> dict:
    """The writer: the study's fields as the file holds them, FORMAT and VERSION first; a field the format does not
    have, or one missing, is a StudyFileError (the writer's mistake, before anything is written)."""
    data = {"format": FORMAT, "version": VERSION} | fields
    why = problem(data)
    if why:
        raise StudyFileError(why)
    return data


def write(path: Path, data: dict) -> None:
    why = problem(data)
    if why:
        raise StudyFileError(why)
    Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf8")


def parse(data: dict, path: Path | None = None) -> Study:
    """A checked study's file (problem() is None) as the account reads it."""
    effects: dict[str, list[Effect]] = {phase: [] for phase in data["phases"]}
    for name in data["interventions"]:
        account = data["account"][name]
        for phase, found in data["effects"][name].items():
            measured = found["pairs"] >= 2
            effects[phase].append(Effect(
                name, phase, data["switches"][name], float(account["weight"]), account["within"], found["pairs"],
                *(found[key] if measured else None for key in ("change", "low", "high")),
                ratio_spread_log=found.get("ratio_spread_log")))
    return Study(path, data["device"], tuple(data["pair"]), tuple(data["phases"]), float(data["confidence"]),
                 tuple(data["interventions"]), effects, data.get("commit"), data.get("dirty"), data.get("machine"),
                 data.get("command"), tuple(data.get("runs") or ()), data["account"])


def read(path: Path, prog: str = "lab.account") -> Study:
    """A study's file, or SystemExit in one line naming `prog`, the file and what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf8"))
    except (OSError, ValueError) as error:
        raise SystemExit(f"{prog}: {path}: cannot read it as JSON ({error})") from None
    why = problem(data)
    if why:
        raise SystemExit(f"{prog}: {path}: {why}")
    return parse(data, Path(path))

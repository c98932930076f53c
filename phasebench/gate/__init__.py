"""Regression gating beyond pytest-benchmark's own --benchmark-compare-fail (README, "Baselines and CI gating"):
per phase, device and workload, the median ratio of every implementation to the one the registry names as its
reference (python/cpp for the published pair), baselines checked before anything runs, and the test-only knob
that slows one phase on purpose to prove that the gates fail.

    python -m phasebench.gate BASELINE RESULT    (files, or run numbers or names as --benchmark-compare takes them)

prints how every benchmark's median and every implementation/reference ratio moved between two saved results,
in phasebench.gate.paired's table (one run a side gives no interval: .ci/bench-pr's interleaved runs decide).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

from phasebench import registry, results
from phasebench import spec as workload

SLOW_PHASE_ENV = "PHASEBENCH_TEST_SLOW_PHASE"
_NS_PER_UNIT = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_SLOW_PHASE = re.compile(r"^(?:(?P<impl>[\w-]+)/)?(?P<phase>\w+):(?P<amount>\d+(?:\.\d+)?)(?P<unit>ns|us|ms|s|%)$")


@dataclass(frozen=True)
class SlowPhase:
    """PHASEBENCH_TEST_SLOW_PHASE=[IMPL/]PHASE:DURATION: the phase busy-waits DURATION inside its timed body;
    with a percentage (forward:20%), that share of the time its body just took, round by round."""

    text: str
    phase: str
    ns: int
    impl: str | None  # None: every implementation
    fraction: float = 0.0  # a percentage over 100; ns is then 0

    def trainer_options(self, impl: str | None) -> dict:
        """The trainer options that carry the knob (Trainer kwargs, pb_options) for a worker of `impl`."""
        if self.impl is not None and self.impl != impl:
            return {}
        if self.fraction:
            return {"slow_phase": self.phase, "slow_fraction": self.fraction}
        return {"slow_phase": self.phase, "slow_ns": self.ns}


def parse_slow_phase(text: str, phases, impls) -> SlowPhase:
    match = _SLOW_PHASE.match(text.strip())
    if not match:
        raise ValueError(f"{SLOW_PHASE_ENV}={text!r}: expected [IMPL/]PHASE:DURATION, e.g. forward:5ms, "
                         f"python/loss:20ms or python/forward:20% (units ns, us, ms, s, or % of the body's time)")
    impl, phase = match["impl"], match["phase"]
    if impl is not None and impl not in impls:
        raise ValueError(f"{SLOW_PHASE_ENV}={text!r}: unknown implementation '{impl}' ({', '.join(impls)})")
    if phase not in phases:
        raise ValueError(f"{SLOW_PHASE_ENV}={text!r}: unknown phase '{phase}' ({', '.join(phases)})")
    if match["unit"] == "%":
        return SlowPhase(text.strip(), phase, 0, impl, float(match["amount"]) / 100)
    ns = round(float(match["amount"]) * _NS_PER_UNIT[match["unit"]])
    return SlowPhase(text.strip(), phase, ns, impl)


def parse_percent(text: str) -> int:
    """--phase-ratio-fail's value: a whole percentage, as pytest-benchmark's median:X% takes it."""
    match = re.fullmatch(r"(\d+)%", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 20%, got {text!r}")
    return int(match[1])


# -- baselines ---------------------------------------------------------------------------------

def baseline_error(path: Path) -> str | None:
    """Why a saved result cannot serve as a baseline, in a few words; None when it can."""
    try:
        saved = json.loads(path.read_text(encoding="utf8"))
    except OSError as error:
        return error.strerror or str(error)
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        return f"not JSON ({error})"
    benchmarks = saved.get("benchmarks") if isinstance(saved, dict) else None
    if not isinstance(benchmarks, list):
        return "not a pytest-benchmark result (no 'benchmarks' list)"
    for index, bench in enumerate(benchmarks):
        stats = bench.get("stats") if isinstance(bench, dict) else None
        if not isinstance(stats, dict) or "median" not in stats or "fullname" not in bench:
            return f"benchmark #{index} has no fullname or stats.median"
    return None


def machine_info_differences(current, saved, prefix: str = "") -> list[str]:
    """'key: saved → current' for every leaf of machine_info that differs, dotted keys."""
    if isinstance(current, dict) and isinstance(saved, dict):
        return [line for key in sorted(current.keys() | saved.keys(), key=str)
                for line in machine_info_differences(current.get(key), saved.get(key), f"{prefix}{key}.")]
    return [] if current == saved else [f"{prefix.rstrip('.')}: {saved!r} → {current!r}"]


# -- the ratio of each implementation to its reference ---------------------------------------------

def change_either_way(before: float, after: float) -> float:
    """How much larger the larger figure is than the smaller, in percent: a slowdown and the speed-up
    that undoes it count the same (a 2× slowdown and a 2× speed-up are both 100%)."""
    return (max(before, after) / min(before, after) - 1) * 100


def case_key(bench: dict) -> tuple[str, str, str, str] | None:
    """(phase, implementation, device, workload id) of a saved benchmark, from its extra_info; None for what
    is not a phasebench case. The one place that turns a result into its key (phasebench.report uses it too);
    results saved before workloads existed are of the published workload, id ''."""
    info = bench.get("extra_info") or {}
    if not {"phase", "device", "implementation"} <= info.keys():
        return None
    return info["phase"], info["implementation"], info["device"], workload.of_info(info).id


def ratio_pairs(names) -> list[tuple[str, str]]:
    """(implementation, the one it is compared with) for every registered implementation among `names` whose
    counterpart is there too: each variant with its reference, the published pair once as python/cpp."""
    present = set(names)
    return [(impl.name, impl.pair) for impl in registry.REGISTRY
            if impl.name in present and impl.pair in present and (impl.reference or impl.language == "python")]


def phase_medians(benchmarks) -> dict[tuple[str, str, str], dict[str, float]]:
    """{(phase, device, workload id): {implementation: median seconds}} from saved benchmarks.

    worker_overhead is left out: it is our messaging, not training, and its python/cpp ratio moved 71%
    between two runs of an unchanged tree (README, "Noise")."""
    medians: dict[tuple[str, str, str], dict[str, float]] = {}
    for bench in benchmarks:
        key = case_key(bench)
        if key and key[0] != "worker_overhead":
            phase, impl, device, workload_id = key
            medians.setdefault((phase, device, workload_id), {})[impl] = bench["stats"]["median"]
    return medians


@dataclass(frozen=True)
class RatioChange:
    phase: str
    device: str
    before: float  # impl median / reference median in the baseline
    after: float  # and in this run
    workload: str = ""  # its id; '' for the published workload
    impl: str = "python"
    reference: str = "cpp"

    @property
    def loser(self) -> str:
        """The implementation that became slower relative to the other."""
        return self.impl if self.after > self.before else self.reference

    @property
    def percent(self) -> float:
        """How much slower the loser became relative to the other, in percent."""
        return change_either_way(self.before, self.after)

    def __str__(self) -> str:
        other = self.reference if self.loser == self.impl else self.impl
        where = f"{self.device}, {self.workload}" if self.workload else self.device
        return (f"{self.phase} on {where}: {self.impl}/{self.reference} median ratio {self.before:.3f} → "
                f"{self.after:.3f}, {self.loser} {self.percent:.1f}% slower relative to {other}")


def ratio_changes(baseline, current) -> list[RatioChange]:
    """Every (phase, device, workload) and implementation whose median and its reference's are in both,
    largest change first (README, "Baselines and CI gating")."""
    before, after = phase_medians(baseline), phase_medians(current)
    changes = []
    for key in before.keys() & after.keys():
        phase, device, workload_id = key
        for impl, reference in ratio_pairs(before[key].keys() & after[key].keys()):
            pairs = before[key], after[key]
            if all(medians[impl] and medians[reference] for medians in pairs):
                ratio_before, ratio_after = (medians[impl] / medians[reference] for medians in pairs)
                changes.append(RatioChange(phase, device, ratio_before, ratio_after, workload_id, impl, reference))
    return sorted(changes, key=lambda change: (-change.percent, change.phase, change.device, change.workload,
                                               change.impl))


def gate_failures(baselines: dict, current: list[dict], ratio_limit: int | None) -> list[str]:
    """What fails a compared run beyond pytest-benchmark's own --benchmark-compare-fail: a baseline that
    shares no benchmark with the run, or a run in which no benchmark ran (the gate would pass by comparing
    nothing) and, with ratio_limit,
    every phase whose python/cpp ratio moved more than ratio_limit percent.

    baselines: {path: {fullname: saved benchmark}}, as pytest-benchmark loaded them; current: this run's."""
    if not current:  # every case skipped (a GPU runner without its GPU) or failed: the gate must not pass
        return [f"nothing compared: no benchmark ran, so none was compared with {', '.join(map(str, baselines))}"]
    failures = []
    for path, baseline in baselines.items():
        if not any(bench["fullname"] in baseline for bench in current):
            failures.append(f"nothing compared: no benchmark of this run is in baseline {path}")
        elif ratio_limit is not None:
            changes = ratio_changes(list(baseline.values()), current)
            if not changes:
                failures.append(f"--phase-ratio-fail: no phase has python and cpp medians, nor any implementation and its "
                                f"reference, both here and in {path}")
            failures += [f"{change}, over the {ratio_limit}% limit (baseline {path})"
                         for change in changes if change.percent > ratio_limit]
    return failures


# -- python -m phasebench.gate ---------------------------------------------------------------------------

def _load(name: str, storage: str) -> tuple[str, dict]:
    """A saved result named as phasebench.report and --benchmark-compare take it (a path, a run number, a name), and
    its path."""
    from phasebench.report import find_results  # phasebench.report imports this module

    found = find_results([name], storage, prog="phasebench.gate")
    if len(found) > 1:
        raise SystemExit(f"phasebench.gate: {name} matches {len(found)} saved results ({', '.join(p.name for p in found)}); "
                         f"name one")
    path = str(found[0])
    error = baseline_error(Path(path))
    if error:
        raise SystemExit(f"phasebench.gate: {path}: {error}")
    return path, json.loads(Path(path).read_text(encoding="utf8"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    from phasebench.report import DEFAULT_STORAGE

    parser.add_argument("baseline", help="a saved pytest-benchmark result: a file, or a run number or name as "
                                         "--benchmark-compare takes it (0001)")
    parser.add_argument("result", help="another one, of the same benchmarks")
    parser.add_argument("--storage", default=DEFAULT_STORAGE,
                        help=f"where saved results are, as --benchmark-storage (default: {DEFAULT_STORAGE})")
    args = parser.parse_args(argv)
    (args.baseline, baseline_result), (args.result, result_result) = (_load(name, args.storage)
                                                                      for name in (args.baseline, args.result))
    different = results.mismatch(args.baseline, baseline_result, results.method_of(result_result))
    if different:
        raise SystemExit(different.replace("this run", args.result))
    from phasebench.gate import paired  # it imports this module

    verdicts = paired.decide([paired.Run.of(args.baseline, baseline_result)], [paired.Run.of(args.result, result_result)])
    if not verdicts:
        raise SystemExit(f"{args.result} has no benchmark that {args.baseline} has")
    threshold = paired.DEFAULT_THRESHOLD
    print(paired.table(verdicts, threshold, threshold), end="")
    print("One run a side: no interval, so no verdict. The evidence is the run: .ci/bench-pr runs base and head "
          "alternately, several runs each, and python -m phasebench.gate.paired decides on them (README, \"Baselines and CI "
          "gating\").")
    medians = [v for v in verdicts if v.kind == "median"]
    ratios = [v for v in verdicts if v.kind == "ratio"]
    largest = max(medians, key=lambda v: change_either_way(v.base, v.head))
    largest_ratio = (f"{max(change_either_way(v.base, v.head) for v in ratios):.1f}%" if ratios
                     else "none (no phase has an implementation and its reference)")
    print(f"largest median change {change_either_way(largest.base, largest.head):.1f}% ({largest.case}); "
          f"largest ratio change {largest_ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The intervention study's statistics and summary (lab/studies/interventions.py runs the study): each switch's effect on
a phase's Python/C++ time ratio over paired runs, with a percentile bootstrap interval, and the tables of its result.
Small and pure: no run, no file."""

from __future__ import annotations

import math
import statistics

from lab.paired_stats import RESAMPLES, geometric_mean, paired_change

PAIR = ("python", "cpp")  # the published pair: the ratio is python's median over cpp's
Z95 = 1.959964


# -- the statistics: small and pure ---------------------------------------------------------------------------------

def ratio(medians: dict[str, float]) -> float:
    """Python's median over C++'s ({language: median seconds} of one phase in one run)."""
    return medians["python"] / medians["cpp"]


def log_changes(baseline: list[float], switched: list[float]) -> list[float]:
    """Per pair, ln(switched ratio / baseline ratio)."""
    if len(baseline) != len(switched):
        raise ValueError(f"{len(baseline)} baseline and {len(switched)} switched ratios: they are paired")
    return [math.log(s / b) for b, s in zip(baseline, switched)]


def effect(baseline: list[float], switched: list[float], resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """The change of the ratio from baseline to switched over paired runs: the geometric means of each side's ratios,
    the effect exp(mean d) − 1 and its bootstrap interval (as fractions: 0.05 is +5 %), the spread of d and n."""
    d = log_changes(baseline, switched)
    change, low, high = paired_change(baseline, switched, resamples, seed=seed)
    return {"pairs": len(d), "ratio_baseline": geometric_mean(baseline), "ratio_switched": geometric_mean(switched),
            "change": change, "low": low, "high": high, "spread_log": statistics.stdev(d) if len(d) > 1 else None}


def log_spread(values: list[float]) -> float | None:
    """The standard deviation of the logs: a spread as a fraction (0.1 is about 10 %)."""
    return statistics.stdev(math.log(v) for v in values) if len(values) > 1 else None


def processes_needed(spread: float, half_width: float = 0.03, z: float = Z95) -> int:
    """Fresh processes per language for a ±half_width interval on a ratio of two languages' means when each
    language's processes spread by `spread` (log standard deviation): n = (z·√2·spread / half_width)²."""
    return math.ceil((z * math.sqrt(2) * spread / half_width) ** 2)


def summarize(runs: list[dict], phases: tuple[str, ...], resamples: int = RESAMPLES) -> dict:
    """Per intervention and phase, the effect over the pairs both of whose runs have both languages' medians; for the
    processes intervention also each language's spread between processes and the processes a ±3 % interval takes."""
    effects: dict[str, dict] = {}
    by_pair: dict[tuple[str, int], dict[str, dict]] = {}
    for run in runs:
        if run.get("medians"):
            by_pair.setdefault((run["intervention"], run["pair"]), {})[run["arm"]] = run["medians"]
    names = list(dict.fromkeys(run["intervention"] for run in runs))
    for name in names:
        effects[name] = {}
        for phase in phases:
            complete = [(arms["baseline"][phase], arms["switched"][phase])
                        for (n, _), arms in sorted(by_pair.items())
                        if n == name and {"baseline", "switched"} <= arms.keys()
                        and all(set(PAIR) <= arms[arm].get(phase, {}).get("median", {}).keys()
                                for arm in ("baseline", "switched"))]
            if not complete:
                effects[name][phase] = {"pairs": 0}
                continue
            baseline = [ratio(b["median"]) for b, _ in complete]
            switched = [ratio(s["median"]) for _, s in complete]
            found = effect(baseline, switched, resamples) if len(complete) > 1 else {"pairs": 1}
            if name == "processes":
                per_language = {lang: log_spread([b["median"][lang] for b, _ in complete]
                                                 + [s["median"][lang] for _, s in complete]) for lang in PAIR}
                found |= {"process_spread": per_language, "ratio_spread_log": log_spread(baseline + switched)}
                widest = max((s for s in per_language.values() if s is not None), default=None)
                if widest is not None:
                    found["processes_for_3pct"] = processes_needed(widest)
            effects[name][phase] = found
    return effects


def markdown(study: dict) -> str:
    def pct(x):
        return f"{x * 100:+.1f} %"

    lines = [f"Intervention study: {', '.join(study['phases'])} on cpu, {study['pairs']} pairs per intervention, "
             f"{study['rounds']} rounds after {study['warmup_rounds']} warm-up; commit {study['commit']}"
             f"{' (dirty)' if study['dirty'] else ''}, {study['machine']['cpu']}, torch {study['machine']['torch']}.",
             "", "| intervention | phase | pairs | python/cpp baseline | switched | change of the ratio (95 % bootstrap "
                 "interval) |", "|---|---|---:|---:|---:|---|"]
    for name, phases in study["effects"].items():
        for phase, found in phases.items():
            if found.get("pairs", 0) < 2:
                lines.append(f"| {name} | {phase} | {found.get('pairs', 0)} | — | — | too few pairs |")
                continue
            lines.append(f"| {name} | {phase} | {found['pairs']} | {found['ratio_baseline']:.3f} | "
                         f"{found['ratio_switched']:.3f} | {pct(found['change'])} ({pct(found['low'])} to "
                         f"{pct(found['high'])}) |")
    processes = study["effects"].get("processes", {})
    spreads = [(phase, found) for phase, found in processes.items() if found.get("process_spread")]
    if spreads:
        lines += ["", "Between fresh processes (the processes intervention's runs, one process per case and run):", "",
                  "| phase | python spread | cpp spread | ratio spread | processes per language for ±3 % |",
                  "|---|---:|---:|---:|---:|"]
        for phase, found in spreads:
            spread = found["process_spread"]
            lines.append(f"| {phase} | {spread['python'] * 100:.1f} % | {spread['cpp'] * 100:.1f} % | "
                         f"{found['ratio_spread_log'] * 100:.1f} % | {found.get('processes_for_3pct', '—')} |")
    checks = {value for run in study["runs"] for phase in (run.get("medians") or {}).values()
              for value in phase["round_checks"].values() if run["intervention"] == "checks" and run["arm"] == "switched"}
    if checks - {"off"}:
        lines += ["", f"The checks intervention's switched runs: the workers did {', '.join(sorted(map(str, checks)))}"
                      f" (each should have done \"off\": a worker that did not left its checks in its rounds)."]
    return "\n".join(lines) + "\n"

"""What closes the gap, from an intervention study: for each switch that is a setting a user can choose (its weight in
the study's account is 1: switching it takes its cause away), each language's time before and after, and the
Python/C++ ratio before and after, over the study's paired runs.

Each figure is a geometric mean over the pairs both of whose runs hold both languages' medians; a change is
exp(mean d) − 1 of the paired d = ln(switched / baseline), with a percentile bootstrap interval
(lab.paired_stats). A control (weight 0) and a reversal (the order, weight ½) close nothing a user can
set, and are left out.
"""

from __future__ import annotations

from lab.paired_stats import geometric_mean, paired_change
from lab.study import Study
from phasebench.report.tables import Table

MIN_PAIRS = 2  # a paired change needs two pairs; the table shows how many each row stands on


def paired_medians(study: Study, intervention: str, phase: str) -> list[tuple[dict, dict]]:
    """[(baseline medians, switched medians)] per complete pair: {language: seconds} for both of the study's pair."""
    arms: dict[int, dict[str, dict]] = {}
    for run in study.runs:
        if run.get("intervention") != intervention or not isinstance(run.get("medians"), dict):
            continue
        medians = (run["medians"].get(phase) or {}).get("median") or {}
        if all(isinstance(medians.get(language), (int, float)) and medians[language] > 0 for language in study.pair):
            arms.setdefault(run["pair"], {})[run["arm"]] = medians
    return [(pair["baseline"], pair["switched"]) for _, pair in sorted(arms.items())
            if {"baseline", "switched"} <= pair.keys()]


def settings(study: Study) -> list[str]:
    """The study's switches that are settings: weight 1 in its account."""
    account = study.account or {}
    return [name for name in study.interventions if (account.get(name) or {}).get("weight") == 1]


def closing_table(study: Study) -> Table:
    """Per phase and setting: each language's median before and after its switch, and the ratio's."""
    confidence = f"{study.confidence * 100:g} %"
    python, cpp = study.pair
    table = Table(f"What each setting does to each language on {study.device} (the study's paired runs, geometric "
                  f"means; {confidence} intervals)",
                  [("Phase", ""), ("setting", ""), ("language", ""), ("pairs", "d"), ("baseline (ms)", ".4f"),
                   ("switched (ms)", ".4f"), ("change (%)", "+.1f"), ("low (%)", "+.1f"), ("high (%)", "+.1f")])
    names = settings(study)
    for phase in study.phases:
        for name in names:
            pairs = paired_medians(study, name, phase)
            if len(pairs) < MIN_PAIRS:
                continue
            switch = next(effect.switch for effect in study.effects.get(phase, []) if effect.intervention == name)
            series = {language: ([b[language] for b, _ in pairs], [s[language] for _, s in pairs])
                      for language in study.pair}
            series[f"{python} / {cpp}"] = ([b[python] / b[cpp] for b, _ in pairs],
                                           [s[python] / s[cpp] for _, s in pairs])
            for label, (before, after) in series.items():
                change, low, high = paired_change(before, after, confidence=study.confidence)
                scale = 1 if "/" in label else 1e3
                table.rows.append([phase, f"{name}: {switch}", label, len(pairs), geometric_mean(before) * scale,
                                   geometric_mean(after) * scale, change * 100, low * 100, high * 100])
    table.notes = ["A ratio row's baseline and switched columns are ratios, not milliseconds. A setting closes the "
                   "gap where the ratio's change is below 0 and its interval excludes 0; it is worth taking where the "
                   "languages' own times fall too"]
    if not table.rows:
        table.notes.append("The study's file holds no paired runs of a setting (its `runs`), so nothing is shown")
    return table

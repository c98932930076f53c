"""What a result says in words: the answer at a glance (pytest's terminal summary, phasebench/plugin/__init__.py),
each ratio with its direction (the charts write it the same way), and the findings the report draws in sentences
from a run of more than the published pair.
"""

from __future__ import annotations

import textwrap

from phasebench import registry, schema
from phasebench.report.cases import (
    NOT_RUN,
    PHASES,
    PROGRAM_PHASES,
    PROGRAM_RUNS,
    RUN_PHASES,
    UNDECIDED,
    devices_of,
    direction,
    impls_of,
    median_ms,
    paired_direction,
    phase_total,
    saved_ratio,
    undecided_lines,
    workload_of_id,
    workloads_of,
)
from phasebench.results import ratio_pairs
from phasebench.saved import SavedResult
from phasebench.stats import MEAN

# --- the answer at a glance: pytest's terminal summary (phasebench/plugin/__init__.py) and the report ------------

def _ratio_cells(values: dict[str, float | None], pairs: list[tuple[str, str]], counted: bool = False,
                 paired: dict[str, dict | None] | None = None, label: str = "",
                 undecided: dict[str, dict] | None = None) -> list[str]:
    """Each pair's ratio: the paired ratio with its interval where the run measured the pair side by side (`paired`:
    {implementation: its saved ratio}), else the ratio of the medians; an undecided one goes into `undecided`."""
    cells = []
    for impl, reference in pairs:
        ratio = (paired or {}).get(impl)
        if ratio and ratio.get("to") == reference:
            cells.append(paired_direction(ratio))
            if cells[-1] == UNDECIDED and undecided is not None:
                undecided[label] = ratio
        elif values.get(impl) and values.get(reference):
            cells.append(direction(values[impl] / values[reference], counted))
        else:
            cells.append("—")
    return cells


def unfit_lines(cases: dict, device: str, workload_id: str) -> list[str]:
    """A line for each case of a device and workload that the machine could not measure (its saved machine_fit)."""
    return [f"measured on a machine unfit to measure: {phase} ({impl}): {fit['why']}"
            for (phase, impl, case_device, case_workload), bench in cases.items()
            if (case_device, case_workload) == (device, workload_id)
            and (fit := getattr(bench.info, "machine_fit", None)) and not fit.get("fit", True)]


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    return ["  ".join(cell.ljust(width) if index == 0 else cell.rjust(width)
                      for index, (cell, width) in enumerate(zip(line, widths))).rstrip()
            for line in [header] + rows]


# Why copy_to_device's per-call ratio and its in-run ratio need not agree on cpu (its product's `resident` check
# proves that nothing is copied there).
COPY_ON_CPU_NOTE_LINES = (
    "copy_to_device on cpu copies nothing: .to('cpu') returns the batch itself in both languages, so per",
    "call it times each language's call overhead (microseconds); in the training run its clock also holds",
    "freeing the previous step's batch, as the published program's did, so the two ratios differ.")
COPY_ON_CPU_NOTE = " ".join(COPY_ON_CPU_NOTE_LINES)


PAIR = ("python", "cpp")  # the published pair, compared with each other
# The ratios the every-implementation rows show: a phase per call, and the training run's Total Time.
RATIO_COLUMNS = (("data_loading", "data_loading"), ("train_step", "train_step"), ("training_run", "Total Time"))


def _run_shape(info: schema.TrainingRunInfo) -> str:
    if getattr(info, "paired_with", None):
        return f"{info.epochs} epoch(s), {info.rounds} pair(s) of rounds"
    return (f"{info.epochs} epoch(s), one run (no spread)" if info.rounds == 1
            else f"{info.epochs} epoch(s), median of {info.rounds}")


def headline_pair(present: list[str]) -> tuple[str, str] | None:
    """The pair the answer leads with: the published pair where both ran, else the first implementation whose
    reference ran (a GPU run of python-graphs against cpp-graphs, say)."""
    if all(impl in present for impl in PAIR):
        return PAIR
    pairs = ratio_pairs(present)
    return pairs[0] if pairs else None


def verdict(cases: dict, device: str, workload_id: str, pair: tuple[str, str]) -> str | None:
    """One line first: the pair's Total Time ratio and the phase that makes most of the gap, with its share; from
    the per-call medians where no training run is in the result."""
    a, b = pair
    runs = {impl: cases.get(("training_run", impl, device, workload_id)) for impl in pair}
    if all(runs.values()):
        totals = {impl: bench.median for impl, bench in runs.items()}
        infos = {impl: bench.info for impl, bench in runs.items()}
        parts = {phase.name: (phase_total(infos[a], phase.name) or 0.0) - (phase_total(infos[b], phase.name) or 0.0)
                 for phase in RUN_PHASES}
        ratio = saved_ratio(runs[a])
        said = (paired_direction(ratio) if ratio and ratio.get("to") == b else direction(totals[a] / totals[b]))
        if said == UNDECIDED:
            return (f"Verdict: undecided: {a}'s Total Time against {b}'s could not be measured closely enough here: "
                    f"{ratio['undecided']} ({totals[a]:.2f} against {totals[b]:.2f} s; {_run_shape(infos[a])}).")
        line = (f"Verdict: {a}'s Total Time is {said} than {b}'s "
                f"({totals[a]:.2f} against {totals[b]:.2f} s; {_run_shape(infos[a])})")
        return line + gap_share(parts, totals[a] - totals[b], "s", ".2f") + "."
    medians = {phase.name: [median_ms(cases, phase.name, impl, device, workload_id) for impl in pair]
               for phase in PHASES if phase.name != "train_step"}
    gaps = {name: x - y for name, (x, y) in medians.items() if x is not None and y is not None}
    step = [median_ms(cases, "train_step", impl, device, workload_id) for impl in pair]
    if None in step or not step[1]:
        return None
    ratio = saved_ratio(cases.get(("train_step", a, device, workload_id)))
    said = paired_direction(ratio) if ratio and ratio.get("to") == b else direction(step[0] / step[1])
    if said == UNDECIDED:
        return (f"Verdict: undecided: {a}'s train_step against {b}'s could not be measured closely enough here: "
                f"{ratio['undecided']}.")
    line = f"Verdict: {a}'s train_step is {said} than {b}'s per call (no training run here)"
    return line + gap_share(gaps, sum(gaps.values()), "ms", ".3f", "the phases'") + "."


def gap_share(parts: dict[str, float], gap: float, unit: str, spec: str, whose: str = "the") -> str:
    """Which phase makes most of a gap, as a share within 0–100 % of it; where phases moved in opposite directions, or
    one phase's part exceeds the whole gap, it says so with each one's move instead of a share."""
    if not parts:
        return ""
    name, most = max(parts.items(), key=lambda item: item[1])
    if most <= 0 or gap <= 0:
        return ""
    against = {phase: part for phase, part in parts.items() if part < 0 and -part >= 0.01 * most}
    if against or most > gap:
        moves = ", ".join(f"{phase} {part:+{spec}} {unit}" for phase, part in
                          sorted(parts.items(), key=lambda item: -abs(item[1]))[:4])
        return f"; the phases moved in opposite directions ({moves} of {whose} {gap:{spec}} {unit} gap)"
    return f"; {name} makes {most:{spec}} {unit} of {whose} {gap:{spec}} {unit} gap ({most / gap:.0%})"


def _every_implementation(cases: dict, device: str, workload_id: str, present: list[str],
                          shown: tuple[str, ...]) -> list[str]:
    """One row per implementation beyond the pair `shown`: its ratio to its reference per column."""
    def value(impl: str, column: str):
        if column == "training_run":
            bench = cases.get(("training_run", impl, device, workload_id))
            return bench.median if bench else None
        return median_ms(cases, column, impl, device, workload_id)

    rows = []
    for impl in present:
        reference = registry.get(impl).reference if impl in registry.BY_NAME else None
        if impl in shown or not reference or reference not in present:
            continue
        cells = []
        for column, _ in RATIO_COLUMNS:
            a, b = value(impl, column), value(reference, column)
            cells.append(direction(a / b) if a is not None and b else "—")
        rows.append([impl, reference] + cells)
    if not rows:
        return []
    return _aligned(["implementation", "against"] + [label for _, label in RATIO_COLUMNS], rows)


def answer(result: SavedResult) -> list[tuple[str, list[str]]]:
    """The answer at a glance, per device and workload: (title, lines). First the verdict; then the published pair
    (or, where it did not run, the first implementation and its reference) per phase (each median per call and python / cpp) and its training run's published rows (Total Time, Summed
    Time, each phase's total, Step In Run where a step is replayed whole); then one row per other implementation with
    its ratio to its reference. Every line fits in 100 columns, whatever the number of implementations."""
    cases = result.cases
    # Counted, the statistics are instructions (1e-9 each): ms read as M instructions.
    counted = result.counted
    unit = "M instructions" if counted else "ms"
    sections = []
    for device in devices_of(cases):
        for workload_id in workloads_of(cases, device):
            present = [impl for impl in impls_of(cases) if any(key[1:] == (impl, device, workload_id) for key in cases)]
            headline = headline_pair(present)
            pair = list(headline) if headline else [impl for impl in PAIR if impl in present]
            pairs = [headline] if headline else []
            ratio_header = [f"{impl} / {reference}" for impl, reference in pairs]
            lines, rows = [], []
            first = verdict(cases, device, workload_id, headline) if headline and not counted else None
            if first:
                lines += textwrap.wrap(first, 100, subsequent_indent="  ") + [""]
            undecided: dict[str, dict] = {}
            for phase in PHASES + PROGRAM_PHASES:  # rows only for the phases the result holds
                medians = {impl: median_ms(cases, phase.name, impl, device, workload_id) for impl in pair}
                paired = {impl: saved_ratio(cases.get((phase.name, impl, device, workload_id))) for impl in pair}
                if any(value is not None for value in medians.values()):
                    rows.append([phase.name] + [NOT_RUN if value is None else f"{value:.4f}" for value in medians.values()]
                                + _ratio_cells(medians, pairs, counted, paired, phase.name, undecided))
            if rows:
                lines += _aligned([f"phase: median {'instructions ' if counted else ''}per call"]
                                  + [f"{impl} ({unit})" for impl in pair] + ratio_header, rows)
            rows = []
            for run in PROGRAM_RUNS:  # the other programs' training runs: Total Time in seconds
                benches = {impl: cases.get((run.name, impl, device, workload_id)) for impl in pair}
                values = {impl: bench.median if bench else None for impl, bench in benches.items()}
                if any(value is not None for value in values.values()):
                    paired = {impl: saved_ratio(bench) for impl, bench in benches.items()}
                    rows.append([run.label] + [NOT_RUN if value is None else f"{value:.4f}" for value in values.values()]
                                + _ratio_cells(values, pairs, paired=paired, label=run.label, undecided=undecided))
            if rows:
                lines += ([""] if lines else []) + _aligned(
                    ["programs' training runs"] + [f"{impl} (s)" for impl in pair] + ratio_header, rows)
            runs = {impl: cases[key] for impl in pair if (key := ("training_run", impl, device, workload_id)) in cases}
            if runs:
                infos = {impl: bench.info for impl, bench in runs.items()}
                shapes = sorted({_run_shape(info) for info in infos.values()})
                # (label, its value, the key of its paired ratio: None the case's own, else in its phase_ratios)
                run_rows = [("Total Time", lambda bench, info: bench.median, None),
                            ("Summed Time", lambda bench, info: info.summed_median_s, schema.SUMMED_RATIO)]
                run_rows += [(phase.label, lambda bench, info, name=phase.name: phase_total(info, name), phase.name)
                             for phase in RUN_PHASES]
                run_rows.append(("Process Total (spawn to exit)", lambda bench, info: info.total_median_s,
                                 schema.PROCESS_TOTAL_RATIO))
                rows = []
                for label, read, key in run_rows:
                    values = {impl: read(runs[impl], infos[impl]) if impl in runs else None for impl in pair}
                    paired = {impl: saved_ratio(runs.get(impl), key) for impl in pair}
                    if any(value is not None for value in values.values()):
                        rows.append([label] + [NOT_RUN if value is None else f"{value:.4f}" for value in values.values()]
                                    + _ratio_cells(values, pairs, paired=paired, label=label, undecided=undecided))
                lines += ([""] if lines else []) + _aligned(
                    ["training run: " + "; ".join(shapes)] + [f"{impl} (s)" for impl in pair] + ratio_header, rows)
            here = [bench for key, bench in cases.items() if key[2:] == (device, workload_id) and saved_ratio(bench)]
            if here:
                # Results measured with each side's blocks in one worker (method 7, --pair-workers 1) say so.
                draws = ("pairs of workers' blocks" if any(getattr(bench.info, "block_workers", None) for bench in here)
                         else "pairs of blocks")
                lines += ["", f"Each ratio: the median of its {draws} measured side by side, with its 95 % "
                              "interval (docs/method.md#every-ratio-with-its-interval)."]
                if any(saved_ratio(bench).get("statistic") == MEAN for bench in here):
                    lines.append("The training run's: the geometric mean of its pairs of rounds, with its t interval.")
            lines += undecided_lines(undecided) + unfit_lines(cases, device, workload_id)
            others = [] if counted else _every_implementation(cases, device, workload_id, present, tuple(pair))
            if others:
                lines += ([""] if lines else []) + ["Every other implementation against its reference (per call; "
                                                    "the training run's Total Time):"] + others
            if lines and device == "cpu" and any(key[0] == "copy_to_device" and key[2] == device for key in cases):
                lines += ["", *COPY_ON_CPU_NOTE_LINES]
            if lines:
                where = f"{device}, {workload_of_id(workload_id).label}" if workload_id else device
                what = "instructions counted" if counted else "the answer"
                sections.append((f"phasebench: {what} on {where}", lines))
    from phasebench.report.distributed import answer_lines

    return sections + answer_lines(result)


# --- the findings of an every-implementation run --------------------------------------------------

def findings(cases: dict, device: str) -> list[str]:
    """What the run says, in sentences drawn from its medians; a sentence whose cases are missing is left out."""
    sentences = []
    med = lambda phase, impl, wid="": median_ms(cases, phase, impl, device, wid)  # noqa: E731
    python, tensor, cpp = (med("data_loading", impl) for impl in ("python", "python-tensor", "cpp"))
    if None not in (python, tensor, cpp) and python > cpp:
        gap = python - cpp
        design, language = python - tensor, tensor - cpp
        sentences.append(
            f"Data loading on {device}: python takes {python:.3f} ms a batch and cpp {cpp:.3f} ms, a gap of {gap:.3f} ms. "
            f"python-tensor, LibTorch's loader design written in Python, takes {tensor:.3f} ms, so the design "
            f"(torchvision's per-image PIL round trip against a split converted once) accounts for {design:.3f} ms "
            f"({design / gap:.0%}) of the gap, and the language with the DataLoader's own machinery (sampler, "
            f"fetcher, collate) for {language:.3f} ms ({language / gap:.0%}).")
    for language_name, published, batched in (("Python", "python", "python-batched"), ("C++", "cpp", "cpp-batched")):
        before, after = med("data_loading", published), med("data_loading", batched)
        step_before, step_after = med("train_step", published), med("train_step", batched)
        if before is not None and after:
            text = (f"Batching in {language_name} on {device} ({batched}: each batch a slice of the split normalized "
                    f"once) takes data_loading from {before:.4f} to {after:.4f} ms ({before / after:.0f}× less)")
            if step_before is not None and step_after:
                text += f", and train_step from {step_before:.3f} to {step_after:.3f} ms ({step_before / step_after:.2f}×)"
            sentences.append(text + ".")
    update = {impl: med("param_update", impl) for impl in ("python", "python-foreach", "python-fused", "cpp")}
    if update["python"] is not None and any(update[impl] is not None for impl in ("python-foreach", "python-fused")):
        sentences.append(f"param_update on {device}: " + ", ".join(f"{impl} {value:.4f} ms" for impl, value in update.items()
                                                                  if value is not None) + ".")
    workers, published = med("data_loading", "python-workers"), med("data_loading", "python")
    if workers is not None and published is not None:
        sentences.append(f"data_loading on {device} with one persistent DataLoader worker (python-workers) is "
                         f"{workers:.3f} ms against {published:.3f} ms in the main process (python): what the main "
                         f"process waits for a batch the worker prepared.")
    for workload_id in workloads_of(cases, device):
        ratios = []
        for impl, reference in ratio_pairs(impls_of(cases)):
            a, b = med("train_step", impl, workload_id), med("train_step", reference, workload_id)
            if a is not None and b:
                ratios.append(f"{impl}/{reference} {a / b:.2f}× ({a:.3f} against {b:.3f} ms)")
        if ratios:
            sentences.append(f"train_step on {device}, {workload_of_id(workload_id).label}: " + "; ".join(ratios) + ".")
    return sentences

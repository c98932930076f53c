"""The report's tables: the published table's shape (the training run, per phase) for the published pair on the
published workload, every implementation's medians and ratios, the timed training run and peak memory of every
implementation, and how a table is written (Markdown, CSV) with the line that describes the result.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from phasebench import registry, schema
from phasebench.data import SYNTHETIC_WARNING
from phasebench.method import METHOD_VERSION
from phasebench.programs import case_phase
from phasebench.report.cases import (
    DEVICE_CLOCK_COLUMNS,
    IMPLEMENTATIONS,
    NOT_RUN,
    ONE_SHOT,
    PHASES,
    PROGRAM_PHASE_TABLES,
    RUN_PHASES,
    UTILIZATION_COLUMNS,
    Phase,
    cases_of,
    device_clock_median,
    direction,
    impls_of,
    median_ms,
    net_median,
    paired_direction,
    phase_total,
    saved_ratio,
    utilization,
    workload_of_id,
)
from phasebench.results import ratio_pairs
from phasebench.saved import SavedResult
from phasebench.stats import MEAN

COLUMN_NAMES = {"python": "Python", "cpp": "CPP"}  # the published table's spelling


@dataclass
class Table:
    title: str
    columns: list[tuple[str, str]]  # (header, format spec for numbers in Markdown)
    rows: list[list] = field(default_factory=list)  # numbers, text, or None where nothing applies
    notes: list[str] = field(default_factory=list)


# --- the published table's shape ---------------------------------------------------------------

def difference(python: float | None, cpp: float | None, paired: dict | None = None) -> list:
    """Python - CPP, and Python / CPP written as every ratio of the suite is (findings.direction: "2.41× slower"),
    where the published table gave (Python - CPP) / CPP in percent; with Python's saved paired ratio to CPP, that
    ratio with its interval (cases.paired_direction)."""
    if python is None or cpp is None:
        return [None, None]
    if paired and paired.get("to") == "cpp":
        return [python - cpp, paired_direction(paired)]
    return [python - cpp, direction(python / cpp) if cpp else None]


def run_table(cases: dict, device: str, method: int = METHOD_VERSION) -> Table:
    runs = {impl: cases[key] for impl in IMPLEMENTATIONS if (key := ("training_run", impl, device)) in cases}
    table = Table(f"Training run on {device}", [("index", ""), ("Func", ""), ("Python(s)", ".4f"), ("CPP(s)", ".4f"),
                                                 ("diff(s)", ".4f"), ("Python / CPP", "")])
    table.notes = [f"{COLUMN_NAMES[impl]}: {NOT_RUN}, no training_run in this result" for impl in IMPLEMENTATIONS
                   if impl not in runs]
    if not runs:
        return table
    infos = {impl: bench.info for impl, bench in runs.items()}
    shapes = sorted({(info.epochs, info.rounds) for info in infos.values()})
    table.title += ": " + "; ".join(f"{epochs} epoch(s), median of {rounds} rounds" for epochs, rounds in shapes) + \
        ", each round a fresh worker process; seconds"

    def line(label: str, read) -> tuple[str, dict]:
        return label, {impl: read(info) for impl, info in infos.items()}

    python_run = runs.get("python")
    paired = {"Total Time": saved_ratio(python_run), "Summed Time": saved_ratio(python_run, schema.SUMMED_RATIO),
              "Process Total (spawn to exit)": saved_ratio(python_run, schema.PROCESS_TOTAL_RATIO)}
    paired |= {phase.label: saved_ratio(python_run, phase.name) for phase in RUN_PHASES}
    if any(paired.values()):
        table.title = table.title.replace("median of", "paired in time, median of")
        statistic = ("geometric mean" if any(ratio.get("statistic") == MEAN for ratio in paired.values() if ratio)
                     else "median")
        table.notes.append(f"Python / CPP: the {statistic} of the pairs of rounds' ratios with its 95 % interval where "
                           "the rounds were paired (docs/method.md#every-ratio-with-its-interval)")
    if method >= 2:  # the benchmark's own time is the program's, measured in the worker
        lines = [("Total Time", {impl: bench.median for impl, bench in runs.items()})]
        process_total = line("Process Total (spawn to exit)", lambda info: info.total_median_s)
    else:
        table.notes.append("Measured by method 1 (phasebench/results.py): its Total Time is the process's, spawn to exit")
        lines = [("Total Time", {impl: None for impl in runs})]
        process_total = ("Process Total (spawn to exit)", {impl: bench.median for impl, bench in runs.items()})
    lines += [line("Summed Time", lambda info: info.summed_median_s),
              line("Step Count", lambda info: info.steps)]
    lines += [line(phase.label, lambda info, name=phase.name: phase_total(info, name)) for phase in RUN_PHASES]
    # Beyond the published rows: the process around the program, the run without phase timers, and
    # the phases' own CPU use.
    lines += [process_total,
              line("Worker Start-up", lambda info: info.startup_median_s),
              line("Program Set-up", lambda info: info.setup_median_s),
              line("Training Loop", lambda info: info.loop_median_s),
              line("Worker Exit", lambda info: info.stopping_median_s),
              line("Free-running Total Time", lambda info: (info.free_running or {}).get("total_s")),
              line("Free-running Training Loop", lambda info: (info.free_running or {}).get("loop_s")),
              line("Free-running Process Total", lambda info: (info.free_running or {}).get("process_total_s")),
              line("Phase CPU (cores)", lambda info: info.phase_cpu_cores)]
    recorded = [(label, values) for label, values in lines if any(value is not None for value in values.values())]
    for index, (label, values) in enumerate(recorded):
        cells = [values[impl] if impl in runs else NOT_RUN for impl in ("python", "cpp")]
        table.rows.append([index, label, *cells] + difference(values.get("python"), values.get("cpp"),
                                                                paired.get(label)))
    return table


def phase_table(cases: dict, device: str, phases: tuple[Phase, ...] = PHASES, title: str = "Per phase") -> Table:
    stats = {(phase.name, impl): cases[key].stats for phase in phases for impl in IMPLEMENTATIONS
             if (key := (phase.name, impl, device)) in cases}
    table = Table(f"{title} on {device}", [("Phase", "")])
    table.notes = [f"{COLUMN_NAMES[impl]}: {NOT_RUN}, no per-phase benchmarks in this result" for impl in IMPLEMENTATIONS
                   if not any(key[1] == impl for key in stats)]
    if not stats:
        return table
    rounds = "/".join(map(str, sorted({s["rounds"] for s in stats.values()})))
    several = sorted({s.get("iterations") or 1 for s in stats.values()} - {1})
    per_round = (f"per call, median and IQR of {rounds} rounds, the short phases' rounds of "
                 f"{'/'.join(map(str, several))} calls (docs/method.md#calls-per-round)" if several
                 else f"one call each, median and IQR of {rounds} rounds")
    table.title += f": {per_round}, and the median net of its worker's timer floor; milliseconds"
    benches = [cases[phase, impl, device] for phase, impl in stats]
    # The host CPU and GPU medians beside the wall time where some benchmark recorded them (cuda results).
    clocks = [(name, header) for name, header in DEVICE_CLOCK_COLUMNS
              if any(device_clock_median(bench, name) is not None for bench in benches)]
    for impl in IMPLEMENTATIONS:
        table.columns += [(f"{COLUMN_NAMES[impl]} median (ms)", ".4f"), (f"{COLUMN_NAMES[impl]} net (ms)", ".4f"),
                          (f"{COLUMN_NAMES[impl]} IQR (ms)", ".4f")]
        table.columns += [(f"{COLUMN_NAMES[impl]} {header} (ms)", ".4f") for _, header in clocks]
    table.columns += [("diff (ms)", ".4f"), ("Python / CPP", "")]
    # Utilization columns only where some benchmark recorded them: nobody watches a GPU on cpu.
    kinds = [(kind, header, spec) for kind, header, spec in UTILIZATION_COLUMNS
             if any(utilization(bench, kind) is not None for bench in benches)]
    table.columns += [(f"{COLUMN_NAMES[impl]} {header}", spec) for _, header, spec in kinds for impl in IMPLEMENTATIONS]

    raw_differences = False
    for phase in phases:
        medians = {impl: stats[phase.name, impl]["median"] * 1e3 for impl in IMPLEMENTATIONS if (phase.name, impl) in stats}
        if not medians:
            continue
        nets = {impl: net * 1e3 for impl in medians
                if (net := net_median(stats[phase.name, impl], cases[phase.name, impl, device])) is not None}
        row = [phase.label]
        for impl in IMPLEMENTATIONS:
            row += ([medians[impl], nets.get(impl), stats[phase.name, impl]["iqr"] * 1e3] if impl in medians
                    else [NOT_RUN, None, None])
            row += [device_clock_median(cases.get((phase.name, impl, device)), name) for name, _ in clocks]
        compared = nets if nets.keys() == medians.keys() else medians
        raw_differences = raw_differences or (compared is medians and len(medians) > 1)
        row += difference(compared.get("python"), compared.get("cpp"), saved_ratio(cases.get((phase.name, "python", device))))
        row += [utilization(cases.get((phase.name, impl, device)), kind) for kind, _, _ in kinds for impl in IMPLEMENTATIONS]
        table.rows.append(row)
    table.notes.append("diff and Python / CPP compare the net medians" if not raw_differences
                       else "diff and Python / CPP compare raw medians where no timer floor was recorded")
    if clocks:
        table.notes.append("host CPU: the CPU time of the thread that ran the body, up to its end, before the closing "
                           "synchronize; GPU: between CUDA events recorded around the body, the stream's span; medians "
                           "of the rounds, timer floor included. Host CPU near the median: the phase is host-bound; far "
                           "below it: the thread waited, for the device or another thread "
                           "(docs/gpu.md#host-cpu-and-gpu-time)")
    if any(kind == "gpu" for kind, _, _ in kinds):
        table.notes.append("GPU busy covers the whole benchmark, warm-up, preparation and messaging included; "
                           "the driver samples it every 1/6 s to 1 s, too coarsely for a phase of microseconds")
    return table


# --- the programs beside the seed's (phasebench/programs.py) --------------------------------------------------

def program_tables(cases: dict, device: str) -> list[Table]:
    """Each other program whose cases ran on `device`: its training run (Total Time, its steps, its set-up and loop,
    paired in time where they were) and its phases in the published table's shape."""
    tables = []
    for name, phases in PROGRAM_PHASE_TABLES:
        run_key = case_phase(name, "training_run")
        runs = {impl: cases[key] for impl in IMPLEMENTATIONS if (key := (run_key, impl, device)) in cases}
        if runs:
            table = Table(f"{name}: training run on {device}, a fixed count of steps, each round a fresh "
                          "worker process; seconds",
                          [("Func", ""), ("Python(s)", ".4f"), ("CPP(s)", ".4f"), ("diff(s)", ".4f"), ("Python / CPP", "")])
            infos = {impl: bench.info for impl, bench in runs.items()}
            lines = [("Total Time", {impl: bench.median for impl, bench in runs.items()}),
                     ("Step Count", {impl: info.steps for impl, info in infos.items()}),
                     ("Program Set-up", {impl: info.setup_median_s for impl, info in infos.items()}),
                     ("Training Loop", {impl: info.loop_median_s for impl, info in infos.items()})]
            paired = saved_ratio(runs.get("python"))
            for label, values in lines:
                cells = [values[impl] if impl in runs else NOT_RUN for impl in IMPLEMENTATIONS]
                table.rows.append([label, *cells] + difference(values.get("python"), values.get("cpp"),
                                                               paired if label == "Total Time" else None))
            if paired:
                table.notes.append(f"{name}: Total Time's Python / CPP: the geometric mean of the pairs of "
                                   "rounds' ratios with its 95 % interval (docs/method.md#every-ratio-with-its-interval)")
            tables.append(table)
        if any((phase.name, impl, device) in cases for phase in phases for impl in IMPLEMENTATIONS):
            tables.append(phase_table(cases, device, phases, f"{name}: per phase"))
    return tables


# --- every implementation and workload ------------------------------------------------------------

def implementations_table(cases: dict, device: str, workload_id: str) -> Table:
    """Per phase, every implementation's median and each one's ratio to its reference."""
    present = [impl for impl in impls_of(cases) if any(key[1:] == (impl, device, workload_id) for key in cases)]
    pairs = ratio_pairs(present)
    table = Table(f"Every implementation on {device}, {workload_of_id(workload_id).label}: median per call (ms), "
                  f"and each implementation against its reference", [("Phase", "")])
    table.columns += [(f"{impl} (ms)", ".4f") for impl in present]
    table.columns += [(f"{impl} / {reference}", ".2f") for impl, reference in pairs]
    for phase in PHASES:
        medians = {impl: median_ms(cases, phase.name, impl, device, workload_id) for impl in present}
        if not any(value is not None for value in medians.values()):
            continue
        ratios = [medians[impl] / medians[reference] if medians[impl] and medians[reference] else None
                  for impl, reference in pairs]
        table.rows.append([phase.label] + [NOT_RUN if value is None else value for value in medians.values()] + ratios)
    notes = {registry.get(impl).notes.get(device) for impl in present if impl in registry.BY_NAME}
    table.notes = sorted(note for note in notes if note)
    return table


def runs_table(cases: dict, device: str, method: int = METHOD_VERSION) -> Table:
    """The timed training run of every implementation and workload (docs/implementations.md#implementations-and-workloads): the
    program's time, the phases' summed time and each phase's total, one-shot phases and step_in_run included."""
    table = Table(f"The timed training run of every implementation on {device} (phase timers on; median of the runs, "
                  f"seconds)", [("Implementation", ""), ("Workload", ""), ("Steps", ""), ("Total Time (s)", ".3f"),
                                ("Summed Time (s)", ".3f")])
    runs = cases_of(cases, device, "training_run")
    infos = [bench.info for _, _, bench in runs]
    phases = [phase for phase in RUN_PHASES + ONE_SHOT
              if any(phase_total(info, phase.name) is not None for info in infos)]
    table.columns += [(f"{phase.label} (s)", ".3f") for phase in phases]
    for (impl, workload_id, bench), info in zip(runs, infos):
        total = bench.median if method >= 2 else None
        table.rows.append([impl, workload_of_id(workload_id).label, info.steps, total,
                           info.summed_median_s] + [phase_total(info, phase.name) for phase in phases])
    if table.rows and method < 2:
        table.notes.append("Measured by method 1 (phasebench/results.py): no Total Time of the program's own")
    return table


def memory_table(cases: dict, device: str) -> Table:
    """The peak memory of each training run (docs/implementations.md#implementations-and-workloads)."""
    table = Table(f"Peak memory of the training runs on {device}: the worker's resident memory"
                  + (", and the device memory allocated" if device != "cpu" else "") + " (MiB, median of the runs)",
                  [("Implementation", ""), ("Workload", ""), ("Peak resident (MiB)", ".0f")]
                  + ([("Peak allocated on the device (MiB)", ".0f")] if device != "cpu" else []))
    for (phase, impl, case_device, workload_id), bench in sorted(
            cases.items(), key=lambda item: (impls_of(cases).index(item[0][1]), workload_of_id(item[0][3]))):
        if phase != "training_run" or case_device != device:
            continue
        info = bench.info
        if info.peak_rss_median_bytes is None:
            continue
        row = [impl, workload_of_id(workload_id).label, info.peak_rss_median_bytes / 2**20]
        if device != "cpu":
            peak = info.peak_device_median_bytes
            row.append(None if peak is None else peak / 2**20)
        table.rows.append(row)
    if not table.rows:
        table.notes.append("no training run with memory figures in this result")
    return table


STARTUP_PARTS = (("imports", "Imports (s)"), ("cuda_init", "CUDA init (s)"), ("trainer", "Trainer (s)"),
                 ("timer_floor", "Timer floor (s)"), ("pci_bus_id", "Bus id (s)"))


def startup_table(cases: dict, device: str) -> Table:
    """Where each training run's worker start went (docs/method.md#a-workers-start-up-in-parts): the start seen from
    pytest (spawn to trainer ready) beside the parts the worker reports, medians of the rounds; no rows for results
    saved without them. A part a device does not have (CUDA's on cpu) has no column."""
    runs = [(impl, workload_id, info) for impl, workload_id, bench in cases_of(cases, device, "training_run")
            if (info := bench.info).startup_parts_median_s]
    parts = [(part, header) for part, header in STARTUP_PARTS
             if any(part in info.startup_parts_median_s for _, _, info in runs)]
    table = Table(f"Worker start-up of the training runs on {device}, in parts (median of the rounds, seconds)",
                  [("Implementation", ""), ("Workload", ""), ("Start-up seen from pytest (s)", ".3f")]
                  + [(header, ".3f") for _, header in parts])
    for impl, workload_id, info in runs:
        table.rows.append([impl, workload_of_id(workload_id).label, info.startup_median_s]
                          + [info.startup_parts_median_s.get(part) for part, _ in parts])
    if table.rows:
        table.notes.append("the start seen from pytest holds more than the parts: the spawn before the worker's "
                           "process exists, and the reply")
    return table


# --- output ------------------------------------------------------------------------------------

def markdown_cell(value, spec: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def markdown(table: Table) -> str:
    lines = [f"**{table.title}**", ""]
    if table.rows:
        lines.append("| " + " | ".join(header for header, _ in table.columns) + " |")
        lines.append("|" + "|".join("---:" if spec else "---" for _, spec in table.columns) + "|")
        lines += ["| " + " | ".join(markdown_cell(value, spec) for value, (_, spec) in zip(row, table.columns)) + " |"
                  for row in table.rows]
        lines.append("")
    lines += [f"{note}." for note in table.notes]
    return "\n".join(lines).rstrip() + "\n"


def csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return float(f"{value:.12g}")  # without the noise of unit conversions (0.009000000000000001)
    return value


def csv_block(table: Table, device: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["device"] + [header for header, _ in table.columns])
    writer.writerows([device] + [csv_cell(value) for value in row] for row in table.rows)
    return out.getvalue()


def _known(value) -> str:
    return "?" if value is None else str(value)


def describe(path: Path, result: SavedResult) -> str:
    machine = result.machine
    commit = result.commit_info
    gpu = (machine.gpu or {}).get("name") or "none"
    text = (f"{path}: saved {result.datetime or '?'}, commit {str(commit.get('id', '?'))[:8]}"
            f"{' (dirty)' if commit.get('dirty') else ''}; method {machine.method}; torch {_known(machine.torch)}, "
            f"{_known(machine.dataset)} data, {_known(machine.threads)} intra-op threads; CPU {_known(machine.cpu)}; "
            f"GPU {gpu}.")
    if machine.dataset == "synthetic":
        text += f" WARNING: {SYNTHETIC_WARNING}."
    slowed = (machine.testing or {}).get("slow_phase")
    if slowed:
        text += f" TEST KNOB {slowed}: slowed on purpose, not a real measurement."
    return text

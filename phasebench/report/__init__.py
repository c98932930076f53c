"""The published table, redone from a saved result.

    python -m phasebench.report [RESULT ...] [--format markdown|csv] [--out report/]

RESULT is a JSON file that pytest-benchmark wrote (--benchmark-autosave, --benchmark-save=NAME,
--benchmark-json=PATH), or a run number or name as --benchmark-compare takes it ("0003"); with
none, the newest result saved for this machine, the one a bare --benchmark-compare would pick.

Per result and device it prints two tables, Markdown by default, CSV with --format csv (one CSV
block per table, a blank line between, a device column first):
1. The published table's shape, from the training_run benchmarks: Total Time (the program's own time
   in the worker, as published), Summed Time, Step Count and each phase's total, Python against C++,
   with Time Difference (%) computed as the published table does, (Python - CPP) / CPP x 100; then
   the process around the program (spawn to exit, start-up, exit), the free-running run, and the
   phases' own CPU use.
2. Per phase, from the test_phase benchmarks: median, median net of the worker's timer floor and IQR
   per implementation, the same difference on the net medians, the phase's own CPU use, and the
   GPU and worker CPU during the whole benchmark where they were recorded.
3. Every implementation the result holds (README, "Implementations and workloads"), per device and
   workload: each phase's median per implementation and its ratio to the implementation the registry
   names as its reference; the findings drawn from them in sentences (the language's and the design's
   share of the data-loading gap, what batching gives in each language, the train_step ratio per
   workload); and the peak memory of each training run.
4. Where the result holds them: the free-running training loop of every implementation against the
   published cpp's, with the one-shot phase (graph_capture, compile) inside it and the GPU busy %;
   concurrent jobs (images/s of all jobs, against one job, each job's slowdown, CPU and GPU busy, MPS);
   ensembles (time per step and per model-step, against one model and against the reference).
Tables 1 and 2 are of the published pair on the published workload. Cases the result lacks (cpp
skipped, cuda skipped) are shown as "not run", with the reason where the result records one. Beside
each table file it writes two charts: per phase, Python vs C++ medians with their IQR, one panel per
device; and the train_step ratio of each implementation to its reference against the Net's width, one
line per batch size. All go into --out, named after the result; their paths are printed on stderr.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pytest_benchmark.logger import Logger
from pytest_benchmark.utils import get_machine_id, load_storage

from phasebench import registry
from phasebench.data import SYNTHETIC_WARNING
from phasebench.gate import case_key, ratio_pairs
from phasebench.registry import DEVICES
from phasebench.results import METHOD_VERSION, method_of
from phasebench.spec import Workload
from phasebench.train.trainer import PHASES  # the row labels: the one list of phases
from phasebench.utilization import THREAD_CPU_MIN_BODY_S
from phasebench.worker.build import ROOT

IMPLEMENTATIONS = registry.DEFAULT_IMPLS  # the published pair, whose tables follow the published shape

NOT_RUN = "not run"
DEFAULT_STORAGE = f"file://{ROOT / '.benchmarks'}"  # phasebench/plugin/__init__.py's default for --benchmark-storage
COLUMN_NAMES = {"python": "Python", "cpp": "CPP"}  # the published table's spelling
CHART_NAMES = {"python": "Python", "cpp": "C++"}
CHART_COLORS = {"python": "#3572A5", "cpp": "#f34b7d"}


@dataclass
class Table:
    title: str
    columns: list[tuple[str, str]]  # (header, format spec for numbers in Markdown)
    rows: list[list] = field(default_factory=list)  # numbers, text, or None where nothing applies
    notes: list[str] = field(default_factory=list)


# --- reading results ---------------------------------------------------------------------------

def find_results(names: list[str], storage_url: str, prog: str = "phasebench.report") -> list[Path]:
    """The files to report on, found as pytest-benchmark's own storage finds them: paths, run numbers, names."""
    storage = load_storage(storage_url, logger=Logger(), default_machine_id=get_machine_id(), netrc=None)
    if not names:
        newest = storage.query("[0-9][0-9][0-9][0-9]_")[-1:]
        if not newest:
            raise SystemExit(f"{prog}: no saved result in {storage}/{get_machine_id()}: run pytest with "
                             "--benchmark-autosave first, or name a result file")
        return newest
    paths = []
    for name in names:
        try:
            found = storage.query(name)
        except ValueError:  # a path to no file, which pytest-benchmark's globs cannot take either
            found = []
        if not found:
            raise SystemExit(f"{prog}: {name}: no such file, nor a saved result of that name in {storage}")
        paths += found
    return paths


def read_result(path: Path) -> dict:
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"phasebench.report: {path}: cannot read it as JSON ({error})") from None
    if not isinstance(result, dict) or not isinstance(result.get("benchmarks"), list):
        raise SystemExit(f"phasebench.report: {path}: no 'benchmarks' list; not a pytest-benchmark result")
    return result


def all_cases(result: dict) -> dict[tuple[str, str, str, str], dict]:
    """(phase, implementation, device, workload id) -> benchmark (phasebench.gate.case_key)."""
    return {key: bench for bench in result["benchmarks"] if (key := case_key(bench))}


def by_case(result: dict) -> dict[tuple[str, str, str], dict]:
    """(phase, implementation, device) -> benchmark, of the published workload: what the published tables read."""
    return {(phase, impl, device): bench for (phase, impl, device, workload_id), bench in all_cases(result).items()
            if not workload_id}


def devices_of(cases: dict) -> list[str]:
    return list(DEVICES) + sorted({key[2] for key in cases} - set(DEVICES))


def absent_reason(result: dict, device: str) -> str:
    recorded = (result.get("machine_info", {}).get("phasebench") or {}).get("gpu_unavailable")
    if device.startswith("cuda") and recorded:
        return recorded
    return "skipped or deselected when the result was saved"


# --- the tables --------------------------------------------------------------------------------

def difference(python: float | None, cpp: float | None) -> list:
    """Python - CPP, and (Python - CPP) / CPP x 100 as the published table computes it."""
    if python is None or cpp is None:
        return [None, None]
    return [python - cpp, (python - cpp) / cpp * 100 if cpp else None]


def run_table(cases: dict, device: str, method: int = METHOD_VERSION) -> Table:
    runs = {impl: cases[key] for impl in IMPLEMENTATIONS if (key := ("training_run", impl, device)) in cases}
    table = Table(f"Training run on {device}", [("index", ""), ("Func", ""), ("Python(s)", ".4f"), ("CPP(s)", ".4f"),
                                                 ("diff(s)", ".4f"), ("Time Difference (%)", ".2f")])
    table.notes = [f"{COLUMN_NAMES[impl]}: {NOT_RUN}, no training_run in this result" for impl in IMPLEMENTATIONS
                   if impl not in runs]
    if not runs:
        return table
    shapes = sorted({(bench["extra_info"]["epochs"], bench["extra_info"]["rounds"]) for bench in runs.values()})
    table.title += ": " + "; ".join(f"{epochs} epoch(s), median of {rounds} rounds" for epochs, rounds in shapes) + \
        ", each round a fresh worker process; seconds"

    def line(label: str, read) -> tuple[str, dict]:
        return label, {impl: read(bench["extra_info"]) for impl, bench in runs.items()}

    if method >= 2:  # the benchmark's own time is the program's, measured in the worker
        lines = [("Total Time", {impl: bench["stats"]["median"] for impl, bench in runs.items()})]
        process_total = line("Process Total (spawn to exit)", lambda info: info.get("total_median_s"))
    else:
        table.notes.append("Measured by method 1 (bench/results.py): its Total Time is the process's, spawn to exit")
        lines = [("Total Time", {impl: None for impl in runs})]
        process_total = ("Process Total (spawn to exit)", {impl: bench["stats"]["median"] for impl, bench in runs.items()})
    lines += [line("Summed Time", lambda info: info["summed_median_s"]),
              line("Step Count", lambda info: info["steps"])]
    lines += [line(phase.label, lambda info, name=phase.name: info["phase_total_s"].get(name)) for phase in PHASES]
    # Beyond the published rows: the process around the program, the run without phase timers, and
    # the phases' own CPU use.
    lines += [process_total,
              line("Worker Start-up", lambda info: info.get("startup_median_s")),
              line("Program Set-up", lambda info: info.get("setup_median_s")),
              line("Training Loop", lambda info: info.get("loop_median_s")),
              line("Worker Exit", lambda info: info.get("stopping_median_s")),
              line("Free-running Total Time", lambda info: info["free_running"]["total_s"]),
              line("Free-running Training Loop", lambda info: info["free_running"]["loop_s"]),
              line("Free-running Process Total", lambda info: info["free_running"].get("process_total_s")),
              line("Phase CPU (cores)", lambda info: info.get("phase_cpu_cores"))]
    recorded = [(label, values) for label, values in lines if any(value is not None for value in values.values())]
    for index, (label, values) in enumerate(recorded):
        cells = [values[impl] if impl in runs else NOT_RUN for impl in ("python", "cpp")]
        table.rows.append([index, label, *cells] + difference(values.get("python"), values.get("cpp")))
    return table


def utilization(bench: dict | None, kind: str) -> float | None:
    """GPU busy % (mean) or worker CPU cores during the whole benchmark (warm-up, preparation and messaging
    included), or the phase's own CPU cores (its timed bodies alone), where the benchmark recorded them."""
    info = (bench or {}).get("extra_info") or {}
    if kind == "phase_thread_cpu" and ((bench or {}).get("stats") or {}).get("median", 1) < THREAD_CPU_MIN_BODY_S:
        return None  # a result saved before the suite left it out: mostly the CPU clocks' own reads (2.79 cores)
    if kind in ("phase_cpu", "phase_thread_cpu"):
        return info.get(f"{kind}_cores")
    recorded = info.get(kind) or {}
    return (recorded.get("utilization_pct") or {}).get("mean") if kind == "gpu" else recorded.get("cores")


UTILIZATION_COLUMNS = (("phase_thread_cpu", "phase CPU, its thread (cores)", ".2f"),
                       ("phase_cpu", "phase CPU, all threads (cores)", ".2f"),
                       ("gpu", "GPU busy in benchmark (%)", ".0f"),
                       ("cpu", "worker CPU in benchmark (cores)", ".2f"))


def net_median(stats: dict, bench: dict) -> float | None:
    """The median less its worker's timer floor (seconds), or None where no floor was recorded."""
    floor = (bench.get("extra_info") or {}).get("timer_floor_s")
    return None if floor is None else stats["median"] - floor


def phase_table(cases: dict, device: str) -> Table:
    stats = {(phase.name, impl): cases[key]["stats"] for phase in PHASES for impl in IMPLEMENTATIONS
             if (key := (phase.name, impl, device)) in cases}
    table = Table(f"Per phase on {device}", [("Phase", "")])
    table.notes = [f"{COLUMN_NAMES[impl]}: {NOT_RUN}, no per-phase benchmarks in this result" for impl in IMPLEMENTATIONS
                   if not any(key[1] == impl for key in stats)]
    if not stats:
        return table
    rounds = "/".join(map(str, sorted({s["rounds"] for s in stats.values()})))
    table.title += (f": one call each, median and IQR of {rounds} rounds, and the median net of its worker's timer "
                    f"floor; milliseconds")
    for impl in IMPLEMENTATIONS:
        table.columns += [(f"{COLUMN_NAMES[impl]} median (ms)", ".4f"), (f"{COLUMN_NAMES[impl]} net (ms)", ".4f"),
                          (f"{COLUMN_NAMES[impl]} IQR (ms)", ".4f")]
    table.columns += [("diff (ms)", ".4f"), ("Time Difference (%)", ".2f")]
    # Utilization columns only where some benchmark recorded them: nobody watches a GPU on cpu.
    benches = [cases[phase, impl, device] for phase, impl in stats]
    kinds = [(kind, header, spec) for kind, header, spec in UTILIZATION_COLUMNS
             if any(utilization(bench, kind) is not None for bench in benches)]
    table.columns += [(f"{COLUMN_NAMES[impl]} {header}", spec) for _, header, spec in kinds for impl in IMPLEMENTATIONS]

    raw_differences = False
    for phase in PHASES:
        medians = {impl: stats[phase.name, impl]["median"] * 1e3 for impl in IMPLEMENTATIONS if (phase.name, impl) in stats}
        if not medians:
            continue
        nets = {impl: net * 1e3 for impl in medians
                if (net := net_median(stats[phase.name, impl], cases[phase.name, impl, device])) is not None}
        row = [phase.label]
        for impl in IMPLEMENTATIONS:
            row += ([medians[impl], nets.get(impl), stats[phase.name, impl]["iqr"] * 1e3] if impl in medians
                    else [NOT_RUN, None, None])
        compared = nets if nets.keys() == medians.keys() else medians
        raw_differences = raw_differences or (compared is medians and len(medians) > 1)
        row += difference(compared.get("python"), compared.get("cpp"))
        row += [utilization(cases.get((phase.name, impl, device)), kind) for kind, _, _ in kinds for impl in IMPLEMENTATIONS]
        table.rows.append(row)
    table.notes.append("diff and Time Difference compare the net medians" if not raw_differences
                       else "diff and Time Difference compare raw medians where no timer floor was recorded")
    if any(kind == "gpu" for kind, _, _ in kinds):
        table.notes.append("GPU busy covers the whole benchmark, warm-up, preparation and messaging included; "
                           "the driver samples it every 1/6 s to 1 s, too coarsely for a phase of microseconds")
    return table


# --- the answer at a glance: pytest's terminal summary (phasebench/plugin/__init__.py) and the report ------------

def direction(ratio: float) -> str:
    """A ratio to the reference with its direction in words: 2.41× slower, 0.96× — faster, 1.00× — the same (to
    the hundredth)."""
    text = f"{ratio:.2f}×"
    if text == "1.00×":
        return f"{text} — the same"
    return f"{text} slower" if ratio > 1 else f"{text} — faster"


def _ratio_cells(values: dict[str, float | None], pairs: list[tuple[str, str]]) -> list[str]:
    return [direction(values[impl] / values[reference]) if values.get(impl) and values.get(reference) else "—"
            for impl, reference in pairs]


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    return ["  ".join(cell.ljust(width) if index == 0 else cell.rjust(width)
                      for index, (cell, width) in enumerate(zip(line, widths))).rstrip()
            for line in [header] + rows]


# Why copy_to_device's per-call ratio and its in-run ratio need not agree on cpu (its product's `resident` check
# proves that nothing is copied there).
COPY_ON_CPU_NOTE = ("copy_to_device on cpu copies nothing: .to('cpu') returns the batch itself in both languages, so "
                    "per call it times each language's call overhead (microseconds); in the training run its clock also "
                    "holds freeing the previous step's batch, as the published program's did, so the two ratios differ.")


def answer(benchmarks: list[dict]) -> list[tuple[str, list[str]]]:
    """The answer at a glance, per device and workload: (title, lines). Per phase, each implementation's median
    per call and its ratio to its reference with the direction in words; then the training run's published rows
    (Total Time, Summed Time, each phase's total) the same way. Generic over implementations: a column per
    implementation present, a ratio column per implementation whose reference is present."""
    cases = {key: bench for bench in benchmarks if (key := case_key(bench))}
    sections = []
    for device in devices_of(cases):
        for workload_id in workloads_of(cases, device):
            present = [impl for impl in impls_of(cases) if any(key[1:] == (impl, device, workload_id) for key in cases)]
            pairs = ratio_pairs(present)
            header = [f"{impl} (ms)" for impl in present] + [f"{impl} / {reference}" for impl, reference in pairs]
            lines, rows = [], []
            for phase in PHASES:
                medians = {impl: median_ms(cases, phase.name, impl, device, workload_id) for impl in present}
                if any(value is not None for value in medians.values()):
                    rows.append([phase.name] + [NOT_RUN if value is None else f"{value:.4f}" for value in medians.values()]
                                + _ratio_cells(medians, pairs))
            if rows:
                lines += _aligned(["phase: median per call"] + header, rows)
            runs = {impl: cases[key]["extra_info"] | {"total": cases[key]["stats"]["median"]} for impl in present
                    if (key := ("training_run", impl, device, workload_id)) in cases}
            if runs:
                shapes = sorted({(info.get("epochs"), info.get("rounds")) for info in runs.values()})
                title = "training run: " + "; ".join(f"{epochs} epoch(s), median of {rounds}" for epochs, rounds in shapes)
                run_rows = [("Total Time", lambda info: info["total"]),
                            ("Summed Time", lambda info: info.get("summed_median_s"))]
                run_rows += [(phase.label, lambda info, name=phase.name: (info.get("phase_total_s") or {}).get(name))
                             for phase in PHASES if phase.name != "train_step"]
                run_rows.append(("Process Total (spawn to exit)", lambda info: info.get("total_median_s")))
                rows = []
                for label, read in run_rows:
                    values = {impl: read(runs[impl]) if impl in runs else None for impl in present}
                    if any(value is not None for value in values.values()):
                        rows.append([label] + [NOT_RUN if value is None else f"{value:.4f}" for value in values.values()]
                                    + _ratio_cells(values, pairs))
                lines += ([""] if lines else []) + _aligned(
                    [title] + [f"{impl} (s)" for impl in present] + header[len(present):], rows)
            if lines and device == "cpu" and any(key[0] == "copy_to_device" and key[2] == device for key in cases):
                lines += ["", COPY_ON_CPU_NOTE]
            if lines:
                where = f"{device}, {workload_of_id(workload_id).label}" if workload_id else device
                sections.append((f"phasebench: the answer on {where}", lines))
    return sections


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


def describe(path: Path, result: dict) -> str:
    machine = result.get("machine_info", {})
    phasebench = machine.get("phasebench") or {}
    commit = result.get("commit_info") or {}
    gpu = (phasebench.get("gpu") or {}).get("name") or "none"
    text = (f"{path}: saved {result.get('datetime', '?')}, commit {str(commit.get('id', '?'))[:8]}"
            f"{' (dirty)' if commit.get('dirty') else ''}; method {method_of(result)}; torch {phasebench.get('torch', '?')}, "
            f"{phasebench.get('dataset', '?')} data, {phasebench.get('threads', '?')} intra-op threads; "
            f"CPU {phasebench.get('cpu', '?')}; GPU {gpu}.")
    if phasebench.get("dataset") == "synthetic":
        text += f" WARNING: {SYNTHETIC_WARNING}."
    if phasebench.get("test_slow_phase"):
        text += f" TEST KNOB {phasebench['test_slow_phase']}: slowed on purpose, not a real measurement."
    return text


# --- every implementation and workload ------------------------------------------------------------

def workloads_of(cases: dict, device: str) -> list[str]:
    """The workload ids the result holds on a device, the published one first, then by width and batch size."""
    ids = {key[3] for key in cases if key[2] == device}
    return sorted(ids, key=lambda wid: (wid != "", workload_of_id(wid)))


def workload_of_id(workload_id: str) -> Workload:
    if not workload_id:
        return Workload()
    width, batch = workload_id.split("-")
    return Workload(int(width[1:]), int(batch[1:]))


def impls_of(cases: dict) -> list[str]:
    """The implementations the result holds, in registry order (unknown names last)."""
    present = {key[1] for key in cases}
    return [name for name in registry.NAMES if name in present] + sorted(present - set(registry.NAMES))


def median_ms(cases: dict, phase: str, impl: str, device: str, workload_id: str = "") -> float | None:
    bench = cases.get((phase, impl, device, workload_id))
    return bench["stats"]["median"] * 1e3 if bench else None


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


def memory_table(cases: dict, device: str) -> Table:
    """The peak memory of each training run (README, "Implementations and workloads")."""
    table = Table(f"Peak memory of the training runs on {device}: the worker's resident memory"
                  + (", and the device memory allocated" if device != "cpu" else "") + " (MiB, median of the runs)",
                  [("Implementation", ""), ("Workload", ""), ("Peak resident (MiB)", ".0f")]
                  + ([("Peak allocated on the device (MiB)", ".0f")] if device != "cpu" else []))
    for (phase, impl, case_device, workload_id), bench in sorted(
            cases.items(), key=lambda item: (impls_of(cases).index(item[0][1]), workload_of_id(item[0][3]))):
        info = bench.get("extra_info") or {}
        if phase != "training_run" or case_device != device or info.get("peak_rss_median_bytes") is None:
            continue
        row = [impl, workload_of_id(workload_id).label, info["peak_rss_median_bytes"] / 2**20]
        if device != "cpu":
            peak = info.get("peak_device_median_bytes")
            row.append(None if peak is None else peak / 2**20)
        table.rows.append(row)
    if not table.rows:
        table.notes.append("no training run with memory figures in this result")
    return table


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


# --- filling the device: every training loop, concurrent jobs, ensembles --------------------------

def _median(values) -> float | None:
    values = [value for value in values or [] if value is not None]
    return statistics.median(values) if values else None


def _mps(info: dict) -> str | None:
    mps = info.get("mps")
    return None if mps is None else ("running" if mps.get("running") else "not running")


def _cases_of(cases: dict, device: str, kind: str, count: str = "") -> list[tuple[str, str, dict]]:
    """(implementation, workload id, benchmark) of one kind of case on a device ("training_run", or a prefix such
    as "ensemble-"), by workload, then registry order, then its count (extra_info[count]: jobs, models)."""
    order = impls_of(cases)
    found = [(impl, workload_id, bench) for (phase, impl, case_device, workload_id), bench in cases.items()
             if case_device == device and (phase == kind or kind.endswith("-") and phase.startswith(kind))]
    return sorted(found, key=lambda case: (workload_of_id(case[1]), order.index(case[0]),
                                           case[2]["extra_info"].get(count, 0) if count else 0))


def loops_table(cases: dict, device: str) -> Table:
    """One free-running epoch of every implementation (README, "On the GPU"): its training loop, the one-shot
    phase (graph_capture, compile) inside it, the loop without it, and each against the published cpp's loop."""
    table = Table(f"The free-running training loop of every implementation on {device} (one epoch per workload, "
                  f"no phase timers; seconds)",
                  [("Implementation", ""), ("Workload", ""), ("Loop (s)", ".3f"), ("One-shot phase in it (s)", ".3f"),
                   ("Loop less one-shot (s)", ".3f"), ("cpp's loop / this", ".2f"), ("GPU busy (%)", ".0f"),
                   ("worker CPU (cores)", ".2f")])
    runs = [(impl, workload_id, bench) for impl, workload_id, bench in _cases_of(cases, device, "training_run")
            if (bench.get("extra_info") or {}).get("free_running")]
    cpp_loops = {workload_id: bench["extra_info"]["free_running"]["loop_s"]
                 for impl, workload_id, bench in runs if impl == "cpp"}
    for impl, workload_id, bench in runs:
        free = bench["extra_info"]["free_running"]
        one_shot, cpp_loop = free.get("one_shot_s"), cpp_loops.get(workload_id)
        table.rows.append([impl, workload_of_id(workload_id).label, free["loop_s"], one_shot,
                           free["loop_s"] - (one_shot or 0.0), cpp_loop / free["loop_s"] if cpp_loop else None,
                           utilization(bench, "gpu"), utilization(bench, "cpu")])
    if table.rows:
        table.notes.append("cpp's loop / this: how many times faster than the published cpp's loop (above 1 faster)")
    return table


def _faults_differ(values: list[float]) -> bool:
    """Two implementations' fault counts differ: the larger is more than one fault and half again the smaller."""
    return max(values) - min(values) > max(1.0, 0.5 * min(values))


def faults_table(cases: dict, device: str) -> Table:
    """Page faults where implementations differ (docs/page-faults.md): per phase, the worker's minor faults across
    a timed body (median of the rounds); per training run, across the free-running loop, per step."""
    present = impls_of(cases)
    table = Table(f"Page faults on {device} where implementations differ: minor faults per round of a phase, per "
                  f"step of the free-running training run (the worker process's, getrusage)",
                  [("Case", ""), ("Workload", "")] + [(impl, ".1f") for impl in present])
    rows, alike = {}, []
    for (phase, impl, case_device, workload_id), bench in cases.items():
        info = bench.get("extra_info") or {}
        value = info.get("free_running_minor_faults_per_step") if phase == "training_run" else \
            info.get("minor_faults_per_round")
        if case_device == device and value is not None:
            rows.setdefault((phase, workload_id), {})[impl] = value
    order = [phase.name for phase in PHASES] + ["training_run"]
    for (phase, workload_id), values in sorted(rows.items(), key=lambda item: (
            order.index(item[0][0]) if item[0][0] in order else len(order), workload_of_id(item[0][1]))):
        label = f"{phase} (per step, free-running)" if phase == "training_run" else phase
        if len(values) > 1 and _faults_differ(list(values.values())):
            table.rows.append([label, workload_of_id(workload_id).label] + [values.get(impl) for impl in present])
        elif len(values) > 1:
            alike.append(label)
    if alike:
        table.notes.append(f"alike in every implementation (within one fault or half): {', '.join(sorted(set(alike)))}")
    return table


def concurrent_table(cases: dict, device: str) -> Table:
    """test_concurrent_jobs (README, "Concurrent jobs and ensembles"): what N jobs together got from the device."""
    table = Table(f"Concurrent jobs on {device}: N fresh workers of one implementation each training one epoch at once",
                  [("Implementation", ""), ("Workload", ""), ("Jobs", ""), ("Threads per job", ""),
                   ("Images/s, all jobs", ".0f"), ("Images/s against 1 job", ".2f"),
                   ("Slowdown of a job (median)", ".2f"), ("A job's loop (s, median)", ".2f"),
                   ("A job's CPU (cores, median)", ".2f"), ("GPU busy (%)", ".0f"), ("MPS", "")])
    jobs = _cases_of(cases, device, "concurrent_jobs-", "jobs")
    single = {(impl, workload_id): bench["extra_info"].get("images_per_s") for impl, workload_id, bench in jobs
              if bench["extra_info"].get("jobs") == 1}
    for impl, workload_id, bench in jobs:
        info = bench["extra_info"]
        one = single.get((impl, workload_id))
        table.rows.append([impl, workload_of_id(workload_id).label, info.get("jobs"), info.get("threads_per_job"),
                           info.get("images_per_s"), info["images_per_s"] / one if one and info.get("images_per_s")
                           else None, _median(info.get("slowdown")), _median(info.get("job_loop_s")),
                           _median(info.get("job_cpu_cores")), utilization(bench, "gpu"), _mps(info)])
    if any(not (bench["extra_info"].get("trained") or "").endswith("free-running") for _, _, bench in jobs):
        table.notes.append("some jobs trained a few steps as a check (--benchmark-disable), not an epoch")
    return table


def ensemble_table(cases: dict, device: str) -> Table:
    """test_ensemble (README, "Concurrent jobs and ensembles"): per step and per model-step, data loading excluded."""
    table = Table(f"Ensembles on {device}: M models trained on the same batches, one step of all M per round "
                  f"(data loading excluded; milliseconds)",
                  [("Implementation", ""), ("Workload", ""), ("Models", ""), ("Step (ms)", ".3f"),
                   ("Per model-step (ms)", ".3f"), ("Per model-step against 1 model", ".2f"),
                   ("Per model-step against its reference", ".2f"), ("GPU busy (%)", ".0f")])
    members = _cases_of(cases, device, "ensemble-", "models")
    per_model = {(impl, workload_id, bench["extra_info"]["models"]): bench["stats"]["median"] * 1e3
                 / bench["extra_info"]["models"] for impl, workload_id, bench in members
                 if bench["extra_info"].get("models")}
    for impl, workload_id, bench in members:
        models = bench["extra_info"].get("models")
        mine = per_model.get((impl, workload_id, models))
        one = per_model.get((impl, workload_id, 1))
        reference = registry.get(impl).pair if impl in registry.BY_NAME else None
        theirs = per_model.get((reference, workload_id, models))
        table.rows.append([impl, workload_of_id(workload_id).label, models, bench["stats"]["median"] * 1e3, mine,
                           mine / one if mine and one else None, mine / theirs if mine and theirs else None,
                           utilization(bench, "gpu")])
    return table


def render(path: Path, result: dict, style: str) -> tuple[str, list[str]]:
    """The report's text, and for CSV the notes it cannot carry (for stderr)."""
    cases, every = by_case(result), all_cases(result)
    markdown_parts, csv_parts, notes = [f"## {path.name}", "", describe(path, result), ""], [], []
    for device in devices_of(every):
        markdown_parts += [f"### {device}", ""]
        if not any(key[2] == device for key in every):
            note = f"{device}: {NOT_RUN} ({absent_reason(result, device)})"
            markdown_parts += [note + ".", ""]
            notes.append(note)
            continue
        tables = [run_table(cases, device, method_of(result)), phase_table(cases, device)]
        beyond = len(impls_of(every)) > 2 or any(key[3] for key in every)
        if beyond:  # more than the published pair on the published workload
            sentences = findings(every, device)
            if sentences:
                markdown_parts += [f"**Findings on {device}**", ""] + [f"- {sentence}" for sentence in sentences] + [""]
            tables += [implementations_table(every, device, wid) for wid in workloads_of(every, device)]
        if any(key[0] == "training_run" and key[2] == device for key in every):
            tables.append(memory_table(every, device))
            if beyond:
                tables.append(loops_table(every, device))
        tables += [table for table in (concurrent_table(every, device), ensemble_table(every, device)) if table.rows]
        faults = faults_table(every, device)
        if faults.rows or faults.notes:
            tables.append(faults)
        markdown_parts += [markdown(table) for table in tables]
        csv_parts += [csv_block(table, device) for table in tables if table.rows]
        notes += [f"{device}: {note}" for table in tables for note in table.notes]
    if style == "markdown":
        return "\n".join(markdown_parts).rstrip() + "\n", []
    return "\n".join(csv_parts), notes


def _run_rows(bench: dict) -> dict[str, float | None]:
    """The training run's published rows (seconds) from its benchmark: Total Time, Summed Time, each phase's total."""
    info = bench.get("extra_info") or {}
    rows = {"Total Time": bench["stats"]["median"], "Summed Time": info.get("summed_median_s")}
    rows |= {phase.label: (info.get("phase_total_s") or {}).get(phase.name) for phase in PHASES if phase.name != "train_step"}
    return rows


def _bar_panel(axis, labels: list[str], values: dict[str, dict[int, float]], spreads: dict[str, dict[int, tuple]],
               unit: str, drawn: dict) -> None:
    """One group of bars per label, one bar per implementation of the published pair, log scale; above each group
    the ratio with its direction, or what was not measured (never a silent gap)."""
    from matplotlib.patches import Patch

    width = 0.38
    for offset, impl in zip((-width / 2, width / 2), IMPLEMENTATIONS):
        slots = sorted(values[impl])
        error = None
        if spreads.get(impl):
            error = [[spreads[impl][i][0] for i in slots], [spreads[impl][i][1] for i in slots]]
        axis.bar([i + offset for i in slots], [values[impl][i] for i in slots], width, yerr=error, capsize=3,
                 color=CHART_COLORS[impl])
    python, cpp = (values[impl] for impl in IMPLEMENTATIONS)
    for i in range(len(labels)):
        if i in python and i in cpp and python[i] and cpp[i]:
            ratio = python[i] / cpp[i]
            text, color = direction(ratio).replace(" — ", "\n"), "black" if ratio >= 1 else "#1a7f37"
            text = text.replace(" slower", "\nslower")
        else:
            missing = [CHART_NAMES[impl] for impl in IMPLEMENTATIONS if i not in values[impl]]
            text, color = f"{' and '.join(missing)}:\nnot measured", "grey"
        top = max([values[impl][i] + (spreads.get(impl) or {}).get(i, (0, 0))[1] for impl in IMPLEMENTATIONS
                   if i in values[impl]], default=None)  # above the error bar
        if top is None:
            axis.text(i, 0.5, text, transform=axis.get_xaxis_transform(), ha="center", va="center", fontsize="small",
                      color=color)
        else:
            axis.annotate(text, (i, top), xytext=(0, 9), textcoords="offset points", ha="center", fontsize="small",
                          color=color)
        drawn["annotations"].append((labels[i], text.replace("\n", " ")))
    axis.set_yscale("log")
    axis.margins(y=0.25)
    axis.set_ylabel(f"{unit} (log scale)")
    axis.set_xticks(range(len(labels)), labels, rotation=20, ha="right")
    axis.grid(axis="y", alpha=0.3)
    legend = [Patch(color=CHART_COLORS[impl], label=CHART_NAMES[impl] + ("" if values[impl] else f" ({NOT_RUN})"))
              for impl in IMPLEMENTATIONS]
    axis.legend(handles=legend, loc="lower right", bbox_to_anchor=(1, 1), ncol=2, fontsize="small", frameon=False)


def chart(path: Path, result: dict, title: str) -> dict:
    """Per device that ran: per phase, Python vs C++ median per call with IQR error bars, and the training run's
    published rows (seconds); above each pair Python / C++ with its direction, as the terminal summary writes it
    (below 1, faster, in green); what a run did not measure is named where its bars would be. A device that did
    not run is left out and named in the caption. Returns what it drew: panels, annotations, caption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = by_case(result)
    ran = [device for device in devices_of(cases) if any(d == device for _, _, d in cases)]
    left_out = [f"{device}: {NOT_RUN} ({absent_reason(result, device)})" for device in devices_of(cases)
                if device not in ran]
    panels = []
    for device in ran:
        if any((phase.name, impl, device) in cases for phase in PHASES for impl in IMPLEMENTATIONS):
            panels.append((device, "phases"))
        if any(("training_run", impl, device) in cases for impl in IMPLEMENTATIONS):
            panels.append((device, "training_run"))
    drawn = {"panels": [], "annotations": [], "caption": ""}
    if not panels:
        panels, ran = [], []
    figure, axes = plt.subplots(max(len(panels), 1), 1, squeeze=False, figsize=(11, 1.5 + 4.2 * max(len(panels), 1)))
    for axis, (device, kind) in zip(axes[:, 0], panels):
        if kind == "phases":
            labels = [phase.label for phase in PHASES]
            stats = {impl: {i: cases[phase.name, impl, device]["stats"] for i, phase in enumerate(PHASES)
                            if (phase.name, impl, device) in cases} for impl in IMPLEMENTATIONS}
            values = {impl: {i: s["median"] * 1e3 for i, s in by_slot.items()} for impl, by_slot in stats.items()}
            spreads = {impl: {i: ((s["median"] - s["q1"]) * 1e3, (s["q3"] - s["median"]) * 1e3) for i, s in by_slot.items()}
                       for impl, by_slot in stats.items()}
            name = f"{device}: per phase, one call"
            _bar_panel(axis, labels, values, spreads, "median per call (ms)", drawn)
        else:
            rows = {impl: _run_rows(cases["training_run", impl, device]) for impl in IMPLEMENTATIONS
                    if ("training_run", impl, device) in cases}
            labels = list(next(iter(rows.values())))
            values = {impl: {i: rows[impl][label] for i, label in enumerate(labels)
                             if impl in rows and rows[impl][label] is not None} for impl in IMPLEMENTATIONS}
            name = f"{device}: training run, whole program and each phase's total"
            _bar_panel(axis, labels, values, {}, "seconds (median of the runs)", drawn)
        axis.set_title(name, loc="left", fontweight="bold")
        drawn["panels"].append(name)
    if not panels:
        axes[0, 0].set_axis_off()
    caption = ("bars: median; error bars: interquartile range of the rounds; above a pair: Python / C++, "
               "below 1 (green) Python is faster")
    if left_out:
        caption += "\n" + "; ".join(left_out)
    drawn["caption"] = caption
    figure.suptitle(f"{title}\n{caption}", fontsize="medium")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return drawn


def scaling_chart(path: Path, result: dict, title: str) -> bool:
    """train_step: each implementation's median over its reference's against the Net's width, one line per
    (pair, batch size), one panel per device; False (and no file) when the result has no such pair."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = all_cases(result)
    panels = {}
    for device in devices_of(cases):
        lines = {}
        for impl, reference in ratio_pairs(impls_of(cases)):
            for workload_id in workloads_of(cases, device):
                a, b = (median_ms(cases, "train_step", name, device, workload_id) for name in (impl, reference))
                if a is not None and b:
                    workload = workload_of_id(workload_id)
                    lines.setdefault((impl, reference, workload.batch_size), []).append((workload.width, a / b))
        if lines:
            panels[device] = lines
    if not panels:
        return False
    # One colour per pair and one line style per batch size: more than ten lines would repeat a colour cycle.
    pairs = sorted({(impl, reference) for lines in panels.values() for impl, reference, _ in lines})
    batch_sizes = sorted({batch_size for lines in panels.values() for _, _, batch_size in lines})
    palette = plt.get_cmap("tab10" if len(pairs) <= 10 else "tab20")
    styles = ["-", "--", ":", "-."]
    figure, axes = plt.subplots(1, len(panels), squeeze=False, figsize=(max(11.0, 8.5 * len(panels)), 5.6))
    for axis, (device, lines) in zip(axes[0], panels.items()):
        for (impl, reference, batch_size), points in sorted(lines.items()):
            widths, ratios = zip(*sorted(points))
            axis.plot(widths, ratios, marker="o", color=palette(pairs.index((impl, reference)) % palette.N),
                      linestyle=styles[batch_sizes.index(batch_size) % len(styles)],
                      label=f"{impl} / {reference}, batch {batch_size}")
        axis.axhline(1.0, color="grey", linewidth=0.8)
        axis.set_xscale("log", base=2)
        axis.set_xlabel("width (every hidden size × W)")
        axis.set_ylabel("train_step median ratio")
        axis.set_title(device, loc="left", fontweight="bold")
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.suptitle(f"{title}\nabove 1: the implementation is slower than its reference")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phasebench.report", description=__doc__.split("\n\n")[0],
                                     epilog="See the module's docstring or the README for what the tables hold.")
    parser.add_argument("results", nargs="*", metavar="RESULT",
                        help="a saved pytest-benchmark JSON file, or a run number or name as --benchmark-compare "
                             "takes it (default: the newest saved for this machine)")
    parser.add_argument("--format", choices=("markdown", "csv"), default="markdown",
                        help="Markdown tables (default), or CSV: one block per table, a blank line between")
    parser.add_argument("--out", type=Path, default=ROOT / "report",
                        help=f"folder for the table file and the chart (default: {ROOT / 'report'})")
    parser.add_argument("--storage", default=DEFAULT_STORAGE,
                        help=f"where saved results are, as --benchmark-storage (default: {DEFAULT_STORAGE}, where the "
                             f"suite saves them wherever pytest is started)")
    args = parser.parse_args(argv)

    for path in find_results(args.results, args.storage):
        result = read_result(path)
        text, notes = render(path, result, args.format)
        sys.stdout.write(text + "\n")
        args.out.mkdir(parents=True, exist_ok=True)
        table_path = args.out / f"{path.stem}.{'md' if args.format == 'markdown' else 'csv'}"
        table_path.write_text(text)
        chart_path = args.out / f"{path.stem}.png"
        saved = str(result.get("datetime", "?"))[:16].replace("T", " ")
        chart(chart_path, result, f"phasebench per-phase times, Python vs C++ (result saved {saved})")
        scaling_path = args.out / f"{path.stem}-workloads.png"
        scaled = scaling_chart(scaling_path, result, f"train_step against the reference, by workload (result saved {saved})")
        for note in notes:
            print(f"phasebench.report: {note}", file=sys.stderr)
        print(f"table: {table_path}\nchart: {chart_path}" + (f"\nchart: {scaling_path}" if scaled else ""),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

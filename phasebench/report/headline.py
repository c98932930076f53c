"""The headline of a training run, per device, in one short table: the published pair's Total Time, the phases that
make most of it, the free-running Total Time and, where the GPU was sampled, how busy it was. It is the README's
table of a run on a GPU (`python -m phasebench.report FILE --headline`), where the full report's tables say more
than a reader needs at a glance.
"""

from __future__ import annotations

from pathlib import Path

from phasebench.report.cases import RUN_PHASES, devices_of, direction, phase_total
from phasebench.report.tables import Table, describe, markdown
from phasebench.saved import SavedCase, SavedResult

PAIR = (("python", "Python"), ("cpp", "C++"))
# The phases of the training loop that make most of its time; the others are hundredths of a second.
HEADLINE_PHASES = ("data_loading", "forward", "backward", "param_update")
LABELS = {phase.name: phase.label for phase in RUN_PHASES}
GPU_BUSY = "GPU busy (NVML, mean over the timed and the free-running run)"


def _epochs(count: int) -> str:
    return "one epoch" if count == 1 else f"{count} epochs"


def gpu_busy(bench: SavedCase) -> str | None:
    """The GPU's mean busy % over the timed run and over the free-running run, each rounded: "1–2 %", or one figure
    where they round alike; None where neither was sampled."""
    info = bench.info
    samples = [info.gpu, (info.free_running or {}).get("gpu")]
    means = sorted({round(mean) for sampled in samples
                    if (mean := ((sampled or {}).get("utilization_pct") or {}).get("mean")) is not None})
    if not means:
        return None
    return f"{means[0]} %" if len(means) == 1 else f"{means[0]}–{means[-1]} %"


def headline_table(result: SavedResult, device: str) -> Table:
    """The published pair's training run on `device` (the published workload): seconds, and Python / C++ as every
    ratio of the suite is written. No rows where either language's training run is missing."""
    cases = result.published()
    runs = {impl: cases.get(("training_run", impl, device)) for impl, _ in PAIR}
    where = (result.machine.gpu or {}).get("name") if device == "cuda" else None
    table = Table(f"Headline on {device}", [("", "")] + [(name, ".2f") for _, name in PAIR] + [("Python / C++", "")])
    missing = [impl for impl, bench in runs.items() if bench is None]
    if missing:
        table.notes.append(f"no training run of {' and '.join(missing)} on {device} in this result")
        return table
    python, cpp = (runs[impl].info for impl, _ in PAIR)
    rounds = "one round a language, no spread" if python.rounds == 1 else f"median of {python.rounds} rounds"
    table.title += f": {_epochs(python.epochs)}, {rounds}; seconds"
    table.columns[0] = (f"{_epochs(python.epochs)} on {where or device} (s)", "")

    def row(label: str, read) -> None:
        values = [read(runs[impl]) for impl, _ in PAIR]
        ratio = direction(values[0] / values[1]) if None not in values and values[1] else None
        table.rows.append([label, *values, ratio])

    if result.method >= 2:
        row("Total Time", lambda bench: bench.median)
    else:  # method 1's benchmark time is the process's, spawn to exit (phasebench/method.py)
        table.notes.append("measured by method 1: no Total Time of the program's own")
    for name in HEADLINE_PHASES:
        row(LABELS[name], lambda bench, name=name: phase_total(bench.info, name))
    row("Free-running Total Time", lambda bench: (bench.info.free_running or {}).get("total_s"))
    busy = [gpu_busy(runs[impl]) for impl, _ in PAIR]
    if any(busy):
        table.rows.append([GPU_BUSY, *busy, None])
    return table


def headline_text(path: Path, result: SavedResult) -> str:
    """Every device's headline table of one result, in Markdown, after the line that describes the result."""
    parts = [f"## {path.name}", "", describe(path, result), ""]
    for device in devices_of(result.cases):
        if any(key[2] == device for key in result.published()):
            parts += [markdown(headline_table(result, device))]
    return "\n".join(parts).rstrip() + "\n"

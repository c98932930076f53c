"""What a result says in words: the answer at a glance (pytest's terminal summary, phasebench/plugin/__init__.py),
each ratio with its direction (the charts write it the same way), and the findings the report draws in sentences
from a run of more than the published pair.
"""

from __future__ import annotations

from phasebench.report.cases import (
    NOT_RUN,
    PHASES,
    RUN_PHASES,
    devices_of,
    impls_of,
    median_ms,
    phase_total,
    workload_of_id,
    workloads_of,
)
from phasebench.results import case_key, ratio_pairs

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
    (Total Time, Summed Time, each phase's total, Step In Run where a step is replayed whole) the same way. Generic over implementations: a column per
    implementation present, a ratio column per implementation whose reference is present."""
    cases = {key: bench for bench in benchmarks
             if (key := case_key(bench)) and not (bench.get("extra_info") or {}).get("world_size")}
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
                run_rows += [(phase.label, lambda info, name=phase.name: phase_total(info, name)) for phase in RUN_PHASES]
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
    from phasebench.report.distributed import answer_lines

    return sections + answer_lines(benchmarks)


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

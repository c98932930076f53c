"""Filling the device (docs/results.md#on-the-gpu-what-makes-python-as-fast-as-c-and-how-much-more-one-gpu-does, docs/gpu.md#concurrent-jobs-and-ensembles): the free-running training loop of
every implementation, concurrent jobs, ensembles, and the page faults where implementations differ
(docs/page-faults.md).
"""

from __future__ import annotations

import statistics

from phasebench import registry, schema
from phasebench.report.cases import PHASES, cases_of, impls_of, utilization, workload_of_id
from phasebench.report.tables import Table


def _median(values) -> float | None:
    values = [value for value in values or [] if value is not None]
    return statistics.median(values) if values else None


def _mps(info: schema.ConcurrentJobsInfo) -> str | None:
    return None if info.mps is None else ("running" if info.mps.get("running") else "not running")


def loops_table(cases: dict, device: str) -> Table:
    """One free-running epoch of every implementation (docs/results.md#on-the-gpu-what-makes-python-as-fast-as-c-and-how-much-more-one-gpu-does): its training loop, the one-shot
    phase (graph_capture, compile) inside it, the loop without it, and each against the published cpp's loop."""
    table = Table(f"The free-running training loop of every implementation on {device} (one epoch per workload, "
                  f"no phase timers; seconds)",
                  [("Implementation", ""), ("Workload", ""), ("Loop (s)", ".3f"), ("One-shot phase in it (s)", ".3f"),
                   ("Loop less one-shot (s)", ".3f"), ("cpp's loop / this", ".2f"), ("GPU busy (%)", ".0f"),
                   ("worker CPU (cores)", ".2f")])
    runs = [(impl, workload_id, bench, info) for impl, workload_id, bench in cases_of(cases, device, "training_run")
            if (info := bench.info).free_running]
    cpp_loops = {workload_id: info.free_running["loop_s"] for impl, workload_id, _, info in runs if impl == "cpp"}
    for impl, workload_id, bench, info in runs:
        free = info.free_running
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
        info = bench.info
        if phase == "training_run":
            value = info.free_running_minor_faults_per_step
        else:  # a phase's own; the other kinds of case record none
            value = info.minor_faults_per_round if isinstance(info, schema.PhaseInfo) else None
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
    """test_concurrent_jobs (docs/gpu.md#concurrent-jobs-and-ensembles): what N jobs together got from the device."""
    table = Table(f"Concurrent jobs on {device}: N fresh workers of one implementation each training one epoch at once",
                  [("Implementation", ""), ("Workload", ""), ("Jobs", ""), ("Threads per job", ""),
                   ("Images/s, all jobs", ".0f"), ("Images/s against 1 job", ".2f"),
                   ("Slowdown of a job (median)", ".2f"), ("A job's loop (s, median)", ".2f"),
                   ("A job's CPU (cores, median)", ".2f"), ("GPU busy (%)", ".0f"), ("MPS", "")])
    jobs = [(impl, workload_id, bench, bench.info)
            for impl, workload_id, bench in cases_of(cases, device, "concurrent_jobs-", lambda info: info.jobs or 0)]
    single = {(impl, workload_id): info.images_per_s for impl, workload_id, _, info in jobs if info.jobs == 1}
    for impl, workload_id, bench, info in jobs:
        one = single.get((impl, workload_id))
        table.rows.append([impl, workload_of_id(workload_id).label, info.jobs, info.threads_per_job,
                           info.images_per_s, info.images_per_s / one if one and info.images_per_s
                           else None, _median(info.slowdown), _median(info.job_loop_s),
                           _median(info.job_cpu_cores), utilization(bench, "gpu"), _mps(info)])
    if any(not (info.trained or "").endswith("free-running") for _, _, _, info in jobs):
        table.notes.append("some jobs trained a few steps as a check (--benchmark-disable), not an epoch")
    return table


def ensemble_table(cases: dict, device: str) -> Table:
    """test_ensemble (docs/gpu.md#concurrent-jobs-and-ensembles): per step and per model-step, data loading excluded."""
    table = Table(f"Ensembles on {device}: M models trained on the same batches, one step of all M per round "
                  f"(data loading excluded; milliseconds)",
                  [("Implementation", ""), ("Workload", ""), ("Models", ""), ("Step (ms)", ".3f"),
                   ("Per model-step (ms)", ".3f"), ("Per model-step against 1 model", ".2f"),
                   ("Per model-step against its reference", ".2f"), ("GPU busy (%)", ".0f")])
    members = [(impl, workload_id, bench, bench.info.models)
               for impl, workload_id, bench in cases_of(cases, device, "ensemble-", lambda info: info.models or 0)]
    per_model = {(impl, workload_id, models): bench.median * 1e3 / models
                 for impl, workload_id, bench, models in members if models}
    for impl, workload_id, bench, models in members:
        mine = per_model.get((impl, workload_id, models))
        one = per_model.get((impl, workload_id, 1))
        reference = registry.get(impl).pair if impl in registry.BY_NAME else None
        theirs = per_model.get((reference, workload_id, models))
        table.rows.append([impl, workload_of_id(workload_id).label, models, bench.median * 1e3, mine,
                           mine / one if mine and one else None, mine / theirs if mine and theirs else None,
                           utilization(bench, "gpu")])
    return table

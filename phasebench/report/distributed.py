"""The "Beyond one machine" table (docs/distributed.md): per device, per data-parallel implementation and world size,
the training run's step p50/p95, grad_sync's share of the step, images/s and the scaling efficiency against world size 1
of the same implementation; and its lines in the answer at a glance. Reads the data-parallel cases only
(SavedResult.distributed_cases); the one-process tables never see them.
"""

from __future__ import annotations

from phasebench import registry, schema
from phasebench.report.tables import Table
from phasebench.saved import SavedCase, SavedResult
from phasebench.spec import GRAD_SYNC

COLUMNS = [("implementation", ""), ("world size", ""), ("launched by", ""), ("step p50 (ms)", ".3f"),
           ("step p95 (ms)", ".3f"), ("grad_sync (ms)", ".3f"), ("grad_sync share of train_step (%)", ".1f"),
           ("images/s", ".0f"), ("scaling efficiency", ".2f")]


def phase_s(bench: SavedCase | None) -> float | None:
    """A per-phase case's figure: the slowest rank's median (DistPhaseInfo.rank_median_s, each rank's median inside its
    worker), else the benchmark's median. Results saved before bench/test_distributed.py read the worker clock (before
    commit "bench/test_distributed.py: the worker clock") hold the pytest process's wall time around each round in
    their stats; their rank medians were always the workers' own."""
    if not bench:
        return None
    info = bench.info
    ranks = info.rank_median_s if isinstance(info, schema.DistPhaseInfo) else None
    return max(ranks) if ranks else bench.median


def _world(key) -> int:
    return int(key[3].rpartition("world")[2] or 0)


def rows(cases: dict, device: str) -> list[list]:
    """One row per (implementation, world size, launcher) with a training run on the device, in registry order."""
    order = registry.NAMES
    found = []
    for key, bench in cases.items():
        phase, impl, case_device, workload_id = key
        if case_device != device or phase not in ("training_run", "torchrun"):
            continue
        info = bench.info
        sync = phase_s(cases.get((GRAD_SYNC, impl, device, workload_id)))
        step = phase_s(cases.get(("train_step", impl, device, workload_id)))
        sync_ms = sync * 1e3 if sync is not None else None
        share = sync / step * 100 if sync is not None and step else None
        launcher = (("torchrun, 2 network namespaces" if info.namespaces else "torchrun, 127.0.0.1")
                    if phase == "torchrun" else "the suite's workers")
        found.append((order.index(impl) if impl in order else len(order), _world(key), phase == "torchrun", [
            impl, _world(key), launcher, info.step_p50_s * 1e3, info.step_p95_s * 1e3,
            sync_ms if sync_ms is not None else ("in backward" if info.sync == "ddp" else None), share,
            info.images_per_s, info.scaling_efficiency]))
    return [row for *_, row in sorted(found, key=lambda item: item[:3])]


def beyond_table(cases: dict, device: str) -> Table:
    table = Table(f"Beyond one machine on {device}: data parallel, per implementation and world size", list(COLUMNS))
    table.rows = rows(cases, device)
    if table.rows:
        table.notes = [
            "step p50/p95: each step timed on every rank, the slowest rank's per step; images/s: the global batches' "
            "images over the slowest rank's loop; scaling efficiency: images/s over world size × images/s at world "
            "size 1 of the same implementation (in the same result)",
            "grad_sync: the per-phase case's slowest rank's median (each rank's clock starts after a barrier); python-ddp's "
            "all-reduce runs inside backward, so it has none; its share is of train_step's median, another case "
            "measured at another moment, so on a loaded machine it can pass 100 %",
        ] + sorted({str(info.threads_split) for key, bench in cases.items()
                    if key[2] == device and (info := bench.info).threads_split})
    return table


def answer_lines(result: SavedResult) -> list[tuple[str, list[str]]]:
    """The answer at a glance for the data-parallel cases: per device, the table's rows as aligned text."""
    cases = result.distributed_cases
    sections = []
    for device in sorted({key[2] for key in cases}):
        table = beyond_table(cases, device)
        if not table.rows:
            continue
        header = [name for name, _ in table.columns]
        lines = ["  ".join(header)]
        for row in table.rows:
            lines.append("  ".join("—" if value is None else format(value, spec) if isinstance(value, float) and spec
                                   else str(value) for value, (_, spec) in zip(row, table.columns)))
        sections.append((f"phasebench: beyond one machine on {device}", lines))
    return sections

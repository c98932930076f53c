"""The report of a counted result (`--count instructions`, docs/instruction-counts.md): instructions per call per
phase and implementation with the ratio to its reference, where they go (by object, and inside LibTorch by symbol)
with the interpreter's share, a chart of that split, and counts beside times (Python/C++ in instructions next to
Python/C++ in time from a timed result of the same tree)."""

from __future__ import annotations

from pathlib import Path

from phasebench import schema
from phasebench.report.cases import PHASES, impls_of
from phasebench.report.tables import Table
from phasebench.results import ratio_pairs

CATEGORIES = ("interpreter", "bindings", "dispatcher and autograd", "ATen kernels", "MKL, oneDNN and JIT code",
              "C library and allocator", "rest")  # phasebench.worker.counting.CATEGORIES, in its order


def _info(cases: dict, phase: str, impl: str, device: str) -> schema.CountedPhaseInfo | None:
    """The counted record of a case of the published workload; None where it was not counted."""
    bench = cases.get((phase, impl, device, ""))
    info = bench.info if bench else None
    return info if isinstance(info, schema.CountedPhaseInfo) else None


def median_count(cases: dict, phase: str, impl: str, device: str) -> float | None:
    info = _info(cases, phase, impl, device)
    return None if info is None or info.instructions_median is None else float(info.instructions_median)


def counts_table(cases: dict, device: str) -> Table:
    impls = impls_of(cases)
    pairs = ratio_pairs(impls)
    table = Table(f"Instructions per call on {device} (median of the counted rounds; floor: the empty bracket)",
                  [("Phase", "")] + [(f"{impl} (instructions)", ",.0f") for impl in impls]
                  + [(f"{impl} floor", ",.0f") for impl in impls] + [(f"{i} / {r}", ".3f") for i, r in pairs]
                  + [("spread (max-min)/median %", ".3f")])
    for phase in PHASES:
        values = {impl: median_count(cases, phase.name, impl, device) for impl in impls}
        if all(v is None for v in values.values()):
            continue
        infos = [_info(cases, phase.name, impl, device) for impl in impls]
        floors = [info.count_floor if info else None for info in infos]
        ratios = [values[i] / values[r] if values[i] and values[r] else None for i, r in pairs]
        spreads = [_spread((info.instructions if info else None) or []) for info in infos]
        table.rows.append([phase.name] + [values[impl] for impl in impls] + [float(f) if f else None for f in floors]
                          + ratios + [max(spreads)])
    return table


def _spread(counts: list) -> float:
    if len(counts) < 2:
        return 0.0
    ordered = sorted(counts)
    return 100.0 * (ordered[-1] - ordered[0]) / ordered[len(ordered) // 2]


def split_table(cases: dict, device: str) -> Table:
    """Per phase and implementation, the median round's instructions by where they went, in percent."""
    table = Table(f"Where the instructions go on {device} (% of the median round's count, by object and, inside "
                  f"LibTorch, by symbol)", [("Phase", ""), ("Implementation", ""), ("instructions", ",.0f")]
                  + [(name, ".1f") for name in CATEGORIES])
    for phase in PHASES:
        for impl in impls_of(cases):
            info = _info(cases, phase.name, impl, device)
            if not info or not info.split:
                continue
            split = info.split
            total = sum(split.values()) or 1
            table.rows.append([phase.name, impl, float(total)] + [100.0 * split.get(name, 0) / total
                                                                 for name in CATEGORIES])
    return table


def interpreter_share(cases: dict, device: str, impl: str = "python") -> tuple[float, float, float] | None:
    """The interpreter's share of `impl`'s counted instructions: (over all its phases, its lowest, its highest)."""
    shares, total, interpreter = [], 0, 0
    for phase in PHASES:
        if phase.name == "train_step":  # the step's parts are phases of their own: not counted twice
            continue
        info = _info(cases, phase.name, impl, device)
        if info and info.split:
            split = info.split
            whole = sum(split.values()) or 1
            shares.append(100.0 * split.get("interpreter", 0) / whole)
            total += whole
            interpreter += split.get("interpreter", 0)
    if not shares:
        return None
    return 100.0 * interpreter / total, min(shares), max(shares)


def interpreter_sentence(cases: dict, device: str) -> str | None:
    share = interpreter_share(cases, device)
    step = _info(cases, "train_step", "python", device)
    if share is None:
        return None
    text = (f"On {device}, CPython's interpreter executes {share[0]:.1f} % of the instructions Python's training "
            f"phases execute (the phases summed, train_step aside; {share[1]:.1f}–{share[2]:.1f} % phase by phase)")
    if step and step.split:
        whole = sum(step.split.values()) or 1
        text += f", {100.0 * step.split.get('interpreter', 0) / whole:.1f} % of a whole train_step"
    return text + "."


def counts_vs_times(counted: dict, timed: dict, device: str) -> Table:
    """Per phase, python/cpp in instructions beside python/cpp in time (medians), and their quotient."""
    table = Table(f"Counts beside times on {device}: python / cpp", [("Phase", ""), ("instructions", ".3f"),
                                                                       ("time", ".3f"), ("time / instructions", ".2f")])
    for phase in PHASES:
        c = [median_count(counted, phase.name, impl, device) for impl in ("python", "cpp")]
        t = [getattr(timed.get((phase.name, impl, device, "")), "median", None) for impl in ("python", "cpp")]
        if None in c or None in t or not c[1] or not t[1]:
            continue
        ci, ti = c[0] / c[1], t[0] / t[1]
        table.rows.append([phase.name, ci, ti, ti / ci])
    return table


def split_chart(path: Path, cases: dict, device: str, title: str) -> bool:
    """Stacked bars: per phase and implementation, the median round's instructions by category, in percent."""
    rows = [(f"{phase.name} {impl}", info.split) for phase in PHASES for impl in impls_of(cases)
            if (info := _info(cases, phase.name, impl, device)) and info.split]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(11, 0.42 * len(rows) + 1.8))
    colors = ["#3572A5", "#8fb3d9", "#e8a33d", "#f34b7d", "#6a3d9a", "#999999", "#cccccc"]
    left = [0.0] * len(rows)
    totals = [sum(split.values()) or 1 for _, split in rows]
    for name, color in zip(CATEGORIES, colors):
        widths = [100.0 * split.get(name, 0) / total for (_, split), total in zip(rows, totals)]
        axis.barh([label for label, _ in rows], widths, left=left, color=color, label=name)
        left = [a + b for a, b in zip(left, widths)]
    for index, total in enumerate(totals):  # each bar's count, at its end
        axis.text(100.5, index, f"{total / 1e6:.3g} M", va="center", fontsize=7)
    axis.invert_yaxis()
    axis.set_xlim(0, 112)
    axis.set_xlabel("% of the phase's instructions per call (its count in millions at the right)")
    axis.set_title(title, fontsize=10)
    axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True

"""The report's charts, beside each table file: per device, per phase, Python vs C++ medians with their IQR and the
training run's published rows; and the train_step ratio of each implementation to its reference against the Net's
width, one line per batch size. matplotlib is imported by the functions that draw.
"""

from __future__ import annotations

from pathlib import Path

from phasebench.programs import case_phase
from phasebench.report.cases import (
    IMPLEMENTATIONS,
    NOT_RUN,
    PHASES,
    PROGRAM_PHASE_TABLES,
    RUN_PHASES,
    absent_reason,
    devices_of,
    impls_of,
    median_ms,
    paired_direction,
    phase_total,
    saved_ratio,
    workload_of_id,
    workloads_of,
)
from phasebench.report.findings import direction
from phasebench.results import ratio_pairs
from phasebench.saved import SavedCase, SavedResult
from phasebench.schema import SUMMED_RATIO
from phasebench.spec import STEP_IN_RUN

CHART_NAMES = {"python": "Python", "cpp": "C++"}
CHART_COLORS = {"python": "#3572A5", "cpp": "#f34b7d"}


def _run_rows(bench: SavedCase) -> dict[str, float | None]:
    """The training run's published rows (seconds) from its benchmark: Total Time, Summed Time, each phase's total;
    step_in_run only where the run recorded it (a step replayed whole, never the published pair's)."""
    info = bench.info
    rows = {"Total Time": bench.median, "Summed Time": info.summed_median_s}
    rows |= {phase.label: phase_total(info, phase.name) for phase in RUN_PHASES
             if phase.name != STEP_IN_RUN or phase_total(info, phase.name) is not None}
    return rows


def _bar_panel(axis, labels: list[str], values: dict[str, dict[int, float]], spreads: dict[str, dict[int, tuple]],
               unit: str, drawn: dict, paired: dict[int, dict] | None = None) -> None:
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
        if (paired or {}).get(i):  # measured side by side: the paired ratio with its interval, as the answer says
            ratio = paired[i]["estimate"]
            text = paired_direction(paired[i]).replace("× ", "×\n", 1).replace(" [", "\n[", 1)
            color = "grey" if not paired[i].get("decided") else "black" if ratio >= 1 else "#1a7f37"
        elif i in python and i in cpp and python[i] and cpp[i]:
            ratio = python[i] / cpp[i]
            text, color = direction(ratio).replace("× ", "×\n"), "black" if ratio >= 1 else "#1a7f37"
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


def _paired_points(cases: dict, device: str) -> list[tuple[str, dict]]:
    """(label, Python's saved ratio to C++) for each phase and training-run row that was paired, in the tables' order;
    then each other program's phases and Total Time."""
    points = [(phase.label, ratio) for phase in PHASES
              if (ratio := saved_ratio(cases.get((phase.name, "python", device)), to="cpp"))]
    run = cases.get(("training_run", "python", device))
    if saved_ratio(run, to="cpp"):
        points.append(("Total Time", saved_ratio(run)))
        points += [(f"in run: {phase.label}", ratio) for phase in RUN_PHASES
                   if (ratio := saved_ratio(run, phase.name))]
    for name, phases in PROGRAM_PHASE_TABLES:
        points += [(f"{name}: {phase.label}", ratio) for phase in phases
                   if (ratio := saved_ratio(cases.get((phase.name, "python", device)), to="cpp"))]
        if ratio := saved_ratio(cases.get((case_phase(name, "training_run"), "python", device)), to="cpp"):
            points.append((f"{name}: Total Time", ratio))
    return points


def _ratio_panel(axis, points: list[tuple[str, dict]], drawn: dict) -> None:
    """Each paired ratio as a point with its interval as error bars, log scale, 1 marked; an undecided one hollow."""
    for i, (label, ratio) in enumerate(points):
        estimate, low, high = ratio["estimate"], ratio.get("low"), ratio.get("high")
        error = [[estimate - low], [high - estimate]] if low is not None else None
        decided = ratio.get("decided")
        axis.errorbar([i], [estimate], yerr=error, fmt="o", capsize=4, color="black" if decided else "grey",
                      markerfacecolor="black" if decided else "white")
        text = paired_direction(ratio)
        # The factor alone: its interval is the error bar, and the bars' panel above writes both out.
        axis.annotate(f"{estimate:.2f}×" if decided else "undecided", (i, high if high is not None else estimate),
                      xytext=(0, 6), textcoords="offset points", ha="center", fontsize="x-small",
                      color="black" if decided else "grey")
        drawn["annotations"].append((label, text))
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_yscale("log")
    axis.margins(y=0.3)
    axis.set_ylabel("Python / C++ (log scale)")
    axis.set_xticks(range(len(points)), [label for label, _ in points], rotation=20, ha="right")
    axis.grid(axis="y", alpha=0.3)


def chart(path: Path, result: SavedResult, title: str) -> dict:
    """Per device that ran: per phase, Python vs C++ median per call with IQR error bars, and the training run's
    published rows (seconds); above each pair Python / C++ with its direction, as the terminal summary writes it
    (below 1, faster, in green); what a run did not measure is named where its bars would be. A device that did
    not run is left out and named in the caption. Returns what it drew: panels, annotations, caption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = result.published()
    ran = [device for device in devices_of(cases) if any(d == device for _, _, d in cases)]
    left_out = [f"{device}: {NOT_RUN} ({absent_reason(result, device)})" for device in devices_of(cases)
                if device not in ran]
    panels = []  # (device, kind, the phases of a "phases" panel, its program's name where not the seed's)
    for device in ran:
        for program, phases in ((None, PHASES),) + PROGRAM_PHASE_TABLES:
            if any((phase.name, impl, device) in cases for phase in phases for impl in IMPLEMENTATIONS):
                panels.append((device, "phases", phases, program))
        if any(("training_run", impl, device) in cases for impl in IMPLEMENTATIONS):
            panels.append((device, "training_run", (), None))
        if _paired_points(cases, device):
            panels.append((device, "ratios", (), None))
    drawn = {"panels": [], "annotations": [], "caption": ""}
    if not panels:
        panels, ran = [], []
    figure, axes = plt.subplots(max(len(panels), 1), 1, squeeze=False, figsize=(11, 1.5 + 4.2 * max(len(panels), 1)))
    for axis, (device, kind, phases, program) in zip(axes[:, 0], panels):
        if kind == "phases":
            labels = [phase.label for phase in phases]
            stats = {impl: {i: cases[phase.name, impl, device].stats for i, phase in enumerate(phases)
                            if (phase.name, impl, device) in cases} for impl in IMPLEMENTATIONS}
            values = {impl: {i: s["median"] * 1e3 for i, s in by_slot.items()} for impl, by_slot in stats.items()}
            spreads = {impl: {i: ((s["median"] - s["q1"]) * 1e3, (s["q3"] - s["median"]) * 1e3) for i, s in by_slot.items()}
                       for impl, by_slot in stats.items()}
            name = f"{device}: {f'{program}: ' if program else ''}per phase, one call"
            paired = {i: ratio for i, phase in enumerate(phases)
                      if (ratio := saved_ratio(cases.get((phase.name, "python", device)), to="cpp"))}
            _bar_panel(axis, labels, values, spreads, "median per call (ms)", drawn, paired)
        elif kind == "ratios":
            name = f"{device}: Python / C++ with its 95 % interval, paired in time"
            _ratio_panel(axis, _paired_points(cases, device), drawn)
        else:
            rows = {impl: _run_rows(cases["training_run", impl, device]) for impl in IMPLEMENTATIONS
                    if ("training_run", impl, device) in cases}
            labels = list(dict.fromkeys(label for by_label in rows.values() for label in by_label))
            values = {impl: {i: rows[impl][label] for i, label in enumerate(labels)
                             if impl in rows and rows[impl].get(label) is not None} for impl in IMPLEMENTATIONS}
            name = f"{device}: training run, whole program and each phase's total"
            run = cases.get(("training_run", "python", device))
            keys = {"Total Time": None, "Summed Time": SUMMED_RATIO} | {phase.label: phase.name for phase in RUN_PHASES}
            paired = {i: ratio for i, label in enumerate(labels)
                      if label in keys and (ratio := saved_ratio(run, keys[label], to="cpp"))}
            _bar_panel(axis, labels, values, {}, "seconds (median of the runs)", drawn, paired)
        axis.set_title(name, loc="left", fontweight="bold")
        drawn["panels"].append(name)
    if not panels:
        axes[0, 0].set_axis_off()
    caption = ("bars: median; error bars: interquartile range of the rounds; above a pair: Python / C++, "
               "below 1 (green) Python is faster")
    if any(kind == "ratios" for _, kind, _, _ in panels):
        caption += ("\nwhere paired in time, Python / C++ is the median of its paired ratios with its 95 % interval "
                    "(the ratio panel's error bars)")
    if left_out:
        caption += "\n" + "; ".join(left_out)
    drawn["caption"] = caption
    figure.suptitle(f"{title}\n{caption}", fontsize="medium")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return drawn


def scaling_chart(path: Path, result: SavedResult, title: str) -> bool:
    """train_step: each implementation's median over its reference's against the Net's width, one line per
    (pair, batch size), one panel per device; False (and no file) when the result has no such pair, or no line
    with two widths to join (a chart with nothing to compare)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = result.cases
    panels = {}
    for device in devices_of(cases):
        lines = {}
        for impl, reference in ratio_pairs(impls_of(cases)):
            for workload_id in workloads_of(cases, device):
                a, b = (median_ms(cases, "train_step", name, device, workload_id) for name in (impl, reference))
                if a is not None and b:
                    workload = workload_of_id(workload_id)
                    lines.setdefault((impl, reference, workload.batch_size), []).append((workload.width, a / b))
        lines = {key: points for key, points in lines.items() if len({width for width, _ in points}) > 1}
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

"""What the report reads of a saved result (phasebench.saved.SavedResult, its cases by CaseKey): the devices,
workloads and implementations they cover, the phases it tables with their labels (phasebench.spec), and the
figures each case recorded. A case is a SavedCase: its record (`info`, phasebench.schema's kind) and pytest-benchmark's
statistics, never read by key (tests/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from phasebench import registry, schema
from phasebench.cpu_windows import THREAD_CPU_MIN_BODY_S
from phasebench.programs import PROGRAMS, case_phase
from phasebench.registry import DEVICES
from phasebench.saved import SavedCase, SavedResult
from phasebench.spec import LABELS, ONE_SHOT_LABELS, PHASE_LABELS, STEP_IN_RUN, Workload, run_total

IMPLEMENTATIONS = registry.DEFAULT_IMPLS  # the published pair, whose tables follow the published shape
NOT_RUN = "not run"


class Phase(NamedTuple):
    name: str
    label: str  # the published table's row


# The training phases, each a case of its own (test_phase), in order.
PHASES = tuple(Phase(name, label) for name, label in PHASE_LABELS.items())
# The phases of the programs beside the seed's (phasebench/programs.py), each a case of its own named PROGRAM:PHASE, in
# their declared order, labelled "PROGRAM: its label".
PROGRAM_PHASES = tuple(Phase(case_phase(program.name, name), f"{program.name}: {program.label(name)}")
                       for program in PROGRAMS.values() if not program.is_default for name in program.phases)
# The same phases program by program, each labelled as its program labels it: (program, its phases), for the report's
# per-program tables and chart panels.
PROGRAM_PHASE_TABLES = tuple((program.name, tuple(Phase(case_phase(program.name, name), program.label(name))
                                                  for name in program.phases))
                             for program in PROGRAMS.values() if not program.is_default)
# Their training runs (bench/test_training_run.py test_program_run), keyed PROGRAM:training_run.
PROGRAM_RUNS = tuple(Phase(case_phase(program.name, "training_run"), f"{program.name}: Total Time")
                     for program in PROGRAMS.values() if not program.is_default)
# What a training run records in phase_total_s, in the published table's order: the training phases but train_step,
# whose in-loop total (a step replayed whole) is step_in_run (results saved before the name: "train_step", read by
# phasebench.spec.run_total).
STEP_IN_RUN_LABEL = LABELS.get(STEP_IN_RUN, "Step In Run")  # phasebench.spec names it; this for a spec that did not
RUN_PHASES = tuple(phase for phase in PHASES if phase.name not in ("train_step", STEP_IN_RUN)) + (
    Phase(STEP_IN_RUN, STEP_IN_RUN_LABEL),)
ONE_SHOT = tuple(Phase(name, label) for name, label in ONE_SHOT_LABELS.items())


def phase_total(info: schema.TrainingRunInfo, name: str) -> float | None:
    """A training run's total of one phase (seconds), from its record; None where it recorded none."""
    return run_total(info.phase_total_s or {}, name)


def devices_of(cases: dict) -> list[str]:
    return list(DEVICES) + sorted({key[2] for key in cases} - set(DEVICES))


def absent_reason(result: SavedResult, device: str) -> str:
    recorded = result.machine.gpu_unavailable
    if device.startswith("cuda") and recorded:
        return recorded
    return "skipped or deselected when the result was saved"


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
    return bench.median * 1e3 if bench else None


def cases_of(cases: dict, device: str, kind: str,
             count: Callable[[schema.Case], int] | None = None) -> list[tuple[str, str, SavedCase]]:
    """(implementation, workload id, benchmark) of one kind of case on a device ("training_run", or a prefix such
    as "ensemble-"), by workload, then registry order, then its count (`count` of its record: jobs, models)."""
    order = impls_of(cases)
    found = [(impl, workload_id, bench) for (phase, impl, case_device, workload_id), bench in cases.items()
             if case_device == device and (phase == kind or kind.endswith("-") and phase.startswith(kind))]
    return sorted(found, key=lambda case: (workload_of_id(case[1]), order.index(case[0]),
                                           count(case[2].info) if count else 0))


def utilization(bench: SavedCase | None, kind: str) -> float | None:
    """GPU busy % (mean) or worker CPU cores during the whole benchmark (warm-up, preparation and messaging
    included), or the phase's own CPU cores (its timed bodies alone), where the benchmark recorded them."""
    info = (bench.info if bench else None)
    if kind == "phase_thread_cpu" and bench and bench.median < THREAD_CPU_MIN_BODY_S:
        return None  # a result saved before the suite left it out: mostly the CPU clocks' own reads (2.79 cores)
    if kind in ("phase_cpu", "phase_thread_cpu"):
        return getattr(info, f"{kind}_cores", None)
    recorded = getattr(info, kind, None) or {}
    return (recorded.get("utilization_pct") or {}).get("mean") if kind == "gpu" else recorded.get("cores")


# A cuda phase's clocks beside its wall time (schema.PhaseInfo's host_cpu_median_s, gpu_median_s).
DEVICE_CLOCK_COLUMNS = (("host_cpu", "host CPU"), ("gpu", "GPU"))


def device_clock_median(bench: SavedCase | None, name: str) -> float | None:
    """A phase's host CPU or GPU median in milliseconds (DEVICE_CLOCK_COLUMNS' names), or None where its result has
    none: on cpu, and in results saved before they were recorded."""
    info = (bench.info if bench else None)
    median = getattr(info, f"{name}_median_s", None)
    return None if median is None else median * 1e3


UTILIZATION_COLUMNS = (("phase_thread_cpu", "phase CPU, its thread (cores)", ".2f"),
                       ("phase_cpu", "phase CPU, all threads (cores)", ".2f"),
                       ("gpu", "GPU busy in benchmark (%)", ".0f"),
                       ("cpu", "worker CPU in benchmark (cores)", ".2f"))


def net_median(stats: dict, bench: SavedCase) -> float | None:
    """The median less its worker's timer floor (seconds), or None where no floor was recorded."""
    floor = getattr(bench.info, "timer_floor_s", None)
    return None if floor is None else stats["median"] - floor


def direction(ratio: float, counted: bool = False) -> str:
    """A time over its reference's, the one way the suite writes a ratio (terminal, report, charts, README), always as
    a factor of at least 1 with its direction in words: 2.41× slower, 1.04× faster, 1.00× the same (to the
    hundredth); of instruction counts, 1.20× more or 1.25× fewer instructions."""
    factor = ratio if ratio >= 1 else 1 / ratio
    text = f"{factor:.2f}×"
    if text == "1.00×":
        return f"{text} the same"
    if counted:
        return f"{text} more instructions" if ratio > 1 else f"{text} fewer instructions"
    return f"{text} slower" if ratio > 1 else f"{text} faster"


UNDECIDED = "undecided"


def paired_direction(ratio: dict) -> str:
    """A paired ratio (a case's saved `ratio`) as the answer writes it: its direction with its 95 % interval in the same
    terms, 2.10× slower [1.96, 2.27] or 1.60× faster [1.52, 1.70]; an interval that holds 1 decides no direction, so
    each of its ends is written in its own, 1.02× slower [1.03× faster, 1.05× slower]; "undecided" where the run could
    not decide it (undecided_lines says why)."""
    if not ratio.get("decided"):
        return UNDECIDED
    estimate, low, high = ratio["estimate"], ratio["low"], ratio["high"]
    if low <= 1 <= high:
        return f"{direction(estimate)} [{direction(low)}, {direction(high)}]"
    bounds = (low, high) if estimate >= 1 else (1 / high, 1 / low)
    return f"{direction(estimate)} [{bounds[0]:.2f}, {bounds[1]:.2f}]"


def undecided_lines(undecided: dict[str, dict]) -> list[str]:
    """{row label: its saved ratio} of the undecided ratios of a table, a line each saying why."""
    return [f"{UNDECIDED}: {label}: {ratio['undecided']}"
            + (f" (its pairs' {'geometric mean' if ratio.get('statistic') == 'mean' else 'median'} "
               f"{direction(ratio['estimate'])})" if ratio.get("estimate") else "")
            for label, ratio in undecided.items()]


def saved_ratio(bench: SavedCase | None, key: str | None = None, to: str | None = None) -> dict | None:
    """A case's saved paired ratio (key None), or one of its training run's phase_ratios (key: a phase, or
    schema.SUMMED_RATIO / PROCESS_TOTAL_RATIO); None where it has none, or where `to` names another reference."""
    if bench is None:
        return None
    ratio = bench.info.ratio if key is None else (bench.info.phase_ratios or {}).get(key)
    return ratio if ratio and (to is None or ratio.get("to") == to) else None

"""What the run prints of its own: the header's lines (the timing actually used), the utilization summary, and the
answer at a glance after pytest-benchmark's tables (docs/getting-started.md#what-a-run-prints)."""

from __future__ import annotations

import pytest

from phasebench import data, programs
from phasebench.plugin import calibration, switches
from phasebench.plugin.cases import left_out_line
from phasebench.plugin.pairing import BLOCK_ROUNDS, block_sizes, pair_worker_count, why_unpaired
from phasebench.plugin.session import ERRORED, PhasebenchSession, harness_cores


@pytest.hookimpl(wrapper=True)
def pytest_report_header(config):
    """phasebench's lines, and pytest-benchmark's own line without the defaults the suite does not use (its timer,
    rounds, warm-up and calibration): the header states the timing actually used."""
    results = yield
    settings: PhasebenchSession = config.phasebench
    m = settings.machine
    source = settings.source.description if settings.source else "-"
    gpu = m["gpu"]["name"] if m["gpu"] else f"none ({settings.cuda_reason})"
    # docs/method.md#calls-per-round: one call a round where nothing is timed or a count has no clock to resolve
    one_call = config.getoption("benchmark_disable", False) or settings.count
    unpaired = why_unpaired(config)
    calls = ("one call a round" if one_call else
             f"each round as many calls as it takes {'the faster side' if not unpaired else 'the phase'}'s median "
             f"warm-up call to fill {calibration.ROUND_TARGET_S * 1e6:g} µs (at most {calibration.MAX_ITERATIONS}; a "
             f"compared case: its baseline's)")
    seed_source = ", the baseline's" if settings.order_seed_from == "baseline" else ""
    sweeps = len(block_sizes(settings.rounds, BLOCK_ROUNDS))
    workers = pair_worker_count(settings.pair_workers, sweeps)
    order = (f"each phase's implementations side by side in time, in alternating blocks of {BLOCK_ROUNDS} rounds "
             f"(A B B A …), {sweeps} sweep(s) two by two through {workers} worker(s) a side (--pair-workers; the "
             f"warm-up calls in each), up to twice as many where more can narrow an undecided ratio, the first "
             f"drawn from seed {settings.order_seed}" if not unpaired else
             f"each phase's implementations one after the other (unpaired: {unpaired}), in a random order, seed "
             f"{settings.order_seed}")
    run_rounds = (f"{settings.run_rounds} pair(s) of rounds, each a fresh worker, alternating (A B B A …)"
                  if not unpaired else f"{settings.run_rounds} rounds")
    timing = (f"phasebench: timing: each phase inside its worker process, python by time.perf_counter_ns, cpp by "
              f"std::chrono::steady_clock (the device synchronized at both ends on cuda), {settings.rounds} "
              f"rounds after {settings.warmup_rounds} warm-up calls, {calls}"
              f"{f' over {settings.processes} fresh workers per case' if settings.processes > 1 else ''}; "
              f"training_run: {settings.epochs} epoch(s), {run_rounds}, no warm-up; {order}{seed_source} "
              f"(--order-seed {settings.order_seed} runs this order again)")
    ours = [
        f"phasebench: data: {source}",
        f"phasebench: torch {m['torch']}, torchvision {m['torchvision']}, CUDA {m['cuda']}, cuDNN {m['cudnn']}; "
        f"GPU {gpu}; {settings.threads or 'not probed (a collection):'} intra-op threads"
        + (f" (a timed run's default: torch's pick, at most one fewer than the {harness_cores()} cores, leaving one to "
           f"the harness; --threads N sets it)" if settings.threads and not config.getoption("threads")
           and not config.getoption("benchmark_disable", False) and not settings.count else ""),
        timing,
        f"phasebench: implementations {', '.join(settings.impls)}; workloads "
        f"{'; '.join(workload.label for workload in settings.workloads)}",
    ] + [program_line(settings, name) for name in settings.programs if not programs.program(name).is_default] + [line for line in (switches.header(settings.switches, None, settings.count, bool(config.getoption("benchmark_disable", False))),) if line] + ([f"phasebench: TESTING RUN: {settings.worker_module} and the {settings.library_variant} library, knobs "
          f"{settings.testing}: these figures are not a measurement"] if settings.testing is not None else [])
    results = [f"{line.split(' (defaults:')[0]} (its timer, rounds, warm-up and calibration are not used: see "
               f"phasebench: timing)" if isinstance(line, str) and line.startswith("benchmark: ") and "(defaults:" in line
               else line for line in results]
    return [ours] + results  # pytest prints the results in reverse: ours last


def program_line(settings: PhasebenchSession, name: str) -> str:
    """A program's own lengths (phasebench/programs.py): its per-phase cases' rounds, and its training run's steps."""
    own = settings.for_program(name)
    declared = programs.program(name)
    return (f"phasebench: program {name} (after pytorch/examples' {declared.source}): its phases {own.rounds} rounds "
            f"after {own.warmup_rounds} warm-up calls each; its training run {declared.run_steps} steps a round")


@pytest.hookimpl(wrapper=True)  # after pytest-benchmark's tables, even when it raised "Performance has regressed"
def pytest_terminal_summary(terminalreporter, config):
    try:
        return (yield)
    finally:
        lines = config.phasebench.utilization.summary_lines()
        if lines:
            terminalreporter.section("phasebench utilization: GPU busy % mean/max, worker CPU in cores; the canary "
                                     "before→after a phase's counted rounds, steal time where any", sep="-")
            for line in lines:
                terminalreporter.write_line(line)
        _write_answer(terminalreporter, config)


def _write_answer(terminalreporter, config) -> None:
    """The answer at a glance after pytest-benchmark's tables (docs/getting-started.md#what-a-run-prints): per
    device, each implementation's median and its ratio to its reference with the direction in words; the training
    run's published rows; and what makes the figures less than they look (synthetic data)."""
    from phasebench.report.findings import answer
    from phasebench.saved import SavedResult

    session = config.pluginmanager.getplugin("pytest-benchmark")
    benchmarks = [bench.as_dict(include_data=False) for bench in getattr(session, "benchmarks", None) or []
                  if bench and not bench.has_error]
    run = SavedResult.from_benchmarks(benchmarks, {"phasebench": config.phasebench.machine_info()})
    for title, lines in answer(run):
        terminalreporter.section(title, sep="-", bold=True)
        for line in lines:
            terminalreporter.write_line(line)
    # Taken out of pytest-benchmark's session at its end, before it compared them (phasebench/plugin/__init__.py).
    failed = config.stash.get(ERRORED, []) + [bench.name for bench in getattr(session, "benchmarks", None) or []
                                              if bench and bench.has_error]
    if failed:  # marked in phasebench/plugin/__init__.py's pytest_runtest_makereport and pytest_runtest_call
        terminalreporter.write_line(f"phasebench: {len(failed)} case(s) failed or cut short, left out of the answer, "
                                    f"the gates and the saved results: {', '.join(failed)}", red=True, bold=True)
    unsaved = [f"{option}={value}" for option, value in (("--benchmark-json", getattr(session, "json", None)),
                                                          ("--benchmark-save", getattr(session, "save", None)))
               if value] + (["--benchmark-autosave"] if getattr(session, "autosave", False) else [])
    if unsaved and not getattr(session, "benchmarks", None):
        skipped = len(terminalreporter.stats.get("skipped", []))
        why = f"no benchmark ran ({skipped} skipped)" if skipped else "no benchmark ran"
        if getattr(session, "disabled", False):
            why = "benchmarks are disabled (--benchmark-disable)"
        terminalreporter.write_line(f"phasebench: {', '.join(unsaved)}: nothing written: {why}", yellow=True, bold=True)
    settings: PhasebenchSession = config.phasebench
    if settings.source is not None and settings.source.name == "synthetic" and benchmarks:
        terminalreporter.write_line(f"phasebench: WARNING: {data.SYNTHETIC_WARNING} ({settings.source.raw_dir})",
                                    yellow=True, bold=True)
    left_out = left_out_line(settings.selections, settings.extras) if benchmarks else None
    if left_out:
        terminalreporter.write_line(left_out)



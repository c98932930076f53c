"""The published table, redone from a saved result.

    python -m phasebench.report [RESULT ...] [--format markdown|csv] [--out report/]

RESULT is a JSON file that pytest-benchmark wrote (--benchmark-autosave, --benchmark-save=NAME,
--benchmark-json=PATH), or a saved run in --storage: its number ("0003") or a glob ("*after") as
--benchmark-compare takes them, or the name it was saved under ("after" for 0003_after.json); with
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
3. Every implementation the result holds (docs/implementations.md#implementations-and-workloads), per device and
   workload: each phase's median per implementation and its ratio to the implementation the registry
   names as its reference; the findings drawn from them in sentences (the language's and the design's
   share of the data-loading gap, what batching gives in each language, the train_step ratio per
   workload); the timed training run of every implementation (each phase's total, the one-shot phase,
   and Step In Run, the in-loop total of a step replayed whole); the peak memory of each training run; and where
   the result saved them, the parts of each training run's worker start-up (docs/method.md#a-workers-start-up-in-parts).
4. Where the result holds them: the free-running training loop of every implementation against the
   published cpp's, with the one-shot phase (graph_capture, compile) inside it and the GPU busy %;
   concurrent jobs (images/s of all jobs, against one job, each job's slowdown, CPU and GPU busy, MPS);
   ensembles (time per step and per model-step, against one model and against the reference).
A counted result (`--count instructions`, docs/instruction-counts.md) gets instead, per device, the instructions
per call per phase and implementation with the ratio to its reference, where they go (by object and, inside
LibTorch, by symbol) with the interpreter's share in a sentence, and a chart of that split; with --beside TIMED,
each phase's python/cpp in instructions beside python/cpp in time from that timed result (the lab's
`python -m lab.account` adds to it the account of an intervention study,
docs/results.md#the-account-where-the-gap-between-time-and-instructions-goes).
With --headline it prints instead, per result and device, one short table of the published pair's training run
(phasebench/report/headline.py): Total Time, the main phases, the free-running Total Time and the GPU busy %, the
README's table of a run on a GPU; it writes no files.
Tables 1 and 2 are of the published pair on the published workload. Cases the result lacks (cpp
skipped, cuda skipped) are shown as "not run", with the reason where the result records one. Beside
each table file it writes two charts: per phase, Python vs C++ medians with their IQR, one panel per
device; and the train_step ratio of each implementation to its reference against the Net's width, one
line per batch size. All go into --out, named after the result; their paths are printed on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from phasebench.report import counts
from phasebench.report.cases import IMPLEMENTATIONS, NOT_RUN, absent_reason, devices_of, impls_of, workloads_of
from phasebench.report.charts import chart, scaling_chart
from phasebench.report.distributed import beyond_table
from phasebench.report.fill import concurrent_table, ensemble_table, faults_table, loops_table
from phasebench.report.findings import findings
from phasebench.report.headline import headline_text
from phasebench.report.tables import (
    csv_block,
    describe,
    implementations_table,
    markdown,
    memory_table,
    phase_table,
    program_tables,
    run_table,
    runs_table,
    startup_table,
)
from phasebench.repository import ROOT
from phasebench.results import DEFAULT_STORAGE, find_result, find_results
from phasebench.saved import SavedResult


def render(path: Path, result: SavedResult, style: str, beside: SavedResult | None = None,
           account: Callable[[dict, SavedResult, str], list] | None = None) -> tuple[str, list[str]]:
    """The report's text, and for CSV the notes it cannot carry (for stderr). `account`: for a counted result with
    `beside`, the tables that follow its counts beside times on a device, from (its cases, the timed result beside
    it, the device): lab/account.py's account of an intervention study."""
    cases, every, data_parallel = result.published(), result.cases, result.distributed_cases
    markdown_parts, csv_parts, notes = [f"## {path.name}", "", describe(path, result), ""], [], []
    if result.counted:
        for device in sorted({key[2] for key in every}):
            sentence = counts.interpreter_sentence(every, device)
            tables = [counts.counts_table(every, device), counts.split_table(every, device)]
            if beside is not None:
                tables.append(counts.counts_vs_times(every, beside.cases, device))
                if account is not None:
                    tables += account(every, beside, device)
                elif tables[-1].rows:
                    # Without a study nothing of the gap is accounted for: a figure ("unexplained: 100 % of the gap")
                    # would read as a finding, that a study found no cause, where none was run. A note says what is
                    # missing instead, and the table stays as it is.
                    tables[-1].notes.append("time / instructions is the gap the account breaks down; no intervention "
                                            "study given, so none of it is accounted for here")
            markdown_parts += [f"### {device}", ""] + ([sentence, ""] if sentence else [])
            markdown_parts += [markdown(table) for table in tables]
            csv_parts += [csv_block(table, device) for table in tables if table.rows]
            notes += [f"{device}: {note}" for table in tables for note in table.notes]
        return ("\n".join(markdown_parts).rstrip() + "\n", []) if style == "markdown" else ("\n".join(csv_parts), notes)
    for device in devices_of(every | data_parallel):
        markdown_parts += [f"### {device}", ""]
        beyond_one = beyond_table(data_parallel, device)
        if beyond_one.rows:
            markdown_parts += [markdown(beyond_one)]
            csv_parts.append(csv_block(beyond_one, device))
            notes += [f"{device}: {note}" for note in beyond_one.notes]
        if not any(key[2] == device for key in every):
            if beyond_one.rows:
                continue
            note = f"{device}: {NOT_RUN} ({absent_reason(result, device)})"
            markdown_parts += [note + ".", ""]
            notes.append(note)
            continue
        tables = [run_table(cases, device, result.method), phase_table(cases, device)] + program_tables(cases, device)
        # More than the published pair on the published workload (a result of the graph pair alone is too).
        beyond = bool(set(impls_of(every)) - set(IMPLEMENTATIONS)) or any(key[3] for key in every)
        if beyond:
            sentences = findings(every, device)
            if sentences:
                markdown_parts += [f"**Findings on {device}**", ""] + [f"- {sentence}" for sentence in sentences] + [""]
            tables += [implementations_table(every, device, wid) for wid in workloads_of(every, device)]
        if any(key[0] == "training_run" and key[2] == device for key in every):
            tables += ([runs_table(every, device, result.method)] if beyond else []) + [memory_table(every, device)]
            tables += [loops_table(every, device)] if beyond else []
            tables += [table for table in (startup_table(every, device),) if table.rows]
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


PROG = "phasebench.report"


def write_outputs(path: Path, result: SavedResult, text: str, notes: list[str], out: Path, table_format: str,
                  prog: str) -> None:
    """What a rendered result leaves: its tables on stdout and in OUT, its charts (a counted result's split of the
    instructions per device; a timed one's per-phase chart and its workloads' scaling), and their paths on stderr."""
    sys.stdout.write(text + "\n")
    out.mkdir(parents=True, exist_ok=True)
    table_path = out / f"{path.stem}.{'md' if table_format == 'markdown' else 'csv'}"
    table_path.write_text(text)
    chart_path = out / f"{path.stem}.png"
    saved_at = str(result.datetime or "?")[:16].replace("T", " ")
    charts = [chart_path]
    if result.counted:
        for device in sorted({key[2] for key in result.cases}):
            counts.split_chart(chart_path, result.cases, device, f"Where the instructions go per call on {device} "
                                                                 f"(result saved {saved_at})")
    else:
        chart(chart_path, result, f"phasebench per-phase times, Python vs C++ (result saved {saved_at})")
        scaling_path = out / f"{path.stem}-workloads.png"
        if scaling_chart(scaling_path, result,
                         f"train_step against the reference, by workload (result saved {saved_at})"):
            charts.append(scaling_path)
    for note in notes:
        print(f"{prog}: {note}", file=sys.stderr)
    print(f"table: {table_path}\n" + "\n".join(f"chart: {made}" for made in charts), file=sys.stderr)


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """--format, --out and --storage, as every command that renders a saved result (write_outputs) takes them."""
    parser.add_argument("--format", choices=("markdown", "csv"), default="markdown",
                        help="Markdown tables (default), or CSV: one block per table, a blank line between")
    parser.add_argument("--out", type=Path, default=ROOT / "report",
                        help=f"folder for the table file and the chart (default: {ROOT / 'report'})")
    parser.add_argument("--storage", default=DEFAULT_STORAGE,
                        help=f"where saved results are, as --benchmark-storage (default: {DEFAULT_STORAGE}, where the "
                             f"suite saves them wherever pytest is started)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phasebench.report", description=__doc__.split("\n\n")[0],
                                     epilog="See the module's docstring or the README for what the tables hold.")
    parser.add_argument("results", nargs="*", metavar="RESULT",
                        help="a saved pytest-benchmark JSON file, a run number (0001), the name it was saved under "
                             "(after, for 0002_after.json) or a glob ('*after'), in --storage (default: the newest "
                             "saved for this machine)")
    add_output_options(parser)
    parser.add_argument("--beside", metavar="TIMED",
                        help="for a counted result: a timed result of the same tree, whose python/cpp time ratios "
                             "are set beside the instruction ratios")
    parser.add_argument("--headline", action="store_true",
                        help="print only the headline of each result per device, the README's table of a run on a "
                             "GPU: Total Time, the main phases, the free-running Total Time and the GPU busy %%, "
                             "Python against C++; nothing is written to --out")
    args = parser.parse_args(argv)
    beside = SavedResult.read(find_result(args.beside, args.storage, PROG), PROG) if args.beside else None

    for path in find_results(args.results, args.storage, PROG):
        result = SavedResult.read(path, PROG)
        if args.headline:
            sys.stdout.write(headline_text(path, result) + "\n")
            continue
        text, notes = render(path, result, args.format, beside)
        write_outputs(path, result, text, notes, args.out, args.format, PROG)
    return 0


if __name__ == "__main__":
    sys.exit(main())

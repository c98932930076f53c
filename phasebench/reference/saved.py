"""docs/reference/saved-results.md, written from the saved-result format (phasebench/schema.py): a section per record
kind, each key with its unit and meaning as its field holds them (phasebench/record.py saved_field), the format's
versions and their migrations (phasebench/saved.py), and the keys no record has (phasebench/reference/fields.py)."""

from __future__ import annotations

import dataclasses

from phasebench import schema
from phasebench.distributed_records import DataParallel, DistRunParts
from phasebench.record import Case, Record, Utilization
from phasebench.reference import fields
from phasebench.reference.markdown import link_docs
from phasebench.saved import MIGRATIONS, RETIRED

# Each record the page describes, in the page's order: (record, heading, what writes it).
SECTIONS = (
    (Utilization, "Every case: utilization", "Every benchmark's `extra_info`, sampled while its rounds run "
     "(phasebench/utilization.py; docs/utilization.md)."),
    (Case, "Every case", "Every benchmark's `extra_info`: what the case is."),
    (schema.PhaseInfo, "test_phase", "bench/test_phases.py: one training phase, timed inside its worker; the "
     "benchmark's statistics are the phase's seconds per round."),
    (schema.CountedPhaseInfo, "test_phase under --count instructions", "bench/test_phases.py under `--count "
     "instructions` (docs/instruction-counts.md): the statistics hold instructions, read as 1e-9 s each."),
    (schema.TrainingRunInfo, "test_training_run", "bench/test_training_run.py: the training run end to end, each "
     "round a fresh worker process; the benchmark's statistics are its Total Time."),
    (schema.ConcurrentJobsInfo, "test_concurrent_jobs", "bench/test_concurrent_jobs.py: N jobs released together "
     "on one device (`--jobs`, `--extra jobs`); the benchmark's value is the makespan."),
    (schema.EnsembleInfo, "test_ensemble", "bench/test_ensemble.py: M models trained together, one step of all of "
     "them per round (`--models`, `--extra ensembles`)."),
    (schema.LossItemInfo, "test_loss_item", "bench/test_examples_differences.py: reading `loss.item()`, timed as "
     "a phase."),
    (schema.WorkerOverheadInfo, "test_worker_overhead", "bench/test_worker_overhead.py: an empty phase's round "
     "trip against its time inside the worker."),
    (DataParallel, "Data parallel: every case", "bench/test_distributed.py, with `--world-size` "
     "(docs/distributed.md): every data-parallel case."),
    (schema.DistPhaseInfo, "test_dist_phase", "One phase on every rank; a round's value is the slowest rank's."),
    (DistRunParts, "Data parallel: both training runs", "What test_dist_training_run and test_torchrun share: the "
     "slowest rank's Total Time and the scaling."),
    (schema.DistTrainingRunInfo, "test_dist_training_run", "A fresh world trains the same steps each round."),
    (schema.TorchrunInfo, "test_torchrun", "The training run launched by torchrun: two agents."),
    (schema.MachineInfo, "machine_info phasebench", "The run's `machine_info[\"phasebench\"]`: where and how it ran "
     "(phasebench/plugin/machine.py; the count mode's keys from phasebench/plugin/counting.py, the switches' from "
     "phasebench/plugin/switches.py)."),
)
HEADINGS = {record: heading for record, heading, _ in SECTIONS}

READING = '''import sys

from phasebench.saved import SavedResult

result = SavedResult.read(sys.argv[1], "read_saved")  # refuses, in one line, a file it cannot read
machine = result.machine  # machine_info["phasebench"], a MachineInfo
print(f"format {result.saved_format}, method {machine.method}, torch {machine.torch}, {machine.cpu}, "
      f"{machine.threads} threads, data {machine.dataset}")
for key, case in result.cases.items():  # CaseKey(phase, implementation, device, workload) -> SavedCase
    info = case.info  # its extra_info as its record kind (PhaseInfo, TrainingRunInfo, ...)
    print(f"{case.name}: {info.kind} {key.phase} {key.implementation} {key.device} median {case.median:.6f} s")'''


def own_fields(record: type[Record]) -> list[str]:
    """The keys a record defines itself, in its order: its fields less its nearest record base's."""
    bases = [base for base in record.__mro__[1:] if dataclasses.is_dataclass(base)]
    inherited = set(bases[0].keys()) if bases else set()
    return [name for name in record.keys() if name not in inherited]


def base_of(record: type[Record]) -> type[Record] | None:
    """The nearest record base the page has a section for."""
    return next((base for base in record.__mro__[1:] if base in HEADINGS), None)


def anchor(heading: str) -> str:
    """GitHub's anchor for one of the page's headings (letters, digits, '-' and '_' kept, spaces to '-')."""
    return "".join(ch for ch in heading.lower() if ch.isalnum() or ch in "-_ ").replace(" ", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def described(record: type[Record], key: str) -> tuple[str, str]:
    """(unit, meaning) of a record's key, from its field; the unit says `required` where every record holds it."""
    metadata = {found.name: found.metadata for found in dataclasses.fields(record)}[key]
    unit = metadata.get("unit", "")
    return (f"{unit}, required" if metadata.get("required") else unit), metadata.get("meaning", "")


def _table(rows) -> list[str]:
    return ["| key | unit | meaning |", "|---|---|---|"] + [
        f"| `{key}` | {_cell(unit)} | {_cell(link_docs(meaning))} |" for key, (unit, meaning) in rows]


def page() -> str:
    """The Markdown page."""
    lines = [
        "# Saved results",
        "",
        "<!-- Generated by `python -m phasebench.reference` from phasebench/schema.py (each key's unit and meaning",
        "     are its field's) and phasebench/reference/fields.py: edit those, never this page.",
        "     tests/test_reference_pages.py checks that the page and the schema hold the same keys. -->",
        "",
        "A saved result is pytest-benchmark's JSON (`--benchmark-json FILE`, `--benchmark-save NAME`,",
        "`--benchmark-autosave`) with phasebench's records in it: each benchmark's `extra_info`, the run's",
        "`machine_info[\"phasebench\"]`, and the keys it adds to `commit_info`. pytest-benchmark's own keys (`stats`,",
        "`machine_info`'s `node`, `cpu`, `python_version`, …) are described on",
        "[its usage page](https://pytest-benchmark.readthedocs.io/en/latest/usage.html).",
        "",
        "phasebench/schema.py defines every key: a run that writes a key its record kind does not have, or leaves a",
        "required key unset, fails, and a saved file with one is refused when read. Times are seconds unless the key",
        "ends in `_ns`; a null value means not recorded, for the reason the key's meaning gives.",
        "",
        "## How to read a saved file",
        "",
        "Read a file through phasebench/saved.py's `SavedResult`, not by key: it checks the file against the schema,",
        "brings a result of an older format to the current one, and gives its `machine_info[\"phasebench\"]`",
        "(`machine`) and each benchmark's `extra_info` typed as its record kind, keyed by phase, implementation,",
        "device and workload (`cases`). Save this as `read_saved.py` and run it with a saved file,",
        "`python read_saved.py .benchmarks/*/0001_*.json`:",
        "",
        "```python",
        READING,
        "```",
        "",
        "`python -m phasebench.report FILE` prints a saved file's tables and answer.",
        "",
        "## Which record a benchmark holds",
        "",
        "Its `kind`, saved with it (`schema.write` records the kind written). A result saved before the kind was",
        "(format 5 and older) gets it when read, from what the case recorded: `phase` `torchrun` is",
        "test_torchrun's; with a `world_size`, `training_run` is test_dist_training_run's and any other phase",
        "test_dist_phase's; `training_run` is test_training_run's, `concurrent_jobs-N` test_concurrent_jobs',",
        "`ensemble-M` test_ensemble's, `loss_item` and `worker_overhead` their tests'; every other phase is",
        "test_phase's, counted where `metric` is `instructions`.",
        "",
        "## Formats",
        "",
        f"A result records its format (`machine_info[\"phasebench\"][\"format\"]`, now {schema.FORMAT_VERSION}); one",
        "saved before it was recorded has its method's number as its format. An older format is read through one",
        "migration per version (phasebench/saved.py `MIGRATIONS`), each in the table; a newer one is refused.",
        "",
        "| from format | to | what changes |",
        "|---|---|---|",
        *[f"| {version} | {version + 1} | {_cell(' '.join((migration.__doc__ or '').split()))} |"
          for version, migration in sorted(MIGRATIONS.items())],
    ]
    for record, heading, intro in SECTIONS:
        lines += ["", f"## {heading}", "", f"{link_docs(intro)} Record: `{record.__name__}`."]
        base = base_of(record)
        if base is not None:
            lines += ["", f"It holds every key of [{HEADINGS[base]}](#{anchor(HEADINGS[base])}), and:"]
        lines += [""] + _table((key, described(record, key)) for key in own_fields(record))
    lines += ["", "## commit_info", "",
              "pytest-benchmark's `commit_info` (`id`, `time`, `branch`, …), with what phasebench adds",
              "(phasebench/provenance.py). A copy without git history records the commit given in",
              "`PHASEBENCH_COMMIT` and whether its tree was clean in `PHASEBENCH_DIRTY` (`1`: not clean).", ""]
    lines += _table(fields.COMMIT_INFO.items())
    lines += ["", "## Keys older formats saved", "",
              "A result of an older format may hold keys the current one no longer has; its migration drops them (or",
              "moves them), and a result of a later format that holds one is refused.", "",
              "| key | record | last format | what it held |", "|---|---|---|---|"]
    for record, retired in RETIRED.items():
        lines += [f"| `{key}` | `{record.__name__}` | {last} | {_cell(fields.RETIRED[key])} |"
                  for key, last in retired.items()]
    return "\n".join(lines) + "\n"


def described_problems(records=None) -> list[str]:
    """Where the page and the schema disagree: a record kind with no section, a key with no unit or meaning in its
    field, a retired key with no meaning or a meaning of no retired key."""
    found = []
    records = [record for record, _, _ in SECTIONS] if records is None else records
    missing = [kind.__name__ for kind in (*schema.CASE_KINDS, schema.MachineInfo) if kind not in records]
    found += [f"{name}: no section on the page" for name in missing]
    for record in records:
        found += [f"{record.__name__}.{key}: no unit or meaning in its field (saved_field, phasebench/record.py)"
                  for key in own_fields(record) if not all(described(record, key))]
    retired = {key for keys in RETIRED.values() for key in keys}
    found += [f"retired key {key}: {'no meaning' if key in retired else 'not retired'}"
              for key in sorted(retired ^ set(fields.RETIRED))]
    return found

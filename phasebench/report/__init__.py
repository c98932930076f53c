"""The published table, redone from a saved result: `python -m phasebench.report [RESULT ...]` (phasebench.report.cli
says what it prints).

One module per role, each importing only those above it in this list (and phasebench.results, the leaf that reads
saved results; tests/test_layers.py checks that no import goes in a circle):

- cases: what the report reads of a result (its cases by key, devices, workloads, implementations, the phases and
  their labels from phasebench.spec, each case's figures);
- tables: the published table's shape, every implementation's medians and ratios, the timed training runs, peak
  memory; Markdown and CSV;
- counts: the report of a counted result (instructions per call, where they go, counts beside times);
- fill: the free-running loops, concurrent jobs, ensembles, page faults;
- findings: the answer at a glance (pytest's terminal summary) and the findings in sentences;
- study: the intervention study's file (interventions.json): its format's name, version and fields, its writer
  (studies/interventions.py writes through it) and its reader; it imports nothing of the report;
- account: per phase, time beside instructions, each intervention's effect and what remains unexplained;
- charts: the per-phase chart and the workload chart (matplotlib, imported when drawing);
- cli: the command.

It imports no torch (nor the trainers): the phases and their labels come from phasebench.spec. `answer` is here too,
where phasebench/plugin/__init__.py reads it.
"""

from phasebench.report.findings import answer

__all__ = ["answer"]

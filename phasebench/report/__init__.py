"""The published table, redone from a saved result: `python -m phasebench.report [RESULT ...]` (phasebench.report.cli
says what it prints).

One module per role, each importing only those above it in this list (and phasebench.results, the leaf that reads
saved results; tests/test_layers.py checks that no import goes in a circle):

- cases: what the report reads of a result (its cases by key, devices, workloads, implementations, the phases and
  their labels from phasebench.spec, each case's figures);
- tables: the published table's shape, every implementation's medians and ratios, the timed training runs, peak
  memory; Markdown and CSV;
- counts: the report of a counted result (instructions per call, where they go, counts beside times; the lab's
  account of an intervention study follows them, lab/account.py, through cli.render's `account`);
- fill: the free-running loops, concurrent jobs, ensembles, page faults;
- findings: the answer at a glance (pytest's terminal summary) and the findings in sentences;
- headline: one short table of the published pair's training run per device, the README's table of a GPU run;
- charts: the per-phase chart and the workload chart (matplotlib, imported when drawing);
- cli: the command.

It imports no torch (nor the trainers): the phases and their labels come from phasebench.spec.
"""

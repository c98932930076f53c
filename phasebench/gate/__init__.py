"""Regression gating beyond pytest-benchmark's own --benchmark-compare-fail (docs/gating.md#baselines-and-ci-gating).

One module per role, each importing only those above it in this list (and phasebench.results, the leaf that
reads saved results; tests/test_layers.py checks that no import goes in a circle):

- options: the percentages the gates take;
- verdict: what both gates share: the outcome of a case (Verdict: only REGRESSED fails), a case's short name, and
  the phases no gate judges (is_gated);
- stats: Student's t, the paired change with its interval, the change either way;
- compare: a run against one baseline (--benchmark-compare, phasebench/plugin/gating.py): the median ratio of
  every implementation to its reference (--phase-ratio-fail), a comparison that compared nothing, and what of
  machine_info is each run's own and left out of comparing it;
- decide: the pull-request gate's decision on paired runs of base and head, and its table, whose first line is the
  verdict (after a confirming rerun, the rerun's);
- paired: its command, `python -m phasebench.gate.paired --base … --head …` (.ci/bench-pr);
- cli: `python -m phasebench.gate BASELINE RESULT`, the table for one pair of saved results, without intervals;
- counts: the instruction-count gate, `python -m phasebench.gate.counts` (.ci/bench-pr-count), with its thresholds
  file count_spread.json beside it.
- comment: the pull request's one comment, `python -m phasebench.gate.comment GATE.json …`, rendered from both
  gates' verdict files (paired's and counts' --json), every device in one, each checked and its strings escaped;
- post: `python -m phasebench.gate.post`, which renders that comment from a pull request's uploaded data and posts it
  or updates its earlier one (.github/workflows/benchmark-comment.yml).

What the gates do on this machine is measured by the lab's studies (lab/studies/), which this package never imports.

It imports no torch. The test-only knob that slows one phase on purpose to prove that the gates fail
(PHASEBENCH_TEST_SLOW_PHASE) is the tests' own: tests/knobs.py.
"""

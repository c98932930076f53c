"""Regression gating beyond pytest-benchmark's own --benchmark-compare-fail (docs/gating.md#baselines-and-ci-gating).

One module per role, each importing only those above it in this list (and phasebench.results, the leaf that
reads saved results; tests/test_layers.py checks that no import goes in a circle):

- options: the percentages the gates take, and the test-only knob (PHASEBENCH_TEST_SLOW_PHASE) that slows one
  phase on purpose to prove that the gates fail;
- stats: Student's t, the paired change with its interval, the change either way;
- compare: a run against one baseline (--benchmark-compare, phasebench/plugin/gating.py): the median ratio of
  every implementation to its reference (--phase-ratio-fail), and a comparison that compared nothing;
- decide: the pull-request gate's decision on paired runs of base and head, and its table;
- paired: its command, `python -m phasebench.gate.paired --base … --head …` (.ci/bench-pr);
- study: `python -m phasebench.gate.study OUT_DIR --slow …`, what the gate does on this machine (.ci/gate-study);
- cli: `python -m phasebench.gate BASELINE RESULT`, the table for one pair of saved results, without intervals.

It imports no torch. The knob's names are here too, where phasebench/plugin/__init__.py reads them.
"""

from phasebench.gate.options import SLOW_PHASE_ENV, SlowPhase, parse_percent, parse_slow_phase

__all__ = ["SLOW_PHASE_ENV", "SlowPhase", "parse_percent", "parse_slow_phase"]

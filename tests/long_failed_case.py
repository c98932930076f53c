"""A failed case judged by no gate, end to end (docs/faults.md#faults-and-bad-input): a baseline of the loss phase, then
a run compared with it in which Python's loss is slowed by 20 ms and then fails a check after its timing. A long check:
it runs in CI's recipe job (.github/workflows/recipes.yml), not in the test command, where
tests/test_gate.py checks the plugin's part of it alone."""

from __future__ import annotations

import pytest

from tests import knobs
from tests.test_gate import GATES, SLOW, suite_run


@pytest.mark.needs_data
def test_a_failed_case_is_judged_by_no_gate(pytestconfig, tmp_path):
    """pytest-benchmark would compare the failed case with its baseline and judge it by --benchmark-compare-fail: it
    reports no regression, and the ratio gate, left without python's side, fails closed on having nothing to
    compare; the run's summary names the case."""
    base = suite_run(pytestconfig.getoption, tmp_path, "--benchmark-save=base")
    assert base.returncode == 0, base.output
    result = suite_run(pytestconfig.getoption, tmp_path, *GATES, slow=SLOW, env={knobs.FAIL_CHECK_ENV: "python/loss:call"})
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.output
    assert "Performance has regressed" not in result.output, result.output
    assert "--phase-ratio-fail: no phase has python and cpp medians" in result.output, result.output
    assert "slower relative to cpp" not in result.output, result.output
    assert "phasebench: 1 case(s) failed or cut short, left out of the answer, the gates and the saved results: " \
           "test_phase[loss-python-cpu]" in result.output, result.output

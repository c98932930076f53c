"""Calls per round (phasebench/plugin/calibration.py; docs/method.md#calls-per-round): the calibration's bounds and
the baseline's calls per round as pytest-benchmark loaded them. What a run records and keeps: tests/test_gate.py."""

from phasebench.plugin.calibration import (
    MAX_ITERATIONS,
    ROUND_COST_S,
    ROUND_TARGET_S,
    baseline_iterations,
    calibrated_iterations,
)


def test_calls_fill_the_target_round_within_the_bounds():
    target_ns = ROUND_TARGET_S * 1e9
    assert calibrated_iterations([]) == 1  # no warm-up: nothing to calibrate from
    assert calibrated_iterations([int(target_ns) * 3]) == 1  # a call longer than the round
    assert calibrated_iterations([int(target_ns / 4)] * 5) == 4
    assert calibrated_iterations([int(target_ns / 4) - 1] * 5) == 5  # rounded up: the round reaches the target
    # The median warm-up call, not the first (cold) one nor an outlier.
    assert calibrated_iterations([int(target_ns), int(target_ns / 10), int(target_ns / 10)]) == 10
    assert calibrated_iterations([1] * 3) == calibrated_iterations([0]) == MAX_ITERATIONS


def test_what_a_round_costs_bounds_its_calls():
    """A call of a microsecond whose preparation takes milliseconds (a loss call runs its forward first): the round
    holds as many calls as ROUND_COST_S pays for, at least one; a cost of 0 (not known) leaves the target's number."""
    micro = [1000] * 5
    assert calibrated_iterations(micro, 0) == 50
    assert calibrated_iterations(micro, ROUND_COST_S * 1e9 / 4) == 4
    assert calibrated_iterations(micro, ROUND_COST_S * 1e9 / 4 + 1) == 3  # rounded down: the round stays in its cost
    assert calibrated_iterations(micro, ROUND_COST_S * 1e9 * 2) == 1
    assert calibrated_iterations(micro, 1000) == 50  # a cheap call: the target decides


def test_the_baselines_calls_per_round_are_pytest_benchmarks_iterations():
    mapping = {"a/0001_before.json": {"t[a]": {"stats": {"iterations": 17}}, "t[b]": {"stats": {"iterations": 1}},
                                      "t[old]": {"stats": {}}}}
    assert baseline_iterations(mapping) == {"t[a]": 17, "t[b]": 1, "t[old]": 1}
    assert baseline_iterations(None) == baseline_iterations({}) == {}

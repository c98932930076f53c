"""Every ratio with its interval where it was paired (docs/method.md#every-ratio-with-its-interval): how the answer
writes it, undecided ones and why, a share of a gap within 0–100 % or the phases' opposite moves, the ratio gate
deciding on intervals, and results saved before pairing still answered with their bare ratios."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from phasebench.gate.compare import RatioChange, gate_failures, undecided_ratios
from phasebench.report.cases import direction, paired_direction, undecided_lines
from phasebench.report.findings import answer, gap_share
from phasebench.repository import ROOT
from phasebench.saved import SavedResult
from phasebench.stats import paired_ratio
from tests.test_gate import saved_bench, saved_result


def ratio(estimate: float, low: float, high: float, pairs: int = 20, to: str = "cpp") -> dict:
    half = math.sqrt(high / low) - 1
    return {"estimate": estimate, "low": low, "high": high, "pairs": pairs, "confidence": 0.95, "half_width": half,
            "decided": half <= 0.10, "to": to, "leaves_out": None,
            "undecided": None if half <= 0.10 else f"its 95% interval spans ±{half:.0%}"}


def test_a_ratio_reads_as_a_factor_of_at_least_one_with_its_interval():
    assert direction(0.62) == "1.61× faster" and direction(2.1) == "2.10× slower" and direction(1.004) == "1.00× the same"
    assert direction(0.8, counted=True) == "1.25× fewer instructions"
    assert paired_direction(ratio(2.10, 1.96, 2.27)) == "2.10× slower [1.96, 2.27]"
    assert paired_direction(ratio(0.625, 0.6, 0.66)) == "1.60× faster [1.52, 1.67]"
    # An interval that holds 1 decides no direction: each end in its own words, never "slower [0.90, 1.05]".
    assert paired_direction(ratio(1.02, 0.97, 1.05)) == "1.02× slower [1.03× faster, 1.05× slower]"
    assert paired_direction(ratio(0.99, 0.95, 1.0)) == "1.01× faster [1.05× faster, 1.00× the same]"
    wide = ratio(1.3, 0.9, 1.9)
    assert paired_direction(wide) == "undecided"
    assert undecided_lines({"forward": wide}) == [
        "undecided: forward: its 95% interval spans ±45% (its pairs' median 1.30× slower)"]
    assert undecided_lines({"Total Time": wide | {"statistic": "mean"}}) == [
        "undecided: Total Time: its 95% interval spans ±45% (its pairs' geometric mean 1.30× slower)"]


def test_a_share_of_the_gap_stays_within_its_bounds_or_says_the_phases_moved_apart():
    assert gap_share({"data_loading": 2.05, "forward": 0.2, "backward": 0.15}, 2.44, "s", ".2f") == (
        "; data_loading makes 2.05 s of the 2.44 s gap (84%)")
    # backward faster in Python by more than forward's gain: no "367%" of a gap, the moves themselves.
    apart = gap_share({"forward": 7.51, "backward": -5.3, "loss": 0.1}, 2.05, "s", ".2f")
    assert apart == ("; the phases moved in opposite directions (forward +7.51 s, backward -5.30 s, loss +0.10 s of "
                     "the 2.05 s gap)")
    assert "opposite directions" in gap_share({"forward": 3.0, "loss": 0.1}, 2.0, "s", ".2f")  # more than the gap
    assert gap_share({"forward": -1.0}, 1.0, "s", ".2f") == ""


@pytest.mark.parametrize("low, high, verdict", [
    (1.40, 1.50, "moved"),  # wholly above 1.13 × 1.1
    (1.20, 1.30, "undecided"),  # straddles 1.13 × 1.1 = 1.243
    (1.05, 1.20, "unchanged"),  # within 1.027 … 1.243
    (0.90, 1.00, "moved"),  # wholly below 1.13 / 1.1 = 1.027
])
def test_the_ratio_gate_decides_on_the_heads_interval(low, high, verdict):
    assert RatioChange("forward", "cpu", 1.13, (low + high) / 2, low=low, high=high).verdict(10) == verdict


def test_a_paired_run_fails_the_ratio_gate_only_beyond_doubt():
    base = saved_result([saved_bench("forward", "python", 1.13), saved_bench("forward", "cpp", 1.0)])

    def head(interval: dict) -> SavedResult:
        benches = [saved_bench("forward", "python", interval["estimate"]), saved_bench("forward", "cpp", 1.0)]
        benches[0]["extra_info"]["ratio"] = interval
        return saved_result(benches)

    slower = head(ratio(1.45, 1.40, 1.50))
    [failure] = gate_failures({"base.json": base}, slower, 10)
    assert "forward on cpu: python/cpp ratio 1.130 → 1.450 [1.400, 1.500]" in failure
    assert undecided_ratios({"base.json": base}, slower, 10) == []
    straddling = head(ratio(1.25, 1.20, 1.30))
    assert gate_failures({"base.json": base}, straddling, 10) == []
    [undecided] = undecided_ratios({"base.json": base}, straddling, 10)
    assert "its interval holds both a move of 10% and none" in undecided
    assert gate_failures({"base.json": base}, head(ratio(1.12, 1.08, 1.16)), 10) == []
    assert undecided_ratios({"base.json": base}, head(ratio(1.12, 1.08, 1.16)), 10) == []


def test_an_interval_from_blocks_is_what_the_case_saves():
    interval = paired_ratio([2.0, 2.1, 1.9, 2.0, 2.05, 1.95], [1.0] * 6)
    assert (interval.estimate, interval.low, interval.high, interval.pairs) == (2.0, 1.9, 2.1, 6)


def test_a_result_saved_before_pairing_is_answered_with_its_bare_ratios():
    """The README's method-6 answer (tests/fixtures/method-6-answer.json) loads and answers as it did: ratios of the
    medians, no interval, nothing undecided."""
    saved = SavedResult.load(Path(ROOT) / "tests/fixtures/method-6-answer.json")
    lines = [line for _, section in answer(saved) for line in section]
    text = "\n".join(lines)
    assert "Verdict: python's Total Time is 1.77× slower than cpp's" in text, text
    assert "undecided" not in text and "[" not in text.split("Verdict")[1].splitlines()[0]

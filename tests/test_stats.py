"""The one statistics module (phasebench/stats.py): the rank interval of a median against distributions whose answer is
known, and a ratio from paired blocks."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from phasebench import stats


def test_the_rank_interval_is_the_sign_tests():
    # Bin(n, 1/2): n = 6 is the first whose extremes hold the median with 95 % (1 - 2/64); 20 pairs: the 6th and 15th.
    assert stats.median_rank_interval([3.0, 1.0, 2.0, 5.0, 4.0]) is None
    assert stats.median_rank_interval([6.0, 1.0, 2.0, 5.0, 4.0, 3.0]) == (1.0, 6.0)
    assert stats.median_rank_interval([float(v) for v in range(20)]) == (5.0, 14.0)
    assert stats.median_rank_interval([float(v) for v in range(10)], confidence=0.8) == (2.0, 7.0)


@pytest.mark.parametrize("pairs", [6, 20, 40])
def test_the_interval_holds_the_true_ratio_as_often_as_it_says(pairs):
    """Blocks whose true ratio is 2.1 and whose times spread log-normally (and now and then a block slowed by a
    neighbour, one side only): the interval holds 2.1 in at least 95 % of 2,000 simulated runs, and at most 99.5 %
    (a rank interval is conservative, not vacuous)."""
    rng = random.Random(7)
    held = 0
    for _ in range(2000):
        sides, references = [], []
        for _ in range(pairs):
            common = rng.lognormvariate(0, 0.3)  # the machine's state, shared by both blocks of a pair
            side = 2.1e-3 * common * rng.lognormvariate(0, 0.05) * (3.0 if rng.random() < 0.05 else 1.0)
            reference = 1e-3 * common * rng.lognormvariate(0, 0.05) * (3.0 if rng.random() < 0.05 else 1.0)
            sides.append(side)
            references.append(reference)
        interval = stats.paired_ratio(sides, references)
        held += interval.low <= 2.1 <= interval.high
    assert 0.95 * 2000 <= held <= 0.995 * 2000, held


@pytest.mark.parametrize("pairs", [4, 8])
def test_the_mean_interval_holds_the_true_ratio_as_often_as_it_says(pairs):
    """Pairs whose log ratios are normal around log 1.9 (a training run's rounds: each sums an epoch's steps): the
    geometric mean's t interval holds 1.9 in 95 % of 4,000 simulated runs, within the simulation's spread."""
    rng = random.Random(5)
    held = 0
    for _ in range(4000):
        common = [rng.lognormvariate(0, 0.2) for _ in range(pairs)]
        sides = [1.9 * c * rng.lognormvariate(0, 0.03) for c in common]
        references = [c * rng.lognormvariate(0, 0.03) for c in common]
        interval = stats.paired_ratio(sides, references, statistic=stats.MEAN)
        held += interval.low <= 1.9 <= interval.high
    assert 0.94 * 4000 <= held <= 0.96 * 4000, held


def test_the_mean_ratio_is_the_geometric_mean_with_its_t_interval():
    interval = stats.paired_ratio([2.0, 8.0, 4.0], [1.0, 2.0, 1.0], statistic=stats.MEAN)
    logs = [math.log(2.0), math.log(4.0), math.log(4.0)]
    mean, sd = sum(logs) / 3, statistics.stdev(logs)
    half = 4.302653 * sd / math.sqrt(3)  # t(0.975, 2)
    assert interval.estimate == pytest.approx(math.exp(mean))
    assert (interval.low, interval.high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)), rel=1e-5)
    assert stats.RatioInterval.from_info(interval.as_info()) == interval
    one = stats.paired_ratio([2.0], [1.0], statistic=stats.MEAN)
    assert one.low is None and one.undecided_because() == "1 pair(s): a 95% interval needs 2"


def test_pairing_cancels_what_both_sides_of_a_pair_share():
    """A machine whose speed swings 3× between pairs leaves a paired ratio decided and close; the ratio of the two
    sides' medians across the same blocks moves with the swing."""
    rng = random.Random(3)
    common = [rng.choice([1.0, 3.0]) * rng.lognormvariate(0, 0.02) for _ in range(20)]
    sides = [1.5 * c * rng.lognormvariate(0, 0.02) for c in common]
    references = [c * rng.lognormvariate(0, 0.02) for c in common]
    interval = stats.paired_ratio(sides, references)
    assert interval.decided and interval.low < 1.5 < interval.high and interval.half_width < 0.03


def test_a_ratio_too_wide_or_with_too_few_pairs_is_undecided_and_says_why():
    few = stats.paired_ratio([2.0, 2.1, 1.9], [1.0, 1.0, 1.0])
    assert not few.decided and few.undecided_because() == "3 pair(s): a 95% interval needs 6"
    wide = stats.paired_ratio([1.0, 3.0, 1.2, 2.8, 1.1, 2.9], [1.0] * 6)
    assert not wide.decided and "more than the ±10%" in wide.undecided_because()
    narrow = stats.paired_ratio([2.0, 2.02, 1.98, 2.01, 1.99, 2.0], [1.0] * 6)
    assert narrow.decided and narrow.undecided_because() is None
    assert stats.RatioInterval.from_info(narrow.as_info()) == narrow
    assert narrow.half_width == pytest.approx(math.sqrt(2.02 / 1.98) - 1)


def test_a_ratio_whose_blocks_share_their_processes_counts_each_pair_of_processes_once():
    """Six pairs of worker processes, each with an offset of its own drawn around a true ratio of 2.1, and 4 blocks
    each with little noise of their own: counted as 24 independent block pairs, the interval holds 2.1 far less often
    than it says; counted per pair of workers, at least as often as it says."""
    rng = random.Random(11)
    held_blocks = held_workers = 0
    for _ in range(1000):
        sides, references, units = [], [], []
        for unit in range(6):
            offset = rng.lognormvariate(0, 0.05)  # the processes' own: memory layout, thread placement
            for _ in range(4):
                sides.append(2.1e-3 * offset * rng.lognormvariate(0, 0.01))
                references.append(1e-3 * rng.lognormvariate(0, 0.01))
                units.append(unit)
        blocks = stats.paired_ratio(sides, references)
        workers = stats.paired_ratio(sides, references, units)
        assert workers.pairs == 6 and blocks.pairs == 24
        held_blocks += blocks.low <= 2.1 <= blocks.high
        held_workers += workers.low <= 2.1 <= workers.high
    assert held_workers >= 0.95 * 1000 and held_blocks < 0.8 * 1000, (held_workers, held_blocks)


def test_within_units_takes_out_each_units_offset():
    """Two units whose ratios sit at 2.0 and 2.6, each exactly: nothing spreads within them (the interval about 1 has
    no width), though the ratio between the units is undecided; blocks that swing 1× to 3× within a unit are wide."""
    units = [0, 1] * 6
    steady = stats.within_units([2.0 if unit == 0 else 2.6 for unit in units], [1.0] * 12, units)
    assert steady.estimate == steady.low == steady.high == 1.0 and steady.decided
    swinging = stats.within_units([1.0, 1.0, 3.0, 3.0] * 3, [1.0] * 12, units)
    assert not swinging.decided

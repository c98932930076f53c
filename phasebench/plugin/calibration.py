"""Calls per round (docs/method.md#calls-per-round): how many calls of a phase each round pytest-benchmark times holds.

pytest-benchmark times a round as `iterations` calls of its target between two reads of its timer and divides by
them, so its statistics stay per call; the worker clock (phasebench.worker.client.worker_clock) sums the calls'
in-worker durations. A round of one call of a microsecond holds one draw of the caches' and the scheduler's state; a
round of calls that last ROUND_TARGET_S together holds their mean. A phase's calls per round are calibrated from
warm-up calls, as pytest-benchmark calibrates its own loops against --benchmark-min-time: in a paired run from the
faster side's median warm-up call, bounded so that the costlier side's calls, preparation included, stay within
ROUND_COST_S a round (bench/test_phases.py paired_iterations), in an unpaired one from the first-timed
implementation's, which the phase's others take (the same statistic on both sides of a ratio either way), except where
--benchmark-compare loaded a baseline holding the case: then they are the baseline's, since a median per call of one
call a round and one of many calls a round are not the same statistic. Both are recorded (stats.iterations, and
extra_info's iterations and iterations_from)."""

from __future__ import annotations

import math
import statistics

ROUND_TARGET_S = 50e-6  # what a round's calls last together, at least
# Each call is a request to the worker (on a loaded 2-core machine about a millisecond of pytest's and the worker's
# time): this bounds what a round of the shortest phase costs.
MAX_ITERATIONS = 100
# What a paired round's calls may cost the run, each call's untimed preparation included (a loss call first runs its
# forward): without the bound, the calls that bring a phase of a microsecond to ROUND_TARGET_S would each run a
# preparation of milliseconds, and --rounds rounds of them cost minutes.
ROUND_COST_S = 20e-3


def calibrated_iterations(warmup_ns: list[int], call_cost_ns: float = 0) -> int:
    """The calls per round of a phase whose warm-up calls took warmup_ns each: enough that their median times the calls
    reaches ROUND_TARGET_S, between 1 and MAX_ITERATIONS, and no more than keeps calls that cost call_cost_ns each
    (timed part and preparation; 0: not known) within ROUND_COST_S; 1 without a warm-up call to calibrate from."""
    if not warmup_ns:
        return 1
    call_ns = max(statistics.median(warmup_ns), 1)
    calls = math.ceil(ROUND_TARGET_S * 1e9 / call_ns)
    if call_cost_ns > 0:
        calls = min(calls, math.floor(ROUND_COST_S * 1e9 / call_cost_ns))
    return max(1, min(MAX_ITERATIONS, calls))


def baseline_iterations(compared_mapping: dict | None) -> dict[str, int]:
    """{case fullname: its calls per round} in the baselines pytest-benchmark loaded for --benchmark-compare
    ({path: {fullname: saved benchmark}}; None or {} without one): pytest-benchmark's own stats.iterations, 1 in a
    result saved before calls per round were calibrated."""
    kept: dict[str, int] = {}
    for baseline in (compared_mapping or {}).values():
        for fullname, bench in baseline.items():
            kept.setdefault(fullname, int((bench.get("stats") or {}).get("iterations") or 1))
    return kept

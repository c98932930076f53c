"""Paired timing (phasebench/plugin/pairing.py, bench/test_phases.py's measure_paired; docs/method.md#paired-in-time):
the balanced sequence and its seed, one rule for calls per round whichever side is drawn first, a failed measurement
failing every case of its group, and a side that cannot run leaving the other measured alone."""

from __future__ import annotations

import types
from collections import Counter

import pytest

from bench.test_phases import PairedSide, measure_paired, paired_iterations
from phasebench.plugin import pairing
from phasebench.plugin.calibration import calibrated_iterations
from phasebench.plugin.cases import run_order
from phasebench.spec import TRAINING_PHASES


def test_the_blocks_alternate_in_a_balanced_sequence():
    assert pairing.block_schedule(("python", "cpp"), 4) == [
        (0, "python"), (0, "cpp"), (1, "cpp"), (1, "python"), (2, "python"), (2, "cpp"), (3, "cpp"), (3, "python")]
    three = [impl for _, impl in pairing.block_schedule(("a", "b", "c"), 2)]
    assert three == ["a", "b", "c", "c", "b", "a"]
    # Over an even number of sweeps every side holds each place of a sweep equally often: no side always goes first.
    places = Counter((index % 3, impl) for index, (_, impl) in enumerate(pairing.block_schedule(("a", "b", "c"), 4)))
    assert places == {(0, "a"): 2, (2, "c"): 2, (1, "b"): 4, (0, "c"): 2, (2, "a"): 2}
    assert pairing.block_sizes(100, 5) == [5] * 20 and pairing.block_sizes(12, 5) == [5, 5, 2]


def test_which_side_goes_first_is_drawn_from_the_seed_and_shared_out():
    """The same seed, the same first side for every phase; over the phases each side goes first about half the
    time; another seed, another draw."""
    impls = ("python", "cpp")
    firsts = {seed: [run_order(seed, phase, "cpu", "", list(impls), impls)[0] for phase in TRAINING_PHASES]
              for seed in (1, 2)}
    assert firsts[1] == [run_order(1, phase, "cpu", "", ["cpp", "python"], impls)[0] for phase in TRAINING_PHASES]
    for drawn in firsts.values():
        assert abs(drawn.count("python") - drawn.count("cpp")) <= 1, drawn
    assert firsts[1] != firsts[2]


def _side(warmup_ms: list[float], cost_ms: float | None = None) -> PairedSide:
    return PairedSide(workers=[None], warmup=[(None, int(ms * 1e6), None) for ms in warmup_ms],
                      warmup_cost_ns=[] if cost_ms is None else [cost_ms * 1e6] * 3)


def test_one_rule_for_calls_per_round_whichever_side_is_first():
    """The faster side's median warm-up call into the round's target, whichever side warmed up first; a compared
    run takes its baseline's, and a baseline holding one side only is refused."""
    slow, fast = [0.040, 0.041, 0.039], [0.012, 0.011, 0.013]  # ms
    expected = calibrated_iterations([int(ms * 1e6) for ms in fast])
    assert expected > 1
    for order in (("python", "cpp"), ("cpp", "python")):
        sides = {impl: _side(slow if impl == "python" else fast) for impl in order}
        assert paired_iterations(sides, lambda impl: None) == (expected, "pair")
        assert paired_iterations(sides, lambda impl: 7) == (7, "baseline")
        with pytest.raises(RuntimeError, match="python: 7, cpp: no case|cpp: no case"):
            paired_iterations(sides, lambda impl: 7 if impl == "python" else None)
    # The calls' cost, preparation included, bounds them by the costlier side, whichever warmed up first.
    costly = calibrated_iterations([int(ms * 1e6) for ms in fast], 8e6)
    assert 1 < costly < expected
    for order in (("python", "cpp"), ("cpp", "python")):
        sides = {impl: _side(slow, 8) if impl == "python" else _side(fast, 0.5) for impl in order}
        assert paired_iterations(sides, lambda impl: None) == (costly, "pair")


def test_a_failed_measurement_fails_every_case_of_its_group():
    store = pairing.PairStore()
    group = ("python", "cpp")
    first = pairing.Pairing(store, ("test_phase", "forward"), group, "bench/test_phases.py::test_phase[forward-python-cpu]")
    second = pairing.Pairing(store, ("test_phase", "forward"), group, "bench/test_phases.py::test_phase[forward-cpp-cpu]")

    def measure(measured_group):
        raise RuntimeError("the cpp worker died: signal 11")

    with pytest.raises(RuntimeError, match="signal 11"):
        first.measure_once(measure)
    with pytest.raises(pytest.fail.Exception, match=r"run by .*forward-python-cpu\], failed: RuntimeError: the cpp "
                                                    r"worker died: signal 11"):
        second.measure_once(lambda measured_group: pytest.fail("measured twice"))


class FakeWorker:
    """A worker whose every call takes `ns`; its round records' requests answer as the real ones do."""

    def __init__(self, ns: int):
        self.ns, self.pid, self.calls = ns, None, 0

    def run_phase(self, phase, checks):
        self.calls += 1
        return types.SimpleNamespace(ns=self.ns, product={}, counted=None)

    def run_phase_block(self, phase, calls, checks):
        return types.SimpleNamespace(rounds=[self.run_phase(phase, checks) for _ in range(calls)], run_ns=calls * self.ns,
                                     wait_ns=0, wall_ns=calls * self.ns)

    def request(self, message):
        return types.SimpleNamespace(canary_ns=1)


class NoWindows:
    def window(self, worker, into):
        from contextlib import nullcontext

        return nullcontext()


def test_a_side_that_cannot_run_leaves_the_other_measured_alone():
    workers = {"python": FakeWorker(2_000_000)}

    def worker_for(impl, device, workload, slot, program):
        if impl not in workers:
            pytest.skip("no C++ compiler here")
        return workers[impl]

    settings = types.SimpleNamespace(warmup_rounds=2, rounds=10, count=None, pair_workers=1,
                                     switches=types.SimpleNamespace(checks=False))
    measured = measure_paired(("python", "cpp"), "forward", "cpu", None, settings, worker_for, NoWindows(),
                              lambda impl: None)
    assert list(measured.sides) == ["python"] and measured.unpaired == {"cpp": "cpp cannot run here: no C++ compiler here"}
    assert measured.sides["python"].blocks == [0.002, 0.002] and workers["python"].calls == 2 + 10
    info = pairing.pairing_info("python", {"python": measured.sides["python"].blocks}, measured.unpaired, 5, None)
    assert info["unpaired"] == "cpp cannot run here: no C++ compiler here" and "ratio" not in info


def test_an_undecided_ratio_gets_more_blocks_up_to_as_many_again():
    """Blocks whose ratio swings between 1× and 3× stay undecided: the measurement doubles its sweeps and stops."""
    class Swinging(FakeWorker):
        def run_phase(self, phase, checks):
            self.calls += 1
            return types.SimpleNamespace(ns=self.ns * (3 if (self.calls // 5) % 2 else 1), product={}, counted=None)

    workers = {"python": Swinging(1_000_000), "cpp": FakeWorker(1_000_000)}
    settings = types.SimpleNamespace(warmup_rounds=0, rounds=30, count=None, pair_workers=1,
                                     switches=types.SimpleNamespace(checks=False))
    measured = measure_paired(("python", "cpp"), "forward", "cpu", None, settings,
                              lambda impl, device, workload, slot, program: workers[impl], NoWindows(), lambda impl: None)
    assert measured.rounds == 60 and len(measured.sides["python"].blocks) == 12
    steady = {"python": FakeWorker(2_000_000), "cpp": FakeWorker(1_000_000)}
    measured = measure_paired(("python", "cpp"), "forward", "cpu", None, settings,
                              lambda impl, device, workload, slot, program: steady[impl], NoWindows(), lambda impl: None)
    assert measured.rounds == 30


def measured_in_six_pairs_of_workers(warmup_rounds: int):
    """forward measured over 60 rounds in six fake workers a side, each steady: C++'s calls 1 ms, Python's 2 ms, but
    2.6 ms in its workers of slots 1 and 4 (two pairs of processes 30 % apart). (workers, settings, measured)."""
    offsets = {("python", 1): 1.3, ("python", 4): 1.3}
    workers = {key: FakeWorker(int(2_000_000 * offsets.get(key, 1.0) / (2 if key[0] == "cpp" else 1)))
               for key in [(impl, slot) for impl in ("python", "cpp") for slot in range(6)]}
    settings = types.SimpleNamespace(warmup_rounds=warmup_rounds, rounds=60, count=None, pair_workers=6,
                                     switches=types.SimpleNamespace(checks=False))
    measured = measure_paired(("python", "cpp"), "forward", "cpu", None, settings,
                              lambda impl, device, workload, slot, program: workers[impl, slot], NoWindows(), lambda impl: None)
    return workers, settings, measured


def test_the_sweeps_run_two_by_two_in_each_sides_workers_and_the_interval_counts_worker_pairs():
    """12 sweeps over 6 workers a side: every worker warms up, sweeps run two by two in each side's next worker (so
    each pair of workers runs both orders), and the ratio's draws are the 6 pairs of workers, not the 12 pairs of
    blocks: two pairs of workers whose Python process sits 30 % slower move two draws of six. Too few sweeps for 6
    pairs of workers: one worker a side, whose block pairs are the draws, and the ratio says what that leaves out."""
    workers, settings, measured = measured_in_six_pairs_of_workers(warmup_rounds=2)
    python = measured.sides["python"]
    assert python.block_slots == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert python.workers == [workers["python", s] for s in range(6)]
    assert all(worker.calls == 2 + 2 * 5 for worker in workers.values())  # each: its warm-up, then 2 blocks of 5
    assert [w for w, _, _ in python.taken[:10]] == [workers["python", 0]] * 10
    info = pairing.pairing_info("python", {impl: side.blocks for impl, side in measured.sides.items()},
                                measured.unpaired, 5, python.leaves_out(), python.block_slots, python.ratio_units())
    assert info["block_workers"] == python.block_slots
    assert info["ratio"]["pairs"] == 6 and info["ratio"]["leaves_out"] is None
    assert (info["ratio"]["low"], info["ratio"]["high"]) == (pytest.approx(2.0), pytest.approx(2.6))
    settings.rounds = 30  # 6 sweeps: 3 pairs of workers would hold no interval
    measured = measure_paired(("python", "cpp"), "forward", "cpu", None, settings,
                              lambda impl, device, workload, slot, program: workers[impl, slot], NoWindows(), lambda impl: None)
    cpp = measured.sides["cpp"]
    assert cpp.block_slots == [0] * 6 and len(cpp.workers) == 1 and cpp.leaves_out() is not None


def test_each_pair_of_workers_runs_both_orders():
    """The balanced sequence flips the order every sweep; sweeps two by two in a slot give each slot one of each."""
    order = ("python", "cpp")
    schedule = pairing.block_schedule(order, 12)
    for slot in range(6):
        firsts = [impl for sweep, impl in schedule[::2] if pairing.sweep_slot(sweep, 6) == slot]
        assert sorted(firsts) == ["cpp", "python"], (slot, firsts)
    assert [pairing.pair_worker_count(6, sweeps) for sweeps in (1, 6, 11, 12, 20, 40)] == [1, 1, 1, 6, 6, 6]


def test_a_ratio_undecided_between_pairs_of_processes_gets_no_more_blocks():
    """Six pairs of workers, two of whose ratios sit at 2.6 and the others at 2.0, each with steady blocks: the blocks
    agree within each pair of workers, so more of them could not narrow the interval between the pairs, and none are
    added."""
    _, _, measured = measured_in_six_pairs_of_workers(warmup_rounds=0)
    python = measured.sides["python"]
    ratio = pairing.pairing_info("python", {impl: side.blocks for impl, side in measured.sides.items()}, {}, 5, None,
                                 python.block_slots, python.ratio_units())["ratio"]
    assert ratio["pairs"] == 6 and not ratio["decided"] and measured.rounds == 60

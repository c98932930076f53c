"""The pull-request gate's decision (phasebench/gate/decide.py, its command phasebench/gate/paired.py;
docs/gating.md#baselines-and-ci-gating) on saved results made up here: an unchanged tree passes, a slowed phase fails by name, a tiny change stays under the floor, and the
statistics agree with textbook values."""

from __future__ import annotations

import json
import math
import random

import pytest

from phasebench import stats
from phasebench.gate import paired
from phasebench.gate.decide import Run, decide, table
from phasebench.gate.verdict import Verdict
from phasebench.method import METHOD_VERSION


def test_t_quantiles_match_the_textbook_table():
    for df, two_sided_95 in [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (30, 2.042)]:
        assert stats.t_quantile(0.975, df) == pytest.approx(two_sided_95, abs=1e-3)
    assert stats.t_quantile(0.8, 4) == pytest.approx(0.941, abs=1e-3)
    assert stats.t_quantile(0.5, 3) == pytest.approx(0.0)


def test_paired_change_and_its_interval():
    unchanged = stats.paired_change([1.0, 1.1, 0.9, 1.05, 0.95], [1.01, 1.08, 0.92, 1.04, 0.96])
    assert not unchanged.significant and unchanged.low < 0 < unchanged.high
    slower = stats.paired_change([1.0, 1.1, 0.9, 1.05, 0.95], [1.2, 1.33, 1.07, 1.27, 1.13])
    assert slower.significant and slower.low > 0 and slower.low < 0.2 < slower.high
    assert 0 < slower.p_value < 0.001
    one = stats.paired_change([1.0], [1.3])
    assert one.estimate == pytest.approx(0.3) and one.low is None and not one.significant
    assert one.interval() == "n/a (one pair)"


def test_minimum_detectable_effect_shrinks_with_more_pairs():
    spread = 0.05  # the log-ratio's standard deviation over pairs of unchanged runs
    five, ten = stats.minimum_detectable(spread, 5), stats.minimum_detectable(spread, 10)
    assert ten < five
    # (t_0.975,4 + t_0.8,4) * 0.05 / sqrt(5) = (2.776 + 0.941) * 0.02236 = 0.0831
    assert five == pytest.approx(math.exp(0.0831) - 1, abs=2e-4)
    assert stats.minimum_detectable(spread, 1) == math.inf


CASES = {  # fullname -> (phase, implementation, median seconds, timer floor seconds)
    "test_phase[forward-python-cpu]": ("forward", "python", 2.7e-3, 160e-9),
    "test_phase[forward-cpp-cpu]": ("forward", "cpp", 2.5e-3, 30e-9),
    "test_phase[copy_to_device-python-cpu]": ("copy_to_device", "python", 1.0e-6, 160e-9),
    "test_phase[copy_to_device-cpp-cpu]": ("copy_to_device", "cpp", 0.4e-6, 30e-9),
}


def save_run(path, rng: random.Random, noise: float, slow: dict[str, float] | None = None,
             method: int = METHOD_VERSION, machine: dict | None = None, iterations: dict[str, int] | None = None) -> str:
    """A saved result with every case of CASES, its median moved by a run offset shared by all cases
    (the machine) and by its own noise, times 1 + slow[name]; machine_info["phasebench"] has `machine` too, and a
    case named in `iterations` those calls per round (stats.iterations)."""
    offset = rng.gauss(0, noise)
    benchmarks = []
    for name, (phase, impl, median, floor) in CASES.items():
        value = median * math.exp(offset + rng.gauss(0, noise / 3)) * (1 + (slow or {}).get(name, 0))
        stats = {"median": value} | ({"iterations": iterations[name]} if name in (iterations or {}) else {})
        benchmarks.append({"fullname": f"bench/test_phases.py::{name}", "name": name, "stats": stats,
                           "extra_info": {"phase": phase, "implementation": impl, "device": "cpu",
                                          "timer_floor_s": floor}})
    path.write_text(json.dumps({"machine_info": {"phasebench": {"method": method} | (machine or {})},
                                "benchmarks": benchmarks}))
    return str(path)


def runs(tmp_path, side: str, pairs: int, seed: int, noise: float = 0.1, slow=None) -> list[Run]:
    rng = random.Random(seed)
    return [Run.load(save_run(tmp_path / f"{side}-{i}.json", rng, noise, slow)) for i in range(pairs)]


def test_an_unchanged_tree_passes_despite_run_to_run_noise(tmp_path):
    # 10 % run-to-run offsets, shared by both sides of a pair only by chance: here not at all.
    for seed in range(20):
        verdicts = decide(runs(tmp_path, "base", 5, seed), runs(tmp_path, "head", 5, 1000 + seed))
        assert not [v for v in verdicts if v.failed], table(verdicts, 10, 10)


def test_a_slowed_phase_fails_by_name_and_its_ratio_too(tmp_path):
    slow = {"test_phase[forward-python-cpu]": 0.2}
    verdicts = decide(runs(tmp_path, "base", 5, 1, noise=0.02), runs(tmp_path, "head", 5, 2, noise=0.02, slow=slow))
    failed = {v.case: v for v in verdicts if v.failed}
    assert set(failed) == {"bench/test_phases.py::test_phase[forward-python-cpu]", "forward python/cpp on cpu"}, (
        table(verdicts, 10, 10))
    assert failed["forward python/cpp on cpu"].members == ("bench/test_phases.py::test_phase[forward-python-cpu]",
                                                           "bench/test_phases.py::test_phase[forward-cpp-cpu]")
    assert 0.1 < failed["forward python/cpp on cpu"].change.estimate < 0.3
    assert verdicts[0].failed  # failures first


def test_a_tiny_phase_under_the_floor_does_not_count(tmp_path):
    # copy_to_device in C++: 0.4 µs, 30 % slower (120 ns) against a floor of 30 ns plus spread: counts;
    # in Python 1 µs, 12 % slower (120 ns) against its 160 ns floor: significant, over the threshold, and ignored.
    slow = {"test_phase[copy_to_device-cpp-cpu]": 0.3, "test_phase[copy_to_device-python-cpu]": 0.12}
    verdicts = decide(runs(tmp_path, "base", 5, 3, noise=0.01), runs(tmp_path, "head", 5, 4, noise=0.01, slow=slow))
    by_case = {v.case: v for v in verdicts}
    assert by_case["bench/test_phases.py::test_phase[copy_to_device-cpp-cpu]"].verdict is Verdict.REGRESSED
    python = by_case["bench/test_phases.py::test_phase[copy_to_device-python-cpu]"]
    assert python.change.significant and python.verdict is Verdict.BELOW_FLOOR, table(verdicts, 10, 10)
    assert not python.failed and "| below floor |" in table(verdicts, 10, 10)
    assert python.floor == pytest.approx(160e-9)  # the same floor in every run: no spread to add


def test_the_command_writes_the_summary_and_the_failing_cases(tmp_path, capsys):
    base = [save_run(tmp_path / f"b{i}.json", random.Random(i), 0.02) for i in range(3)]
    head = [save_run(tmp_path / f"h{i}.json", random.Random(10 + i), 0.02, {"test_phase[forward-cpp-cpu]": 0.5})
            for i in range(3)]
    status = paired.main(["--base", *base, "--head", *head, "--markdown", str(tmp_path / "gate.md"),
                          "--failing", str(tmp_path / "failing.txt")])
    out = capsys.readouterr().out
    assert status == 1 and "**Gate: FAILED, 2 regressed**" in out
    assert "| case | base | head | change | 95 % interval | p | significant | floor | verdict |" in out
    assert (tmp_path / "gate.md").read_text() == out
    assert (tmp_path / "failing.txt").read_text().splitlines() == [
        "bench/test_phases.py::test_phase[forward-cpp-cpu]", "bench/test_phases.py::test_phase[forward-python-cpu]"]
    assert paired.main(["--base", *base, "--head", *base]) == 0
    with pytest.raises(SystemExit):
        paired.main(["--base", *base, "--head", *head[:2]])


SAME = {"order_seed": 7, "dataset": "mnist", "torch": "2.14.1"}
UNLIKE = {  # what differs in head -> (head's machine_info, head's calls per round, the reason's start)
    "method": ({}, {}, f"method: base {METHOD_VERSION - 1}, head {METHOD_VERSION} "),
    "run order": ({"order_seed": 8}, {}, "run order: base 7, head 8 "),
    "data": ({"dataset": "synthetic"}, {}, "data: base mnist, head synthetic "),
    "torch": ({"torch": "2.15.0"}, {}, "torch: base 2.14.1, head 2.15.0 "),
    "calls per round": ({}, {"test_phase[forward-cpp-cpu]": 12}, "calls per round of test_phase[forward-cpp-cpu]: "
                                                                 "base 4, head 12 "),
}


@pytest.mark.parametrize("unlike", UNLIKE)
def test_base_and_head_that_cannot_be_compared_fail_unless_the_change_is_accepted(tmp_path, capsys, unlike):
    """Another method, run order, data, torch, or calls per round of a case: no case is judged, even one slowed 50 %;
    the gate fails naming what differs in its first line, and passes saying so where a maintainer accepted it."""
    machine, iterations, reason = UNLIKE[unlike]
    base_method = METHOD_VERSION - 1 if unlike == "method" else METHOD_VERSION
    calls = {"test_phase[forward-cpp-cpu]": 4}
    base = [save_run(tmp_path / f"b{i}.json", random.Random(i), 0.02, method=base_method, machine=SAME,
                     iterations=calls) for i in range(3)]
    head = [save_run(tmp_path / f"h{i}.json", random.Random(10 + i), 0.02, {"test_phase[forward-cpp-cpu]": 0.5},
                     machine=SAME | machine, iterations=calls | iterations) for i in range(3)]
    files = ["--markdown", str(tmp_path / "gate.md"), "--failing", str(tmp_path / "failing.txt"), "--json",
             str(tmp_path / "gate.json")]
    assert paired.main(["--base", *base, "--head", *head, *files]) == 1
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith(f"**Gate: FAILED, not comparable** ({reason}"), first
    assert "--accept-change REASON" in first and "| case |" not in out
    assert (tmp_path / "gate.md").read_text() == out and (tmp_path / "failing.txt").read_text() == ""
    held = json.loads((tmp_path / "gate.json").read_text())
    assert (held["outcome"], held["accepted"], held["rows"]) == ("not comparable", None, [])
    assert held["note"].startswith(reason)

    accepted = "the label benchmark-change-accepted, added by a maintainer"
    assert paired.main(["--base", *base, "--head", *head, *files, "--accept-change", accepted]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"**Gate: passed, change accepted** (base and head cannot be compared: {reason}"), first
    assert f"accepted by a maintainer: {accepted}; no case is judged)" in first
    held = json.loads((tmp_path / "gate.json").read_text())
    assert (held["outcome"], held["accepted"]) == ("change accepted", accepted)


def test_runs_that_differ_within_a_side_cannot_be_compared_either(tmp_path, capsys):
    base = [save_run(tmp_path / f"b{i}.json", random.Random(i), 0.02, machine={"order_seed": i}) for i in range(3)]
    assert paired.main(["--base", *base, "--head", *base]) == 1
    assert capsys.readouterr().out.startswith("**Gate: FAILED, not comparable** (run order: base 0 and 1 and 2, head "
                                              "0 and 1 and 2 ")


def test_a_head_newer_than_the_gates_code_cannot_be_compared(tmp_path, capsys):
    """The gate runs base's code: a head that raised the method past what that code reads is not comparable, and
    fails in one first line that says so, unless accepted."""
    base = [save_run(tmp_path / f"b{i}.json", random.Random(i), 0.02) for i in range(2)]
    head = [save_run(tmp_path / f"h{i}.json", random.Random(10 + i), 0.02, method=METHOD_VERSION + 1)
            for i in range(2)]
    assert paired.main(["--base", *base, "--head", *head]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"**Gate: FAILED, not comparable** (method: head measured by phasebench method "
                            f"{METHOD_VERSION + 1}; this code knows methods up to {METHOD_VERSION}"), first
    assert paired.main(["--base", *base, "--head", *head, "--accept-change", "method 7"]) == 0


def test_an_acceptance_does_not_pass_a_regression_of_comparable_runs(tmp_path, capsys):
    base = [save_run(tmp_path / f"b{i}.json", random.Random(i), 0.02) for i in range(3)]
    head = [save_run(tmp_path / f"h{i}.json", random.Random(10 + i), 0.02, {"test_phase[forward-cpp-cpu]": 0.5})
            for i in range(3)]
    assert paired.main(["--base", *base, "--head", *head, "--accept-change", "a label"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("**Gate: FAILED, 2 regressed**") and "can be compared: the gate judged them as usual" in out

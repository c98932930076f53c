"""The instruction-count gate's decision (phasebench.gate.counts), the metric that keeps counts and times apart
(phasebench.results), the callgrind dump reader (phasebench.worker.counting), and the wall-time gate's ratio verdict
(phasebench.gate.decide): a ratio fails only when its named loser is slower in its own medians."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phasebench import results
from phasebench.gate import counts
from phasebench.gate.decide import decide, table
from phasebench.gate.verdict import Verdict
from phasebench.method import METHOD_VERSION
from phasebench.repository import ROOT
from phasebench.saved import SavedResult
from phasebench.worker import counting
from tests.test_paired import runs

BRACKET = counting.BRACKET


def counted_json(values: dict[str, list[int]], bracket=BRACKET, metric="instructions") -> dict:
    benchmarks = []
    for name, rounds in values.items():
        phase, impl, device = name.split("-")[:3]
        counted = {"metric": metric, "instructions": rounds, "count_floor": 900} if metric == "instructions" else {}
        benchmarks.append({"fullname": f"bench/test_phases.py::test_phase[{name}]", "stats": {"median": 0},
                           "extra_info": {"phase": phase, "implementation": impl, "device": device} | counted})
    return {"machine_info": {"phasebench": {"method": METHOD_VERSION, "metric": metric,
                                            "count": {"bracket": bracket}}}, "benchmarks": benchmarks}


def counted_result(values: dict[str, list[int]], bracket=BRACKET, metric="instructions") -> SavedResult:
    return SavedResult.from_json(counted_json(values, bracket, metric), "counted.json")


BASE = {"forward-python-cpu": [36_550_000, 36_560_000, 36_555_000], "backward-cpp-cpu": [20_000_000] * 3}


def test_a_two_percent_regression_fails_and_an_improvement_is_reported():
    head = {"forward-python-cpu": [37_281_000] * 3, "backward-cpp-cpu": [19_000_000] * 3}
    rows = {r.case.split("[")[1][:-1]: r for r in counts.decide(counted_result(BASE), counted_result(head), {})}
    assert rows["forward-python-cpu"].verdict is Verdict.REGRESSED and rows["forward-python-cpu"].verdict.fails
    assert rows["forward-python-cpu"].threshold_pct == 0.5  # 10 × 0.03 % spread is under the 0.5 % minimum
    assert rows["backward-cpp-cpu"].verdict is Verdict.IMPROVED and not rows["backward-cpp-cpu"].verdict.fails
    text = counts.markdown(list(rows.values()))
    assert "| **regressed** |" in text and "the gate FAILS" in text and "1 improvement(s)" in text


def test_the_gate_json_and_exit_status_follow_the_outcome(tmp_path):
    """gate.json shows each verdict as its word; a case in one side alone is reported, never failing."""
    head = {"forward-python-cpu": [37_281_000] * 3, "loss-python-cpu": [1_000_000] * 3}
    base, head_file, out = tmp_path / "base.json", tmp_path / "head.json", tmp_path / "gate.json"
    base.write_text(json.dumps(counted_json(BASE)))
    head_file.write_text(json.dumps(counted_json(head)))
    assert counts.main(["--base", str(base), "--head", str(head_file), "--json", str(out)]) == 1
    verdicts = {row["case"].split("[")[1][:-1]: row["verdict"] for row in json.loads(out.read_text())["rows"]}
    assert verdicts == {"forward-python-cpu": "regressed", "backward-cpp-cpu": "only in base",
                        "loss-python-cpu": "only in head"}
    assert counts.main(["--base", str(base), "--head", str(base)]) == 0


def test_the_gate_owns_its_thresholds_and_a_missing_file_fails_naming_it(tmp_path, capsys, monkeypatch):
    """By default the thresholds are the gate's own file, shipped beside it; a thresholds file that is missing or
    unreadable, its own or one --spread names, fails the gate (exit 2) in one line that names it."""
    assert counts.DEFAULT_SPREAD.parent == Path(counts.__file__).parent
    assert counts.load_spreads(counts.DEFAULT_SPREAD)  # every case of the default pair on cpu
    base = tmp_path / "base.json"
    base.write_text(json.dumps(counted_json(BASE)))
    capsys.readouterr()
    for spread, problem in ((tmp_path / "gone.json", "does not exist"), (base, "is unreadable")):
        assert counts.main(["--base", str(base), "--head", str(base), "--spread", str(spread)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"thresholds file {spread} {problem}" in err, err
    monkeypatch.setattr(counts, "DEFAULT_SPREAD", tmp_path / "count_spread.json")
    assert counts.main(["--base", str(base), "--head", str(base)]) == 2
    assert f"thresholds file {tmp_path / 'count_spread.json'} does not exist" in capsys.readouterr().err


def test_the_threshold_is_ten_times_the_measured_spread():
    spread = {"bench/test_phases.py::test_phase[forward-python-cpu]": 0.2}
    head = {"forward-python-cpu": [37_281_000] * 3, "backward-cpp-cpu": [20_000_000] * 3}
    rows = counts.decide(counted_result(BASE), counted_result(head), spread)
    forward = next(r for r in rows if "forward" in r.case)
    assert forward.threshold_pct == 2.0 and forward.verdict is Verdict.UNCHANGED  # +2.0 % is not beyond 2.0 %


def test_base_and_head_that_cannot_be_compared_fail_unless_the_change_is_accepted(tmp_path, capsys):
    """A base without the mode or with another count bracket fails the gate, naming why in its first line, unless a
    maintainer accepted the change: then it passes without a verdict."""
    time_base = counted_json(BASE, metric="time")
    time_base["machine_info"]["phasebench"].pop("count")
    assert counts.not_comparable(SavedResult.from_json(time_base, "time.json"), counted_result(BASE)) == [
        "base holds time, not instruction counts (base lacks the mode)"]
    assert counts.not_comparable(counted_result(BASE, bracket="other"), counted_result(BASE)) == [
        f"the count bracket changed (base 'other', head {BRACKET!r})"]
    base, head, gate_md = tmp_path / "base.json", tmp_path / "head.json", tmp_path / "gate.md"
    base.write_text(json.dumps(counted_json(BASE, bracket="old")))
    head.write_text(json.dumps(counted_json({k: [v[0] * 2] * 3 for k, v in BASE.items()})))
    assert counts.main(["--base", str(base), "--head", str(head), "--markdown", str(gate_md)]) == 1
    first = gate_md.read_text().splitlines()[0]
    assert first.startswith("## Instruction-count gate: FAILED, not comparable (the count bracket changed (base 'old'"), first
    assert counts.main(["--base", str(base), "--head", str(head), "--markdown", str(gate_md), "--json",
                        str(tmp_path / "gate.json"), "--accept-change", "new bracket"]) == 0
    first = gate_md.read_text().splitlines()[0]
    assert first.startswith("## Instruction-count gate: passed, change accepted (base and head cannot be compared: "
                            "the count bracket changed"), first
    assert "accepted by a maintainer: new bracket; no case is judged" in first
    held = json.loads((tmp_path / "gate.json").read_text())
    assert held["accepted"] == "new bracket" and held["rows"] == [] and held["note"].startswith("the count bracket")
    capsys.readouterr()


def with_machine(values: dict, **machine) -> dict:
    held = counted_json(values)
    held["machine_info"]["phasebench"].update(machine)
    return held


@pytest.mark.parametrize(("base_machine", "head_machine", "reason"), [
    ({"order_seed": 1}, {"order_seed": 2}, "run order: base 1, head 2"),
    ({"dataset": "mnist"}, {"dataset": "synthetic"}, "data: base mnist, head synthetic"),
    ({"torch": "2.14.1"}, {"torch": "2.15.0"}, "torch: base 2.14.1, head 2.15.0"),
], ids=["run order", "data", "torch"])
def test_another_run_order_data_or_torch_is_not_comparable(tmp_path, capsys, base_machine, head_machine, reason):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(with_machine(BASE, **base_machine)))
    head.write_text(json.dumps(with_machine(BASE, **head_machine)))
    assert counts.main(["--base", str(base), "--head", str(head)]) == 1
    assert capsys.readouterr().out.startswith(f"## Instruction-count gate: FAILED, not comparable ({reason}; ")
    assert counts.main(["--base", str(base), "--head", str(head), "--accept-change", "ok"]) == 0


def test_calls_per_round_that_differ_are_not_comparable_and_name_the_case(tmp_path, capsys):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(counted_json(BASE)))
    other = counted_json(BASE)
    other["benchmarks"][0]["stats"]["iterations"] = 3
    head.write_text(json.dumps(other))
    assert counts.main(["--base", str(base), "--head", str(head)]) == 1
    assert ("not comparable (calls per round of test_phase[forward-python-cpu]: base None, head 3; "
            in capsys.readouterr().out.splitlines()[0])


def test_a_method_change_must_change_the_bracket_or_be_accepted(tmp_path, capsys):
    """A method change with the same count bracket is refused: a method change that alters what a count holds must
    change the bracket. Accepted (the counts are unaffected), the counts are judged, and a regression still fails."""
    base, head, slower = tmp_path / "base.json", tmp_path / "head.json", tmp_path / "slower.json"
    base.write_text(json.dumps(with_machine(BASE, method=METHOD_VERSION - 1)))
    head.write_text(json.dumps(counted_json(BASE)))
    slower.write_text(json.dumps(counted_json(BASE | {"forward-python-cpu": [37_281_000] * 3})))
    assert counts.main(["--base", str(base), "--head", str(head)]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert (f"FAILED, not comparable (method: base {METHOD_VERSION - 1}, head {METHOD_VERSION}, but the count bracket "
            f"is the same (a method change that alters what a count holds must change the bracket") in first, first
    assert counts.main(["--base", str(base), "--head", str(head), "--accept-change", "clocks only"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Instruction-count gate: passed (base vs head") and "| case |" in out
    assert counts.main(["--base", str(base), "--head", str(slower), "--accept-change", "clocks only"]) == 1
    assert capsys.readouterr().out.startswith("## Instruction-count gate: FAILED, 1 regressed")


def test_a_head_newer_than_the_gates_code_is_not_comparable(tmp_path, capsys):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(counted_json(BASE)))
    head.write_text(json.dumps(with_machine(BASE, method=METHOD_VERSION + 1)))
    assert counts.main(["--base", str(base), "--head", str(head)]) == 1
    assert capsys.readouterr().out.startswith(f"## Instruction-count gate: FAILED, not comparable (method: head "
                                              f"measured by phasebench method {METHOD_VERSION + 1}; ")
    assert counts.main(["--base", str(base), "--head", str(head), "--accept-change", "method raised"]) == 0


def test_a_count_is_never_compared_with_a_time():
    timed = SavedResult.from_json({"machine_info": {"phasebench": {"method": METHOD_VERSION}}, "benchmarks": []},
                                  "0001.json")
    line = results.mismatch(timed, METHOD_VERSION, "instructions")
    assert "holds time, this run instructions" in line


def test_a_callgrind_dump_is_read_by_self_cost(tmp_path):
    dump = tmp_path / "callgrind.out.1"
    dump.write_text("version: 1\ncreator: callgrind-3.19.0\ncmd: python\npart: 1\n\n"
                    "desc: Trigger: Client Request: python/forward/3\n\nevents: Ir\n\n"
                    "ob=/usr/lib/libpython3.11.so.1.0\nfl=ceval.c\nfn=_PyEval_EvalFrameDefault\n10 500\n"
                    "cob=/x/torch/lib/libtorch_cpu.so\ncfn=at::native::conv2d(at::Tensor const&)\ncalls=1 0\n11 9000\n"
                    "ob=/x/torch/lib/libtorch_cpu.so\nfl=conv.cpp\nfn=at::native::conv2d(at::Tensor const&)\n5 3000\n"
                    "fn=c10::Dispatcher::call(int)\n6 400\n"
                    "ob=???\nfn=0x000000000badc0de\n0 5000\n\ntotals: 8900\n")
    parsed = counting.parse_dump(dump)
    assert parsed["label"] == "python/forward/3" and parsed["instructions"] == 8900
    split = counting.split(parsed["self"])
    assert split["interpreter"] == 500 and split["ATen kernels"] == 3000
    assert split["dispatcher and autograd"] == 400 and split["MKL, oneDNN and JIT code"] == 5000
    assert sum(split.values()) == 8900
    # The pytest process reads a worker's round (outside Valgrind) and deletes its dump; another label is refused.
    text = dump.read_text()
    read = counting.read_round(str(dump), "python/forward/3")
    assert read["instructions"] == 8900 and read["split"] == split and not dump.exists()
    dump.write_text(text)
    with pytest.raises(RuntimeError, match="labelled 'python/forward/3'"):
        counting.read_round(str(dump), "python/forward/4")


def test_kept_dumps_are_compared_function_by_function(tmp_path, monkeypatch, capsys):
    """PHASEBENCH_COUNT_DUMPS keeps a read round's dump under its label; two kept dumps compare by category and by
    function. ctypes' libffi (unnamed functions) is the C library, not JIT code; the bindings' per-call checks that
    live in libtorch_cpu are framework, not kernels."""
    def dump(label: str, nll_nd: int) -> str:
        path = tmp_path / f"callgrind.out.{label.replace('/', '')}"
        path.write_text("version: 1\ncmd: python\n\n"
                        f"desc: Trigger: Client Request: {label}\n\nevents: Ir\n\n"
                        "ob=/x/torch/lib/libtorch_cpu.so\nfn=at::native::nll_loss_nd_symint(at::Tensor const&)\n"
                        f"1 {nll_nd}\nfn=at::impl::torch_function_mode_enabled()\n2 76\n"
                        "fn=c10::WarningUtils::get_warning_handler()\n3 13\n"
                        "ob=/usr/lib/x86_64-linux-gnu/libffi.so.8.1.2\nfn=0x0000000000002510\n4 71\n")
        return str(path)

    monkeypatch.setenv(counting.KEEP_DUMPS_ENV, str(tmp_path / "kept"))
    read = counting.read_round(dump("python/loss/6", 154), "python/loss/6")
    assert read["split"]["ATen kernels"] == 154 and read["split"]["dispatcher and autograd"] == 89
    assert read["split"]["C library and allocator"] == 71 and read["split"]["MKL, oneDNN and JIT code"] == 0
    kept = tmp_path / "kept" / "python_loss_6.callgrind"
    assert kept.exists()
    other = dump("cpp/loss/6", 0)
    text = counting.compare_dumps(kept, other, n=1)
    assert "+154  [ATen kernels] libtorch_cpu.so: at::native::nll_loss_nd_symint" in text
    assert [line.split()[:1] for line in text.splitlines()[1:3]] == [["instructions"], ["interpreter"]]


def test_a_python_speed_up_is_no_cpp_regression_and_a_slower_cpp_fails(tmp_path):
    """A real 15 % speed-up of python moves the python/cpp ratio as a cpp slowdown would; it is
    reported, never failed, while a cpp 15 % slower fails by its median and by its ratio."""
    faster = {"test_phase[forward-python-cpu]": -0.15}
    verdicts = decide(runs(tmp_path, "base", 5, 1, noise=0.02), runs(tmp_path, "head", 5, 2, noise=0.02, slow=faster))
    assert not [v for v in verdicts if v.failed], table(verdicts, 10, 10)
    ratio = next(v for v in verdicts if v.case == "forward python/cpp on cpu")
    assert ratio.verdict is Verdict.RATIO_MOVED and ratio.detail.startswith("test_phase[forward-cpp-cpu] not slower"), (
        ratio.text)
    slower = {"test_phase[forward-cpp-cpu]": 0.15}
    verdicts = decide(runs(tmp_path, "base", 5, 3, noise=0.02), runs(tmp_path, "head", 5, 4, noise=0.02, slow=slower))
    failed = {v.case: v for v in verdicts if v.failed}
    assert set(failed) == {"bench/test_phases.py::test_phase[forward-cpp-cpu]", "forward python/cpp on cpu"}, failed
    assert {v.verdict for v in failed.values()} == {Verdict.REGRESSED}
    assert failed["forward python/cpp on cpu"].detail.endswith("and slower in its own medians")


def test_the_work_knob_is_parsed_for_both_languages():
    from tests.knobs import parse_slow_phase

    knob = parse_slow_phase("cpp/backward:212443work", ("forward", "backward"), ("python", "cpp"))
    assert knob.work == 212443 and knob.ns == 0 and knob.fraction == 0
    assert knob.trainer_options("cpp") == {"slow_phase": "backward", "slow_work": 212443}
    assert knob.trainer_options("python") == {}


def test_the_report_of_a_counted_result_shows_counts_split_and_the_interpreter_share(tmp_path):
    from phasebench.report.cli import render

    saved = json.loads((ROOT / "results/instruction-counts/spread/01.json").read_text())
    text, _ = render(tmp_path / "01.json", SavedResult.from_json(saved, "01.json"), "markdown")
    assert "**Instructions per call on cpu" in text and "| forward | 36,574,771 | 36,299,607 |" in text
    assert "**Where the instructions go on cpu" in text
    assert "CPython's interpreter executes 12.1 % of the instructions" in text


FAKE_PYTEST = """#!/bin/sh
# A side's pytest that runs until it is told to stop, and says that it was.
echo started > "$PWD/started"
sleep 60 & sleeping=$!
trap 'echo TERM > "$PWD/stopped"; kill $sleeping; exit 143' TERM
wait
"""


@pytest.mark.parametrize("serial", ["", "1"], ids=["side-by-side", "serial"])
def test_a_cancelled_count_gate_stops_both_sides(tmp_path, serial):
    """A cancelled CI job signals .ci/bench-pr-count's shell alone: the pytest of each side it started gets SIGTERM
    (where it saves what it finished, tests/test_interrupted_runs.py), and the script exits 143 at once instead of leaving them
    counting on."""
    import os
    import signal
    import subprocess
    import time


    trees = [tmp_path / "base", tmp_path / "head"]
    for tree in trees:
        (tree / "phasebench" / "plugin").mkdir(parents=True)
        (tree / "phasebench" / "plugin" / "counting.py").touch()  # base has the mode
        python = tree / ".venv" / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(FAKE_PYTEST)
        python.chmod(0o755)
    gate = subprocess.Popen(["bash", str(ROOT / ".ci" / "bench-pr-count"), *map(str, trees), str(tmp_path / "out")],
                            env=os.environ | {"PHASEBENCH_NO_INSTALL": "1", "BENCH_PR_COUNT_SERIAL": serial},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        counting_sides = trees if not serial else trees[:1]  # serially, head has not started yet
        deadline = time.monotonic() + 30
        while not all((tree / "started").exists() for tree in counting_sides) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(gate.pid, signal.SIGTERM)
        output = gate.communicate(timeout=10)[0].decode()
    finally:
        if gate.poll() is None:
            os.killpg(gate.pid, signal.SIGKILL)
    assert gate.returncode == 143, output
    assert [(tree / "stopped").exists() for tree in trees] == [True, not serial], output
    if serial:
        assert not (trees[1] / "started").exists(), "head started after the cancel"


FAKE_COUNT = """import json, os, sys
from pathlib import Path
from pytest_benchmark.utils import get_machine_id
sys.path.insert(0, {root!r})
from tests.test_count_gate import BASE, counted_json

options = dict(arg[2:].split("=", 1) for arg in sys.argv[1:] if arg.startswith("--") and "=" in arg)
values = BASE | ({{"forward-python-cpu": [37_281_000] * 3}} if os.environ.get("FAKE_SLOWER") else {{}})
folder = Path(options["benchmark-storage"].removeprefix("file://")) / get_machine_id()
folder.mkdir(parents=True)
(folder / f"0001_{{options['benchmark-save']}}.json").write_text(json.dumps(counted_json(values)))
"""


def test_the_count_gate_is_decided_by_bases_code(tmp_path):
    """Head's tree provides the code under test, not the judge: a head whose own phasebench.gate.counts passes
    everything is judged by base's, and its 2 % regression fails the gate."""
    import os
    import subprocess
    import sys

    trees = [tmp_path / "base", tmp_path / "head"]
    for tree in trees:
        python = tree / ".venv" / "bin" / "python"
        python.parent.mkdir(parents=True)
        (tree / "fake_count.py").write_text(FAKE_COUNT.format(root=str(ROOT)))
        python.write_text(f'#!/bin/sh\nif [ "$1 $2" = "-m pytest" ]; then shift 2; exec {sys.executable} '
                          f'{tree / "fake_count.py"} "$@"; fi\nexec {sys.executable} "$@"\n')
        python.chmod(0o755)
    (trees[0] / "phasebench").symlink_to(ROOT / "phasebench")  # base's code: this checkout's
    shadow = trees[1] / "phasebench" / "gate"
    shadow.mkdir(parents=True)
    for package in (shadow.parent, shadow):
        (package / "__init__.py").touch()
    (shadow / "counts.py").write_text("import sys\nfor flag in ('--markdown', '--json'):\n"
                                      "    open(sys.argv[sys.argv.index(flag) + 1], 'w').write('passed\\n')\n")
    done = subprocess.run(["bash", str(ROOT / ".ci" / "bench-pr-count"), *map(str, trees), str(tmp_path / "out")],
                          env=os.environ | {"PHASEBENCH_NO_INSTALL": "1", "BENCH_PR_COUNT_SERIAL": "1",
                                            "HEAD_ENV": "FAKE_SLOWER=1"},
                          capture_output=True, text=True, timeout=120)
    gate_md = (tmp_path / "out" / "gate.md").read_text()
    assert done.returncode == 1, done.stdout + done.stderr
    assert gate_md.startswith("## Instruction-count gate: FAILED, 1 regressed"), gate_md

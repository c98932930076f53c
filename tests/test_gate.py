"""Regression gating (phasebench/gate/, phasebench/plugin/gating.py; docs/gating.md#baselines-and-ci-gating), proven end to
end: the suite runs in a subprocess that saves a baseline, then fails against it with one phase slowed by the
test-only knob, and passes without it. The CI workflows pass actionlint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
from pytest_benchmark.utils import get_machine_id

from phasebench import schema
from phasebench import stats as gate_stats
from phasebench.gate import cli as gate_cli
from phasebench.gate import compare as gate_compare
from phasebench.method import METHOD_VERSION
from phasebench.registry import NAMES as IMPLEMENTATIONS
from phasebench.repository import ROOT
from phasebench.saved import SavedResult
from phasebench.spec import TRAINING_PHASES as PHASE_NAMES
from tests import knobs

# A phase of tens of microseconds on cpu slowed by 20 ms: far beyond the run-to-run noise of a busy
# machine, which the generous thresholds leave room for, so the verdicts below cannot flake.
SLOW = "python/loss:20ms"
GATES = ("--benchmark-compare=0001", "--benchmark-compare-fail=median:400%", "--phase-ratio-fail=400%")


def run_suite(pytestconfig, storage: Path, *options: str) -> subprocess.CompletedProcess:
    """The loss phase on cpu in both implementations, a few rounds, results in `storage`."""
    result = suite_run(pytestconfig.getoption, storage, *options)
    assert "Traceback" not in result.output, result.output
    return result


def suite_run(option, storage: Path, *options: str, slow: str | None = None,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """run_suite's child pytest, unchecked; option: the getoption of the run whose data it uses."""
    from tests.child_runs import child_process

    env = {name: value for name, value in os.environ.items() if name != knobs.SLOW_PHASE_ENV} | (env or {})
    if slow:  # the knob is the test plugin's (tests/knobs.py)
        env |= {knobs.SLOW_PHASE_ENV: slow, "PYTEST_ADDOPTS": "-ptests.knobs"}
    # The phase cases' module alone: collecting the whole suite would take longer than the two cases' rounds.
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "bench/test_phases.py", "--benchmark-only",
               "-k", "test_phase and loss",
               # One worker a side: these tests judge the gates, not the spread between processes (each block pair
               # a draw, which the ratio's `leaves_out` says), and six more workers a side would triple the runs.
               "--device", "cpu", "--rounds", "30", "--warmup-rounds", "1", "--pair-workers", "1",
               f"--mnist-root={os.path.abspath(option('mnist_root'))}",
               f"--dataset={option('dataset')}", f"--benchmark-storage={storage}", *options]
    with child_process(command, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        stdout, stderr = child.communicate(timeout=600)
    result = subprocess.CompletedProcess(command, child.returncode, stdout, stderr)
    result.output = stdout + stderr
    return result


@pytest.fixture(scope="module")
def gate_run(pytestconfig, tmp_path_factory):
    """gate_run(name): that run of the runs the gate's tests below check, made once for the module, one after the
    other: a baseline saved in a folder (with its histogram), then, gated against it, a run with python's loss
    slowed, one unchanged, and one in which nothing runs. Each run is checked to have no Traceback and to follow a
    saved baseline by the test that reads it, so a Traceback fails only the tests that read that run."""
    option, folder = pytestconfig.getoption, tmp_path_factory.mktemp("gate")
    runs = {"baseline": suite_run(option, folder, "--benchmark-save=base", f"--benchmark-histogram={folder / 'histogram'}")}
    if runs["baseline"].returncode == 0:
        runs["slowed"] = suite_run(option, folder, *GATES, f"--benchmark-json={folder / 'slowed.json'}", slow=SLOW)
        runs["unchanged"] = suite_run(option, folder, *GATES)
        # A GPU runner that lost its GPU, with the default devices.
        runs["nothing"] = suite_run(option, folder, *GATES, "-k", "test_phase and loss and cuda", "--device=cpu,cuda",
                                    f"--benchmark-json={folder / 'out.json'}", env={"CUDA_VISIBLE_DEVICES": ""})

    def get(name: str) -> subprocess.CompletedProcess:
        assert "Traceback" not in runs["baseline"].output and runs["baseline"].returncode == 0, runs["baseline"].output
        assert "Traceback" not in runs[name].output, runs[name].output
        return runs[name]

    get.folder = folder
    return get


@pytest.mark.needs_data
def test_histogram_is_written(gate_run):
    """--benchmark-histogram works (pytest-benchmark[histogram], requirements.txt), beside the baseline's save."""
    gate_run("baseline")
    svg = (gate_run.folder / "histogram-loss.svg").read_text()
    assert svg.startswith("<?xml") and "test_phase[loss-python-cpu]" in svg and "test_phase[loss-cpp-cpu]" in svg


@pytest.mark.needs_data
def test_slowed_phase_fails_both_gates(gate_run):
    result = gate_run("slowed")
    assert result.returncode == 1, result.output
    assert "Performance has regressed" in result.output
    assert "test_phase[loss-python-cpu] (0001_base) - Field 'median' has failed" in result.output
    assert "test_phase[loss-cpp-cpu] (0001_base) - Field" not in result.output  # only python was slowed
    assert "regression gate failed" in result.output
    # The failed gate leaves the rest of the summary: the utilization of each benchmark (docs/utilization.md#utilization).
    assert "phasebench utilization: GPU busy % mean/max, worker CPU in cores" in result.output
    assert "loss: cpp-cpu CPU " in result.output and "python-cpu CPU " in result.output
    [ratio] = [line for line in result.output.splitlines() if line.startswith("loss on cpu: python/cpp ratio")]
    assert "slower relative to cpp, over the 400% limit" in ratio
    # The knob shows in the header and the comparison, and stays in the saved result.
    [header] = [line for line in result.output.splitlines() if line.startswith("phasebench: TESTING RUN: ")]
    assert SLOW in header, header
    assert any("machine_info" in line and SLOW in line for line in result.output.splitlines()), result.output
    saved = SavedResult.load(gate_run.folder / "slowed.json")
    assert saved.machine.testing["slow_phase"] == SLOW
    # Saved in the current format, each record with its kind.
    assert saved.saved_format == schema.FORMAT_VERSION and saved.cases
    assert all(case.info.kind == type(case.info).__name__ for case in saved.cases.values())


def test_an_error_benchmark_leaves_pytest_benchmarks_session_before_it_compares():
    """pytest-benchmark compares every benchmark of its session with the baseline and judges it by
    --benchmark-compare-fail, an error too: the plugin's wrapper around session finish takes the errors out first and
    keeps their names for the run's summary. (End to end, with a slowed case that fails a check after its timing:
    tests/long_failed_case.py, a long check.)"""
    from phasebench.plugin import pytest_sessionfinish
    from phasebench.plugin.session import ERRORED

    class Bench:
        def __init__(self, name, has_error, stats=True):
            self.name, self.has_error, self.stats = name, has_error, stats

        def __bool__(self):  # pytest-benchmark's: a benchmark without stats is false
            return self.stats

    passed, failed, unmeasured = Bench("passed", False), Bench("failed", True), Bench("unmeasured", True, False)
    bs = types.SimpleNamespace(benchmarks=[passed, failed, unmeasured])
    session = types.SimpleNamespace(config=types.SimpleNamespace(_benchmarksession=bs, stash=pytest.Stash()))
    wrapper = pytest_sessionfinish(session)
    next(wrapper)  # up to pytest-benchmark's own finish, which compares and saves
    assert bs.benchmarks == [passed, unmeasured] and session.config.stash[ERRORED] == ["failed"]
    with pytest.raises(StopIteration):
        wrapper.send(None)


@pytest.mark.needs_data
def test_calls_per_round_are_recorded_and_kept_from_the_baseline(gate_run):
    """Each case records its calls per round (docs/method.md#calls-per-round): in the baseline calibrated from both
    sides' warm-up (the faster side's median call) and shared by both, taken from the baseline in the run
    compared with it (whose own warm-up, with python's loss slowed to 20 ms, would calibrate one call a round), as
    pytest-benchmark's iterations and in extra_info alike."""
    gate_run("baseline")
    [path] = gate_run.folder.glob("*/0001_base.json")
    base = {bench["fullname"]: bench for bench in json.loads(path.read_text())["benchmarks"]}
    slowed = {bench["fullname"]: bench for bench in json.loads((gate_run.folder / "slowed.json").read_text())["benchmarks"]}
    assert base and set(base) == set(slowed), (set(base), set(slowed))
    assert sorted(bench["extra_info"]["iterations_from"] for bench in base.values()) == ["pair", "pair"], base
    assert len({bench["stats"]["iterations"] for bench in base.values()}) == 1, base  # one statistic for the ratio
    for name, bench in base.items():
        assert bench["extra_info"]["iterations"] == bench["stats"]["iterations"] >= 1, name
        compared = slowed[name]
        assert compared["extra_info"]["iterations_from"] == "baseline", name
        assert compared["stats"]["iterations"] == compared["extra_info"]["iterations"] == bench["stats"]["iterations"], name


@pytest.mark.needs_data
def test_a_compared_run_runs_in_its_baselines_order(gate_run):
    """Under --benchmark-compare a run takes its baseline's order seed (docs/method.md#order): each worker runs its
    phases in the sequence the baseline's did, and the header says whose seed it is."""
    gate_run("baseline")
    [path] = gate_run.folder.glob("*/0001_base.json")
    seed = json.loads(path.read_text())["machine_info"]["phasebench"]["order_seed"]
    slowed = json.loads((gate_run.folder / "slowed.json").read_text())
    assert slowed["machine_info"]["phasebench"]["order_seed"] == seed
    assert f"seed {seed}, the baseline's (--order-seed {seed} runs this order again)" in gate_run("unchanged").output
    orders = {bench["fullname"]: bench["extra_info"]["order"] for bench in slowed["benchmarks"]}
    assert orders == {bench["fullname"]: bench["extra_info"]["order"]
                      for bench in json.loads(path.read_text())["benchmarks"]}


def test_a_given_order_seed_wins_over_the_baselines():
    """--order-seed names the order; a baseline's seed only replaces one drawn for the run, and the first baseline
    that records one is kept (as its calls per round are)."""
    from phasebench.plugin.session import PhasebenchSession

    def session(seed: int, source: str) -> PhasebenchSession:
        made = PhasebenchSession(impls=("python", "cpp"), devices=("cpu",), workloads=(), threads=2, rounds=5,
                                 warmup_rounds=1, round_timeout=60.0, epochs=1, run_rounds=1, processes=1, source=None,
                                 cuda_reason=None, order_seed=seed, order_seed_from=source)
        made.machine = {"order_seed": seed}
        return made

    given = session(7, "given")
    given.take_baseline_order({"phasebench": {"order_seed": 99}})
    assert (given.order_seed, given.machine["order_seed"]) == (7, 7)
    drawn = session(7, "drawn")
    drawn.take_baseline_order({"phasebench": {}})  # a baseline that records no seed leaves the drawn one
    assert drawn.order_seed == 7 and drawn.order_seed_from == "drawn"
    for baseline_seed in (99, 5):
        drawn.take_baseline_order({"phasebench": {"order_seed": baseline_seed}})
    assert (drawn.order_seed, drawn.order_seed_from, drawn.machine["order_seed"]) == (99, "baseline", 99)


@pytest.mark.needs_data
def test_unchanged_run_passes_both_gates(gate_run):
    result = gate_run("unchanged")
    assert result.returncode == 0, result.output
    assert "Comparing against benchmarks from" in result.output
    assert "machine_info" not in result.output  # the same machine: its run order's seed is the run's own
    assert "Performance has regressed" not in result.output
    assert "regression gate failed" not in result.output
    # What the user reads (docs/getting-started.md#what-a-run-prints): the timing used, not pytest-benchmark's
    # defaults; nothing skipped that an explicit --device or --benchmark-only excluded; the answer with its direction.
    assert "(its timer, rounds, warm-up and calibration are not used: see phasebench: timing)" in result.output
    assert "phasebench: timing: each phase inside its worker process" in result.output
    assert ("30 rounds after 1 warm-up calls, each round as many calls as it takes the faster side's median warm-up "
            "call to fill 50 µs") in result.output
    assert "each phase's implementations side by side in time, in alternating blocks of 5 rounds" in result.output
    assert "skipped" not in result.output and " deselected" in result.output
    answer = result.output.split("phasebench: the answer on cpu", 1)[1].splitlines()
    [loss] = [line for line in answer if line.startswith("loss ")]
    # slower [low, high]; faster or the same; or undecided, said why below the table
    assert (loss.split()[3].endswith("×") and loss.split()[4] in ("slower", "faster", "the")) or (
        loss.split()[3] == "undecided" and "undecided: loss: " in result.output), loss


@pytest.mark.needs_data
def test_a_gated_run_in_which_nothing_ran_fails(gate_run):
    """A GPU runner that lost its GPU, with the default devices: every cuda case skips with its reason, and the gate
    fails instead of passing green; --benchmark-json says why it wrote nothing."""
    result = gate_run("nothing")
    out = gate_run.folder / "out.json"
    assert result.returncode == 1, result.output
    assert "nothing compared: no benchmark ran, so none was compared with " in result.output
    assert f"phasebench: --benchmark-json={out}: nothing written: no benchmark ran (2 skipped)" in result.output
    assert not out.exists()


@pytest.mark.parametrize("content, compare, problem", [
    (None, "0001", "no baseline in {storage} matches '0001'"),
    (None, "{storage}/no/such/base.json", "baseline {storage}/no/such/base.json does not exist"),
    ('{"benchmarks": [', "0001", "baseline {file} is unreadable: not JSON"),
    ((Path(__file__).parent / "fixtures" / "missing.json").read_text(), "0001",
     f"{{file}} was measured by phasebench method 1, this run by method {METHOD_VERSION}"),
], ids=["missing", "missing-path", "corrupt", "other-method"])
def test_bad_baseline_is_a_one_line_error(pytestconfig, tmp_path, content, compare, problem):
    file = tmp_path / get_machine_id() / "0001_base.json"
    if content is not None:
        file.parent.mkdir()
        file.write_text(content)
    result = run_suite(pytestconfig, tmp_path, f"--benchmark-compare={compare.format(storage=tmp_path)}",
                       "--benchmark-compare-fail=median:5%")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and problem.format(storage=tmp_path, file=file) in errors[0], result.output
    if "measured by" not in problem:  # another method's baseline loads: its machine_info difference still warns
        assert "PytestBenchmarkWarning" not in result.output  # pytest-benchmark's "Can't compare", "Failed to load"
    assert "passed" not in result.output  # stopped before any benchmark ran


# -- phasebench.gate on its own ------------------------------------------------------------------------------------

def saved_bench(phase: str, impl: str, median: float, device: str = "cpu") -> dict:
    return {"fullname": f"bench/test_phases.py::test_phase[{phase}-{impl}-{device}]", "stats": {"median": median},
            "extra_info": {"phase": phase, "implementation": impl, "device": device}}


def saved_result(benchmarks: list[dict], name: str = "0001_base.json") -> SavedResult:
    return SavedResult.from_json({"machine_info": {"phasebench": {"method": METHOD_VERSION}},
                                  "benchmarks": benchmarks}, name)


def test_slow_phase_knob_parses_and_rejects_typos():
    knob = knobs.parse_slow_phase("python/loss:1.5ms", PHASE_NAMES, IMPLEMENTATIONS)
    assert (knob.phase, knob.ns, knob.impl) == ("loss", 1_500_000, "python")
    assert knob.trainer_options("python") == {"slow_phase": "loss", "slow_ns": 1_500_000}
    assert knob.trainer_options("cpp") == {}
    relative = knobs.parse_slow_phase("python-foreach/forward:20%", PHASE_NAMES, IMPLEMENTATIONS)
    assert relative.trainer_options("python-foreach") == {"slow_phase": "forward", "slow_fraction": 0.2}
    both = knobs.parse_slow_phase("forward:5us", PHASE_NAMES, IMPLEMENTATIONS)
    assert both.trainer_options("cpp") == {"slow_phase": "forward", "slow_ns": 5_000}
    for typo, complaint in [("fowrard:5ms", "unknown phase 'fowrard'"), ("java/loss:5ms", "unknown implementation"),
                            ("loss:5", "expected [IMPL/]PHASE:DURATION"), ("loss", "expected")]:
        with pytest.raises(ValueError, match=complaint.replace("[", r"\[")):
            knobs.parse_slow_phase(typo, PHASE_NAMES, IMPLEMENTATIONS)


def test_change_either_way():
    assert gate_stats.change_either_way(1.0, 2.0) == gate_stats.change_either_way(2.0, 1.0) == 100.0
    assert gate_stats.change_either_way(3.0, 3.0) == 0.0


def test_ratio_changes_name_the_side_that_lost():
    baseline = [saved_bench("loss", "python", 2.0), saved_bench("loss", "cpp", 1.0),
                saved_bench("forward", "python", 3.0), saved_bench("forward", "cpp", 1.0),
                saved_bench("backward", "python", 1.0)]  # no cpp: no ratio
    current = [saved_bench("loss", "python", 2.0), saved_bench("loss", "cpp", 2.0),  # cpp twice as slow
               saved_bench("forward", "python", 3.3), saved_bench("forward", "cpp", 1.0),  # python 10% slower
               saved_bench("backward", "python", 9.0), saved_bench("backward", "cpp", 1.0)]
    loss, forward = gate_compare.ratio_changes(saved_result(baseline), saved_result(current))
    assert (loss.phase, loss.loser, round(loss.percent, 6)) == ("loss", "cpp", 100.0)
    assert (forward.phase, forward.loser, round(forward.percent, 6)) == ("forward", "python", 10.0)
    assert "cpp 100.0% slower relative to python" in str(loss)


def test_gate_failures():
    baseline = {"0001_base.json": saved_result([saved_bench("loss", "python", 2.0), saved_bench("loss", "cpp", 1.0)])}
    slower_cpp = saved_result([saved_bench("loss", "python", 2.0), saved_bench("loss", "cpp", 1.5)])
    assert gate_compare.gate_failures(baseline, slower_cpp, ratio_limit=60) == []
    [failure] = gate_compare.gate_failures(baseline, slower_cpp, ratio_limit=40)
    assert "cpp 50.0% slower relative to python, over the 40% limit (baseline 0001_base.json)" in failure
    assert gate_compare.gate_failures(baseline, slower_cpp, ratio_limit=None) == []
    elsewhere = saved_result([saved_bench("loss", "python", 1.0, device="cuda")])
    [nothing] = gate_compare.gate_failures(baseline, elsewhere, ratio_limit=None)
    assert nothing.startswith("nothing compared")
    [none_ran] = gate_compare.gate_failures(baseline, saved_result([]), ratio_limit=None)
    assert none_ran == "nothing compared: no benchmark ran, so none was compared with 0001_base.json"
    [no_pair] = gate_compare.gate_failures(baseline, saved_result([saved_bench("loss", "python", 2.0)]), ratio_limit=10)
    assert "no phase has python and cpp medians" in no_pair


def test_machine_info_differences():
    saved = {"torch": "2.14.1", "phasebench": {"test_slow_phase": None, "threads": 2}}
    current = {"torch": "2.14.1", "phasebench": {"test_slow_phase": "loss:5ms", "threads": 2}, "new": 1}
    assert gate_compare.machine_info_differences(current, saved) == [
        "new: None → 1", "phasebench.test_slow_phase: None → 'loss:5ms'"]


class RecordedWarnings:
    """A pytest-benchmark session's logger and storage, as its machine_info comparison uses them: the warnings kept."""

    def __init__(self):
        self.warnings = []
        self.storage = SimpleNamespace(location=".benchmarks")
        self.logger = SimpleNamespace(warning=lambda text, **_: self.warnings.append(text))


def machine_info(order_seed: int = 1, hz: int = 2_596_096_000, cpu: str = "AMD EPYC", torch: str = "2.14.1") -> dict:
    return {"node": "vm", "cpu": {"brand_raw": cpu, "count": 2, "hz_advertised": [2_596_096_000, 0],
                                  "hz_actual": [hz, 0], "hz_actual_friendly": f"{hz / 1e9:.4f} GHz"},
            "phasebench": {"method": METHOD_VERSION, "torch": torch, "cpu": cpu, "threads": 2, "order_seed": order_seed}}


def test_machine_info_compares_without_what_each_run_draws(pytestconfig):
    """pytest-benchmark's own comparison, through the plugins this run loaded: two runs on one machine that differ in
    their order seed and the CPU's momentary clock compare quietly, and both sides are left as they were; another
    CPU or another torch still warns."""
    def compare(current: dict, saved: dict) -> list[str]:
        session = RecordedWarnings()
        before = json.dumps([current, saved])
        pytestconfig.hook.pytest_benchmark_compare_machine_info(
            config=pytestconfig, benchmarksession=session, machine_info=current,
            compared_benchmark={"machine_info": saved, "benchmarks": []})
        assert json.dumps([current, saved]) == before  # the per-run values are back where they were
        return session.warnings

    assert compare(machine_info(order_seed=2256146807, hz=2_400_000_000),
                   machine_info(order_seed=2061901169, hz=2_596_096_000)) == []
    [another_cpu] = compare(machine_info(order_seed=2), machine_info(cpu="Intel(R) Xeon(R) Processor"))
    assert "machine_info is different" in another_cpu and "Intel(R) Xeon(R) Processor" in another_cpu
    [another_torch] = compare(machine_info(order_seed=2), machine_info(torch="2.13.0"))
    assert "machine_info is different" in another_torch and "2.13.0" in another_torch


def test_changes_command(tmp_path, capsys):
    for name, cpp_median in (("a.json", 1.0), ("b.json", 1.25)):
        benchmarks = [saved_bench("loss", "python", 2.0), saved_bench("loss", "cpp", cpp_median)]
        (tmp_path / name).write_text(json.dumps({"benchmarks": benchmarks}))
    assert gate_cli.main([str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "| bench/test_phases.py::test_phase[loss-cpp-cpu] | 1000.0000 ms | 1250.0000 ms | +25.0 % | n/a (one pair) " \
           "| n/a | no |  | not decided (one pair) |" in lines
    assert "| loss python/cpp on cpu | 2.000 | 1.600 | -20.0 % | n/a (one pair) | n/a | no |  | not decided (one pair) |" \
           in lines
    assert lines[-1].startswith("largest median change 25.0% (bench/test_phases.py::test_phase[loss-cpp-cpu]); "
                                "largest ratio change 25.0%")


def test_changes_command_takes_run_numbers_and_names(tmp_path, capsys):
    folder = tmp_path / get_machine_id()
    folder.mkdir()
    for name, cpp_median in (("0001_a.json", 1.0), ("0002_b.json", 1.25)):
        benchmarks = [saved_bench("loss", "python", 2.0), saved_bench("loss", "cpp", cpp_median)]
        (folder / name).write_text(json.dumps({"benchmarks": benchmarks}))
    for names in (["0001", "0002"], ["0001_a", str(folder / "0002_b.json")]):
        assert gate_cli.main([*names, "--storage", f"file://{tmp_path}"]) == 0
        assert capsys.readouterr().out.splitlines()[-1].startswith("largest median change 25.0%")
    with pytest.raises(SystemExit, match=r"^phasebench.gate: 0003: no such file, nor a saved result of that name in "):
        gate_cli.main(["0001", "0003", "--storage", f"file://{tmp_path}"])


def test_changes_command_refuses_another_method(tmp_path):
    benchmarks = [saved_bench("loss", "python", 2.0), saved_bench("loss", "cpp", 1.0)]
    for name, method in (("old.json", 1), ("new.json", 2)):
        (tmp_path / name).write_text(json.dumps({"machine_info": {"phasebench": {"method": method}},
                                                 "benchmarks": benchmarks}))
    with pytest.raises(SystemExit, match=r"old.json was measured by phasebench method 1, .*new.json by method 2"):
        gate_cli.main([str(tmp_path / "old.json"), str(tmp_path / "new.json")])


# -- the workflows ------------------------------------------------------------------------------------------------

def actionlint(*arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """actionlint from requirements.txt, with ShellCheck from there too for the run: scripts."""
    scripts = Path(sysconfig.get_path("scripts"))
    binary = scripts / "actionlint"
    assert binary.exists(), "actionlint is missing: pip install -r requirements.txt"
    return subprocess.run([str(binary), f"-shellcheck={scripts / 'shellcheck'}", "-pyflakes=", "-no-color",
                           *arguments], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_workflows_pass_actionlint():
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert workflows
    result = actionlint(*map(str, workflows))
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    """The check above can fail: a missing job and an unquoted shell variable are caught."""
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text("on: pull_request\njobs:\n  cpu:\n    needs: build\n    runs-on: ubuntu-latest\n"
                      "    steps:\n      - run: echo $UNQUOTED\n")
    result = actionlint(str(broken), cwd=tmp_path)
    assert result.returncode == 1
    assert 'needs job "build" which does not exist' in result.stdout
    assert "SC2086" in result.stdout  # ShellCheck ran


def test_commit_passed_in_for_a_copy_without_git(monkeypatch):
    """A GPU machine's copy has no git history: the commit and its cleanness come in by environment; elsewhere
    git status decides whether the tree was clean."""
    from phasebench import plugin
    from phasebench.plugin.session import COMMIT_ENV, DIRTY_ENV
    from phasebench.provenance import tree_state

    info = {"id": "unknown", "dirty": False}
    monkeypatch.delenv(COMMIT_ENV, raising=False)
    plugin.pytest_benchmark_update_commit_info(None, info)
    state = tree_state()
    assert (info["id"], info["dirty"], info["sources_hash"]) == ("unknown", state["dirty"], state["sources_hash"])
    monkeypatch.setenv(COMMIT_ENV, "0123abcd")
    monkeypatch.setenv(DIRTY_ENV, "1")
    plugin.pytest_benchmark_update_commit_info(None, info)
    assert (info["id"], info["dirty"]) == ("0123abcd", True) and "without git history" in info["commit_source"]


def test_ratio_gate_compares_every_implementation_with_its_reference():
    """Per phase, device and workload, each registered variant against its reference (docs/implementations.md#implementations-and-workloads); the published pair once, as python/cpp."""
    def bench(impl, median, width=1):
        saved = saved_bench("train_step", impl, median)
        saved["extra_info"] |= {"width": width, "batch_size": 64}
        saved["fullname"] += f"-{impl}-w{width}"
        return saved

    baseline = [bench("python", 2.0), bench("cpp", 1.0), bench("python-batched", 1.1), bench("cpp-batched", 1.0),
                bench("python", 8.0, width=4), bench("cpp", 4.0, width=4)]
    current = [bench("python", 2.0), bench("cpp", 1.0), bench("python-batched", 2.2), bench("cpp-batched", 1.0),
               bench("python", 8.0, width=4), bench("cpp", 8.0, width=4)]
    changes = {(change.impl, change.reference, change.workload): change
               for change in gate_compare.ratio_changes(saved_result(baseline), saved_result(current))}
    assert set(changes) == {("python", "cpp", ""), ("python-batched", "cpp-batched", ""), ("cpp-batched", "cpp", ""),
                            ("python", "cpp", "w4-b64")}
    assert changes["python-batched", "cpp-batched", ""].loser == "python-batched"
    assert str(changes["python", "cpp", "w4-b64"]) == ("train_step on cpu, w4-b64: python/cpp ratio 2.000 → "
                                                       "1.000, cpp 100.0% slower relative to python")

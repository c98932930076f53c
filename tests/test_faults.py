"""Faults (docs/faults.md#faults-and-bad-input): a worker that dies or hangs fails only the case it was
running, with the signal or the timeout in the message; the next case gets a fresh worker; the
results of the cases that ran are saved even when others failed or the run was interrupted; bad
option values are usage errors.

Faults are made on purpose with the testing worker's knob (tests/knobs_worker.py): the "fault" request, and, for
whole suite runs in a child pytest loaded with the testing plugin (-p tests.knobs),
PHASEBENCH_TEST_FAULT=[IMPL/]PHASE:KIND[,...] (KIND: segfault, abort, kill or hang).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import time
import types
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from phasebench import registry
from phasebench.plugin import guards, session
from phasebench.worker import protocol
from phasebench.worker.client import ROOT, WorkerDied, WorkerError, WorkerPool
from tests.knobs_worker import Fault

KNOBS = {"module": "tests.knobs_worker"}  # a worker that answers the fault request

ROUND_TIMEOUT_S = 6  # the faulty run's --round-timeout: what a hung case costs it


def run_suite(*options: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """This suite in a child pytest, as a user running it with these options sees it."""
    with child_suite(*options, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        stdout, stderr = child.communicate(timeout=timeout)
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def child_suite(*options: str, env: dict | None = None, **popen):
    """A child pytest of this suite in a process group of its own, killed on the way out with any
    worker it left behind."""
    return child_process([sys.executable, "-u", "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.knobs", *options],
                         env, **popen)


@contextlib.contextmanager
def child_process(command: list[str], env: dict | None = None, **popen):
    """`command` in a process group of its own, killed on the way out with anything it left behind."""
    # SIGINT back to its default: a run started in the background by a non-interactive shell (as CI may
    # be) inherits it ignored, and a child that ignores Ctrl-C cannot show what Ctrl-C does.
    from tests import beside

    child = subprocess.Popen(command, cwd=ROOT, env=os.environ | (env or {}), start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **popen)
    beside.GROUPS.add(child.pid)  # killed at the session's end, where the lane still runs it
    try:
        yield child
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        beside.GROUPS.discard(child.pid)


def _data_options(config) -> list[str]:
    """The child runs on the data this run uses. (Written OPTION=VALUE: pytest reads a separate value of
    an option that conftest.py adds as a path, and would look for the suite there.)"""
    return [f"--dataset={config.getoption('dataset')}", f"--mnist-root={config.getoption('mnist_root')}"]


def _saved(path: Path) -> dict[str, int]:
    """Benchmark name -> rounds, from a saved result (--benchmark-json or --benchmark-autosave)."""
    return {bench["name"]: bench["stats"]["rounds"] for bench in json.loads(path.read_text())["benchmarks"]}


def _autosaved(storage: Path) -> Path:
    (saved,) = storage.rglob("*.json")
    return saved


# -- one worker at a time ------------------------------------------------------------------------


@pytest.mark.parametrize("kind, signal_name", [("segfault", "SIGSEGV"), ("abort", "SIGABRT"), ("kill", "SIGKILL")])
def test_a_dead_worker_is_reported_with_its_signal(new_worker, kind, signal_name):
    worker = new_worker("cpp", "cpu")(**KNOBS)
    try:
        with pytest.raises(WorkerDied, match=f"cpp worker on cpu died with signal {signal_name} during 'fault'"):
            worker.request(Fault(kind))
    finally:
        worker.stop()


def test_a_hung_worker_is_killed_at_the_timeout(new_worker):
    worker = new_worker("cpp", "cpu")(**KNOBS)
    try:
        with pytest.raises(WorkerDied, match=r"did not answer within 0\.5 s \(--round-timeout\) and was killed"):
            worker.request(Fault("hang"), timeout=0.5)
        assert not worker.alive()
    finally:
        worker.stop()


def test_an_interrupted_request_kills_its_worker(new_worker):
    """Ctrl-C while waiting for a reply (here from a timer, to this process only): the reply would come
    out of turn, so the worker is killed rather than left running or asked again."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    worker = new_worker("cpp", "cpu")(**KNOBS)
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            worker.request(Fault("hang"), timeout=60)
        assert not worker.alive()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        worker.stop()


def test_the_pool_replaces_a_dead_worker(new_worker):
    spawn = new_worker("cpp", "cpu")
    pool = WorkerPool(lambda impl, device, workload, library: spawn(**KNOBS))
    try:
        first = pool.get("cpp", "cpu")
        with pytest.raises(WorkerDied):
            first.request(Fault("kill"))
        second = pool.get("cpp", "cpu")
        assert second.pid != first.pid and second.alive()
        second.run_phase("forward")
    finally:
        pool.stop_all()


@protocol.request_type("no_such_command", protocol.Ok)
class NoSuchCommand(protocol.Request):
    pass


@protocol.request_type("train", protocol.Run)
class TrainWithoutEpochs(protocol.Request):
    synchronize: bool


@protocol.request_type("phase", protocol.PhaseReply)
class PhaseWithRounds(protocol.Request):
    name: str
    rounds: int


def test_requests_the_worker_does_not_know_are_error_replies(new_worker):
    """An unknown command, a missing, unknown or mistyped field: each a WorkerError saying so, and the worker goes on."""
    worker = new_worker("cpp", "cpu")()
    try:
        for request, says in ((NoSuchCommand(), "unknown command 'no_such_command' (this worker knows: "),
                              (TrainWithoutEpochs(True), "'train': missing field 'epochs'"),
                              (PhaseWithRounds("noop", 2), "'phase': unknown field(s) rounds (it takes: name)"),
                              (protocol.Phase(5), "'phase': field 'name' must be str, got int 5"),
                              (protocol.Train(1.5, True), "'train': field 'epochs' must be int, got float 1.5")):
            with pytest.raises(WorkerError) as refused:
                worker.request(request)
            assert says in str(refused.value)
        assert worker.run_phase("noop").ns >= 0
    finally:
        worker.stop()
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.decode_request("{", protocol.REQUESTS)


def test_the_pool_releases_a_worker_no_later_case_needs(new_worker):
    spawn = new_worker("cpp", "cpu")
    pool = WorkerPool(lambda impl, device, workload, library: spawn())
    try:
        first = pool.get("cpp", "cpu")
        pool.release("cpp", "cpu")
        assert not first.alive() and first.process.returncode == 0 and not pool.workers
        pool.release("cpp", "cpu")  # nothing to stop: no error
        assert pool.get("cpp", "cpu").pid != first.pid
    finally:
        pool.stop_all()


USE_AFTER_FREE = "#include <cstdio>\nint main() { int* p = new int[4]; delete[] p; std::printf(\"%d\", p[1]); }\n"


def test_a_sanitizer_report_is_reported_in_full(new_worker, tmp_path):
    """A worker whose log holds a sanitizer report fails with the whole report, whose cause is at its top, far
    more than the last lines of the log. The report is a real one, which a program built with AddressSanitizer
    writes into the worker's log (where a sanitized worker's own would go) before the worker dies."""
    program = tmp_path / "use-after-free"
    built = subprocess.run([os.environ.get("CXX", "g++"), "-fsanitize=address", "-g", "-x", "c++", "-",
                            "-o", str(program)], input=USE_AFTER_FREE, capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"no AddressSanitizer build here: {built.stderr.strip()}")
    worker = new_worker("cpp", "cpu")(**KNOBS)
    try:
        with open(worker.log.name, "a") as log:
            print("output before the report", file=log, flush=True)
            subprocess.run([str(program)], stdout=log, stderr=log, env=os.environ | {"ASAN_OPTIONS": ""})
        report = Path(worker.log.name).read_text().split("output before the report\n", 1)[1].strip()
        lines = report.splitlines()
        assert len(lines) > 30 and "ERROR: AddressSanitizer: heap-use-after-free" in lines[1], report
        assert lines[-1].endswith("==ABORTING")
        with pytest.raises(WorkerDied) as died:
            worker.request(Fault("abort"))
        message = str(died.value)
        assert message.startswith("cpp worker on cpu died with signal SIGABRT during 'fault'; its last output:\n")
        assert message.endswith("\n" + "\n".join(lines[1:])), message  # from its ERROR line to its last
    finally:
        worker.stop()


# -- whole suite runs ------------------------------------------------------------------------------

FAULTY_CASES = ["forward", "loss", "backward", "param_update"]  # run in this order


def faulty_suite_run(item, folder, library):
    """One child suite run of four phases of the cpp worker, on cpu and on cuda (hidden from it), where loss
    segfaults and backward hangs: (outcomes by case, the run, its folder). The tests below share it (once=True), a
    piece of work for the lane beside the tests (tests/beside.py): mostly waiting, on the hang's round timeout."""
    def run() -> tuple:
        run = run_suite(
            "bench/test_phases.py", "-k", " or ".join(FAULTY_CASES), "--impl", "cpp", "--device", "cpu,cuda",
            "--rounds", "2", "--warmup-rounds", "0", "--round-timeout", str(ROUND_TIMEOUT_S),
            "--benchmark-json", str(folder / "results.json"), "--benchmark-autosave",
            "--benchmark-storage", f"file://{folder / 'storage'}", "--junitxml", str(folder / "junit.xml"),
            *_data_options(item.config),
            env={"PHASEBENCH_TEST_FAULT": "cpp/loss:segfault,cpp/backward:hang", "CUDA_VISIBLE_DEVICES": ""})
        return junit_outcomes(folder / "junit.xml"), run, folder

    return run


faulty = pytest.mark.beside.with_args(faulty_suite_run, once=True, cost_s=12)


@pytest.fixture
def faulty_run(started_beside):
    return started_beside.result(timeout=600)


def junit_outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """Test name -> (passed, failure, error or skipped; its message), from a child run's --junitxml."""
    outcomes = {}
    for case in ElementTree.parse(path).iter("testcase"):
        verdict = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        outcomes[case.get("name")] = ("passed", "") if verdict is None else (verdict.tag, verdict.get("message"))
    return outcomes


@faulty
def test_a_crashing_case_fails_with_the_signal(faulty_run):
    outcomes, run, _ = faulty_run
    verdict, message = outcomes["test_phase[loss-cpp-cpu]"]
    assert verdict == "failure" and "cpp worker on cpu died with signal SIGSEGV during 'loss'" in message, run.stdout


@faulty
def test_a_hanging_case_fails_at_the_round_timeout(faulty_run):
    outcomes, run, _ = faulty_run
    verdict, message = outcomes["test_phase[backward-cpp-cpu]"]
    expected = f"did not answer within {ROUND_TIMEOUT_S} s (--round-timeout) and was killed during 'backward'"
    assert verdict == "failure" and expected in message, run.stdout


@faulty
def test_the_other_cases_pass_on_fresh_workers(faulty_run):
    outcomes, run, _ = faulty_run
    for phase in ("forward", "param_update"):  # param_update runs after two workers died
        assert outcomes[f"test_phase[{phase}-cpp-cpu]"] == ("passed", ""), run.stdout
    assert run.returncode == pytest.ExitCode.TESTS_FAILED


@faulty
def test_the_results_of_the_cases_that_ran_are_saved(faulty_run):
    _, run, out = faulty_run
    expected = {"test_phase[forward-cpp-cpu]": 2, "test_phase[param_update-cpp-cpu]": 2}
    assert _saved(out / "results.json") == expected, run.stdout
    assert _saved(_autosaved(out / "storage")) == expected


@faulty
def test_cuda_without_a_gpu_skips_with_the_reason(faulty_run):
    outcomes, run, _ = faulty_run
    for phase in FAULTY_CASES:
        outcome, reason = outcomes[f"test_phase[{phase}-cpp-cuda]"]
        # Why depends on the machine: a CPU build of torch, no GPU that NVML lists, or torch that cannot use it.
        assert outcome == "skipped" and reason.startswith("no usable GPU: "), run.stdout


def test_ctrl_c_keeps_the_results_of_the_finished_cases(pytestconfig, cpp_library, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while a case is running:
    the run stops at once, the finished cases are saved, the cut-short one is not, no worker is left."""
    child, text = _interrupted_run(pytestconfig, tmp_path, "cpp", lambda child: os.killpg(child.pid, signal.SIGINT))
    assert child.returncode == pytest.ExitCode.INTERRUPTED, text
    assert "KeyboardInterrupt" in text
    expected = {"test_phase[forward-cpp-cpu]": 2}
    assert _saved(tmp_path / "results.json") == expected, text
    assert _saved(_autosaved(tmp_path / "storage")) == expected


def test_sigterm_keeps_the_results_of_the_finished_cases(pytestconfig, cpp_library, tmp_path):
    """SIGTERM to pytest alone (as `kill`, `timeout` and a cancelled CI job send it) while a case is running:
    as with Ctrl-C, the finished cases are saved and the cut-short one is not; pytest stops its workers itself,
    the idle python one too, and exits non-zero, within the 10 s a cancelled GitHub job leaves. A second
    SIGTERM, sent while pytest is most likely stopping the python worker, changes nothing."""

    def terminate_twice(child):
        os.kill(child.pid, signal.SIGTERM)
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGTERM)  # a zombie until communicate() reaps it: never ProcessLookupError

    child, text = _interrupted_run(pytestconfig, tmp_path, "python,cpp", terminate_twice, within=10)
    assert child.returncode == pytest.ExitCode.INTERRUPTED, text
    assert "KeyboardInterrupt: SIGTERM" in text
    expected = {"test_phase[forward-python-cpu]": 2, "test_phase[forward-cpp-cpu]": 2,
                "test_phase[loss-python-cpu]": 2}
    assert _saved(tmp_path / "results.json") == expected, text
    assert _saved(_autosaved(tmp_path / "storage")) == expected


def test_a_cancelled_ci_job_keeps_the_results_of_the_finished_cases(pytestconfig, cpp_library, tmp_path):
    """A cancelled GitHub job signals the step's shell alone: SIGINT, SIGTERM about 7.5 s later, and about
    2.5 s after that it kills the whole process tree. .ci/bench-pr, which the step runs with exec, passes the
    signal on to its pytest, which saves the finished cases of base and stops; head never runs. Here SIGTERM
    follows sooner, while pytest is still saving, where it must spoil nothing."""
    trees = tmp_path / "base", tmp_path / "head"
    for tree in trees:  # this checkout, run by this interpreter, on the suite's data, with its C++ build
        tree.mkdir()
        # phasebench too: where the venv's editable install is another checkout's (a clone with a borrowed venv),
        # the child would import that one and build that checkout's library from cold (238 s here).
        for entry in ("bench", "cpp", "phasebench", "tests", "conftest.py", "pytest.ini", "requirements.txt"):
            (tree / entry).symlink_to(ROOT / entry)
        (tree / "data").symlink_to(Path(pytestconfig.getoption("mnist_root")).resolve())
        # Not a link to this venv: torch would be found under another path, and the library built again.
        python = tree / ".venv" / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        python.chmod(0o755)
    out = tmp_path / "out"
    command = ["bash", str(ROOT / ".ci" / "bench-pr"), *map(str, trees), str(out), "bench/test_phases.py", "-v",
               "-p", "no:cacheprovider", "-p", "tests.knobs", "-k", "forward or loss", "--impl", "cpp", "--device", "cpu",
               "--rounds", "2", "--warmup-rounds", "0", _data_options(pytestconfig)[0]]
    env = {"PHASEBENCH_NO_INSTALL": "1", "PHASEBENCH_TEST_FAULT": "cpp/loss:hang", "PYTHONUNBUFFERED": "1"}
    with child_process(command, env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as child:
        output = _read_until(child, b"test_phase[loss-cpp-cpu]", timeout=300)
        time.sleep(0.5)  # most likely the loss request is in flight by now, and its worker hangs
        os.kill(child.pid, signal.SIGINT)
        cancelled = time.monotonic()
        time.sleep(0.5)
        os.kill(child.pid, signal.SIGTERM)
        output += child.communicate(timeout=60)[0]
        took = time.monotonic() - cancelled
        with pytest.raises(ProcessLookupError):  # nothing of the run's process group is left
            os.killpg(child.pid, 0)
    text = output.decode(errors="replace")
    assert child.returncode == 130 and took < 10, f"exit status {child.returncode} after {took:.1f} s:\n{text}"
    assert "KeyboardInterrupt: SIGTERM" in text
    (saved,) = (out / "storage").rglob("*.json")  # base's, and no head
    assert saved.name == "0001_first-base-1.json"
    assert _saved(saved) == {"test_phase[forward-cpp-cpu]": 2}, text


def _interrupted_run(pytestconfig, tmp_path, impls: str, interrupt, within: float = 60):
    """A child run of forward and loss on cpu (2 rounds, saved in tmp_path), whose cpp loss hangs, interrupted
    by interrupt(child) once that case is running; checked to end within `within` seconds and to leave nothing
    of its process group. Returns the child and its output."""
    with child_suite("bench/test_phases.py", "-v", "-k", "forward or loss", "--impl", impls, "--device", "cpu",
                     "--rounds", "2", "--warmup-rounds", "0", "--benchmark-json", str(tmp_path / "results.json"),
                     "--benchmark-autosave", "--benchmark-storage", f"file://{tmp_path / 'storage'}",
                     *_data_options(pytestconfig), env={"PHASEBENCH_TEST_FAULT": "cpp/loss:hang"},
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as child:
        output = _read_until(child, b"test_phase[loss-cpp-cpu]", timeout=120)
        time.sleep(0.5)  # most likely the loss request is in flight by now, and its worker hangs
        interrupt(child)
        interrupted = time.monotonic()
        output += child.communicate(timeout=60)[0]
        took = time.monotonic() - interrupted
        with pytest.raises(ProcessLookupError):  # nothing of the run's process group is left
            os.killpg(child.pid, 0)
    text = output.decode(errors="replace")
    assert took < within, f"the run took {took:.1f} s to end:\n{text}"
    return child, text


def _read_until(child: subprocess.Popen, marker: bytes, timeout: float) -> bytes:
    """The child's output until `marker` appears (pytest -v writes a test's name when it starts)."""
    output, deadline = b"", time.monotonic() + timeout
    while marker not in output:
        ready, _, _ = select.select([child.stdout], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(child.stdout.fileno(), 1 << 16) if ready else b""
        if not chunk:
            pytest.fail(f"the child run never reached {marker.decode()}:\n{output.decode(errors='replace')}")
        output += chunk
    return output


# -- option values ---------------------------------------------------------------------------------


@pytest.mark.parametrize("option, value, valid", [
    ("--impl", "rust", ", ".join(registry.NAMES)),
    ("--device", "tpu", "cpu, cuda"),
    ("--dataset", "imagenet", "auto, mnist, fashion-mnist, synthetic"),
])
def test_an_unknown_option_value_is_a_usage_error(option, value, valid):
    run = run_suite(option, value)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert f"{option} '{value}': valid values are {valid}" in run.stderr


@pytest.mark.parametrize("option, value", [("--batch-size", "64,x"), ("--jobs", "2,0"), ("--models", "four")])
def test_a_bad_count_is_a_usage_error(option, value):
    run = run_suite(option, value)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert f"{option} '{value}': expected positive whole numbers, comma-separated" in run.stderr


def test_a_separate_path_outside_the_repository_stops_with_the_equals_form(tmp_path):
    """pytest picks its root directory before any plugin declares --mnist-root, and takes a separate existing path
    for a test path: outside the repository it would run without pytest.ini (docs/options.md#options)."""
    separate = run_suite("--collect-only", "-q", "--mnist-root", str(tmp_path))
    assert separate.returncode == pytest.ExitCode.USAGE_ERROR, separate.stdout + separate.stderr
    [line] = [line for line in separate.stderr.splitlines() if line.startswith("ERROR:")]
    assert line.endswith(f"write --mnist-root={tmp_path}") and f"--mnist-root {tmp_path}: pytest took" in line
    for works in ([f"--mnist-root={tmp_path}"], ["--mnist-root", str(ROOT / "data")]):  # the = form; inside the repository
        run = run_suite("--collect-only", "-q", *works)
        assert run.returncode == pytest.ExitCode.OK, run.stdout + run.stderr
        assert "bench/test_phases.py::test_phase[forward-cpp-cpu]" in run.stdout  # pytest.ini's testpaths


def test_the_plugin_is_installed_under_its_module_name():
    """requirements.txt installs this checkout (-e .): pytest loads phasebench/plugin/__init__.py from its pytest11 entry point,
    before it parses the command line, wherever it is started (docs/options.md#options)."""
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group="pytest11") if ep.value == "phasebench.plugin"]
    if not found:
        pytest.skip("phasebench is not installed in this environment: pip install -r requirements.txt")
    assert [ep.name for ep in found] == ["phasebench.plugin"], "conftest.py's pytest_plugins must find it registered"
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                          str(ROOT / "tests" / "test_registry.py"), "--impl", "all"],
                         cwd="/", capture_output=True, text=True, timeout=300)
    assert run.returncode == pytest.ExitCode.OK, run.stdout + run.stderr


# -- what cannot run, and what the suite cannot honour -------------------------------------------------------------


@pytest.mark.parametrize("options, env, error", [
    (["--device", "cuda"], {"CUDA_VISIBLE_DEVICES": ""},
     "ERROR: --device cuda: no usable GPU: "),
    (["--impl", "cpp"], {"CXX": "no-such-compiler"},
     "ERROR: --impl cpp: no C++ toolchain: 'no-such-compiler' not found on PATH (install g++ and make)"),
], ids=["cuda-without-gpu", "cpp-without-compiler"])
def test_asking_only_for_what_cannot_run_is_a_usage_error(options, env, error):
    """A GPU runner that lost its GPU must not pass green with every case skipped (docs/options.md#options)."""
    run = run_suite("--benchmark-only", *options, env=env)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].startswith(error), run.stderr  # why no GPU depends on the machine


def test_a_pytest_benchmark_option_it_cannot_honour_is_refused():
    run = run_suite("--benchmark-only", "--benchmark-min-rounds=5")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert [line for line in run.stderr.splitlines() if line.startswith("ERROR:")] == [
        "ERROR: --benchmark-min-rounds is not supported: phasebench times each phase inside its worker process for "
        "a fixed number of rounds: use --rounds N"], run.stderr


@pytest.mark.parametrize("option", sorted(guards.REFUSED_BENCHMARK_OPTIONS))
def test_every_refused_option_is_found_wherever_it_is_given(option, monkeypatch):
    def config(args=(), addopts=()):
        return types.SimpleNamespace(invocation_params=types.SimpleNamespace(args=tuple(args)),
                                     getini=lambda name: list(addopts))

    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    assert guards.refused_option(config(["--rounds", "5"])) is None
    for given in (config([f"{option}=1"]), config([option, "1"]), config(addopts=[option])):
        assert guards.refused_option(given).startswith(f"{option} is not supported: ")
    assert guards.refused_option(config(["--", option])) is None  # past --: not an option
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{option}=1")
    assert guards.refused_option(config()).startswith(f"{option} is not supported: ")


def test_run_from_another_directory_creates_nothing_there(pytestconfig, tmp_path):
    """The default data/ and .benchmarks/ are the repository's, wherever pytest is started (docs/options.md#options)."""
    data = [] if pytestconfig.getoption("mnist_root") == str(session.DEFAULT_DATA) else _data_options(pytestconfig)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--device=cpu",
                          str(ROOT / "tests" / "test_registry.py"), "-k", "every_implementation", *data],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == pytest.ExitCode.OK, run.stdout + run.stderr
    assert list(tmp_path.iterdir()) == []
    if "--benchmark-storage" not in guards.given_options(pytestconfig):
        assert pytestconfig.option.benchmark_storage == session.DEFAULT_STORAGE == f"file://{ROOT / '.benchmarks'}"


def test_a_replacement_that_fails_to_start_leaves_nothing_closed_twice():
    """A dead worker's replacement that dies during 'start' (a loaded machine past --round-timeout) fails its own
    case; the pool's teardown must not close the dead one a second time (its log is gone: FileNotFoundError)."""
    closes = []

    class DeadWorker:
        def alive(self):
            return False

        def close(self):
            closes.append(self)

        def stop(self):
            self.close()

    def make(impl, device, workload, library):
        if closes or made:
            raise WorkerDied("cpp worker on cpu did not answer within 6 s (--round-timeout) and was killed during 'start'")
        made.append(DeadWorker())
        return made[-1]

    made = []
    pool = WorkerPool(make)
    pool.get("cpp", "cpu")  # a worker that has died since
    with pytest.raises(WorkerDied):
        pool.get("cpp", "cpu")  # closes the dead one; its replacement fails to start
    pool.stop_all()
    assert closes == made


def test_pytest_itself_does_not_import_torchvision():
    """Its import costs about as much as torch's: only a process that reads data (a Python worker) pays it; the
    version in the header and machine_info is still torchvision's own."""
    import subprocess
    import sys

    code = ("import sys; from phasebench import plugin, report; from phasebench.train import trainer; "
            "from phasebench.plugin import machine; print(machine.torchvision_version()); "
            "print('torchvision' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    import torchvision

    assert out == [torchvision.__version__, "False"]

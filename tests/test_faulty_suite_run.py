"""A faulty case in a whole suite run (docs/faults.md#faults-and-bad-input) fails alone: a child suite run of six
phases of the cpp worker, where loss segfaults and backward hangs, fails those two cases with the signal and the
timeout in their messages, passes the others on fresh workers, which the cases that take them record and print;
where copy_to_device fails a check after its timing and progress_print its teardown, those two are left out of the
saved results and named in the run's summary; the results of the cases that passed are saved, and cuda skips
without a GPU with the reason.

The faults are made with the testing plugin's PHASEBENCH_TEST_FAULT=[IMPL/]PHASE:KIND[,...] (tests/knobs.py; KIND:
segfault, abort, kill or hang), the failed checks with its PHASEBENCH_TEST_FAIL_CHECK=[IMPL/]PHASE:WHEN."""

from __future__ import annotations

import json
import re

import pytest

from tests.child_runs import _autosaved, _data_options, _saved, junit_outcomes, run_suite

# The module's tests share one child run: under pytest-xdist they run in one process, which makes it once.
pytestmark = pytest.mark.xdist_group("faulty_suite_run")

ROUND_TIMEOUT_S = 6  # the faulty run's --round-timeout: what a hung case costs it
FAULTY_CASES = ["forward", "loss", "backward", "param_update"]  # run in this order
# Cases that fail after their timing: copy_to_device runs before forward, progress_print after param_update.
FAILED_CHECKS = {"copy_to_device": "call", "progress_print": "teardown"}


@pytest.fixture(scope="module")
def faulty_run(pytestconfig, cpp_library, tmp_path_factory) -> tuple:
    """The child suite run, on cpu and on cuda (hidden from it): (outcomes by case, the run, its folder). Mostly
    waiting, on the hang's round timeout."""
    folder = tmp_path_factory.mktemp("faulty-run")
    run = run_suite(
        "bench/test_phases.py", "-k", " or ".join([*FAULTY_CASES, *FAILED_CHECKS]), "--impl", "cpp", "--unpaired",
        "--device", "cpu,cuda",
        "--rounds", "2", "--warmup-rounds", "0", "--round-timeout", str(ROUND_TIMEOUT_S),
        "--benchmark-json", str(folder / "results.json"), "--benchmark-autosave",
        "--benchmark-storage", f"file://{folder / 'storage'}", "--junitxml", str(folder / "junit.xml"),
        *_data_options(pytestconfig),
        env={"PHASEBENCH_TEST_FAULT": "cpp/loss:segfault,cpp/backward:hang", "CUDA_VISIBLE_DEVICES": "",
             "PHASEBENCH_TEST_FAIL_CHECK": ",".join(f"cpp/{phase}:{when}" for phase, when in FAILED_CHECKS.items())})
    return junit_outcomes(folder / "junit.xml"), run, folder


def test_a_crashing_case_fails_with_the_signal(faulty_run):
    outcomes, run, _ = faulty_run
    verdict, message = outcomes["test_phase[loss-cpp-cpu]"]
    assert verdict == "failure" and "cpp worker on cpu died with signal SIGSEGV during 'loss'" in message, run.stdout


def test_a_hanging_case_fails_at_the_round_timeout(faulty_run):
    outcomes, run, _ = faulty_run
    verdict, message = outcomes["test_phase[backward-cpp-cpu]"]
    expected = f"did not answer within {ROUND_TIMEOUT_S} s (--round-timeout) and was killed during 'backward'"
    assert verdict == "failure" and expected in message, run.stdout


def test_the_other_cases_pass_on_fresh_workers(faulty_run):
    outcomes, run, _ = faulty_run
    for phase in ("forward", "param_update"):  # param_update runs after two workers died
        assert outcomes[f"test_phase[{phase}-cpp-cpu]"] == ("passed", ""), run.stdout
    assert run.returncode == pytest.ExitCode.TESTS_FAILED


def test_the_results_of_the_cases_that_passed_are_saved(faulty_run):
    _, run, out = faulty_run
    expected = {"test_phase[forward-cpp-cpu]": 2, "test_phase[param_update-cpp-cpu]": 2}
    assert _saved(out / "results.json") == expected, run.stdout
    assert _saved(_autosaved(out / "storage")) == expected


def test_a_case_that_fails_after_its_timing_is_no_result_and_the_summary_names_it(faulty_run):
    outcomes, run, _ = faulty_run  # its absence from the saved results: the test above
    assert outcomes["test_phase[copy_to_device-cpp-cpu]"][0] == "failure", run.stdout
    verdict, message = outcomes["test_phase[progress_print-cpp-cpu]"]
    assert verdict == "error" and "teardown" in message, run.stdout
    summary = next((line for line in run.stdout.splitlines() if "failed or cut short" in line), "")
    assert summary.startswith("phasebench: 2 case(s) failed or cut short, left out of the answer"), run.stdout
    assert "test_phase[copy_to_device-cpp-cpu]" in summary and "test_phase[progress_print-cpp-cpu]" in summary


def test_a_case_on_a_replaced_worker_records_and_prints_it(faulty_run):
    _, run, out = faulty_run
    benchmarks = json.loads((out / "results.json").read_text())["benchmarks"]
    saved = {bench["name"]: bench["extra_info"] for bench in benchmarks}
    assert saved["test_phase[forward-cpp-cpu]"].get("worker_replaced") is None
    # backward hung on the worker that replaced loss's, and was killed at the timeout
    replaced = saved["test_phase[param_update-cpp-cpu]"]["worker_replaced"]
    assert re.fullmatch(r"cpp worker on cpu \(pid \d+\) had died with signal SIGKILL", replaced or ""), replaced
    printed = [line for line in run.stdout.splitlines() if " runs on a fresh cpp worker on cpu " in line]
    assert [line.split(" runs on")[0] for line in printed] == [
        "phasebench: test_phase[backward-cpp-cpu]", "phasebench: test_phase[param_update-cpp-cpu]"], run.stdout
    assert printed[0].endswith("had died with signal SIGSEGV") and printed[1].endswith(replaced), run.stdout


def test_cuda_without_a_gpu_skips_with_the_reason(faulty_run):
    outcomes, run, _ = faulty_run
    for phase in FAULTY_CASES:
        outcome, reason = outcomes[f"test_phase[{phase}-cpp-cuda]"]
        # Why depends on the machine: a CPU build of torch, no GPU that NVML lists, or torch that cannot use it.
        assert outcome == "skipped" and reason.startswith("no usable GPU: "), run.stdout

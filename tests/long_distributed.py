"""Data parallel end to end (docs/distributed.md): two torchrun agents training one world, and a suite run whose rank
is killed mid-phase. A long check: it runs in CI's recipe job (.github/workflows/recipes.yml), not in the test
command, where tests/test_distributed.py checks the worlds in one process, a killed rank failing its peers within the
timeout and a hanging one killed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.test_distributed import STEPS, TIMEOUT_S


def test_torchrun_two_agents(pytestconfig, cpp_library, tmp_path):
    """Two torchrun agents (--nnodes 2, c10d rendezvous, --max-restarts 0), in two network namespaces where the machine
    allows, each starting one cpp-allreduce rank: under the agent's store rank 0 is a store client too, and the C++
    library, which takes the group from c10d's registry, trains as in the suite's worlds: both ranks end with the same
    parameters."""
    from phasebench.worker import torchrun

    options = pytestconfig.phasebench.worker_options("cpu", str(tmp_path / "progress.log"), impl="cpp-allreduce")
    result = torchrun.launch("cpp-allreduce", options | {"threads": 1}, STEPS, tmp_path / "ranks", cpp_library,
                             timeout_s=180, dist_timeout_s=TIMEOUT_S)
    ranks = result["ranks"]
    assert [rank["rank"] for rank in ranks] == [0, 1], result
    assert ranks[0]["params_sha256"] == ranks[1]["params_sha256"], "the ranks ended with different parameters"
    assert all(rank["agent_store"] == "True" for rank in ranks), ranks  # every rank a client of the agent's store
    assert all(len(rank["step_ns"]) == STEPS for rank in ranks)
    assert result["namespaces"] == (torchrun.namespaces_usable() is None), result["network"]
    # Each agent kept its log folder beside the run's files, none in /tmp.
    assert all(any(Path(folder).iterdir()) for folder in result["agent_logs"]), result["agent_logs"]


def test_a_killed_rank_fails_its_own_case_and_nothing_else_is_lost(pytestconfig, tmp_path):
    """A suite run of world size 2 where rank 1 is killed in grad_sync: that case fails at once with a message that
    names rank 1 first, the next case (param_update) passes on a fresh world, and its results are saved (json and
    autosave). One child pytest, because the fault knob acts in the workers of a real suite run, which no in-process
    world can show; python-allreduce alone, two worlds of 2 (about 15 s, most of it the four workers' start)."""
    from tests.child_runs import _autosaved, _data_options, _saved, junit_outcomes, run_suite

    out = tmp_path
    started = time.monotonic()
    run = run_suite(
        "bench/test_distributed.py", "--world-size", "2", "--impl", "python-allreduce", "--device", "cpu",
        "-k", "test_dist_phase and (grad_sync or param_update)", "--rounds", "2", "--warmup-rounds", "0",
        "--benchmark-json", str(out / "results.json"), "--benchmark-autosave",
        "--benchmark-storage", f"file://{out / 'storage'}", "--junitxml", str(out / "junit.xml"),
        *_data_options(pytestconfig), env={"PHASEBENCH_TEST_FAULT": "python-allreduce@1/grad_sync:kill"})
    elapsed = time.monotonic() - started
    outcomes = junit_outcomes(out / "junit.xml")
    name = "test_dist_phase[{}-python-allreduce-cpu-world2]"
    verdict, message = outcomes[name.format("grad_sync")]
    died = "rank 1: python-allreduce worker on cpu died with signal SIGKILL during 'grad_sync'"
    assert verdict == "failure" and died in message, run.stdout[-3000:]
    assert "rank 0: " not in message or message.index(died) < message.index("rank 0: "), message
    assert outcomes[name.format("param_update")] == ("passed", ""), run.stdout[-3000:]
    assert run.returncode == pytest.ExitCode.TESTS_FAILED
    expected = {name.format("param_update"): 2}
    assert _saved(out / "results.json") == expected and _saved(_autosaved(out / "storage")) == expected
    assert elapsed < 120, f"{elapsed:.0f} s: a killed rank's peers fail at once (Gloo sees the connection closed)"

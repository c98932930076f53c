""".ci/bisect-count without Valgrind: its decision step alone (exit status 0 within the threshold, 1 beyond it, 125
where the commit cannot build or be counted), and a whole bisection on a scratch repository of nine commits with a
fake count (BISECT_COUNT_COMMAND prints the commit's count from a file, BISECT_COUNT_BUILD fails where the commit
says so): git bisect run names the planted commit, past a step under the threshold and a commit that cannot build.
A few seconds."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from phasebench.repository import ROOT
from tests.scratch_git import commit, git, new_repo

SCRIPT = ROOT / ".ci/bisect-count"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"

# (message, {path: content}), oldest first: the planted 3 % step is commit 6; commit 3 moves the count by 0.2 %
# (under a 1 % threshold); commit 4 cannot build.
COMMITS = [
    ("the suite", {"count": "1000000"}),
    ("docs", {"docs.md": "a"}),
    ("a change", {"other": "1"}),
    ("a 0.2 % step", {"count": "1002000"}),
    ("the build breaks", {"broken": "1"}),
    ("the build mended", {"broken": None}),
    ("the planted loop: 3 %", {"count": "1032000"}),
    ("docs again", {"docs.md": "b"}),
    ("another change", {"other": "2"}),
]


@pytest.fixture
def repo(tmp_path) -> tuple[Path, list[str]]:
    path = new_repo(tmp_path / "repo")
    return path, [commit(path, message, files) for message, files in COMMITS]


def environment(tmp_path: Path, repo: Path) -> dict:
    return {**os.environ, "BISECT_COUNT_REPO": str(repo), "BISECT_COUNT_WORK": str(tmp_path / "work"),
            "BISECT_COUNT_VENV": str(Path(sys.executable).parents[1]), "BISECT_COUNT_MNIST_ROOT": str(tmp_path),
            "BISECT_COUNT_COMMAND": "cat count", "BISECT_COUNT_BUILD": "test ! -e broken",
            "TMPDIR": str(tmp_path)}


def bisect(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(("good", "count", "threshold", "status"), [
    ("1000000", "1004000", "0.5", 0), ("1000000", "1006000", "0.5", 1), ("1000000", "994000", "0.5", 1),
    ("1000000", "1000000", "0.5", 0), ("1000000", "1005000", "0.5", 0)])
def test_the_decision_is_the_threshold_either_way(good, count, threshold, status):
    assert subprocess.run(["bash", str(SCRIPT), "__decide", good, count, threshold]).returncode == status


def test_a_step_exits_0_1_or_125(tmp_path, repo):
    path, shas = repo
    env = environment(tmp_path, path) | {"BISECT_COUNT_OUT": str(tmp_path)}

    def step(sha: str) -> int:
        git(path, "checkout", "-q", "--detach", sha)
        return subprocess.run(["bash", str(SCRIPT), "__step", "1000000", "1"], cwd=path, env=env,
                              capture_output=True, text=True).returncode

    assert [step(shas[n]) for n in (0, 3, 4, 6, 8)] == [0, 0, 125, 1, 1]
    counted = (tmp_path / "counts.tsv").read_text().splitlines()
    assert [line.split("\t")[1] for line in counted] == ["good", "good", "skipped", "bad", "bad"]
    assert counted[3].split("\t")[3] == "+3.200 %"
    # A count command that fails, or prints nothing countable, is a commit that cannot be counted.
    git(path, "checkout", "-q", "--detach", shas[0])
    for command in ("false", "echo"):
        done = subprocess.run(["bash", str(SCRIPT), "__step", "1000000", "1"], cwd=path,
                              env=env | {"BISECT_COUNT_COMMAND": command}, capture_output=True, text=True)
        assert done.returncode == 125, (command, done.stderr)


def test_git_bisect_run_names_the_planted_commit(tmp_path, repo):
    path, shas = repo
    done = bisect(environment(tmp_path, path), "python/forward", shas[0], shas[-1], "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"beyond 1 % from GOOD's: {shas[6]}" in done.stdout
    assert "the planted loop" in done.stdout
    # The checkout it was started from is untouched, no bisection is left open, the worktree is gone.
    assert git(path, "rev-parse", "HEAD") == shas[-1] and git(path, "status", "--porcelain") == ""
    assert not (path / ".git/BISECT_LOG").exists() and not (tmp_path / "work/tree").exists()
    assert len(git(path, "worktree", "list").splitlines()) == 1


def test_nothing_to_bisect_and_only_skipped_commits_say_so(tmp_path, repo):
    path, shas = repo
    env = environment(tmp_path, path)
    within = bisect(env, "python/forward", shas[0], shas[5], "1")  # 0.2 %: BAD within the threshold
    assert within.returncode == 1 and "nothing to bisect" in within.stdout
    # With a threshold of 0.1 %, the 0.2 % step of commit 3 is the first that moved.
    finer = bisect(env, "python/forward", shas[0], shas[5], "0.1")
    assert finer.returncode == 0 and f"{shas[3]}" in finer.stdout.splitlines()[-3]
    # Every commit between cannot build: no single first commit.
    broken = bisect(env | {"BISECT_COUNT_BUILD": f"test $(git rev-parse HEAD) = {shas[0]} -o "
                                                   f"$(git rev-parse HEAD) = {shas[8]}"},
                    "python/forward", shas[0], shas[8], "1")
    assert broken.returncode == 1 and "no single first commit" in broken.stderr


def test_usage_errors(tmp_path, repo):
    path, shas = repo
    env = environment(tmp_path, path)
    assert bisect(env, "forward", shas[0], shas[1]).returncode == 2  # no IMPL/
    assert bisect(env, "python/forward", "no-such", shas[1]).returncode == 2
    assert bisect(env, "python/forward", shas[1], shas[0]).returncode == 2  # GOOD after BAD
    assert bisect(env, "python/forward", shas[0], shas[1], "none").returncode == 2
    assert bisect(env | {"BISECT_COUNT_COMMAND": "false"}, "python/forward", shas[0], shas[1]).returncode == 2


def test_the_default_threshold_is_the_count_gates(tmp_path, repo):
    from phasebench.history import changes

    path, shas = repo
    done = bisect(environment(tmp_path, path), "python/data_loading", shas[0], shas[-1])
    name = "bench/test_phases.py::test_phase[data_loading-python-cpu]"
    threshold = changes.count_threshold_pct(name, changes.default_count_spreads(), [])
    assert threshold > 0.5  # the gate's measured spread for this case, not its minimum
    assert f"threshold {threshold:.4g} %" in done.stdout
    assert done.returncode == 0 and f"{shas[6]}" in done.stdout


def test_the_count_is_read_through_saved_result_by_its_whole_case(tmp_path):
    """The counted result is read by phasebench's SavedResult (migrated from its format), and the case is IMPL's
    PHASE on cpu, alone: not the first benchmark of that phase and implementation on another device, and no guess
    between two cpu workloads."""
    from phasebench.saved import SavedResult
    from tests.test_history import COUNTED, template

    result = template(COUNTED)
    cpu = next(bench for bench in result["benchmarks"] if bench["name"] == "test_phase[loss-python-cpu]")
    on_cuda = json.loads(json.dumps(cpu))
    on_cuda["name"] = on_cuda["fullname"] = "test_phase[loss-python-cuda]"
    on_cuda["extra_info"] |= {"device": "cuda", "instructions": [1, 2, 3]}
    result["benchmarks"].insert(0, on_cuda)  # first: a reader matching phase and implementation alone takes it
    path = tmp_path / "counted.json"
    path.write_text(json.dumps(result))
    env = {**os.environ, "BISECT_COUNT_VENV": str(Path(sys.executable).parents[1])}

    def read(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(SCRIPT), "__read", str(path), *args], capture_output=True, text=True,
                              env=env)

    expected = statistics.median(SavedResult.load(path).published()[("loss", "python", "cpu")].info.instructions)
    done = read("loss", "python")
    assert done.returncode == 0 and done.stdout.strip() == str(int(expected)), done.stderr
    wider = json.loads(json.dumps(cpu))
    wider["name"] = wider["fullname"] = "test_phase[loss-python-cpu-w4]"
    wider["extra_info"]["width"] = 4
    path.write_text(json.dumps(result | {"benchmarks": [*result["benchmarks"], wider]}))
    two = read("loss", "python")
    assert two.returncode == 1 and "2 cpu cases of python/loss" in two.stderr and "-w4]" in two.stderr, two.stderr
    assert read("forward", "python").returncode == 1


@pytest.mark.skipif(not SHELLCHECK.exists(), reason="shellcheck is not installed (requirements.txt pins it)")
def test_the_script_passes_shellcheck():
    done = subprocess.run([str(SHELLCHECK), str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout

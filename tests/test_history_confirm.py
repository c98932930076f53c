"""Change points confirmed by re-running their neighbouring commits: `python -m phasebench.history --unconfirmed`
lists those not yet confirmed (synthetic saved results), and .ci/history-confirm runs each neighbour of one again
through .ci/history-run (HISTORY_AGAIN=1, -k naming the cases) until it holds two runs, on a scratch repository with a
fake build and a fake pytest that honours -k as pytest does (a case is run where a term of the expression is part of
its name). Needs no Valgrind and no compiler. The scripts' run end to end, about 12 s of CPU, is a long check:
tests/long_history_confirm.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from phasebench.history import cli, points
from phasebench.history import series as series_mod
from phasebench.repository import ROOT
from tests.scratch_git import commit, new_repo
from tests.test_history import COUNTED, COUNTS, saved, scratch_repo, template, write

CONFIRM = ROOT / ".ci/history-confirm"
RUN = ROOT / ".ci/history-run"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"
STEP = {key: value * (1.1 if key == ("loss", "python") else 1.0) for key, value in COUNTS.items()}


def unconfirmed(results: Path, repo: Path, capsys) -> list[list[str]]:
    assert cli.main([str(results), "--repo", str(repo), "--unconfirmed"]) == 0
    return [line.split("\t") for line in capsys.readouterr().out.splitlines()]


def test_a_time_step_needs_three_runs_on_each_side(tmp_path, capsys):
    shas, _ = scratch_repo(tmp_path / "repo", 8)
    results, repo = tmp_path / "results", tmp_path / "repo"
    loss = {("loss", "python"): 1e-5}

    def run(name: str, n: int, scale: float):  # python's loss 50 % dearer from the fifth commit on
        write(results, name, saved(shas[n], {k: v * scale * (1.5 if n >= 4 else 1) for k, v in loss.items()}, "time"))

    for n in range(8):
        run(f"{n}.json", n, 1 + n % 2 / 100)
    # A second run of each neighbour, wholly apart: 1 chance in 6 under noise alone, so not yet confirmed.
    run("3b.json", 3, 1.01)
    run("4b.json", 4, 1.01)
    assert [row[:2] + row[5:] for row in unconfirmed(results, repo, capsys)] == [
        [shas[3], shas[4], "python", "loss", "+50.37", "2", "2", "3", "code"]]
    run("3c.json", 3, 1.02)
    run("4c.json", 4, 1.02)
    assert unconfirmed(results, repo, capsys) == []


def test_unconfirmed_lists_a_step_until_both_neighbours_ran_twice(tmp_path, capsys):
    shas, _ = scratch_repo(tmp_path / "repo", 3)
    results, repo = tmp_path / "results", tmp_path / "repo"
    for n, sha in enumerate(shas):  # a 10 % step in python's loss at the third commit, each commit run once
        write(results, f"{n}.json", saved(sha, STEP if n == 2 else COUNTS))
    assert unconfirmed(results, repo, capsys) == [
        [shas[1], shas[2], "instructions", "cpu", "-", "python", "loss", "+10.00", "1", "1", "2", "code"]]

    # A second run of each neighbour that overlaps the other's runs confirms nothing.
    write(results, "1-again.json", saved(shas[1], COUNTS))
    write(results, "2-again.json", saved(shas[2], COUNTS))
    assert unconfirmed(results, repo, capsys) == [
        [shas[1], shas[2], "instructions", "cpu", "-", "python", "loss", "+5.00", "2", "2", "2", "code"]]

    # Runs that lie beyond each other confirm it: it is listed no more, and the terminal says it without the note.
    write(results, "2-again.json", saved(shas[2], STEP))
    assert unconfirmed(results, repo, capsys) == []
    assert cli.main([str(results), "--repo", str(repo)]) == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if text.strip().startswith("loss python"))
    assert f"{shas[1][:7]}..{shas[2][:7]} +10.0 %" in line and "unconfirmed" not in line

    with pytest.raises(SystemExit) as refused:
        cli.main([str(results), "--repo", str(repo), "--unconfirmed", "--by", "torch"])
    assert refused.value.code == 2


# The fake pytest: a counted run of the tree it runs in, each case's count read from the tree (its file cost-PHASE-IMPL
# under cpp/, else cost), only the cases -k selects (a term of its `or` part of the case's name, as pytest matches).
FAKE_PYTEST = r'''
import json, os, subprocess, sys, time
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as calls:
    calls.write(" ".join(args) + "\n")
result = json.loads(Path(os.environ["FAKE_TEMPLATE"]).read_text())
result["commit_info"].update(id=subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                               check=True).stdout.strip(), dirty=False)
result["datetime"] = f"run-{time.time_ns()}"
terms = args[args.index("-k") + 1].split(" or ") if "-k" in args else None
kept = []
for bench in result["benchmarks"]:
    if terms is not None and not any(term.lower() in bench["name"].lower() for term in terms):
        continue
    info = bench["extra_info"]
    own = Path(f"cpp/cost-{info['phase']}-{info['implementation']}")
    value = float((own if own.exists() else Path("cpp/cost")).read_text()) * 1000
    info["instructions"] = [value] * 3
    bench["stats"].update(median=value * 1e-9, data=[value * 1e-9] * 3)
    kept.append(bench)
result["benchmarks"] = kept
out = next(arg.split("=", 1)[1] for arg in args if arg.startswith("--benchmark-json="))
Path(out).write_text(json.dumps(result))
'''

COMMITS = [
    ("the suite with its count mode", {"cpp/cost": "100", "phasebench/plugin.py": 'OPTION = "--count"\n'}),
    ("a code change that costs nothing", {"bench/test_x.py": "# x\n"}),
    ("a 10 % step in python's loss", {"cpp/cost-loss-python": "110"}),
    ("docs only", {"guide/a.md": "a\n"}),
]


@pytest.fixture
def setup(tmp_path):
    return scratch(tmp_path)


def scratch(tmp_path: Path) -> tuple[Path, list[str], dict]:
    """A scratch repository of COMMITS with a fake build and pytest, and the scripts' environment for it."""
    repo = new_repo(tmp_path / "repo")
    shas = [commit(repo, message, files) for message, files in COMMITS]
    (tmp_path / "template.json").write_text(json.dumps(template(COUNTED)))
    (tmp_path / "fake_pytest.py").write_text(FAKE_PYTEST)
    env = {**os.environ, "HISTORY_REPO": str(repo), "HISTORY_OUT": str(tmp_path / "history"),
           "HISTORY_WORK": str(tmp_path / "work"), "HISTORY_VENV": str(Path(sys.executable).parents[1]),
           "HISTORY_MNIST_ROOT": str(tmp_path / "data"), "HISTORY_BUILD": "true",
           "HISTORY_PYTEST": f"{sys.executable} {tmp_path / 'fake_pytest.py'}",
           "FAKE_TEMPLATE": str(tmp_path / "template.json"), "FAKE_CALLS": str(tmp_path / "calls")}
    for name in ("HISTORY_TIME", "HISTORY_AGAIN", "HISTORY_RETRY", "HISTORY_LIMIT", "HISTORY_TESTS"):
        env.pop(name, None)
    return tmp_path, shas, env


def script(path: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(path), *args], capture_output=True, text=True, env=env, timeout=120)


def runs_per_series(folder: Path, repo: Path) -> dict[tuple[str, str], list[int]]:
    """(phase, implementation): the runs at each commit of its series."""
    built, _ = series_mod.build(points.read([str(folder)]).points, series_mod.Order("commit", repo))
    return {(s.key.phase, s.key.implementation): [len(runs) for runs in s.runs] for s in built}


def test_history_confirm_usage_errors(setup):
    tmp_path, _, env = setup
    assert script(CONFIRM, env).returncode == 2  # no series yet
    assert script(CONFIRM, {**env, "HISTORY_VENV": str(tmp_path / "none")}).returncode == 2
    assert script(CONFIRM, env, "--help").returncode == 2


@pytest.mark.skipif(not SHELLCHECK.exists(), reason="shellcheck is not installed (requirements.txt pins it)")
def test_history_confirm_passes_shellcheck():
    done = subprocess.run([str(SHELLCHECK), str(CONFIRM)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout

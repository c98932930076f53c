""".ci/history-run on a scratch repository of nine commits, with a fake build and a fake pytest (HISTORY_BUILD,
HISTORY_PYTEST) that write a saved result whose counts come from a file of the commit: commits whose code is a tree
already run are not run again, a build that fails, a missing option and a failing run are recorded with their
reasons, the runs are appended to compact series that python -m phasebench.history reads, and a second run
resumes: it runs only what the first did not record. Needs no Valgrind and no compiler (a few seconds)."""

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

SCRIPT = ROOT / ".ci/history-run"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"

# The fake pytest: the result of a counted run of the tree it runs in, its (phase, implementation) counts read from
# the tree's cost file, its commit the tree's HEAD; unrecognized arguments where the tree says so, as pytest does.
FAKE_PYTEST = r'''
import json, os, subprocess, sys, time
from pathlib import Path
with open(os.environ["FAKE_CALLS"], "a") as calls:
    calls.write(" ".join(sys.argv[1:]) + "\n")
if Path("bench/no-option").exists():
    print("pytest: error: unrecognized arguments: --count instructions", file=sys.stderr)
    sys.exit(4)
result = json.loads(Path(os.environ["FAKE_TEMPLATE"]).read_text())
def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
# dirty as phasebench/provenance.py takes it: an untracked file (the venv's link, were it not excluded) counts.
result["commit_info"].update(id=git("rev-parse", "HEAD"), dirty=bool(git("status", "--porcelain",
                                                                         "--untracked-files=all")))
result["datetime"] = f"run-{time.time_ns()}"
cost = float(Path("cpp/cost").read_text())
for bench in result["benchmarks"]:
    value = cost * (1000 if bench["extra_info"]["implementation"] == "python" else 900)
    bench["extra_info"]["instructions"] = [value] * 3
    bench["stats"].update(median=value * 1e-9, data=[value * 1e-9] * 3)
out = next(arg.split("=", 1)[1] for arg in sys.argv[1:] if arg.startswith("--benchmark-json="))
if Path("bench/fail-one").exists():  # one case failed: pytest's exit status 1, the rest saved
    # phasebench's plugin marks a failed case has_error, and pytest-benchmark's pytest_benchmark_generate_json leaves
    # such a benchmark out of the file (tests/test_faulty_suite_run.py shows it in a real run)
    result["benchmarks"] = result["benchmarks"][1:]
Path(out).write_text(json.dumps(result))
sys.exit(1 if Path("bench/fail-one").exists() else 0)
'''

# (message, {path: content}): each commit of the scratch repository, oldest first. docs/ is no code path.
COMMITS = [
    ("the suite, no count mode", {"cpp/cost": "100", "phasebench/plugin.py": "# no counting\n"}),
    ("the count mode", {"phasebench/plugin.py": 'OPTION = "--count"\n'}),
    ("docs only", {"guide/a.md": "a\n"}),
    ("a code change that costs nothing", {"bench/test_x.py": "# x\n"}),
    ("a 10 % step", {"cpp/cost": "110"}),
    ("docs only again", {"guide/a.md": "b\n"}),
    ("the build breaks", {"cpp/broken": "1"}),
    ("the build mended, an option removed", {"cpp/broken": None, "bench/no-option": "1"}),
    ("the option back, one case fails", {"bench/no-option": None, "bench/fail-one": "1"}),
]


def scratch(path: Path) -> list[str]:
    new_repo(path)
    return [commit(path, message, files) for message, files in COMMITS]


@pytest.fixture
def setup(tmp_path):
    shas = scratch(tmp_path / "repo")
    saved = template(COUNTED)
    (tmp_path / "template.json").write_text(json.dumps(saved))
    (tmp_path / "fake_pytest.py").write_text(FAKE_PYTEST)
    env = {**os.environ, "HISTORY_REPO": str(tmp_path / "repo"), "HISTORY_OUT": str(tmp_path / "history"),
           "HISTORY_WORK": str(tmp_path / "work"), "HISTORY_VENV": str(Path(sys.executable).parents[1]),
           "HISTORY_MNIST_ROOT": str(tmp_path / "data"), "HISTORY_BUILD": "test ! -e cpp/broken",
           "HISTORY_PYTEST": f"{sys.executable} {tmp_path / 'fake_pytest.py'}",
           "FAKE_TEMPLATE": str(tmp_path / "template.json"), "FAKE_CALLS": str(tmp_path / "calls")}
    return tmp_path, shas, env


def run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)


def state(folder: Path, metric: str = "instructions") -> dict[str, list[str]]:
    lines = (folder / f"runs-{metric}.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["commit", "status", "code_tree", "options", "seconds", "why"]
    rows = [line.split("\t") for line in lines[1:]]
    return {row[0]: row for row in rows}


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def test_a_range_is_run_once_per_code_tree_with_reasons_and_resumed(setup):
    tmp_path, shas, env = setup
    # The first run stops after the docs-only commit that follows the step (as an interrupted run would).
    first = run(env, f"{shas[5]}")
    assert first.returncode == 0, first.stderr + first.stdout
    rows = state(tmp_path / "history")
    assert list(rows) == shas[:6]
    assert [rows[sha][1] for sha in shas[:6]] == ["no-option", "ran", "same-tree", "ran", "ran", "same-tree"]
    assert "no --count option" in rows[shas[0]][5]
    assert rows[shas[2]][5] == f"code as {shas[1]} (ran)"
    assert rows[shas[5]][5] == f"code as {shas[4]} (ran)"
    assert len(calls(tmp_path)) == 3
    assert "--count instructions" in calls(tmp_path)[0] and "--mnist-root=" in calls(tmp_path)[0]

    # Resumed over the whole range: only the commits not recorded run.
    again = run(env, "main")
    assert again.returncode == 0, again.stderr + again.stdout
    rows = state(tmp_path / "history")
    assert list(rows) == shas
    assert [rows[sha][1] for sha in shas[6:]] == ["build-failed", "no-option", "partial"]
    assert rows[shas[6]][5].startswith("exit status 1")
    assert "unrecognized arguments" in rows[shas[7]][5]
    assert rows[shas[8]][5].startswith("pytest exit status 1")
    assert len(calls(tmp_path)) == 3 + 2  # the broken build runs no pytest
    for sha in (shas[6], shas[7], shas[8]):  # a log's tail kept for each commit that could not run (whole)
        assert (tmp_path / "history/logs/instructions" / f"{sha}.log").exists()

    # Nothing left: a third run runs nothing; HISTORY_RETRY=1 runs the failed commits again.
    assert run(env, "main").returncode == 0 and len(calls(tmp_path)) == 5
    assert run({**env, "HISTORY_RETRY": "1"}, "main").returncode == 0
    assert len(calls(tmp_path)) == 5 + 2  # the build failure again (no pytest), the no-option and the partial


def test_the_compact_series_are_what_the_history_reads(setup, capsys):
    tmp_path, shas, env = setup
    assert run(env, "main").returncode == 0
    folder = tmp_path / "history/instructions"
    files = sorted(folder.glob("*.json"))
    assert len(files) == 4  # backward and loss, python and cpp
    held = json.loads(files[0].read_text())
    assert held["format"] == points.COMPACT_FORMAT and held["key"]["metric"] == "instructions"
    ran = [shas[1], shas[3], shas[4], shas[8]]
    failed = template(COUNTED)["benchmarks"][0]["extra_info"]  # the case the fake fails at the last commit
    for path in files:
        key = json.loads(path.read_text())["key"]
        commits = [entry["commit"] for entry in json.loads(path.read_text())["points"]]
        lacks_last = (key["phase"], key["implementation"]) == (failed["phase"], failed["implementation"])
        assert commits == (ran[:-1] if lacks_last else ran), path.name
    assert all(len(line) < 2000 for line in files[0].read_text().splitlines())
    assert cli.main([str(tmp_path / "history"), "--repo", str(tmp_path / "repo")]) == 0
    printed = capsys.readouterr().out
    line = next(text for text in printed.splitlines() if text.strip().startswith("loss python"))
    assert f"{shas[3][:7]}..{shas[4][:7]}" in line and "+10.0 %" in line  # the step, the docs commits aside


def test_times_on_request_keep_a_state_of_their_own(setup):
    tmp_path, shas, env = setup
    assert run(env, "--time", f"{shas[3]}^!").returncode == 0
    rows = state(tmp_path / "history", "time")
    assert [rows[sha][1] for sha in rows] == ["ran"]
    assert "--count" not in calls(tmp_path)[0]
    assert not (tmp_path / "history/runs-instructions.tsv").exists()


def test_usage_errors(setup):
    tmp_path, _, env = setup
    assert run(env).returncode == 2
    assert run(env, "no-such-ref").returncode == 2
    assert run({**env, "HISTORY_VENV": str(tmp_path / "none")}, "main").returncode == 2


def test_compact_series_hold_each_run_once_and_read_as_the_results_do(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 2)
    results = [write(tmp_path / "r", f"{n}.json", saved(sha, COUNTS, torch="2.14.1+cu130"))
               for n, sha in enumerate(shas)]
    results.append(write(tmp_path / "r", "time.json", saved(shas[0], {k: 0.001 for k in COUNTS}, metric="time")))
    full = points.read([str(tmp_path / "r")])
    added = points.append(full.points, tmp_path / "h")
    assert sorted(added.values()) == [1] * 4 + [2] * 4  # 4 time series of one run, 4 count series of two
    again = points.append(points.read([str(results[0])]).points, tmp_path / "h")  # a run read again
    assert len(again) == 4 and set(again.values()) == {0}
    compact = points.read([str(tmp_path / "h")])

    def held(found):
        return {(p.key, p.commit): (p.value, p.torch, p.context, p.fullname, p.language, p.reference) for p in found}

    assert len(compact.points) == len(full.points) and held(compact.points) == held(full.points)
    timed = [p for p in compact.points if p.key.metric == "time"]
    assert timed and all(p.rounds == () for p in timed)  # a time keeps its median alone
    counted = [p for p in compact.points if p.key.metric == "instructions"]
    assert all(len(p.rounds) == 3 for p in counted)
    # Read by torch version, the key holds the build's kind, as it does for the results themselves.
    by_torch = {p.key for p in points.read([str(tmp_path / "h")], by="torch").points}
    assert by_torch == {p.key for p in points.read([str(tmp_path / "r")], by="torch").points}
    built, _ = series_mod.build(compact.points, series_mod.Order("commit", tmp_path / "repo"), {})
    assert sorted(len(s.positions) for s in built) == [1] * 4 + [2] * 4
    with pytest.raises(ValueError, match="keyed by commit"):
        points.append(points.read([str(tmp_path / "r")], by="torch").points, tmp_path / "other")


@pytest.mark.skipif(not SHELLCHECK.exists(), reason="shellcheck is not installed (requirements.txt pins it)")
def test_the_script_passes_shellcheck():
    done = subprocess.run([str(SHELLCHECK), str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout

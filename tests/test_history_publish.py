"""The history's CI steps run here (.ci/history-publish fetch, record, page, push, as
.github/workflows/benchmark-history.yml runs them), against a scratch "origin" (a bare repository) with the fake
build and pytest of tests/test_history_run.py: a history with no series still has a page, and the workflows call
exactly these steps. Needs no Valgrind and no GitHub. Two pushes to main end to end (the first starts the history
branch, the second appends to it, the page shows both commits and the step between them), about 7 s of CPU, are a
long check: tests/long_history_publish.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from phasebench.repository import ROOT
from tests.scratch_git import commit, git, new_repo
from tests.test_history import COUNTED, template
from tests.test_history_run import FAKE_PYTEST

SCRIPT = ROOT / ".ci/history-publish"
WORKFLOWS = ROOT / ".github/workflows"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"


@pytest.fixture
def runner(tmp_path):
    return scratch_origin(tmp_path)


def scratch_origin(tmp_path: Path) -> tuple[Path, Path, Path, dict]:
    """A bare origin with one commit on main, a clone of it (the runner's checkout) and the steps' environment."""
    origin, seed = tmp_path / "origin.git", tmp_path / "seed"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    new_repo(seed)
    commit(seed, "the suite", {"cpp/cost": "100", "phasebench/plugin.py": 'OPTION = "--count"\n'})
    git(seed, "remote", "add", "origin", str(origin))
    git(seed, "push", "-q", "origin", "main")
    (tmp_path / "template.json").write_text(json.dumps(template(COUNTED)))
    (tmp_path / "fake_pytest.py").write_text(FAKE_PYTEST)
    env = {**os.environ, "HISTORY_WORK": str(tmp_path / "work"), "HISTORY_VENV": str(Path(sys.executable).parents[1]),
           "HISTORY_MNIST_ROOT": str(tmp_path / "data"), "HISTORY_BUILD": "true",
           "HISTORY_PYTEST": f"{sys.executable} {tmp_path / 'fake_pytest.py'}",
           "FAKE_TEMPLATE": str(tmp_path / "template.json"), "FAKE_CALLS": str(tmp_path / "calls"),
           "GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@example.invalid"}
    return tmp_path, origin, seed, env


def workflow_run(tmp_path: Path, origin: Path, env: dict, name: str) -> dict[str, subprocess.CompletedProcess]:
    """One run of the workflow's steps on a fresh clone of origin's main (as actions/checkout makes it)."""
    checkout = tmp_path / f"checkout-{name}"
    git(tmp_path, "clone", "-q", str(origin), str(checkout))
    history, site = tmp_path / f"history-{name}", tmp_path / f"site-{name}"
    env = env | {"HISTORY_REPO": str(checkout)}
    done = {}
    for step, args in (("fetch", [history]), ("record", [history]), ("page", [history, site]), ("push", [history])):
        done[step] = subprocess.run(["bash", str(SCRIPT), step, *map(str, args)], capture_output=True, text=True,
                                    env=env, timeout=120)
        assert done[step].returncode == 0, (step, done[step].stdout, done[step].stderr)
    return done


def test_a_history_with_no_series_still_has_a_page(runner):
    tmp_path, origin, _, env = runner
    done = workflow_run(tmp_path, origin, env | {"HISTORY_BUILD": "false"}, "broken")
    assert "build-failed" in done["record"].stdout
    page = (tmp_path / "site-broken/index.html").read_text()
    assert "No series yet" in page
    assert "build-failed" in (tmp_path / "site-broken/summary.md").read_text()


def steps_of(workflow: str) -> list[str]:
    """The `run:` commands of a workflow, in order."""
    return [m.group(1).strip() for m in re.finditer(r"^\s+run: (.+)$", workflow, flags=re.M)]


def test_the_workflows_run_these_steps_with_the_permissions_they_need():
    history = (WORKFLOWS / "benchmark-history.yml").read_text()
    steps = [s for s in steps_of(history) if "history-publish" in s]
    assert [s.split("history-publish ")[1].split()[0] for s in steps] == ["fetch", "record", "record", "page", "push"]
    assert "record \"$RUNNER_TEMP/history\" --time" in steps[2]
    assert "actions/upload-pages-artifact@" in history and "actions/deploy-pages@" in history
    assert "fetch-depth: 0" in history and "contents: write" in history
    assert "pages: write" in history and "id-token: write" in history and "name: github-pages" in history
    benchmark = (WORKFLOWS / "benchmark.yml").read_text()
    assert "uses: ./.github/workflows/benchmark-history.yml" in benchmark
    caller = benchmark[benchmark.index("  history:"):]
    assert all(p in caller for p in ("contents: write", "pages: write", "id-token: write"))
    assert "branches: [main]" in benchmark and "workflow_dispatch:" in benchmark
    compare = (WORKFLOWS / "benchmark-compare.yml").read_text()
    assert "github.io" in compare and "[the history]" in compare


@pytest.mark.skipif(not SHELLCHECK.exists(), reason="shellcheck is not installed (requirements.txt pins it)")
def test_the_script_passes_shellcheck():
    done = subprocess.run([str(SHELLCHECK), str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout

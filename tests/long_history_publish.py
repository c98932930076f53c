""".ci/history-publish end to end over two pushes to main (tests/test_history_publish.py has its scratch origin and
its other checks): the first push starts the history branch, the second appends to it, the page shows both commits
and the step between them, and a run with nothing new pushes nothing. A long check, about 7 s of CPU: the module is
named outside test_*.py, so the README's test command does not collect it; the job `recipe` of
.github/workflows/recipes.yml runs it on every push and pull request, and tests/test_docs_recipes.py checks that it
does."""

from __future__ import annotations

import pytest

from tests.scratch_git import commit, git
from tests.test_history_publish import scratch_origin, workflow_run


@pytest.fixture
def runner(tmp_path):
    return scratch_origin(tmp_path)


def test_two_pushes_to_main_make_a_history_on_its_branch_and_a_page(runner):
    tmp_path, origin, seed, env = runner
    first_sha = git(seed, "rev-parse", "HEAD")
    first = workflow_run(tmp_path, origin, env, "1")
    assert "starts it" in first["fetch"].stdout
    assert git(origin, "ls-tree", "-r", "--name-only", "history").splitlines().count("runs-instructions.tsv") == 1
    series = [name for name in git(origin, "ls-tree", "-r", "--name-only", "history").splitlines()
              if name.startswith("instructions/")]
    assert len(series) == 4 and all(name.endswith(".json") for name in series)
    site = tmp_path / "site-1"
    assert (site / "index.html").read_text().count('class="point"') == 4
    assert "this commit: ran" in (site / "summary.md").read_text()

    # A docs-only push and a push with a 10 % step: the second run records both, the first as same-tree.
    commit(seed, "docs", {"guide/a.md": "a"})
    step_sha = commit(seed, "a 10 % step", {"cpp/cost": "110"})
    git(seed, "push", "-q", "origin", "main")
    second = workflow_run(tmp_path, origin, env, "2")
    assert "holds history" in second["fetch"].stdout
    rows = [line.split("\t") for line in git(origin, "show", "history:runs-instructions.tsv").splitlines()[1:]]
    assert [(row[0], row[1]) for row in rows] == [(first_sha, "ran"), (git(seed, "rev-parse", "HEAD~1"), "same-tree"),
                                                  (step_sha, "ran")]
    html = (tmp_path / "site-2/index.html").read_text()
    assert html.count('class="point"') == 8
    assert f"{first_sha[:7]}..{step_sha[:7]}" in (tmp_path / "site-2/history.txt").read_text()
    assert len(git(origin, "log", "--format=%H", "history").splitlines()) == 2

    # A run with nothing new pushes nothing.
    third = workflow_run(tmp_path, origin, env, "3")
    assert "nothing new to push" in third["push"].stdout
    assert len(git(origin, "log", "--format=%H", "history").splitlines()) == 2

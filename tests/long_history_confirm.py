""".ci/history-confirm end to end (tests/test_history_confirm.py has its parts and its scratch repository): each
neighbour of an unconfirmed change point run again through .ci/history-run until it holds two runs, and then nothing.
A long check, about 12 s of CPU: the module is named outside test_*.py, so the README's test command does not collect
it; the job `recipe` of .github/workflows/recipes.yml runs it on every push and pull request, and
tests/test_docs_recipes.py checks that it does."""

from __future__ import annotations

import pytest

from tests.test_history_confirm import CONFIRM, RUN, runs_per_series, scratch, script, unconfirmed


@pytest.fixture
def setup(tmp_path):
    return scratch(tmp_path)


def test_history_confirm_runs_each_neighbour_until_it_holds_two_runs_and_then_nothing(setup, capsys):
    tmp_path, shas, env = setup
    history, repo = tmp_path / "history", tmp_path / "repo"
    assert script(RUN, env, "main").returncode == 0
    assert len((tmp_path / "calls").read_text().splitlines()) == 3  # the docs-only commit is same-tree
    assert unconfirmed(history, repo, capsys) == [
        [shas[1], shas[2], "instructions", "cpu", "-", "python", "loss", "+10.00", "1", "1", "2", "code"]]

    done = script(CONFIRM, env, "--rounds", "3")
    assert done.returncode == 0, done.stderr + done.stdout
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 5  # each neighbour once, python's loss alone (not python-foreach's, nor cpp's)
    for call in calls[3:]:
        assert "--count instructions" in call and call.endswith("--rounds 3 -k test_phase[loss-python-cpu]")
    assert runs_per_series(history / "instructions", repo) == {
        ("loss", "python"): [1, 2, 2], ("loss", "cpp"): [1, 1, 1],
        ("backward", "python"): [1, 1, 1], ("backward", "cpp"): [1, 1, 1]}
    assert unconfirmed(history, repo, capsys) == []
    assert "1 unconfirmed change point(s) of instructions" in done.stdout and "2 run(s) of 2 commit(s)" in done.stdout
    line = next(text for text in done.stdout.splitlines() if text.strip().startswith("loss python"))
    assert f"{shas[1][:7]}..{shas[2][:7]} +10.0 %" in line and "unconfirmed" not in line
    rows = [row.split("\t") for row in (history / "runs-instructions.tsv").read_text().splitlines()[1:]]
    assert [(row[0], row[1]) for row in rows[-2:]] == [(shas[1], "ran"), (shas[2], "ran")]

    # Nothing left to confirm: a second invocation runs nothing.
    again = script(CONFIRM, env, "--rounds", "3")
    assert again.returncode == 0, again.stderr + again.stdout
    assert "0 unconfirmed change point(s)" in again.stdout and "0 run(s) of 0 commit(s)" in again.stdout
    assert len((tmp_path / "calls").read_text().splitlines()) == 5

    # history-run itself: a commit recorded with these options runs again under HISTORY_AGAIN=1 alone.
    selection = ["--rounds", "3", "-k", "test_phase[loss-python-cpu]"]
    assert script(RUN, env, f"{shas[1]}^!", *selection).returncode == 0
    assert len((tmp_path / "calls").read_text().splitlines()) == 5
    assert script(RUN, {**env, "HISTORY_AGAIN": "1"}, f"{shas[1]}^!", *selection).returncode == 0
    assert len((tmp_path / "calls").read_text().splitlines()) == 6
    assert runs_per_series(history / "instructions", repo)[("loss", "python")] == [1, 3, 2]

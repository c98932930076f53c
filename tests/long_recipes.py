"""The recipes that run pytest end to end, each for minutes: the README's quick start with docs/recipes.md's "Save
and compare a baseline", and docs/gating.md's wall-time gate. Named outside test_*.py, so that the README's test
command does not collect this module; the job `recipe` of .github/workflows/recipes.yml runs it on every push and
pull request (`.venv/bin/python -m pytest tests/long_recipes.py --benchmark-disable`), and
tests/test_docs_recipes.py checks that it does. The machinery is tests/test_docs_recipes.py's."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from phasebench.repository import ROOT
from tests.test_docs_recipes import RECIPES, SMALL_RUN, checkout_copy, clean_env, run_recipe, sections, this_venv


def test_the_quick_start_and_the_baseline_recipe_run_as_written(pytestconfig, cpp_library, tmp_path):
    """The README's quick-start benchmark run, then docs/recipes.md's "Save and compare a baseline", every command
    in its order, in a copy of this checkout. Shrunk: every pytest run gets one counted round and no warm-up, and
    `-k forward`: the recipe's runs `--impl python,cpp` (one phase in both languages, which the ratio gate and the
    gate's ratios need; the C++ library is the suite's cached build), the README's `--impl python`. Not run: the
    quick start's `python3 -m venv .venv` and `pip install -r requirements.txt` (the environment this test
    runs in; CI's test job makes it with those commands, .ci/run), and the README's test command, which is the
    command running this test."""
    tree = checkout_copy(tmp_path / "checkout", Path(pytestconfig.getoption("mnist_root")))
    readme = [argv for _, argv in sections((ROOT / "README.md").read_text(encoding="utf8"))["Quick start"]]
    assert [".venv/bin/python", "-m", "pytest", "--benchmark-only"] in readme, readme

    def shrink(argv: list[str], impls: str = "python,cpp") -> list[str]:
        if argv[1:3] != ["-m", "pytest"]:
            return argv
        # The recipe's thresholds judge runs of the default 100 rounds; two runs of one round of a phase of a few
        # milliseconds on a shared 2-core machine differ by more than 30 % by chance. Whether unchanged runs
        # hold the recipe's thresholds is measured apart; here the compare must run, with thresholds no chance
        # difference reaches.
        wide = {"--benchmark-compare-fail": "--benchmark-compare-fail=median:100000%",
                "--phase-ratio-fail": "--phase-ratio-fail=100000%"}
        return [wide.get(arg.split("=")[0], arg) for arg in argv] + SMALL_RUN + ["-k", "forward", "--impl", impls]

    readme_page = tmp_path / "quick-start.md"  # the README's command, run by the same machinery as the recipes
    readme_page.write_text("## Quick start\n\n```sh\n.venv/bin/python -m pytest --benchmark-only\n```\n")
    (_, quick), = run_recipe(readme_page, "Quick start", tree, lambda argv: shrink(argv, "python"), clean_env())
    assert "test_phase[forward-python-cpu]" in quick.stdout and "the answer" in quick.stdout, quick.stdout[-3000:]
    ran = run_recipe(tree / RECIPES, "Save and compare a baseline", tree, shrink, clean_env())
    assert len(ran) == 5, [shlex.join(argv) for argv, _ in ran]
    saved = sorted(path.name for path in (tree / ".benchmarks").rglob("*.json"))
    assert saved == ["0001_before.json", "0002_after.json"], saved
    assert re.search(r"Comparing against benchmarks from: \S*0001_before\.json", ran[1][1].stdout + ran[1][1].stderr)
    assert "0001_before" in ran[2][1].stdout and "0002_after" in ran[2][1].stdout, ran[2][1].stdout[-3000:]
    assert ran[3][1].stdout.lstrip("*").startswith("Gate: no verdict"), ran[3][1].stdout[:500]
    assert "forward" in ran[4][1].stdout, ran[4][1].stdout[:500]


def test_the_wall_time_gate_recipe_runs_as_written(pytestconfig, tmp_path):
    """docs/gating.md's wall-time gate, every command in its order (fetch, the two worktrees, the shared
    environment, the gate, the removal), from a clone of this repository whose origin is this checkout: the
    recipe's trees are commits, base origin/main (this checkout's HEAD where it has no main branch, as a CI
    checkout of a pull request) and head HEAD. Shrunk: GATE_PAIRS=1 (one run a side, which gives "no verdict"),
    one round without warm-up, `--impl python -k "test_phase and forward"` (one case; no C++ case, for which each
    tree would build its own library), and this run's data (`--mnist-root`), so that neither tree unpacks its own."""
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True, capture_output=True)
    if subprocess.run(["git", "-C", str(clone), "rev-parse", "-q", "--verify", "origin/main"],
                      capture_output=True).returncode != 0:
        subprocess.run(["git", "-C", str(clone), "update-ref", "refs/remotes/origin/main", "HEAD"], check=True)
    this_venv(clone)
    data = Path(pytestconfig.getoption("mnist_root")).resolve()

    def shrink(argv: list[str]) -> list[str]:
        if not any(arg.endswith(".ci/bench-pr") for arg in argv):
            return argv
        return argv + SMALL_RUN + ["--impl", "python", "-k", "test_phase and forward", f"--mnist-root={data}"]

    ran = run_recipe(ROOT / "docs" / "gating.md", "The wall-time gate", clone, shrink,
                     clean_env() | {"GATE_PAIRS": "1"})
    assert [argv[0] for argv, _ in ran] == ["git", "git", "git", "ln", "ln", "env", "git", "git"], ran
    gate = (tmp_path / "gate" / "time" / "gate.md").read_text()
    assert "no verdict" in gate.splitlines()[0], gate
    assert "test_phase[forward-python-cpu]" in gate, gate
    assert not (tmp_path / "gate" / "base").exists() and not (tmp_path / "gate" / "head").exists()

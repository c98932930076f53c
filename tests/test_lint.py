"""The tree is lint-clean by the rule set pyproject.toml names ([tool.ruff]), with the ruff requirements.txt pins:
part of the test command, so a finding fails it."""

import subprocess
import sys

import pytest

from phasebench.repository import ROOT


def test_the_tree_is_ruff_clean():
    try:
        import ruff  # noqa: F401 (the wheel that carries the binary)
    except ImportError:
        pytest.fail("ruff is not installed: pip install -r requirements.txt pins it")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", str(ROOT)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, f"ruff check found:\n{done.stdout}{done.stderr}"

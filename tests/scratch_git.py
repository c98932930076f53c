"""Scratch git repositories for the tests of the history's scripts and readers: made, committed to, read."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def new_repo(path: Path) -> Path:
    """An empty repository on main at path, with a committer."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.invalid")
    git(path, "config", "user.name", "t")
    return path


def commit(repo: Path, message: str, files: dict[str, str | None]) -> str:
    """Write each file (None removes it), commit them, and return the commit's sha."""
    for name, content in files.items():
        if content is None:
            git(repo, "rm", "-q", name)
            continue
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(content)
        git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")

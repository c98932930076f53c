"""Which tree a run ran from (phasebench/provenance.py): git status, untracked files included, decides whether it was
clean, and the sources hash follows the files, with git or without it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from phasebench import provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "phasebench").mkdir(parents=True)
    (root / "phasebench" / "clock.py").write_text("def clock(): return 1\n")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / ".gitignore").write_text("__pycache__/\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_a_clean_tree_is_clean_and_an_untracked_file_makes_it_dirty(repo):
    clean = provenance.tree_state(repo)
    assert clean["dirty"] is False and clean["porcelain"] == []
    (repo / "phasebench" / "new.py").write_text("x = 1\n")
    dirty = provenance.tree_state(repo)
    assert dirty["dirty"] is True and dirty["porcelain"] == ["?? phasebench/new.py"]
    assert dirty["sources_hash"] != clean["sources_hash"]  # the untracked source ran too


def test_the_sources_hash_follows_a_change_and_not_a_commit(repo):
    before = provenance.tree_state(repo)["sources_hash"]
    (repo / "phasebench" / "clock.py").write_text("def clock(): return 2\n")
    changed = provenance.tree_state(repo)
    assert changed["dirty"] and changed["sources_hash"] != before
    git(repo, "commit", "-q", "-am", "second")
    committed = provenance.tree_state(repo)
    assert not committed["dirty"] and committed["sources_hash"] == changed["sources_hash"]
    (repo / "notes.txt").write_text("not a source\n")
    assert provenance.tree_state(repo)["sources_hash"] == changed["sources_hash"]


def test_a_copy_without_git_hashes_the_same_files_alike(repo, tmp_path, monkeypatch):
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    (copy / "phasebench" / "__pycache__").mkdir()
    (copy / "phasebench" / "__pycache__" / "clock.cpython-311.pyc").write_bytes(b"\0")
    state = provenance.tree_state(copy)
    assert state == {"dirty": None, "porcelain": None, "sources_hash": provenance.tree_state(repo)["sources_hash"]}
    monkeypatch.setenv("PB_TEST_COMMIT", "abc123")
    monkeypatch.setenv("PB_TEST_DIRTY", "1")
    info = provenance.commit_info("PB_TEST_COMMIT", "PB_TEST_DIRTY", copy)
    assert info["id"] == "abc123" and info["dirty"] is True and "PB_TEST_COMMIT" in info["commit_source"]
    assert info["sources_hash"] == state["sources_hash"]


def test_porcelain_is_capped(repo):
    for index in range(provenance.PORCELAIN_LINES + 5):
        (repo / f"extra{index}.txt").write_text("x\n")
    lines = provenance.tree_state(repo)["porcelain"]
    assert len(lines) == provenance.PORCELAIN_LINES + 1 and lines[-1] == "... and 5 more"

"""Which tree a run ran from: whether it was clean, what differed, and a hash of the sources that ran.

pytest-benchmark's commit_info["dirty"] comes from `git describe --dirty`, which ignores untracked files: a run
with a new, uncommitted source file passes as clean. tree_state() asks `git status --porcelain
--untracked-files=all` instead, and hashes the sources (SOURCES) as git would store them: one git blob id per
file, the working tree's content where it differs from the index, so that the same files give the same hash with
git or, in a copy without history, without it. Imports no torch.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from phasebench.repository import ROOT

SOURCES = ("phasebench", "bench", "cpp", "conftest.py", "pytest.ini", "requirements.txt")  # what a run executes
PORCELAIN_LINES = 50  # at most this many of git status's lines are recorded
# Without git, what .gitignore leaves out of the sources (build outputs and caches).
IGNORED_NAMES = {"__pycache__", "build", "obj", "libphasebench.so"}
IGNORED_SUFFIXES = (".pyc", ".egg-info")


def _git(root: Path, *args: str) -> str | None:
    """git's output in `root`, or None where there is no git or no repository."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, check=False)
    except OSError:
        return None
    return done.stdout.decode("utf8", "surrogateescape") if done.returncode == 0 else None


def blob_id(data: bytes) -> str:
    """The id git gives a file of this content (`git hash-object`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _files_without_git(root: Path) -> list[str]:
    found = []
    for source in SOURCES:
        path = root / source
        if path.is_file():
            found.append(source)
            continue
        for folder, folders, files in os.walk(path):
            folders[:] = sorted(name for name in folders
                                if name not in IGNORED_NAMES and not name.endswith(IGNORED_SUFFIXES))
            found += [Path(folder, name).relative_to(root).as_posix() for name in files
                      if name not in IGNORED_NAMES and not name.endswith(IGNORED_SUFFIXES)]
    return found


def sources_hash(root: Path = ROOT, porcelain: list[str] | None = None) -> str:
    """sha256 (first 16 hex digits) over 'path blob-id' of every source file, sorted: git's index ids for the files
    git status does not list, the working tree's content for those it lists (modified or untracked); every file's
    content where there is no git."""
    root = Path(root)
    listed = _git(root, "ls-files", "-s", "-z", "--", *SOURCES)
    blobs: dict[str, str | None] = {}
    if listed is None:
        changed = _files_without_git(root)
    else:
        for entry in filter(None, listed.split("\0")):
            meta, path = entry.split("\t", 1)
            blobs[path] = meta.split()[1]
        if porcelain is None:
            porcelain = _porcelain(root)
        changed = [_path_of(line) for line in porcelain]
        changed = [path for path in changed if path in blobs or any(
            path == source or path.startswith(source + "/") for source in SOURCES)]
    for path in changed:
        try:
            blobs[path] = blob_id((root / path).read_bytes())
        except OSError:  # deleted in the working tree
            blobs[path] = None
    lines = "".join(f"{path} {blob or 'deleted'}\n" for path, blob in sorted(blobs.items()))
    return hashlib.sha256(lines.encode("utf8", "surrogateescape")).hexdigest()[:16]


def _porcelain(root: Path) -> list[str]:
    out = _git(root, "status", "--porcelain", "--untracked-files=all")
    return [line for line in (out or "").splitlines() if line.strip()]


def _path_of(line: str) -> str:
    """The path a porcelain line names (the new one of a rename), without git's quoting of odd names."""
    path = line[3:].split(" -> ")[-1]
    return path[1:-1] if path.startswith('"') and path.endswith('"') else path


def tree_state(root: Path = ROOT) -> dict:
    """{"dirty": whether git status lists anything (untracked files included), "porcelain": its lines (the first
    PORCELAIN_LINES, then how many more), "sources_hash": sources_hash()}; where there is no git, dirty and
    porcelain are None and the hash is of the files."""
    root = Path(root)
    if _git(root, "rev-parse", "--git-dir") is None:
        return {"dirty": None, "porcelain": None, "sources_hash": sources_hash(root)}
    lines = _porcelain(root)
    shown = lines[:PORCELAIN_LINES] + ([f"... and {len(lines) - PORCELAIN_LINES} more"]
                                       if len(lines) > PORCELAIN_LINES else [])
    return {"dirty": bool(lines), "porcelain": shown, "sources_hash": sources_hash(root, lines)}


def commit_info(commit_env: str, dirty_env: str, root: Path = ROOT) -> dict:
    """What the plugin adds to pytest-benchmark's commit_info: tree_state()'s dirty, porcelain and sources_hash. A
    copy without git history names its commit and whether that tree was clean in `commit_env` and `dirty_env`
    (docs/reference/saved-results.md#commit_info), and the result says so in commit_source."""
    state = tree_state(root)
    commit = os.environ.get(commit_env)
    if commit:
        return state | {"id": commit, "dirty": os.environ.get(dirty_env) == "1",
                        "commit_source": f"{commit_env} (a copy without git history)"}
    if state["dirty"] is None:
        return {key: value for key, value in state.items() if key != "dirty"}  # pytest-benchmark's own stays
    return state

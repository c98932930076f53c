"""What the paired studies' summaries share: the --runs-json option, and each run's .time file (its load average
before and after, its wall time), as lab/studies/paired/*.sh write them."""

from __future__ import annotations

import re
import sys
from pathlib import Path


def runs_json_option(argv: list[str]) -> tuple[Path | None, list[str]]:
    """(FILE of --runs-json FILE, or None; the other arguments)."""
    if "--runs-json" not in argv:
        return None, argv
    at = argv.index("--runs-json")
    return Path(argv[at + 1]), argv[:at] + argv[at + 2:]


def study_arguments(argv: list[str], usage: str) -> tuple[Path | None, Path] | None:
    """(--runs-json FILE or None, the study's folder) of a summary's command line; None, with its usage printed,
    where it names no one folder."""
    runs_json, argv = runs_json_option(argv)
    if len(argv) != 1:
        print(usage, file=sys.stderr)
        return None
    return runs_json, Path(argv[0])


def load_and_wall(folder: Path, name: str) -> tuple[list[float], float | None]:
    """A run's load averages (1 minute) before and after it, and its wall time in seconds, from NAME.time."""
    text = (folder / f"{name}.time").read_text()
    seconds = re.findall(r"; ([\d.]+) s", text)
    return [float(value) for value in re.findall(r"(?:before|after): ([\d.]+)", text)], (
        round(float(seconds[0]), 1) if seconds else None)

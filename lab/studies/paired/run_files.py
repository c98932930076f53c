"""What the paired studies' summaries share: the --runs-json option, and each run's .time file (its load average
before and after, its wall time), as lab/studies/paired/*.sh write them."""

from __future__ import annotations

import json
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


def new_runs(folder: Path) -> list[str]:
    """The new tree's saved runs of a paired study (new-1.json, new-2.json, …), in the order run."""
    return sorted((path.stem for path in folder.glob("new-*.json")), key=lambda stem: int(stem.split("-")[1]))


def kept_or_collected(argv: list[str], usage: str, collect, read_kept) -> dict | None:
    """The runs a summary tabulates: `--from FILE`, what an earlier --runs-json kept (read_kept(FILE)); or `DIR
    [--runs-json FILE]`, {run: collect(DIR, run)} over DIR's new runs, kept in FILE when asked. None, with the usage
    printed, for any other command line."""
    if argv[:1] == ["--from"] and len(argv) == 2:
        return read_kept(Path(argv[1]))
    runs_json, rest = runs_json_option(argv)
    if len(rest) != 1 or rest[0] == "--from":
        print(usage, file=sys.stderr)
        return None
    folder = Path(rest[0])
    runs = {name: collect(folder, name) for name in new_runs(folder)}
    if runs_json:
        runs_json.write_text(json.dumps(runs, indent=1) + "\n")
    return runs


def summary_main(argv: list[str], usage: str, collect, read_kept, table) -> int:
    """A summary's command line: prints table(runs) of the runs kept_or_collected gives; 2, with the usage printed,
    for any other command line."""
    runs = kept_or_collected(argv, usage, collect, read_kept)
    if runs is None:
        return 2
    print(table(runs))
    return 0

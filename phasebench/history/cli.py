"""`python -m phasebench.history [RESULT_FILES_OR_STORAGE_DIRS ...]`: every phase's cost across commits (or torch
releases), its change points, and optionally the page (--html).

    python -m phasebench.history .benchmarks results/instruction-counts       # along first-parent history of HEAD
    python -m phasebench.history --by torch results/history/torch --html out.html # by torch version
    python -m phasebench.history out.json --append results/history            # out.json's runs into compact series
    python -m phasebench.history results/history/instructions results/history/time \
        --releases results/history/torch --html index.html                      # commits, then torch releases
    python -m phasebench.history results/history --unconfirmed                # the change points to re-run

A folder of compact series (--append) is read like any other. With no path, pytest-benchmark's default storage
(.benchmarks/ of the repository). A path that is no file or folder names saved runs in --storage
(phasebench.results.find_results): a run number (0001), the name a run was saved under (before, for
0001_before.json), a glob ('*before'). Exit status 0, 2 on a usage error or where no series could be built. Imports
no torch."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from phasebench import results
from phasebench.history import page, points
from phasebench.history import series as series_mod
from phasebench.history.units import amount
from phasebench.method import METHOD_VERSION
from phasebench.repository import ROOT


def describe(found: series_mod.Found) -> str:
    """One change point: its range, its size, whether it is a change of measurement, and what else changed there."""
    text = f"{found.range} {found.change.change_pct:+.1f} %"
    if found.measurement:
        text += f" (a change of measurement: {', '.join(found.measurement)})"
    if not found.confirmed:
        text += " (unconfirmed: re-run both neighbours)"
    if found.also_changed:
        text += f" [also changed: {', '.join(found.also_changed)}]"
    return text


def terminal(all_series: list[series_mod.Series], notes: list[str], split_lines: list[str], by: str) -> str:
    """One block per machine, method, metric, device and workload; in it one line per phase and implementation:
    points, latest value, change since the first point, change points."""
    lines = []
    for note in notes:
        lines.append(f"left out: {note}")
    for line in split_lines:
        lines.append(line)
    groups = defaultdict(list)
    for s in all_series:
        groups[s.key.group()].append(s)
    for (_, method, metric, device, workload), members in groups.items():
        key = members[0].key
        lines += ["", f"{metric} on {device}{', workload ' + workload if workload else ''}, method {method}, "
                      f"by {by}: {key.machine_label()}"]
        width = max(len(f"{s.key.phase} {s.key.implementation}") for s in members)
        for s in members:
            values = s.values
            first, last = values[0], values[-1]
            since = f"{100 * (last / first - 1):+.1f} %" if len(values) > 1 and first else "—"
            found = "; ".join(describe(f) for f in s.changes) or "none"
            lines.append(f"  {(s.key.phase + ' ' + s.key.implementation).ljust(width)}  {len(values):3d} pts  "
                         f"latest {amount(last, metric):>16}  since first {since:>8}  change points: {found}")
        newest = sorted({newest_line(s) for s in members})
        lines += [f"  newest: {line}" for line in newest]
    if all_series:
        lines += ["", summary(all_series, by)]
    return "\n".join(lines) + "\n"


def newest_line(s: series_mod.Series) -> str:
    """A series' newest point: its commit, the commit's date and the method (Series.newest)."""
    newest = s.newest()
    release = "" if newest.at.date or newest.at.x == newest.commit else f"{newest.at.short} at "
    commit = newest.commit[:7] if newest.commit else "commit unrecorded"
    return f"{release}{commit} of {newest.date or 'an unrecorded date'}, method {newest.method}"


def summary(all_series: list[series_mod.Series], by: str) -> str:
    """The change points counted: those of code (or of a release) by direction and status, the changes of
    measurement apart, and the method of the code that reads them beside the newest series'."""
    code = [f for s in all_series for f in s.changes if not f.measurement]
    measured = [f for s in all_series for f in s.changes if f.measurement]
    what = "code" if by == "commit" else "release"

    def counted(found: list[series_mod.Found]) -> str:
        up = sum(1 for f in found if f.change.change_pct > 0)
        sure = sum(1 for f in found if f.confirmed)
        return f"{up} dearer, {len(found) - up} cheaper; {sure} confirmed"

    text = f"change points of {what}: {len(code)}" + (f" ({counted(code)})" if code else "")
    text += f"; changes of measurement, not of {what}: {len(measured)}"
    if measured:
        fields = sorted({name for f in measured for name in f.measurement})
        text += f" ({counted(measured)}; {', '.join(fields)})"
    newest = max(s.key.method for s in all_series)
    text += f"\nthe series' newest method: {newest}; the code that reads them measures with method {METHOD_VERSION}"
    if newest < METHOD_VERSION:
        text += " (a run of it joins none of these series)"
    return text


def unconfirmed(all_series: list[series_mod.Series]) -> str:
    """--unconfirmed: one tab-separated line per change point not yet confirmed (by commit): the commits before and
    after it (full hashes), metric, device, workload ("-" for the default), implementation, phase, the change in
    percent, the runs of the case at the commit before and at the commit after, the runs each needs to confirm it
    (series.runs_to_confirm): what .ci/history-confirm re-runs; last, what the step is a change of: "code", or
    "measurement: " and the fields that changed (Found.measurement)."""
    lines = []
    for s in all_series:
        for found in s.changes:
            if found.confirmed:
                continue
            runs = {position.x: len(at) for position, at in zip(s.positions, s.runs)}
            lines.append("\t".join([found.before.x, found.after.x, s.key.metric, s.key.device, s.key.workload or "-",
                                    s.key.implementation, s.key.phase, f"{found.change.change_pct:+.2f}",
                                    str(runs[found.before.x]), str(runs[found.after.x]),
                                    str(series_mod.runs_to_confirm(s.key.metric)),
                                    found.kind_words("commit")]))
    return "".join(line + "\n" for line in lines)


def commit_address(repo: Path) -> str | None:
    """A commit's address on GitHub ({sha} for its hash) where the repository's origin is there, else None."""
    try:
        url = subprocess.run(["git", "-C", str(repo), "remote", "get-url", "origin"], capture_output=True, text=True,
                             check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    match = re.match(r"(?:https://github\.com/|git@github\.com:)([\w.-]+/[\w.-]+?)(?:\.git)?/?$", url)
    return f"https://github.com/{match.group(1)}/commit/{{sha}}" if match else None


def default_paths() -> list[str]:
    return [results.DEFAULT_STORAGE.removeprefix("file://")]


def append(prog: str, paths: list[str], folder: Path, dirty: bool, count_glibc: str | None) -> int:
    """--append: the runs under `paths` into compact series under `folder`; one line per file written."""
    reading = points.read(paths, by="commit", dirty=dirty, count_glibc=count_glibc)
    for note in reading.left_out:
        print(f"left out: {note}")
    if not reading.points:
        print(f"{prog}: nothing to append: no phasebench result under {', '.join(paths)} could be read",
              file=sys.stderr)
        return 2
    added = points.append(reading.points, folder)
    for path, count in sorted(added.items()):
        print(f"{path}: {count} run(s) added")
    print(f"appended {sum(added.values())} run(s) of {len(reading.points)} point(s) to {len(added)} series under "
          f"{folder}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phasebench.history", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", help="saved result files (--benchmark-json, --benchmark-save) and "
                                                 "folders searched for them (pytest-benchmark's storage), or saved "
                                                 "runs in --storage by number (0001), name (before, for "
                                                 "0001_before.json) or glob ('*before')")
    parser.add_argument("--storage", default=results.DEFAULT_STORAGE,
                        help="where saved runs named by number, name or glob are, as --benchmark-storage (default: "
                             "%(default)s)")
    parser.add_argument("--by", choices=("commit", "torch"), default="commit",
                        help="order along first-parent git history (default) or by torch version")
    parser.add_argument("--rev", default="HEAD", help="whose first-parent history orders the commits (%(default)s)")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the git repository (%(default)s)")
    parser.add_argument("--dirty", action="store_true", help="keep runs of trees with uncommitted changes")
    parser.add_argument("--html", type=Path, help="write the page here: one self-contained file")
    parser.add_argument("--commit-url", metavar="URL",
                        help="a commit's address, {sha} standing for its hash, that the page links each change point's "
                             "commit to (default: GitHub's, where the repository's origin is on GitHub; else no link)")
    parser.add_argument("--append", type=Path, metavar="DIR",
                        help="append the runs read to compact series under DIR (one small file per series) and "
                             "build nothing else; exit status 2 where no run could be read")
    parser.add_argument("--releases", nargs="+", metavar="PATH",
                        help="results of torch releases (.ci/history-torch's folder), shown by torch version "
                             "after the history, on the same page")
    parser.add_argument("--count-glibc", metavar="VERSION",
                        help="the glibc version of counted runs that record none (counted before the count mode "
                             "recorded it), for their series' key; .ci/history-run passes the machine's own")
    parser.add_argument("--unconfirmed", action="store_true",
                        help="print only the change points not yet confirmed, one tab-separated line each: commit "
                             "before, commit after, metric, device, workload (- for the default), implementation, "
                             "phase, change in percent, runs before, runs after, runs needed (.ci/history-confirm "
                             "reads them), what the step is a change of (code, or measurement: the fields); "
                             "exit status 0 where there are none")
    args = parser.parse_args(argv)
    if args.unconfirmed and args.by != "commit":
        parser.error("--unconfirmed lists change points between commits: it takes no --by torch")
    if args.unconfirmed and (args.append or args.html):
        parser.error("--unconfirmed prints the change points alone: it takes no --append or --html")
    try:  # a file or folder as it is; anything else names saved runs (phasebench.results.find_results)
        paths = [found for given in args.paths or default_paths()
                 for found in ([given] if Path(given).exists() else results.find_results([given], args.storage,
                                                                                      parser.prog))]
    except SystemExit as error:
        print(error, file=sys.stderr)
        return 2
    paths = [str(path) for path in paths]
    missing = [p for p in args.releases or [] if not Path(p).exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    if args.append:
        return append(parser.prog, paths, args.append, args.dirty, args.count_glibc)
    reading = points.read(paths, by=args.by, dirty=args.dirty, count_glibc=args.count_glibc)
    try:
        order = series_mod.Order(args.by, args.repo, args.rev)
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"{parser.prog}: cannot read first-parent history of {args.rev} in {args.repo}: "
              f"{getattr(error, 'stderr', '') or error}", file=sys.stderr)
        return 2
    all_series, notes = series_mod.build(reading.points, order)
    if args.unconfirmed and all_series:
        sys.stdout.write(unconfirmed(all_series))
        return 0
    split_lines = series_mod.splits(all_series)
    if not args.unconfirmed:
        sys.stdout.write(terminal(all_series, reading.left_out + notes, split_lines, args.by))
    if not all_series:
        print(f"{parser.prog}: no series: no phasebench result under {', '.join(paths)} could be placed",
              file=sys.stderr)
        return 2
    releases, release_splits = [], []
    if args.releases:
        release_reading = points.read(args.releases, by="torch", dirty=args.dirty, count_glibc=args.count_glibc)
        releases, release_notes = series_mod.build(release_reading.points, series_mod.Order("torch"))
        release_splits = series_mod.splits(releases)
        sys.stdout.write(terminal(releases, release_reading.left_out + release_notes, release_splits, "torch"))
        release_splits += [f"left out: {note}" for note in release_reading.left_out + release_notes]
    if args.html:
        commit_url = args.commit_url or commit_address(args.repo)
        args.html.write_text(page.render(all_series, split_lines, reading.left_out + notes, args.by,
                                         releases, release_splits, commit_url), encoding="utf8")
        print(f"page: {args.html}")
    return 0

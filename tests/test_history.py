"""phasebench.history on synthetic results in the saved format: copies of real saved results (a counted run, a
timed default run) with their commit, values and machine changed, ordered along the first-parent history of a
scratch git repository."""

from __future__ import annotations

import copy
import json
import random
import re
import tarfile
from pathlib import Path

import pytest

from phasebench.history import changes, cli, page, points
from phasebench.history import series as series_mod
from phasebench.method import METHOD_VERSION
from phasebench.repository import ROOT
from phasebench.saved import SavedResult
from tests.scratch_git import git, new_repo

# (archive, member): --count instructions, method 3; the default timed run, method 3
COUNTED = (ROOT / "results/instruction-counts/study-e677c9f/spread.tar.xz", "spread/01.json")
TIMED = (ROOT / "tests/fixtures/method-6-default-runs.tar.xz", "default-1.json")
PHASES = ("backward", "loss")


def template(saved: tuple[Path, str]) -> dict:
    """A real saved result, its benchmarks cut to PHASES on cpu."""
    archive, member = saved
    with tarfile.open(archive) as tar:
        result = json.load(tar.extractfile(member))
    result["benchmarks"] = [b for b in result["benchmarks"] if b["extra_info"]["phase"] in PHASES]
    return result


TEMPLATES = {"instructions": template(COUNTED), "time": template(TIMED)}


def saved(commit: str, values: dict[tuple[str, str], float], metric: str = "instructions", torch: str | None = None,
          kernel: str | None = None, valgrind: str | None = None, glibc: str | None = None,
          method: int | None = None,
          testing: dict | None = None, dirty: bool = False) -> dict:
    """A result of `commit` whose (phase, implementation) medians are `values` (instructions, or seconds)."""
    result = copy.deepcopy(TEMPLATES[metric])
    result["commit_info"].update(id=commit, dirty=dirty)
    machine = result["machine_info"]["phasebench"]
    if torch:
        machine["torch"] = torch
    if kernel:
        result["machine_info"]["release"] = kernel
    if valgrind:
        machine["count"]["valgrind"] = valgrind
    if glibc:
        machine["count"]["glibc"] = glibc
    if method:
        machine["method"] = method
    if testing:
        machine["testing"] = testing
    kept = []
    for bench in result["benchmarks"]:
        key = (bench["extra_info"]["phase"], bench["extra_info"]["implementation"])
        if key not in values:
            continue
        value = values[key]
        if metric == "instructions":
            bench["extra_info"]["instructions"] = [value, value, value]
            bench["stats"].update(median=value * 1e-9, data=[value * 1e-9] * 3)
        else:
            bench["stats"].update(median=value, data=[value])
        kept.append(bench)
    result["benchmarks"] = kept
    return result


def write(folder: Path, name: str, result: dict) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result), encoding="utf8")
    return path


def scratch_repo(path: Path, commits: int, side_branch: bool = False) -> tuple[list[str], str | None]:
    """A repository of `commits` empty commits on main (oldest first); with side_branch, one more commit on a
    branch merged into main after the second, which first-parent history does not hold."""
    new_repo(path)
    shas, side = [], None
    for n in range(commits):
        git(path, "commit", "-q", "--allow-empty", "-m", f"commit {n}")
        shas.append(git(path, "rev-parse", "HEAD"))
        if side_branch and n == 1:
            git(path, "checkout", "-q", "-b", "side")
            git(path, "commit", "-q", "--allow-empty", "-m", "on the side")
            side = git(path, "rev-parse", "HEAD")
            git(path, "checkout", "-q", "main")
            git(path, "merge", "-q", "--no-ff", "-m", "merge side", "side")
            shas.append(git(path, "rev-parse", "HEAD"))
    return shas, side


def history(paths: list[Path], repo: Path, by: str = "commit", spreads: dict | None = None):
    reading = points.read([str(p) for p in paths], by=by)
    built, notes = series_mod.build(reading.points, series_mod.Order(by, repo), spreads or {})
    return {(s.key.phase, s.key.implementation, s.key.metric): s for s in built}, built, reading.left_out + notes


COUNTS = {("backward", "python"): 63_600_000.0, ("backward", "cpp"): 63_500_000.0,
          ("loss", "python"): 25_000.0, ("loss", "cpp"): 9_500.0}


def test_one_series_per_case_ordered_along_first_parent_history(tmp_path):
    shas, side = scratch_repo(tmp_path / "repo", 4, side_branch=True)
    results = tmp_path / "results"
    # Written newest first, two runs of one commit, one of a commit only the merged branch holds.
    paths = [write(results, f"{n:04d}_run.json", saved(sha, COUNTS)) for n, sha in enumerate(reversed(shas))]
    paths.append(write(results, "again.json", saved(shas[0], COUNTS)))
    paths.append(write(results, "side.json", saved(side, COUNTS)))
    found, built, notes = history([results], tmp_path / "repo")
    assert len(built) == 4  # backward and loss, python and cpp: one series each
    backward = found[("backward", "python", "instructions")]
    assert [p.x for p in backward.positions] == shas
    assert [len(runs) for runs in backward.runs] == [2, 1, 1, 1, 1]
    assert backward.values == [63_600_000.0] * 5
    assert any("not on the first-parent history" in note and "side.json" in note for note in notes)


def test_series_are_split_by_metric_method_and_machine_and_say_why(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 3)
    times = {key: 0.001 for key in COUNTS}
    paths = [write(tmp_path, "a.json", saved(shas[0], COUNTS)),
             write(tmp_path, "b.json", saved(shas[1], COUNTS, valgrind="valgrind-3.22.0")),
             write(tmp_path, "c.json", saved(shas[0], times, metric="time")),
             write(tmp_path, "d.json", saved(shas[1], times, metric="time", kernel="6.1.0-other")),
             write(tmp_path, "e.json", saved(shas[2], times, metric="time", method=2))]
    _, built, _ = history(paths, tmp_path / "repo")
    backward_python = [s for s in built if (s.key.phase, s.key.implementation) == ("backward", "python")]
    assert len(backward_python) == 5  # two count machines, two time machines, one time method
    assert all(len(s.positions) == 1 for s in backward_python)
    lines = "\n".join(series_mod.splits(built))
    assert "split on valgrind" in lines and "valgrind-3.22.0" in lines
    assert "split on kernel" in lines and "6.1.0-other" in lines
    assert "split on method" in lines
    assert "times and instruction counts are separate series" in lines


def test_series_of_different_calls_per_round_are_kept_apart():
    """A median per call of one call a round and of several is not the same statistic: a case's series is keyed on
    its calls per round where a round held more than one; one call a round keeps the key it always had."""
    def key_of(calls: int | None):
        result = saved("a" * 40, {("loss", "python"): 0.001}, metric="time")
        if calls is None:
            result["benchmarks"][0]["stats"].pop("iterations", None)
        else:
            result["benchmarks"][0]["stats"]["iterations"] = calls
        (point,) = points.points_of(SavedResult.from_json(result, "run.json"), "commit")
        return point.key

    assert key_of(6) != key_of(5)
    assert ("calls per round", "6") in key_of(6).machine and key_of(6).group() != key_of(5).group()
    assert key_of(1) == key_of(None) and not [name for name, _ in key_of(1).machine if name == "calls per round"]


def test_a_count_that_records_no_glibc_takes_the_one_it_is_said_to_have_run_with(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 3)
    paths = [write(tmp_path, "old.json", saved(shas[0], COUNTS)),  # counted before glibc was recorded
             write(tmp_path, "new.json", saved(shas[1], COUNTS, glibc="2.36")),
             write(tmp_path, "other.json", saved(shas[2], COUNTS, glibc="2.41"))]
    reading = points.read([str(p) for p in paths], count_glibc="2.36")
    glibc = {Path(p.source).name: dict(p.key.machine)["glibc"] for p in reading.points}
    assert glibc == {"old.json": "2.36", "new.json": "2.36", "other.json": "2.41"}
    built, _ = series_mod.build(reading.points, series_mod.Order("commit", tmp_path / "repo"), {})
    joined = [s for s in built if (s.key.phase, s.key.implementation) == ("loss", "cpp")]
    assert sorted(len(s.positions) for s in joined) == [1, 2]  # 2.36 joined, 2.41 apart
    assert "split on glibc" in "\n".join(series_mod.splits(built))
    unsaid = points.read([str(paths[0])])
    assert {dict(p.key.machine)["glibc"] for p in unsaid.points} == {"unrecorded"}


def test_count_change_points_beyond_the_count_gates_threshold(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 5)
    paths = []
    for n, sha in enumerate(shas):
        values = dict(COUNTS)
        if n >= 3:  # a 2 % step in python's backward at the fourth commit
            values[("backward", "python")] *= 1.02
        values[("backward", "cpp")] *= 1 + 0.001 * n  # steps of 0.1 %: under the gate's threshold
        paths.append(write(tmp_path, f"{n}.json", saved(sha, values)))
    found, _, _ = history(paths, tmp_path / "repo", spreads=changes.default_count_spreads())
    steps = found[("backward", "python", "instructions")].changes
    assert [(s.range, round(s.change.change_pct, 3)) for s in steps] == [(f"{shas[2][:7]}..{shas[3][:7]}", 2.0)]
    assert steps[0].change.threshold_pct == 0.5  # the gate's minimum: the case's measured spread is tiny
    assert not steps[0].confirmed  # each neighbour ran once
    assert found[("backward", "cpp", "instructions")].changes == []


def test_a_change_point_is_confirmed_by_reruns_of_both_neighbours(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 3)
    paths = []
    for n, sha in enumerate(shas):
        for run in range(2):
            values = {key: value * (1.05 if n == 2 else 1.0) * (1 + 1e-5 * run) for key, value in COUNTS.items()}
            paths.append(write(tmp_path, f"{n}-{run}.json", saved(sha, values)))
    found, _, _ = history(paths, tmp_path / "repo")
    (step,) = found[("loss", "cpp", "instructions")].changes
    assert step.confirmed and step.range == f"{shas[1][:7]}..{shas[2][:7]}"


def test_time_change_point_found_at_its_commit_and_none_in_noise(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 14)
    rng = random.Random(3)
    paths = []
    for n, sha in enumerate(shas):
        values = {("backward", "python"): 0.0015 * (1.3 if n >= 8 else 1.0) * rng.lognormvariate(0, 0.02),
                  ("backward", "cpp"): 0.0014 * rng.lognormvariate(0, 0.02)}
        paths.append(write(tmp_path, f"{n}.json", saved(sha, values, metric="time")))
    found, _, _ = history(paths, tmp_path / "repo")
    (step,) = found[("backward", "python", "time")].changes
    assert step.range == f"{shas[7][:7]}..{shas[8][:7]}"
    assert 25 < step.change.change_pct < 35
    assert found[("backward", "cpp", "time")].changes == []


def test_ordered_by_torch_version_with_cuda_builds_apart(tmp_path):
    paths = [write(tmp_path, f"{n}.json", saved("0" * 40, COUNTS, metric="time", torch=torch))
             for n, torch in enumerate(("2.10.0+cu130", "2.9.1+cu128", "2.14.1+cu130", "2.10.0+cpu"))]
    reading = points.read([str(p) for p in paths], by="torch")
    built, _ = series_mod.build(reading.points, series_mod.Order("torch"), {})
    backward = [s for s in built if (s.key.phase, s.key.implementation) == ("backward", "python")]
    assert sorted([p.x for p in s.positions] for s in backward) == [["2.10.0+cpu"],
                                                                    ["2.9.1+cu128", "2.10.0+cu130", "2.14.1+cu130"]]


def test_the_page_by_torch_version_gives_each_release_its_ratio_and_the_interpreters_share(tmp_path):
    by_release = {"2.12.1+cu130": 1.25, "2.13.0+cu130": 2.0}  # python / cpp of loss
    paths = [write(tmp_path, f"{n}.json", saved("0" * 40, {("loss", "python"): 10_000.0 * ratio,
                                                           ("loss", "cpp"): 10_000.0}, torch=torch))
             for n, (torch, ratio) in enumerate(by_release.items())]
    reading = points.read([str(p) for p in paths], by="torch")
    built, _ = series_mod.build(reading.points, series_mod.Order("torch"), {})
    html = page.render(built, [], [], "torch")
    rows = re.findall(r'<tr data-pair="python / cpp" data-x="([^"]+)">.*?<td>([\d.]+)×</td><td>([-\d.]+) %</td>', html)
    assert rows == [("2.12.1+cu130", "1.250", "20.0"), ("2.13.0+cu130", "2.000", "50.0")]
    assert "interpreter's share" not in page.render(built, [], [], "commit")  # along commits: the ratio chart alone


def test_one_page_holds_the_commits_and_then_the_torch_releases(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 2)
    history_paths = [write(tmp_path / "history", f"{n}.json", saved(sha, COUNTS)) for n, sha in enumerate(shas)]
    release_paths = [write(tmp_path / "releases", f"{n}.json", saved("0" * 40, COUNTS, torch=torch))
                     for n, torch in enumerate(("2.12.1+cu130", "2.13.0+cu130"))]
    out = tmp_path / "page.html"
    assert cli.main([str(tmp_path / "history"), "--repo", str(tmp_path / "repo"), "--releases",
                     str(tmp_path / "releases"), "--html", str(out)]) == 0
    html = out.read_text(encoding="utf8")
    by_commit, by_torch = html.split('<h1 id="releases">')
    assert by_commit.count('data-by="commit"') == 1 and 'data-by="torch"' not in by_commit
    assert by_torch.count('data-by="torch"') == 1 and len(release_paths) == len(history_paths)
    assert "interpreter's share" in by_torch and "interpreter's share" not in by_commit
    rows = re.findall(r'<tr data-pair="python / cpp" data-x="([^"]+)"><td>[^<]*</td><td>[^<]*</td><td>([\d.]+)×',
                      by_torch)
    assert {("2.12.1+cu130", "2.632"), ("2.13.0+cu130", "2.632")} <= set(rows)  # loss: 25,000 / 9,500


def test_testing_runs_and_dirty_trees_are_left_out_with_their_reason(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 1)
    write(tmp_path / "r", "slowed.json", saved(shas[0], COUNTS, testing={"slow_phase": "python/loss:1000work"}))
    write(tmp_path / "r", "dirty.json", saved(shas[0], COUNTS, dirty=True))
    write(tmp_path / "r", "not-a-result.json", {"spread_pct": {}})
    reading = points.read([str(tmp_path / "r")])
    assert reading.points == []
    assert sorted(line.split(": ", 1)[1].split(" (")[0] for line in reading.left_out) == [
        "a testing run", "run on a tree with uncommitted changes"]
    assert len(points.read([str(tmp_path / "r")], dirty=True).points) == 4


def test_the_command_prints_a_line_per_phase_and_writes_the_page(tmp_path, capsys):
    shas, _ = scratch_repo(tmp_path / "repo", 3)
    for n, sha in enumerate(shas):
        write(tmp_path / "results", f"{n}.json", saved(sha, {k: v * (1.1 if n == 2 else 1) for k, v in COUNTS.items()}))
    out = tmp_path / "page.html"
    assert cli.main([str(tmp_path / "results"), "--repo", str(tmp_path / "repo"), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    line = next(text for text in printed.splitlines() if text.strip().startswith("loss python"))
    assert "3 pts" in line and "latest" in line and "+10.0 %" in line and f"{shas[1][:7]}..{shas[2][:7]}" in line
    html = out.read_text(encoding="utf8")
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    assert html.count('class="point"') == 12  # 2 phases x 2 implementations x 3 commits
    assert page.SCRIPT.strip() in html
    assert cli.main([str(tmp_path / "repo"), "--repo", str(tmp_path / "repo")]) == 2  # no result there


@pytest.mark.parametrize(("values", "expected"), [([1e6] * 4, []), ([1e6, 1e6, 1.006e6, 1.006e6], [2])])
def test_count_changes_alone(values, expected):
    assert [c.index for c in changes.count_changes(values, 0.5)] == expected


# -- what a step is a change of, the spread beside it, each series' newest point ------------------------------

BRACKETS = ("callgrind 2: zero, toggle, body, toggle, dump", "callgrind 3: the type attribute cache emptied first")


def bracketed(commit: str, values: dict, bracket: str) -> dict:
    result = saved(commit, values)
    result["machine_info"]["phasebench"]["count"]["bracket"] = bracket
    return result


def test_a_step_where_the_count_bracket_changed_is_a_change_of_measurement_apart_from_code(tmp_path, capsys):
    shas, _ = scratch_repo(tmp_path / "repo", 5)
    results, repo = tmp_path / "results", tmp_path / "repo"
    for n, sha in enumerate(shas):  # a code step in python's backward at the third commit; the bracket changes at
        # the fourth, where python's loss steps with it
        values = {key: value * (1.1 if key == ("backward", "python") and n >= 2 else 1.0)
                  * (1.1 if key == ("loss", "python") and n >= 3 else 1.0) for key, value in COUNTS.items()}
        write(results, f"{n}.json", bracketed(sha, values, BRACKETS[n >= 3]))
    found, _, _ = history([results], repo)
    (code,) = found[("backward", "python", "instructions")].changes
    (measured,) = found[("loss", "python", "instructions")].changes
    assert (code.measurement, code.kind("commit")) == ((), "code")
    assert (measured.measurement, measured.kind("commit")) == (("count bracket",), "measurement")
    assert measured.range == f"{shas[2][:7]}..{shas[3][:7]}"

    assert cli.main([str(results), "--repo", str(repo), "--html", str(tmp_path / "page.html")]) == 0
    printed = capsys.readouterr().out
    lines = {text.split()[0] + " " + text.split()[1]: text for text in printed.splitlines() if " pts " in text}
    assert "+10.0 % (a change of measurement: count bracket)" in lines["loss python"]
    assert "measurement" not in lines["backward python"] and "+10.0 %" in lines["backward python"]
    assert ("change points of code: 1 (1 dearer, 0 cheaper; 0 confirmed); changes of measurement, not of code: 1 "
            "(1 dearer, 0 cheaper; 0 confirmed; count bracket)") in printed.splitlines()

    html = (tmp_path / "page.html").read_text(encoding="utf8")
    rows = re.findall(r'<tr class="change-row ([^"]*)"[^>]*data-impl="([^"]+)"[^>]*data-kind="([^"]+)">'
                      r'<td class="size">(.)</td><td>([^<]+)</td>.*?<td>([^<]*)</td></tr>', html)
    # The change of code first, though the change of measurement is newer; the latter hollow, grey, and named.
    assert [(impl, phase, kind, mark, said) for _, impl, kind, mark, phase, said in rows] == [
        ("python", "backward", "code", "▲", "code"),
        ("python", "loss", "measurement", "△", "measurement: count bracket")]
    assert rows[1][0].split() == ["up", "measurement"]
    assert '<select id="f-kind" data-field="kind">' in html
    assert '<g class="change unconfirmed measurement" data-impl="python"' in html

    assert cli.main([str(results), "--repo", str(repo), "--unconfirmed"]) == 0
    listed = {(row[6], row[5]): row for row in (line.split("\t") for line in capsys.readouterr().out.splitlines())}
    assert listed[("loss", "python")][11:] == ["measurement: count bracket"]
    assert listed[("backward", "python")][11:] == ["code"]


def test_a_measurement_field_one_side_did_not_record_makes_no_change_of_measurement():
    key = points.SeriesKey((), 3, "instructions", "cpu", "", "python", "loss")

    def runs(bracket, sources):
        return [points.Point("r", key, "a" * 40, None, 1.0, (), "f", context={"count bracket": bracket,
                                                                              "method sources": sources})]

    assert series_mod.measurement_changed(runs("b1", None), runs("b2", None)) == ("count bracket",)
    assert series_mod.measurement_changed(runs(None, "h1"), runs("b2", "h2")) == ("method sources",)
    assert series_mod.measurement_changed(runs("b1", "h1"), runs("b1", "h1")) == ()


def test_the_spread_beside_a_change_is_labelled_descriptive_not_a_confidence_interval(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 3)
    for n, sha in enumerate(shas):
        write(tmp_path / "results", f"{n}.json", saved(sha, {k: v * (1.1 if n == 2 else 1) for k, v in COUNTS.items()}))
    found, built, _ = history([tmp_path / "results"], tmp_path / "repo")
    assert found[("loss", "python", "instructions")].changes[0].change.low_pct is not None
    html = page.render(built, [], [], "commit")
    head = html[html.index('<table id="changes">'):html.index("</tr>")]
    assert "<th>spread (descriptive)</th>" in head and "interval" not in head
    assert "it is not a confidence interval for the change" in html
    assert "95 % interval" not in html  # nor in a change point's hover text on the chart


def test_the_page_and_the_terminal_say_each_series_newest_commit_its_date_and_its_method(tmp_path, capsys):
    shas, _ = scratch_repo(tmp_path / "repo", 3)
    results, repo = tmp_path / "results", tmp_path / "repo"
    for n, sha in enumerate(shas):  # loss cpp stops a commit earlier than the rest
        write(results, f"{n}.json", saved(sha, {k: v for k, v in COUNTS.items() if n < 2 or k != ("loss", "cpp")}))
    dates = {sha: git(repo, "log", "-1", "--format=%cs", sha) for sha in shas}
    out = tmp_path / "page.html"
    assert cli.main([str(results), "--repo", str(repo), "--html", str(out), "--commit-url",
                     "https://example.org/c/{sha}"]) == 0
    printed = capsys.readouterr().out
    html = out.read_text(encoding="utf8")
    table = html[html.index('<table id="newest">'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<tr class="(older|current)" data-commit="([0-9a-f]*)" data-date="([^"]*)" '
                      r'data-method="(\d+)"><td>[^<]*</td><td class="num">(\d+)</td><td><a href="([^"]+)">', table)
    assert sorted(rows) == sorted([("older", shas[2], dates[shas[2]], "3", "3", f"https://example.org/c/{shas[2]}"),
                                   ("older", shas[1], dates[shas[1]], "3", "1", f"https://example.org/c/{shas[1]}")])
    assert f"measures with method {METHOD_VERSION}" in html and "newest series are of method 3, older" in html
    assert (f"cpp: newest {shas[1][:7]} of {dates[shas[1]]}, method 3; python: newest {shas[2][:7]} of "
            f"{dates[shas[2]]}, method 3") in html  # the loss chart's own line
    assert f"  newest: {shas[2][:7]} of {dates[shas[2]]}, method 3" in printed.splitlines()
    assert f"  newest: {shas[1][:7]} of {dates[shas[1]]}, method 3" in printed.splitlines()
    assert (f"the series' newest method: 3; the code that reads them measures with method {METHOD_VERSION} "
            "(a run of it joins none of these series)") in printed.splitlines()


def test_a_release_series_newest_point_names_the_commit_that_ran_it_and_that_commits_recorded_date(tmp_path):
    for n, torch in enumerate(("2.12.1+cu130", "2.13.0+cu130")):
        result = saved("ab" * 20, COUNTS, torch=torch)
        result["commit_info"]["time"] = f"2026-0{n + 1}-15T10:00:00+00:00"
        write(tmp_path, f"{n}.json", result)
    built, _ = series_mod.build(points.read([str(tmp_path)], by="torch").points, series_mod.Order("torch"), {})
    newest = built[0].newest()
    assert (newest.at.x, newest.commit, newest.date, newest.method) == ("2.13.0+cu130", "ab" * 20, "2026-02-15", 3)
    assert '<td>2.13.0+cu130 at abababa</td><td>2026-02-15</td>' in page.render(built, [], [], "torch")

"""The history page (phasebench/history/page.py): its axes, its list of change points on copies of the real count
history (a planted step listed first, noise alone listing nothing), its size as the points grow, and, in a real
browser, its first screen.

The browser test uses Playwright's Python API with Debian's chromium (executable_path; no browser of Playwright's
own is downloaded), the page opened from disk with every request beyond it refused; it saves a screenshot of the
first screen beside the page. Skipped, with the reason, where no Chromium or no Playwright is installed (.ci/run
installs both)."""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
from pathlib import Path

import pytest

from phasebench.history import changes, cli, page, points
from phasebench.history import series as series_mod
from phasebench.repository import ROOT

HISTORY = ROOT / "results" / "history"
CHROMIUM = os.environ.get("PHASEBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ROW = re.compile(r'<tr class="change-row [^"]*"[^>]*data-range="([^"]+)" data-phase="([^"]+)" data-impl="([^"]+)" '
                 r'data-metric="([^"]+)"')


# -- axes ----------------------------------------------------------------------------------------------------

def one_two_five(value: float) -> bool:
    """1, 2 or 5 times a power of ten."""
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5))


def round_ticks(axis) -> bool:
    """Linear: evenly spaced by a 1-2-5 step, each a multiple of it; log: each a 1-2-5 value."""
    if axis.log:
        return all(one_two_five(t) for t in axis.ticks)
    step = axis.step
    multiples = [t / step for t in axis.ticks]
    return one_two_five(step) and all(abs(m - round(m)) < 1e-6 for m in multiples) and all(
        abs(b - a - 1) < 1e-6 for a, b in zip(multiples, multiples[1:]))


@pytest.mark.parametrize("values", [
    [36_180_000.0, 36_460_000.0, 36_490_000.0],  # forward's counts: the old labels left Python's above the top one
    [1.008693, 1.008700],
    [0.00211, 0.00212, 0.00195],
    [979.0, 8749.0],  # a log axis
    [230e-9, 2.32e-6, 3.04e-3],
    [5.0],
    [25_438.0, 9_118.0, 19_662.0, 22_000.0],
])
def test_an_axis_has_at_most_six_round_labels_and_every_value_within_them(values):
    axis = page.Axis(values, 0, 100)
    assert 2 <= len(axis.ticks) <= page.MOST_TICKS
    assert axis.ticks[0] <= min(values) and max(values) <= axis.ticks[-1]
    assert round_ticks(axis), axis.ticks
    labels = page.tick_labels(axis, "instructions" if values[0] > 1 else "time")
    assert len(set(labels)) == len(labels), labels  # no two labels read the same
    assert all(0 <= axis.y(v) <= 100 for v in values)


def test_a_ratio_axis_spans_at_least_the_run_to_run_spread_so_noise_draws_flat():
    wobble = [1.008693, 1.008700, 1.008695]  # moves by 0.0007 %; the series' spread is 0.05 %
    flat = page.Axis(wobble, 0, 100, spread=0.0005)
    assert flat.ticks[-1] - flat.ticks[0] >= 4 * 0.0005 * 1.0087
    ys = [flat.y(v) for v in wobble]
    assert max(ys) - min(ys) < 1  # under a pixel of a 100-pixel chart
    labels = page.tick_labels(flat, "instructions", ratio=True)
    assert all(len(label.rstrip("×").split(".")[1]) <= 4 for label in labels)  # not six decimals
    alone = page.Axis(wobble, 0, 100)  # without its spread, the wobble fills the chart: the check above can fail
    assert max(alone.y(v) for v in wobble) - min(alone.y(v) for v in wobble) > 20


# -- the list of change points on copies of the real count history ---------------------------------------------

def copy_counts(tmp_path: Path, edit) -> Path:
    """results/history/instructions copied, each compact series' text passed through edit(held) first."""
    folder = tmp_path / "instructions"
    folder.mkdir()
    for path in sorted((HISTORY / "instructions").glob("*.json")):
        held = json.loads(path.read_text(encoding="utf8"))
        edit(held)
        (folder / path.name).write_text(json.dumps(held), encoding="utf8")
    return folder


def newest_commit(held: dict) -> str:
    order = series_mod.Order("commit", ROOT).commits
    return max((entry["commit"] for entry in held["points"]), key=lambda sha: order[sha].order)


def build_page(folder: Path, out: Path) -> str:
    assert cli.main([str(folder), "--repo", str(ROOT), "--html", str(out), "--commit-url",
                     "https://example.org/commit/{sha}"]) == 0
    return out.read_text(encoding="utf8")


def planted_copy(tmp_path: Path) -> tuple[Path, str]:
    """The real count history with optimizer_init python's newest point (of its newest pins) raised by 1.5 times
    its series' threshold; the short hash of that point's commit."""
    spreads = changes.default_count_spreads()
    planted = []

    def plant(held):
        if (held["key"]["phase"], held["key"]["implementation"]) != ("optimizer_init", "python") or \
                not any(name == "pins" and "GLIBC_TUNABLES" in value for name, value in held["key"]["machine"]):
            return
        threshold = changes.count_threshold_pct(held["fullname"], spreads,
                                                [entry["rounds"] for entry in held["points"]])
        factor = 1 + 1.5 * threshold / 100
        last = newest_commit(held)
        for entry in held["points"]:
            if entry["commit"] == last:
                entry["value"] *= factor
                entry["rounds"] = [r * factor for r in entry["rounds"]]
        planted.append(last[:7])

    folder = copy_counts(tmp_path, plant)
    assert len(planted) == 1
    return folder, planted[0]


def test_a_step_planted_at_one_and_a_half_thresholds_is_the_first_row(tmp_path):
    folder, short = planted_copy(tmp_path)
    html = build_page(folder, tmp_path / "index.html")
    rows = ROW.findall(html)
    assert rows, "no change point listed"
    step_range, phase, impl, metric = rows[0]
    assert (phase, impl, metric) == ("optimizer_init", "python", "instructions")
    assert step_range.endswith(".." + short)
    first = html[html.index('<tr class="change-row'):]
    first = first[:first.index("</tr>")]
    assert 'data-direction="up"' in first and "https://example.org/commit/" in first
    size, low, high = (float(v) for v in re.search(r'([+-][\d.]+) %</td><td class="num">\[([+-][\d.]+), '
                                                     r'([+-][\d.]+)\] %', first).groups())
    assert low <= size <= high and low > 0


def test_a_change_point_carries_its_seeded_interval():
    rng = random.Random(3)
    before = [rng.lognormvariate(0, 0.02) for _ in range(6)]
    after = [1.3 * rng.lognormvariate(0, 0.02) for _ in range(6)]
    low, high = changes.bootstrap_interval(before, after)
    assert 20 < low < 30 < high < 40
    assert changes.bootstrap_interval(before, after) == (low, high)  # seeded: the same page every build
    same = changes.bootstrap_interval(before, before)
    assert same[0] < 0 < same[1]
    times = [0.0015 * (1.3 if n >= 8 else 1.0) * rng.lognormvariate(0, 0.02) for n in range(16)]
    positions = [series_mod.Position(f"{n:040x}", f"{n:07x}", str(n), n) for n in range(16)]
    key = points.SeriesKey((("CPU", "x"),), 3, "time", "cpu", "", "python", "backward")
    timed = series_mod.Series(key, positions, [[points.Point(source="t", key=key, commit=p.x, torch=None, value=v,
                                                             rounds=(), fullname="test_phase[backward-python-cpu]")]
                                               for p, v in zip(positions, times)])
    (step,) = series_mod.find_changes(timed, {})
    assert step.change.low_pct < step.change.change_pct < step.change.high_pct and step.change.low_pct > 15


def test_the_real_count_history_with_noise_alone_lists_nothing(tmp_path):
    spreads = changes.default_count_spreads()
    rng = random.Random(1)

    def noise(held):
        """Every run the series' first value, moved by noise within its measured spread."""
        spread = spreads.get(held["fullname"], 0.05) / 100
        level = held["points"][0]["value"]
        for entry in held["points"]:
            entry["rounds"] = [level * (1 + rng.uniform(-spread / 2, spread / 2)) for _ in entry["rounds"]]
            entry["value"] = sorted(entry["rounds"])[len(entry["rounds"]) // 2]

    html = build_page(copy_counts(tmp_path, noise), tmp_path / "index.html")
    assert ROW.findall(html) == []
    assert "No change points" in html
    real = build_page(HISTORY / "instructions", tmp_path / "real.html")  # the same page lists the real history's
    assert len(ROW.findall(real)) >= 3


def test_no_line_crosses_a_pin_or_method_change_and_the_change_is_marked(tmp_path):
    html = build_page(HISTORY / "instructions", tmp_path / "real.html")
    assert cli.main([str(HISTORY / "time"), "--repo", str(ROOT), "--html", str(tmp_path / "time.html")]) == 0
    marked = {}
    for text in (html, (tmp_path / "time.html").read_text(encoding="utf8")):
        for card in text.split('<div class="chart"')[1:]:
            marks = [(float(x), what) for x, what in re.findall(
                r'<g class="key-change"[^>]*><line x1="([\d.]+)"[^>]*/><text[^>]*>([^<]*)</text>', card)]
            for x, what in marks:
                marked[what] = marked.get(what, 0) + 1
                for line in re.findall(r'<polyline [^>]*points="([^"]+)"', card):
                    xs = [float(point.split(",")[0]) for point in line.split()]
                    assert max(xs) < x or min(xs) > x, f"a line crosses the change at {x}: {what}"
    assert any(what.startswith("pins +GLIBC_TUNABLES=") for what in marked)  # the counts' tcache pin
    assert any("method 2 → 3" in what for what in marked)  # the times' method change


# -- growth --------------------------------------------------------------------------------------------------

def synthetic(commits: int) -> list[series_mod.Series]:
    """Two phases, two implementations, `commits` counted commits (a few runs each)."""
    order = series_mod.Order("torch")
    order.by = "commit"
    rng = random.Random(commits)
    found = []
    for n in range(commits):
        sha = f"{n:040x}"
        order.commits[sha] = series_mod.Position(sha, sha[:7], f"{sha[:7]} commit number {n}", n)
        for phase, impl, level in (("loss", "python", 25_000), ("loss", "cpp", 9_500), ("forward", "python", 36e6),
                                   ("forward", "cpp", 36.1e6)):
            value = level * (1 + rng.uniform(-1e-4, 1e-4)) * (1.05 if n > commits // 2 else 1)
            key = points.SeriesKey((("valgrind", "valgrind-3.19.0"),), 3, "instructions", "cpu", "", impl, phase)
            found.append(points.Point(source="synthetic", key=key, commit=sha, torch="2.14.1", value=value,
                                      rounds=(value,) * 3, fullname=f"test_phase[{phase}-{impl}-cpu]",
                                      language=impl, reference="cpp" if impl == "python" else "python"))
    built, _ = series_mod.build(found, order, {})
    return built


def test_twice_the_points_give_at_most_about_twice_the_bytes():
    built = synthetic(40)
    steps = [found for s in built for found in s.changes]
    assert steps and all(found.change.low_pct is not None for found in steps)  # the planted 5 % steps
    small, large = (page.render(series, [], [], "commit") for series in (built, synthetic(80)))
    assert large.count('class="point"') == 2 * small.count('class="point"') == 2 * 160
    assert len(large.encode()) <= 2.1 * len(small.encode())
    assert "http://" not in large.replace("http://www.w3.org/2000/svg", "") and "https://" not in large


# -- in a browser ------------------------------------------------------------------------------------------

def browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright's Python package is not installed (pip install -r requirements.txt)")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    return sync_playwright


def terminal_changes(text: str) -> set[tuple[str, str, str, str]]:
    """(phase, implementation, range, change) of every change point `python -m phasebench.history` prints."""
    found = set()
    for line in text.splitlines():
        match = re.match(r"  (\S+) (\S+) .* change points: (.*)$", line)
        if match and match.group(3) != "none":
            for step in match.group(3).split("; "):
                step_range, change = step.split()[:2]
                found.add((match.group(1), match.group(2), step_range, f"{change} %"))
    return found


def test_the_present_history_in_chromium(tmp_path, capsys):
    sync_playwright = browser_or_skip()
    out = tmp_path / "index.html"
    assert cli.main([str(HISTORY / "instructions"), str(HISTORY / "time"), "--releases", str(HISTORY / "torch"),
                     "--repo", str(ROOT), "--html", str(out)]) == 0
    expected = terminal_changes(capsys.readouterr().out)
    assert expected
    requested = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            view = browser.new_page(viewport={"width": 1280, "height": 800})
            view.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else (requested.append(route.request.url), route.abort()))
            view.goto(out.as_uri())
            rows = view.locator("#changes tr.change-row")
            drawn = rows.evaluate_all("rs => rs.map(r => [r.getBoundingClientRect().top, "
                                      "r.getBoundingClientRect().bottom, [...r.cells].map(c => c.textContent.trim())])")
            for top, bottom, _ in drawn:
                assert 0 <= top and bottom <= 800, "a change point's row is below the first screen"
            assert {(cells[1], cells[2], cells[4], cells[5]) for _, _, cells in drawn} == expected
            view.screenshot(path=str(out.with_name("first-screen.png")))

            visible = view.locator(".chart:visible")
            assert visible.count() >= 1
            for name in (row.get_attribute("data-case") for row in [rows.first, rows.last]):
                view.locator(f'#changes tr.change-row[data-case="{name}"]').first.click()
                cards = view.locator(".chart:visible")
                assert cards.count() >= 1
                assert all(cards.nth(i).get_attribute("data-case") == name for i in range(cards.count()))
            other = next(v for v in view.locator("#f-case option").evaluate_all("os => os.map(o => o.value)")
                         if v.endswith("|forward"))
            view.select_option("#f-case", other)
            cards = view.locator(".chart:visible")
            assert cards.count() >= 1 and cards.first.get_attribute("data-case") == other

            for svg in cards.first.locator("svg").all():  # the axis rule, as drawn
                ticks, circles = svg.evaluate(
                    "s => [[...s.querySelectorAll('text.tick')].map(t => +t.getAttribute('y') - 4), "
                    "[...s.querySelectorAll('circle')].map(c => [+c.getAttribute('cy'), c.getAttribute('tabindex'), "
                    "c.querySelector('title').textContent])]")
                assert 2 <= len(ticks) <= page.MOST_TICKS and circles
                for cy, tabindex, said in circles:
                    assert min(ticks) - 0.1 <= cy <= max(ticks) + 0.1
                    assert tabindex == "0" and "method" in said and "machine" in said

            folder, short = planted_copy(tmp_path)
            view.goto(build_page(folder, tmp_path / "planted.html") and (tmp_path / "planted.html").as_uri())
            first = view.locator("#changes tr.change-row").first
            box = first.bounding_box()
            assert box and box["y"] + box["height"] <= 800 and first.is_visible()
            assert first.get_attribute("data-phase") == "optimizer_init"
            assert first.get_attribute("data-range").endswith(".." + short)

            view.goto(out.as_uri())
            view.select_option("#f-direction", "up")
            assert all(r.get_attribute("data-direction") == "up" for r in view.locator("#changes tr.change-row:visible").all())
            assert view.locator('#changes tr.change-row[data-direction="down"]').first.is_hidden()
        finally:
            browser.close()
    assert requested == []  # nothing fetched beyond the file
    assert out.with_name("first-screen.png").stat().st_size > 1000

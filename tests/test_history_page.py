"""The history page in a real browser: Playwright's Python API launches Debian's chromium (executable_path; no
browser of Playwright's own is downloaded), opens the page from disk with every request beyond it refused, and
checks that each phase's chart holds its points, that a change point shows its commit range, and that the filters
hide what they should; a screenshot is saved beside the page. Skipped, with the reason, where no Chromium or no
Playwright is installed (.ci/run installs both)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from phasebench.history import cli
from tests.test_history import COUNTS, saved, scratch_repo, write

CHROMIUM = os.environ.get("PHASEBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
COMMITS = 4


def browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright's Python package is not installed (pip install -r requirements.txt)")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    return sync_playwright


@pytest.fixture(scope="module")
def history_page(tmp_path_factory):
    """A page of COMMITS commits, python's loss 10 % dearer from the third on; the commits' hashes."""
    folder = tmp_path_factory.mktemp("history")
    shas, _ = scratch_repo(folder / "repo", COMMITS)
    for n, sha in enumerate(shas):
        values = dict(COUNTS)
        if n >= 2:
            values[("loss", "python")] *= 1.10
        write(folder / "results", f"{n}.json", saved(sha, values))
    out = folder / "history.html"
    assert cli.main([str(folder / "results"), "--repo", str(folder / "repo"), "--html", str(out)]) == 0
    return out, shas


def test_the_page_in_chromium(history_page):
    sync_playwright = browser_or_skip()
    out, shas = history_page
    requested = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else (requested.append(route.request.url), route.abort()))
            page.goto(out.as_uri())
            charts = page.locator(".chart")
            assert charts.count() == 2  # backward and loss
            for i in range(charts.count()):
                chart = charts.nth(i)
                expected = json.loads(chart.get_attribute("data-points"))
                assert expected == {"python": COMMITS, "cpp": COMMITS}
                for impl, count in expected.items():
                    assert chart.locator(f'g.series[data-impl="{impl}"] circle.point').count() == count
                assert chart.locator("circle.ratio-point").count() == COMMITS
            loss = page.locator('.chart[data-phase="loss"]')
            change = loss.locator('g.change[data-impl="python"]')
            assert change.count() == 1
            assert change.locator("text").text_content() == f"{shas[1][:7]}..{shas[2][:7]} +10.0 %"
            first = loss.locator('g.series[data-impl="python"] circle.point').first
            assert shas[0][:7] in first.locator("title").text_content()
            page.screenshot(path=str(out.with_suffix(".png")), full_page=True)
            page.select_option("#f-phase", "loss")
            assert page.locator('.chart[data-phase="backward"]').is_hidden()
            page.select_option("#f-impl", "cpp")
            assert loss.locator('g.series[data-impl="python"]').is_hidden()
            assert loss.locator('g.series[data-impl="cpp"]').is_visible()
        finally:
            browser.close()
    assert requested == []  # nothing fetched beyond the file
    assert out.with_suffix(".png").stat().st_size > 1000

"""The docs' checks, in one module over tests/docs_text.py's machinery (which files, their prose, the findings):

- citations that cannot rot (docs/architecture.md#the-c-abi-and-the-build): code, --help texts, .ci/ and the
  workflows cite the docs by file and anchor (docs/method.md#what-is-measured), and every cited file and anchor must
  exist, with anchors as GitHub makes them from headings. Markdown links between the docs and from the README are
  checked the same way, and so is every path the pages, the comments and docstrings of the code, requirements.txt
  and pyproject.toml cite (bench/test_phases.py, results/…): a path that moves or goes fails here;
- the words: the manual is in the present tense and machine-independent, and the code's comments explain the code.
  Outside the results page (docs/results.md) and results/, no page under docs/ nor the README holds a commit hash, a
  date, a time of day or "this machine" (a reader has neither the night nor the machine); the provenance of a figure
  is the results page's. No comment or docstring of the code, requirements.txt or pyproject.toml holds an issue
  number, a date or a note of what held up to which commit (a reader cannot follow the first, and the others are
  history). Each finding reads file:line;
- the README: it fits on a few screens, and its answer is the saved result's (results/answer/README.md says how it
  was made): every row of its answer table is the row `python -m phasebench.report`'s answer prints for that result.

The generated reference pages have their own module (tests/test_reference_pages.py), and so do the recipes, run as
written (tests/test_docs_recipes.py)."""

from __future__ import annotations

import itertools
import re
import unicodedata
from pathlib import Path

from phasebench.report.findings import answer
from phasebench.repository import ROOT
from phasebench.saved import SavedResult
from tests import docs_text

CITATION = re.compile(r"(?<![\w/.-])(docs/[\w./-]+?\.md)(#[\w-]+)?")
LINK = re.compile(r"\]\(([^)\s#]*\.md)?(#[^)\s]+)?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
TEXT_SUFFIXES = {".py", ".cpp", ".h", ".yml", ".yaml", ".sh", ".toml", ".txt", ".md", ".ini", ""}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).strip().lower()
    kept = "".join(ch for ch in text if ch in "-_ " or unicodedata.category(ch)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown file, repeats suffixed -1, -2, … as GitHub suffixes them."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in path.read_text(encoding="utf8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            found.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
    return found


def tracked_text_files(root: Path) -> list[Path]:
    return [root / name for name in docs_text.tracked(root)
            if Path(name).suffix in TEXT_SUFFIXES and (root / name).is_file()]


def broken_citations(root: Path, files: list[Path]) -> list[str]:
    """Every citation of a docs file or anchor that does not exist, as 'file:line: what'."""
    problems = []
    cache: dict[Path, set[str]] = {}

    def check(source: Path, number: int, target: Path, anchor: str | None, text: str):
        if not target.is_file():
            problems.append(f"{source.relative_to(root)}:{number}: {text}: no such file")
        elif anchor and anchor not in cache.setdefault(target, anchors(target)):
            problems.append(f"{source.relative_to(root)}:{number}: {text}: no such anchor")

    for path in files:
        try:
            lines = path.read_text(encoding="utf8").splitlines()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(lines, 1):
            for match in CITATION.finditer(line):
                check(path, number, root / match.group(1), (match.group(2) or "#")[1:] or None, match.group(0))
            if path.suffix == ".md":
                for match in LINK.finditer(line):
                    file, anchor = match.group(1), (match.group(2) or "#")[1:] or None
                    if file and re.match(r"^[a-z]+://", file):
                        continue
                    target = (path.parent / file).resolve() if file else path
                    check(path, number, target, anchor, match.group(0))
    return problems


def test_every_cited_docs_file_and_anchor_exists():
    current = [path for path in tracked_text_files(ROOT) if not historical(path) and path.name != "test_docs.py"]
    assert broken_citations(ROOT, current) == []


def historical(path: Path) -> bool:
    """Saved provenance under results/<folder>/ records how a result was made at its commit, links included; the
    index at the top of results/ is a page like the others."""
    parts = path.relative_to(ROOT).parts
    return len(parts) > 2 and parts[0] == "results"


def test_no_citation_names_a_readme_section():
    """A section cited by its title (the README's or a page's, in quotes after the file's name) rots silently on a
    rename: cite its anchor (docs/method.md#what-is-measured), which the tests here check."""
    old = re.compile(r'(?:README|docs/[\w./-]+\.md),? "')
    offenders = [f"{path.relative_to(ROOT)}" for path in tracked_text_files(ROOT)
                 if path.suffix != ".md" and not historical(path) and old.search(path.read_text(encoding="utf8"))]
    assert offenders == []


def test_renaming_a_cited_anchor_fails(tmp_path):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "method.md"
    page.write_text("# The method\n\n## What is measured\n\n## What is measured\n\n## `torch.compile` and C++\n")
    code = tmp_path / "code.py"
    code.write_text("# docs/method.md#what-is-measured docs/method.md#what-is-measured-1 "
                    "docs/method.md#torchcompile-and-c\n")
    assert broken_citations(tmp_path, [code, page]) == []
    page.write_text(page.read_text().replace("## What is measured\n\n## What", "## What is timed\n\n## What"))
    assert broken_citations(tmp_path, [code]) == ["code.py:1: docs/method.md#what-is-measured-1: no such anchor"]
    page.unlink()
    assert len(broken_citations(tmp_path, [code])) == 3


# A link in a page: [text](target) or ![alt](picture), the target up to a space or the closing parenthesis.
ANY_LINK = re.compile(r"\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")


def broken_paths(root: Path, files: list[Path]) -> list[str]:
    """Every path cited in the prose of `files` (a page's lines, the comments and docstrings of code) and every
    relative link of a page that does not resolve, as 'file:line: what'. A bare path is read from the repository's
    root or from the citing file's folder (cpp/exports.map cites include/phasebench.h); a link from the page's."""
    problems = []
    cache: dict[Path, set[str]] = {}

    def check(source: Path, number: int, targets: list[Path], anchor: str | None, text: str):
        target = next((candidate for candidate in targets if candidate.exists()), None)
        where = f"{source.relative_to(root)}:{number}: {text}"
        if target is None:
            problems.append(f"{where}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in cache.setdefault(target, anchors(target)):
            problems.append(f"{where}: no such anchor")

    for path in files:
        for number, line in docs_text.prose(path):
            prose = ANY_LINK.sub("]()", line) if path.suffix == ".md" else line  # a link's target is checked below
            for cited, anchor in docs_text.cited_paths(prose):
                text = cited + (f"#{anchor}" if anchor else "")
                check(path, number, [root / cited, path.parent / cited], anchor, text)
            if path.suffix != ".md":
                continue
            for match in ANY_LINK.finditer(line):
                target = match.group(1)
                if re.match(r"^[a-z][a-z+.-]*:", target):
                    continue  # a URL, mailto:
                file, _, anchor = target.partition("#")
                check(path, number, [(path.parent / file) if file else path], anchor or None, f"link {target}")
    return problems


def cited_files(root: Path) -> list[Path]:
    """README.md and the pages under docs/, and the code's files (requirements.txt and pyproject.toml included)."""
    return [path for path in docs_text.pages(root) + docs_text.code_files(root) if not historical(path)]


def test_every_cited_path_and_link_resolves():
    problems = broken_paths(ROOT, cited_files(ROOT))
    assert problems == [], "\n".join(problems)


def test_a_broken_path_or_link_fails(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_phases.py").write_text("")
    (tmp_path / "docs" / "method.md").write_text("# The method\n\n## What is measured\n")
    page = tmp_path / "README.md"
    page.write_text("See [the method](docs/method.md#what-is-measured), `bench/test_phases.py` and docs/method.md.\n"
                    "Times of pytorch/examples' cpp/mnist; cpp/backward is a case; results/<run>.json a template.\n")
    code = tmp_path / "bench" / "code.py"
    code.write_text('"""Reads bench/test_phases.py (docs/method.md#what-is-measured)."""\n'
                    'path = "results/gone.json"  # a string, not a citation\n')
    assert broken_paths(tmp_path, [page, code]) == []
    page.write_text("See [the method](docs/method.md#what-is-timed), [data](results/x.json), results/y/README.md.\n")
    code.write_text("# Reads bench/test_gone.py, see docs/method.md#what-is-timed.\n")
    assert broken_paths(tmp_path, [page, code]) == [
        "README.md:1: results/y/README.md: no such file",
        "README.md:1: link docs/method.md#what-is-timed: no such anchor",
        "README.md:1: link results/x.json: no such file",
        "bench/code.py:1: bench/test_gone.py: no such file",
        "bench/code.py:1: docs/method.md#what-is-timed: no such anchor"]


# ---- The words: present tense, no machine, no history in comments -----------------------------------------------

PAGE_FINDERS = (docs_text.commits, docs_text.dates, docs_text.times_of_day, docs_text.this_machine)
CODE_FINDERS = (docs_text.issues, docs_text.dates, docs_text.until_commit)
RESULTS_PAGE = Path("docs") / "results.md"


def manual_pages(root: Path) -> list[Path]:
    return [path for path in docs_text.pages(root) if path.relative_to(root) != RESULTS_PAGE]


def test_no_page_holds_a_commit_a_date_a_time_of_day_or_this_machine():
    found = docs_text.findings(ROOT, manual_pages(ROOT), PAGE_FINDERS)
    assert found == [], "\n".join(found)


def test_no_code_comment_holds_an_issue_number_a_date_or_until_commit():
    found = docs_text.findings(ROOT, docs_text.code_files(ROOT), CODE_FINDERS)
    assert found == [], "\n".join(found)


def test_the_page_checker_finds_each_kind(tmp_path):
    (tmp_path / "docs" / "guide").mkdir(parents=True)
    (tmp_path / "README.md").write_text(
        "# phasebench\n\n"
        "The step takes 2.65× as long ([results](docs/results.md), commit 555f3ce of the run).\n"
        "Measured on 1 December, and again December 2 and 2 Dec 2026; saved 2026-12-01.\n"
        "The run started at 01:55 and ended 17:04 UTC on this machine.\n")
    (tmp_path / "docs" / "guide" / "nested.md").write_text("This machine has 2 cores.\n")
    (tmp_path / "docs" / "results.md").write_text("Commit e677c9f, 1 December, at 01:55, this machine.\n")
    assert docs_text.findings(tmp_path, manual_pages(tmp_path), PAGE_FINDERS) == [
        "README.md:3: commit hash 555f3ce",
        "README.md:4: date '1 December'",
        "README.md:4: date 'December 2'",
        "README.md:4: date '2 Dec'",
        "README.md:4: date '2026-12-01'",
        "README.md:5: time of day 'at 01:55'",
        "README.md:5: time of day '17:04 UTC'",
        "README.md:5: 'this machine'",
        "docs" + "/guide/nested.md:1: 'This machine'"]  # built, so that the path checker reads no citation


def test_the_page_checker_passes_what_only_looks_like_it(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "usage.md").write_text(
        "A `--rounds 20` run takes 1:30 of your machine's time; the ratio is 2.65× (3.1 s against 1.17 s).\n"
        "Install torch 2.14.1 from https://github.com/pytorch/pytorch/commit/555f3ce4a1b2 or deadbeef feed.\n"
        "The digest sha256:0123456789abcdef and the file times-b96ed3c.json; a 1234567 s total; May I?\n"
        "`--benchmark-columns=min,median` and 12 Decembers are neither.\n")
    assert docs_text.findings(tmp_path, manual_pages(tmp_path), PAGE_FINDERS) == []


def test_the_code_checker_reads_comments_and_docstrings_only(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "cpp").mkdir()
    (tmp_path / "bench" / "code.py").write_text(
        '"""The layering of issue 22."""\n'
        'URL = "https://github.com/o/r/issues/36"  # kept as it is until commit 555f3ce\n'
        'TEXT = "issue 36, 1 December"  # a string is the code\'s, not a comment\n'
        "def f():\n"
        '    """Measured on 2 December (see #36); pytest-dev/pytest-xdist#1386 is upstream\'s."""\n')
    (tmp_path / "cpp" / "code.cpp").write_text(
        '// route (a) of issue 24\nconst char *s = "// issue 25";  /* since commit abc1234 */\n')
    (tmp_path / "requirements.txt").write_text("# pinned on 2026-12-01 (PR 40)\ntorch==2.14.1  # #41\n")
    assert docs_text.findings(tmp_path, docs_text.code_files(tmp_path), CODE_FINDERS) == [
        "bench/code.py:1: issue number 'issue 22'",
        "bench/code.py:2: history 'until commit'",
        "bench/code.py:5: issue number '#36'",
        "bench/code.py:5: date '2 December'",
        "cpp/code.cpp:1: issue number 'issue 24'",
        "cpp/code.cpp:2: history 'since commit'",
        "requirements.txt:1: issue number 'PR 40'",
        "requirements.txt:1: date '2026-12-01'",
        "requirements.txt:2: issue number '#41'"]


# ---- The README -----------------------------------------------------------------------------------------------------

README = ROOT / "README.md"
RESULT = ROOT / "results" / "answer" / "default-run-paired.json"


def test_the_readme_fits_on_a_few_screens():
    assert len(README.read_text(encoding="utf8").splitlines()) <= 250


def printed_answer(path: Path) -> dict[str, list[str]]:
    """{row label: its cells} of the answer on cpu that a saved result prints (phasebench.report.findings.answer)."""
    lines = dict(answer(SavedResult.load(path)))["phasebench: the answer on cpu"]
    printed = {}
    for line in lines:
        cells = [cell for cell in re.split(r"\s{2,}", line.strip()) if cell]
        if cells:
            printed.setdefault(cells[0], cells[1:4])
    return printed


def answer_rows(section: str, printed: dict[str, list[str]]) -> list[list[str]]:
    """The rows of a page's Markdown tables in `section` whose label the answer prints."""
    table = [[cell.strip() for cell in row.strip("|").split("|")] for row in section.splitlines()
             if row.startswith("| ")]
    return [row for row in table if row[0] in printed]


def test_the_readme_answer_is_the_saved_results():
    text = README.read_text(encoding="utf8")
    assert f"`{RESULT.relative_to(ROOT)}`" in text, "the README names the result its answer comes from"
    printed = printed_answer(RESULT)
    cpu_answer = text.split("\n## The answer", 1)[1].split("\n#", 1)[0]  # the GPU preview's table follows it
    rows = answer_rows(cpu_answer, printed)
    assert len(rows) >= 6, cpu_answer
    for label, *cells in rows:
        assert cells == printed[label], label


def test_the_results_pages_answer_is_the_saved_result_it_cites():
    """docs/results.md's answer section: every row of its tables that the answer prints is the answer of the file its
    provenance line names, cell for cell (the training run's rows and the per-call phases')."""
    text = (ROOT / RESULTS_PAGE).read_text(encoding="utf8")
    section = text.split("\n## The answer: one epoch of the published run on cpu", 1)[1].split("\n## ", 1)[0]
    first = section.split("\nmachine:")[1]  # the first provenance line and its tables
    [cited] = re.findall(r"file\s+\[results/([^\]]+\.json)\]", first)
    printed = printed_answer(ROOT / "results" / cited)
    rows = answer_rows(first, printed)
    assert len(rows) >= 15, section
    for label, *cells in rows:
        assert cells == printed[label], label


def page_table(text: str, header: list[str]) -> list[list[str]]:
    """The Markdown table of a page whose header row is `header`: its header and rows, the alignment row dropped."""
    lines = text.split("| " + " | ".join(header) + " |\n", 1)[1].splitlines()
    body = [line for line in itertools.takewhile(lambda line: line.startswith("|"), lines)][1:]
    return [header] + [[cell.strip() for cell in line.strip("|").split("|")] for line in body]


def test_the_readmes_gpu_table_is_the_reports_headline_of_the_saved_preview(tmp_path, capsys):
    """The README's GPU preview, as its provenance pages repeat it, is what `python -m phasebench.report --headline`
    prints for the saved run, cell for cell."""
    from phasebench.report import cli
    from tests.test_report_headline import PREVIEW_PACK, PREVIEW_RUN, headline_rows, unpacked

    assert cli.main([str(unpacked(PREVIEW_PACK, PREVIEW_RUN, tmp_path)), "--headline"]) == 0
    printed = headline_rows(capsys.readouterr().out, "cuda")
    assert len(printed) == 8
    for page in (README, ROOT / "docs/results.md", ROOT / "results/gpu-preview/README.md"):
        assert page_table(page.read_text(encoding="utf8"), printed[0]) == printed, page.name

"""Citations that cannot rot (docs/architecture.md#the-c-abi-and-the-build): code, --help texts, .ci/ and the
workflows cite the docs by file and anchor (docs/method.md#what-is-measured), and every cited file and anchor must
exist, with anchors as GitHub makes them from headings. Markdown links between the docs and from the README are
checked the same way, and so is every path the pages, the comments and docstrings of the code, requirements.txt and
pyproject.toml cite (bench/test_phases.py, results/…): a path that moves or goes fails here."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from pathlib import Path

from phasebench.worker.client import ROOT
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
    names = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    return [root / name for name in names if Path(name).suffix in TEXT_SUFFIXES and (root / name).is_file()]


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

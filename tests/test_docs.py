"""Citations that cannot rot (docs/architecture.md#the-c-abi-and-the-build): code, --help texts, .ci/ and the
workflows cite the docs by file and anchor (docs/method.md#what-is-measured), and every cited file and anchor must
exist, with anchors as GitHub makes them from headings. Markdown links between the docs and from the README are
checked the same way."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from pathlib import Path

from phasebench.worker.client import ROOT

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
    """Saved provenance under docs/<folder>/ records how a result was made at its commit, links included."""
    parts = path.relative_to(ROOT).parts
    return len(parts) > 2 and parts[0] == "docs"


def test_no_citation_names_a_readme_section():
    """Section titles of the README were cited about 95 times and rotted silently on every rename."""
    old = re.compile(r'README,? "')
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

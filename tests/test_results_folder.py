"""results/ holds the saved files that a published figure rests on, and nothing else: each file there is cited by the
README, a page under docs/ or the index (results/README.md, one table row a file), each row of the index and each
results/ path a page cites names a file that exists, and the folder stays small. docs/ holds pages and their
pictures only. results/history/ is the measured history, with its own index (results/history/README.md): its
generated files are its README's to cite, not these pages'."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from phasebench.repository import ROOT

INDEX = "results/README.md"
HISTORY = "results/history/"
RESULTS_LIMIT = 5_000_000  # bytes, the files' own sizes
DOCS_LIMIT = 2_000_000
PICTURES = {".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp"}

# An index row: its first cell, a path relative to results/ in backquotes.
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|", re.M)
# A path from the repository's root in a page's text (prose or code), or a Markdown link's target.
BARE = re.compile(r"(?<![\w/.-])((?:\.\./)*results/[\w./-]*[\w-])")
LINK = re.compile(r"\]\(\s*([^)\s#]+)")


def files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file() and not path.name.startswith("."))


def pages(root: Path) -> list[Path]:
    """The README and every page under docs/, nested pages included."""
    found = [root / "README.md"] if (root / "README.md").is_file() else []
    return found + (sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else [])


def index_rows(root: Path) -> list[str]:
    """The files the index names, as paths from the repository's root."""
    index = root / INDEX
    if not index.is_file():
        return []
    return ["results/" + cell.strip().lstrip("./") for cell in ROW.findall(index.read_text(encoding="utf8"))]


def page_citations(root: Path) -> dict[str, str]:
    """{path from the root: 'page'} for every results/ path a page names or links to."""
    cited = {}
    for page in pages(root):
        text = page.read_text(encoding="utf8")
        name = page.relative_to(root).as_posix()
        for bare in BARE.findall(text):
            for base in (root, page.parent):
                path = Path(os.path.normpath(base / bare))
                if path.is_relative_to(root / "results"):
                    cited.setdefault(path.relative_to(root).as_posix(), name)
                    break
        for target in LINK.findall(text):
            if re.match(r"^[a-z][a-z+.-]*:", target):
                continue  # a URL
            path = Path(os.path.normpath(page.parent / target))
            if path.is_relative_to(root / "results"):
                cited.setdefault(path.relative_to(root).as_posix(), name)
    return cited


def uncited(root: Path) -> list[str]:
    """The files under results/ that neither a page nor the index cites (the index itself and the history's
    generated files aside)."""
    cited = set(page_citations(root)) | set(index_rows(root))
    found = []
    for path in files_under(root / "results"):
        name = path.relative_to(root).as_posix()
        if name == INDEX or (name.startswith(HISTORY) and name != HISTORY + "README.md"):
            continue
        if name not in cited:
            found.append(name)
    return found


def missing(root: Path) -> list[str]:
    """Each index row and each results/ path cited by a page that names no file or folder, as 'where: path'."""
    found = [f"{INDEX}: {row}" for row in index_rows(root) if not (root / row).is_file()]
    for path, page in sorted(page_citations(root).items()):
        if any(ch in path for ch in "*{}") or path.endswith("…"):
            continue  # a pattern, not a path
        if not (root / path).exists():
            found.append(f"{page}: {path}")
    return found


def size(folder: Path) -> int:
    return sum(path.stat().st_size for path in files_under(folder))


def docs_problems(root: Path) -> list[str]:
    """docs/ holds pages (.md) and their pictures, and stays under DOCS_LIMIT."""
    docs = root / "docs"
    found = [f"{path.relative_to(root).as_posix()}: neither a page nor a picture" for path in files_under(docs)
             if path.suffix.lower() not in PICTURES | {".md"}]
    if size(docs) >= DOCS_LIMIT:
        found.append(f"docs/: {size(docs)} bytes, not under {DOCS_LIMIT}")
    return found


def test_every_file_under_results_is_cited():
    assert uncited(ROOT) == []


def test_every_cited_result_and_index_row_exists():
    assert missing(ROOT) == []


def test_results_stays_under_its_limit():
    assert size(ROOT / "results") < RESULTS_LIMIT


def test_docs_holds_pages_and_pictures_only():
    assert docs_problems(ROOT) == []


def test_the_index_names_each_file_once():
    rows = index_rows(ROOT)
    assert rows and len(rows) == len(set(rows))


def test_an_uncited_file_a_missing_row_and_data_in_docs_are_found(tmp_path):
    pages_dir = "docs"  # the pages' folder, named apart so that the docs test does not read these names as citations

    def write(name: str, text: str = "x") -> None:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf8")

    write("README.md", "The answer: `results/a/run.json`.\n")
    write(f"{pages_dir}/results.md", "![chart](../results/a/chart.png) and [the log](../results/a/run.log#L2)\n")
    write("results/a/run.json", "{}")
    write("results/a/chart.png")
    write("results/a/run.log")
    write("results/a/study.tar.xz")
    write("results/history/series.json", "{}")  # the history's own, cited by its README
    write("results/history/README.md", "# history\n")
    write(INDEX, "| file | what |\n|---|---|\n| `a/study.tar.xz` | raw runs |\n| `history/README.md` | the history |\n")
    assert uncited(tmp_path) == [] and missing(tmp_path) == [] and docs_problems(tmp_path) == []

    write("results/a/forgotten.json", "{}")
    write(INDEX, (tmp_path / INDEX).read_text() + "| `a/gone.json` | deleted |\n")
    write(f"{pages_dir}/page.md", "Saved as `results/a/renamed.json`.\n")
    write(f"{pages_dir}/data/run.json", "{}")
    assert uncited(tmp_path) == ["results/a/forgotten.json"]
    assert missing(tmp_path) == [f"{INDEX}: results/a/gone.json", f"{pages_dir}/page.md: results/a/renamed.json"]
    assert docs_problems(tmp_path) == [f"{pages_dir}/data/run.json: neither a page nor a picture"]

    write(f"{pages_dir}/big.png", "x" * DOCS_LIMIT)
    assert docs_problems(tmp_path)[-1] == f"docs/: {size(tmp_path / 'docs')} bytes, not under {DOCS_LIMIT}"


# A page naming the current method: "the current method is N", "method N is current".
CURRENT_METHOD = re.compile(r"current method is (\d+)|method (\d+) is (?:the )?current", re.I)
# The README's answer: the saved file its answer section cites first.
ANSWER_FILE = re.compile(r"`(results/answer/[\w.-]+\.json)`")


def current_method_problems(root: Path) -> list[str]:
    """Each page that names a method other than phasebench/method.py's as current, and an answer in the README
    whose saved result is of another method."""
    from phasebench.method import METHOD_VERSION

    problems = []
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        for match in CURRENT_METHOD.finditer(page.read_text(encoding="utf8")):
            named = int(match.group(1) or match.group(2))
            if named != METHOD_VERSION:
                problems.append(f"{page.relative_to(root)}: names method {named} as current, the code's is "
                                f"{METHOD_VERSION}")
    readme = (root / "README.md").read_text(encoding="utf8")
    answer = ANSWER_FILE.search(readme.split("## The answer", 1)[-1])
    if answer is None:
        problems.append("README.md: its answer cites no saved result under results/answer/")
    else:
        method = json.loads((root / answer.group(1)).read_text())["machine_info"]["phasebench"].get("method") or 1
        if method != METHOD_VERSION:
            problems.append(f"README.md: its answer, {answer.group(1)}, is of method {method}, the code's is "
                            f"{METHOD_VERSION}")
    return problems


def test_no_page_names_another_method_as_current_and_the_answer_is_of_the_current_method():
    assert not current_method_problems(ROOT)


def test_a_page_naming_an_old_method_as_current_is_found(tmp_path):
    from phasebench.method import METHOD_VERSION

    (tmp_path / "docs").mkdir()
    (tmp_path / "results" / "answer").mkdir(parents=True)
    (tmp_path / "docs" / "results.md").write_text(f"The current method is {METHOD_VERSION - 1}.\n")
    (tmp_path / "results" / "answer" / "run.json").write_text(
        json.dumps({"machine_info": {"phasebench": {"method": METHOD_VERSION - 2}}}))
    (tmp_path / "README.md").write_text("## The answer\n\nsaved in `results/answer/run.json`\n")
    found = current_method_problems(tmp_path)
    assert len(found) == 2 and "docs/results.md: names method" in found[0] and "README.md: its answer" in found[1]

"""results/ holds the saved files that a published figure rests on, and nothing else: each file there is cited by the
README, a page under docs/ or the index (results/README.md, one table row a file), each row of the index and each
results/ path a page cites names a file that exists, and the folder stays small. docs/ holds pages and their
pictures only. results/history/ is the measured history, with its own index (results/history/README.md): its
generated files are its README's to cite, not these pages'."""

from __future__ import annotations

import json
import os
import re
import tarfile
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


# A preview: a cited result of another method that is no clean committed tree's measurement with the pinned torch on
# real data. A page may cite one only with its label in the section that cites it: the words below, each drawn from
# the saved file, so that a reader cannot take it for a current result.
PIN = re.compile(r"^torch==([\w.]+)", re.M)
HEADING = re.compile(r"^#{1,6} ", re.M)


def saved_results(path: Path) -> list[tuple[dict, object]]:
    """(raw JSON, SavedResult) of a cited .json file, or of each .json member of a .tar.xz pack; what is no
    pytest-benchmark result is left out."""
    from phasebench.saved import SavedResult, SavedResultError

    if path.name.endswith(".tar.xz"):
        with tarfile.open(path) as tar:
            texts = [(f"{path}:{member.name}", tar.extractfile(member).read()) for member in tar.getmembers()
                     if member.isfile() and member.name.endswith(".json")]
    elif path.suffix == ".json":
        texts = [(str(path), path.read_bytes())]
    else:
        return []
    found = []
    for name, text in texts:
        raw = json.loads(text)
        try:
            found.append((raw, SavedResult.from_json(raw, name)))
        except SavedResultError:
            continue
    return found


def preview_label(raw: dict, result, pin: str) -> list[str]:
    """The words a preview's citation needs beside it; [] for a result that is no preview."""
    from phasebench import schema
    from phasebench.method import METHOD_VERSION

    machine, commit = result.machine, result.commit_info
    torch = (machine.torch or "").split("+")[0]
    dirty = [line[3:] for line in commit.get("porcelain") or []] if commit.get("dirty") else []
    if result.method == METHOD_VERSION or not (dirty or commit.get("dirty") or torch != pin
                                               or machine.dataset == "synthetic"):
        return []
    words = ["preview", "not comparable", f"method {result.method}", f"the current method is {METHOD_VERSION}"]
    words += dirty
    if torch != pin:
        words += [f"torch {'.'.join(torch.split('.')[:2])}", f"the pin is {pin}"]
    if machine.dataset == "synthetic":
        words.append("synthetic data")
    cores = (raw.get("machine_info", {}).get("cpu") or {}).get("count")
    if cores:
        words.append(f"{cores} cores")
    if any(isinstance(case.info, schema.TrainingRunInfo) and case.info.rounds == 1 for case in result.cases.values()):
        words.append("no spread")
    if any(isinstance(case.info, schema.PhaseInfo) for case in result.cases.values()):
        words.append(f"{machine.rounds} rounds")  # the per-call phases' rounds
    return words


def unlabelled_previews(root: Path, page: str = "README.md") -> list[str]:
    """Each citation of a preview in `page` whose section (from the heading above it to the next) lacks a word of its
    label, as 'page: path lacks ...'."""
    pin = PIN.search((root / "requirements.txt").read_text(encoding="utf8")).group(1)
    text = (root / page).read_text(encoding="utf8")
    starts = [0] + [match.start() for match in HEADING.finditer(text)] + [len(text)]
    problems = []
    for begin, end in zip(starts, starts[1:]):
        section = text[begin:end]
        for cited in sorted(set(BARE.findall(section))):
            path = root / cited
            if not path.is_file():
                continue
            needed = [word for raw, result in saved_results(path) for word in preview_label(raw, result, pin)]
            # What the section says: no link's target, no path (the preview's folder may be named so).
            shown = BARE.sub("", re.sub(r"\]\([^)]*\)", "]", section)).lower()
            lacking = [word for word in dict.fromkeys(needed) if word.lower() not in shown]
            if lacking:
                problems.append(f"{page}: {cited} lacks " + ", ".join(repr(word) for word in lacking))
    return problems


def test_the_readme_cites_a_preview_only_with_its_label():
    assert unlabelled_previews(ROOT) == []


def test_the_preview_without_its_label_is_found(tmp_path):
    pack = "results/gpu-preview/run2-setdevice-patched.tar.xz"
    for name in ("README.md", "requirements.txt", pack):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    assert unlabelled_previews(tmp_path) == []
    readme = (ROOT / "README.md").read_text(encoding="utf8")
    label = readme.split("**A preview of", 1)[1].split(" Saved in ", 1)[0]
    (tmp_path / "README.md").write_text(readme.replace("**A preview of" + label, ""), encoding="utf8")
    found = unlabelled_previews(tmp_path)
    assert len(found) == 1 and found[0].startswith(f"README.md: {pack} lacks 'method 4', 'the current method is ")
    for word in ("phasebench/train/state.py", "torch 2.11", "the pin is 2.14.1", "synthetic data", "16 cores",
                 "no spread", "10 rounds"):
        assert repr(word) in found[0]
    heading = readme.split("### On a GPU", 1)[1].split("\n", 1)[0]
    (tmp_path / "README.md").write_text(readme.replace("**A preview of" + label, "").replace(heading, ""),
                                        encoding="utf8")
    assert unlabelled_previews(tmp_path) == [found[0].replace("lacks ", "lacks 'preview', 'not comparable', ")]
    # The label in another section is not beside the citation.
    (tmp_path / "README.md").write_text(readme.replace("**A preview of" + label, "")
                                        + "\n## Elsewhere\n\n**A preview of" + label + "\n", encoding="utf8")
    assert unlabelled_previews(tmp_path) == found

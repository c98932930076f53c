"""The prose a docs test reads: the comments and docstrings of the code, the pages, and the finders that look in it
for what a manual must not hold (a commit hash, a date, a time of day, "this machine", an issue number) and for
the paths it cites. Every finder answers 'file:line: what' so that a failure points at the line."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

from phasebench.spec import ONE_SHOT_PHASES, TRAINING_PHASES

# The code whose comments are read: directories, and single files at the root.
CODE_DIRS = ("phasebench", "bench", "lab", "tests", "cpp", ".ci", ".github")
CODE_FILES = ("conftest.py", "requirements.txt", "pyproject.toml")
# The top-level names a bare path in prose starts with: a path that starts otherwise is not checked.
PATH_ROOTS = ("docs", "results", "bench", "phasebench", "lab", "tests", "cpp", ".ci", ".github")
ROOT_FILES = ("README.md", "conftest.py", "requirements.txt", "pyproject.toml", "pytest.ini")


def tracked(root: Path) -> list[str]:
    """The files git tracks under root; outside a repository (a test's scratch folder), every file."""
    done = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    if done.returncode == 0:
        return done.stdout.split()
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def code_files(root: Path) -> list[Path]:
    """The tracked files of the code, besides the data (JSON) a test or the gate reads."""
    names = [name for name in tracked(root) if name in CODE_FILES or name.split("/")[0] in CODE_DIRS]
    return [root / name for name in names
            if (root / name).is_file() and Path(name).suffix not in {".json", ".csv", ".jsonl", ".svg", ".png"}]


def pages(root: Path) -> list[Path]:
    """README.md and every page under docs/, nested pages included."""
    found = sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []
    return ([root / "README.md"] if (root / "README.md").is_file() else []) + found


def python_prose(text: str) -> list[tuple[int, str]]:
    """A Python file's comments and docstrings, each as (line, text), a docstring line by line."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                found.append((token.start[0], token.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return found
    lines = text.splitlines()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found += [(number, lines[number - 1]) for number in range(first.lineno, first.end_lineno + 1)]
    return sorted(found)


def c_prose(text: str) -> list[tuple[int, str]]:
    """A C or C++ file's // and /* */ comments, each line as (line, text); string literals are passed over."""
    found = []
    block = False
    for number, line in enumerate(text.splitlines(), 1):
        i, start, quote = 0, 0 if block else None, None
        while i < len(line):
            if block:
                if line.startswith("*/", i):
                    found.append((number, line[start:i]))
                    block, start = False, None
                    i += 2
                    continue
            elif quote:
                if line[i] == "\\":
                    i += 1
                elif line[i] == quote:
                    quote = None
            elif line[i] in "\"'":
                quote = line[i]
            elif line.startswith("//", i):
                found.append((number, line[i:]))
                break
            elif line.startswith("/*", i):
                block, start = True, i
                i += 2
                continue
            i += 1
        if block:
            found.append((number, line[start:]))
    return found


HASH_COMMENT = re.compile(r"""(?:^|(?<=\s))#(?![!{])(.*)$""")


def hash_prose(text: str) -> list[tuple[int, str]]:
    """The # comments of a shell script, a Makefile, requirements.txt or pyproject.toml: a # at the start of a line
    or after a blank, outside quotes as far as one line shows."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        unquoted = re.sub(r"'[^']*'|\"(?:\\.|[^\"\\])*\"", lambda m: " " * len(m.group(0)), line)
        match = HASH_COMMENT.search(unquoted)
        if match and not line.startswith("#!"):
            found.append((number, line[match.start():]))
    return found


def prose(path: Path) -> list[tuple[int, str]]:
    """What a reader reads as prose in a file: all of a page, the comments and docstrings of code."""
    try:
        text = path.read_text(encoding="utf8")
    except UnicodeDecodeError:
        return []
    if path.suffix == ".md":
        return list(enumerate(text.splitlines(), 1))
    if path.suffix == ".py":
        return python_prose(text)
    if path.suffix in {".cpp", ".h", ".c", ".cc", ".map"}:
        return c_prose(text)
    return hash_prose(text)


def findings(root: Path, files: list[Path], finders) -> list[str]:
    """Every finder's hits in the prose of the files, as 'file:line: what'."""
    found = []
    for path in files:
        for number, line in prose(path):
            for finder in finders:
                found += [f"{path.relative_to(root)}:{number}: {hit}" for hit in finder(line)]
    return found


# A word of 7 to 40 hex digits with a digit and a letter in it, not part of a URL or a longer word.
COMMIT = re.compile(r"(?<![\w/.#:-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
URL = re.compile(r"\b[a-z][a-z+.-]*://\S+")
MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
         r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
DATE = re.compile(rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)? {MONTH}\b|{MONTH} \d{{1,2}}(?:st|nd|rd|th)?\b(?!:)"
                  rf"|{MONTH} (?:19|20)\d\d\b|(?:19|20)\d\d-[01]\d-[0-3]\d\b)")
TIME_OF_DAY = re.compile(r"\b(?:at|by|until|from|before|after|around) [0-2]?\d:[0-5]\d\b"
                         r"|\b[0-2]?\d:[0-5]\d(?::[0-5]\d)? ?(?:UTC|GMT|CET|CEST|[ap]\.?m\.?)(?!\w)")
THIS_MACHINE = re.compile(r"\bthis machine\b", re.IGNORECASE)
ISSUE = re.compile(r"\b(?:issues?|PR|pull request|ticket)s? #?\d+\b|(?<![\w/&-])#\d+\b", re.IGNORECASE)
UNTIL_COMMIT = re.compile(r"\b(?:until|since|before|after|as of|up to) (?:commit|revision)\b", re.IGNORECASE)


def commits(line: str) -> list[str]:
    return [f"commit hash {m.group(0)}" for m in COMMIT.finditer(URL.sub(" ", line))]


def dates(line: str) -> list[str]:
    return [f"date {m.group(0)!r}" for m in DATE.finditer(URL.sub(" ", line))]


def times_of_day(line: str) -> list[str]:
    return [f"time of day {m.group(0)!r}" for m in TIME_OF_DAY.finditer(line)]


def this_machine(line: str) -> list[str]:
    return [f"{m.group(0)!r}" for m in THIS_MACHINE.finditer(line)]


def issues(line: str) -> list[str]:
    return [f"issue number {m.group(0)!r}" for m in ISSUE.finditer(URL.sub(" ", line))]


def until_commit(line: str) -> list[str]:
    return [f"history {m.group(0)!r}" for m in UNTIL_COMMIT.finditer(line)]


# A path from the repository's root: a top-level folder and what follows, or a root file. A template (<folder>,
# *.json, {a,b}, $VAR, an upper-case PLACEHOLDER) makes it no single path, and it is left unchecked.
BARE_PATH = re.compile(r"(?<![\w/.~$@:-])((?:" + "|".join(re.escape(name) for name in PATH_ROOTS) + r")/[\w./-]*"
                       r"|(?:" + "|".join(re.escape(name) for name in ROOT_FILES) + r"))(#[\w-]+)?(?![<*{$\w/#-]|\.\w)")
# A path inside another repository: pytorch/examples' cpp/mnist.
OTHER_REPO = re.compile(r"\b[\w.-]+/[\w.-]+'s? `?$")
# A case named by implementation and phase (cpp/backward) is no path.
CASE = re.compile(r"cpp/(?:" + "|".join(TRAINING_PHASES + ONE_SHOT_PHASES) + ")")
PLACEHOLDER = re.compile(r"(?<![A-Za-z])[A-Z]{2,}(?![A-Za-z.])")  # README.md is a name, cost-PHASE-IMPL a template


def cited_paths(line: str) -> list[tuple[str, str | None]]:
    """The bare paths a line cites, each as (path, anchor or None), outside URLs; a sentence's full stop is not part
    of the path."""
    text = URL.sub(" ", line)
    found = []
    for match in BARE_PATH.finditer(text):
        path = match.group(1).rstrip(".") if not match.group(2) else match.group(1)
        if OTHER_REPO.search(text[:match.start()]) or CASE.fullmatch(path) or PLACEHOLDER.search(path):
            continue
        found.append((path, match.group(2)[1:] if match.group(2) else None))
    return found

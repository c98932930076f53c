"""The maintainer recipes (docs/recipes.md) run as written. Each recipe is a `## ` section and its shell commands are
in ```sh blocks; every command of every block runs at least to its usage check, instead of its real arguments:
`python -m MODULE --help`, `pytest --help`, `pytest-benchmark compare --help`, a .ci/ script's own usage check (its
--help, or no arguments where too few make it print its usage and exit 2), `git worktree add -h` (git's usage, exit
129), and for any other program that it is installed. A command that only reads (`python -c …`, `python -m
phasebench.report FILE` of a saved file that exists) runs for real. A program that is gone, a module renamed, a git
subcommand misspelt or an option dropped from a script fails here, with the page's line.

Then the recipes run end to end, each command as written, in the order a reader follows them, on the smallest rounds:
the README's quick-start run and "Save and compare a baseline" in a copy of this checkout, docs/gating.md's wall-time
gate from a clone; the count gate's recipe, minutes under Valgrind, in its own CI job (`python -m
tests.test_docs_recipes PAGE SECTION [OPTIONS]`, main below)."""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from phasebench.repository import ROOT

RECIPES = Path("docs") / "recipes.md"
BUILTINS = {"cd", "export", "source", ".", "set", "unset", "pushd", "popd", "true", "false", "test", "[", "echo",
            "printf", "read", "exit"}
PREFIXES = {"time", "nice", "env", "sudo", "command", "exec"}
GIT_TWO_WORDS = {"worktree", "remote", "submodule", "bisect", "stash", "notes", "sparse-checkout"}
SHELLS = {"sh", "shell", "bash", "console"}
SEPARATORS = {"|", "||", "&&", ";", "&", "|&"}
CHEAP_MODULES = {"phasebench.report"}  # they only read the files they are given
TIMEOUT_S = 60


def sections(text: str) -> dict[str, list[tuple[int, list[str]]]]:
    """{recipe title: [(line, argv), …]}: the commands of the ```sh blocks of each `## ` section, continuation lines
    joined, a `$ ` prompt dropped (where a block has prompts, the lines without one are output), comments dropped,
    and a line split at |, &&, || and ; into its commands."""
    found: dict[str, list[tuple[int, list[str]]]] = {}
    title, fence, block = None, None, []
    for number, line in enumerate(text.splitlines(), 1):
        opening = re.match(r"^\s*```\s*(\S*)", line)
        if opening and fence is None:
            fence, block = opening.group(1), []
        elif opening:
            if fence in SHELLS and title is not None:
                found[title].extend(commands(block))
            fence = None
        elif fence is None and line.startswith("## "):
            title = line[3:].strip()
            found.setdefault(title, [])
        elif fence is not None:
            block.append((number, line))
    return found


def commands(block: list[tuple[int, str]]) -> list[tuple[int, list[str]]]:
    prompted = any(line.lstrip().startswith("$ ") for _, line in block)
    joined: list[tuple[int, str]] = []
    pending = None
    for number, line in block:
        if prompted and pending is None:
            if not line.lstrip().startswith("$ "):
                continue
            line = line.lstrip()[2:]
        if pending is not None:
            pending = (pending[0], pending[1] + " " + line)
        else:
            pending = (number, line)
        if line.rstrip().endswith("\\"):
            pending = (pending[0], pending[1].rstrip()[:-1])
            continue
        joined.append(pending)
        pending = None
    found = []
    for number, line in joined:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, ""
        tokens = list(lexer)
        tokens = tokens[:next((i for i, token in enumerate(tokens) if token.startswith("#")), len(tokens))]
        argv: list[str] = []
        for token in tokens + [";"]:
            if token in SEPARATORS:
                if argv:
                    found.append((number, argv))
                argv = []
            else:
                argv.append(token)
    return found


def strip_prefixes(argv: list[str]) -> list[str]:
    """The command without its NAME=VALUE assignments and its env, nice, time or sudo (with their options)."""
    while argv:
        if re.match(r"^[A-Za-z_]\w*=", argv[0]):
            argv = argv[1:]
        elif argv[0] in PREFIXES:
            takes = {"nice": {"-n"}, "env": {"-u"}, "sudo": {"-u"}}.get(argv[0], set())
            argv = argv[1:]
            while argv and argv[0].startswith("-"):
                argv = argv[2:] if argv[0] in takes else argv[1:]
        else:
            return argv
    return argv


VENV_BIN = ".venv/bin/"  # where the recipes name the virtual environment's programs


def venv_bin(root: Path) -> Path:
    """The virtual environment the recipes mean by .venv: the root's, or, where the root holds none (the tests run
    from another environment), the one running the tests."""
    own = root / VENV_BIN
    return own if own.is_dir() else Path(sys.executable).parent


def resolve(program: str, root: Path) -> Path | None:
    """A program as a recipe names it, run from the root: a path, the virtual environment's, or the PATH's."""
    if "/" in program:
        path = venv_bin(root) / program.removeprefix(VENV_BIN) if program.startswith(VENV_BIN) else root / program
        return path if path.is_file() and os.access(path, os.X_OK) else None
    venv = venv_bin(root) / program
    if venv.is_file():
        return venv
    found = shutil.which(program)
    return Path(found) if found else None


def python_check(python: Path, args: list[str], root: Path) -> tuple[list[str] | None, set[int], str | None]:
    """A python command's check: -m MODULE's --help (or a real run where it only reads), -c CODE run for real, a
    script's --help where it parses options with argparse."""
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
        args = args[1:]
    if not args:
        return None, set(), "python without a module, a script or -c"
    if args[0] == "-c":
        return [str(python), *args[:2]], {0}, None
    if args[0] == "-m":
        module, rest = args[1], args[2:]
        if module in CHEAP_MODULES and rest and all((root / arg).is_file() for arg in rest if not arg.startswith("-")):
            return [str(python), "-m", module, *rest], {0}, None
        if module in ("pytest", "pip") or parses_options(module, root):
            return [str(python), "-m", module, "--help"], {0}, None
        found = subprocess.run([str(python), "-c", f"import importlib.util, sys; sys.exit(importlib.util.find_spec("
                                f"{module!r}) is None)"], cwd=root, capture_output=True)
        return None, set(), None if found.returncode == 0 else f"no module {module}"
    script = root / args[0]
    if not script.is_file():
        return None, set(), f"no script {args[0]}"
    if "ArgumentParser" in script.read_text(encoding="utf8"):
        return [str(python), str(script), "--help"], {0}, None
    return [str(python), "-m", "py_compile", str(script)], {0}, None


def parses_options(module: str, root: Path) -> bool:
    """Whether a module of this repository answers --help: its file, or its package's, builds an ArgumentParser."""
    base = root.joinpath(*module.split("."))
    files = list(base.glob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
    return any(path.is_file() and "ArgumentParser" in path.read_text(encoding="utf8") for path in files)


def script_check(script: Path) -> tuple[list[str], set[int]]:
    """A shell script's own usage check: its --help where it has one; no arguments where too few print the usage
    and exit 2 before anything runs; else bash -n (it parses)."""
    text = script.read_text(encoding="utf8")
    if re.search(r"-h \| --help\)|--help\) ", text):
        return [str(script), "--help"], {0, 2}
    if re.search(r"\[ \$# -(?:lt [1-9]|ge [1-9])|\$\{#\w+\[@\]\} -ge [1-9] \] \|\| usage", text):
        return [str(script)], {2}
    return ["bash", "-n", str(script)], {0}


def check(argv: list[str], root: Path) -> tuple[list[str] | None, set[int], str | None]:
    """(the command to run, the exit statuses it may end with, or a problem found without running anything)."""
    argv = strip_prefixes(argv)
    if not argv or argv[0] in BUILTINS:
        return None, set(), None
    if argv[0] in ("bash", "sh") and len(argv) > 1 and not argv[1].startswith("-"):
        argv = argv[1:]
        script = root / argv[0]
        return (*script_check(script), None) if script.is_file() else (None, set(), f"no script {argv[0]}")
    program = resolve(argv[0], root)
    if program is None:
        return None, set(), f"{argv[0]}: no such program"
    name = program.name
    if name.startswith("python"):
        return python_check(program, argv[1:], root)
    if name in ("pytest", "py.test"):
        return [str(program), "--help"], {0}, None
    if name in ("pytest-benchmark", "py.test-benchmark", "pip", "pip3"):
        words = [arg for arg in argv[1:2] if not arg.startswith("-")]
        return [str(program), *words, "--help"], {0}, None
    if name == "git":
        args = argv[1:]
        while args and args[0].startswith("-"):
            args = args[2:] if args[0] in ("-C", "-c") else args[1:]
        words = args[:2] if args and args[0] in GIT_TWO_WORDS else args[:1]
        return [str(program), *words, "-h"], {129}, None
    if program.is_relative_to(root) and not program.is_relative_to(root / ".venv"):
        return (*script_check(program), None)
    return None, set(), None  # an installed program: found is enough


def options(argv: list[str]) -> list[str]:
    """The long options a command gives its program (--benchmark-save=before: --benchmark-save), which its --help
    must name: an option renamed or dropped fails although the command's own arguments never run."""
    return [arg.split("=")[0] for arg in strip_prefixes(argv)[1:] if re.match(r"^--[\w-]+", arg)]


def problems(root: Path, text: str, page: str) -> list[str]:
    """Every command of every recipe that fails its check, as 'page:line: command: why'."""
    found, ran = [], {}
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("PYTEST_", "PHASEBENCH_", "HISTORY_", "GATE_", "BENCH_PR"))}
    for recipe in sections(text).values():
        for number, argv in recipe:
            command, statuses, problem = check(argv, root)
            if problem is None and command is not None:
                key = tuple(command)
                if key not in ran:
                    try:
                        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                                              timeout=TIMEOUT_S)
                        ran[key] = (done.returncode, done.stdout + done.stderr)
                    except subprocess.TimeoutExpired:
                        ran[key] = (None, f"no answer in {TIMEOUT_S} s")
                status, output = ran[key]
                if status not in statuses:
                    problem = f"`{shlex.join(command)}` exited {status}, not {sorted(statuses)}: {output[-300:]}"
                elif statuses != {0} or command[-1] in ("--help", "-h"):
                    problem = None if re.search(r"usage|\w+ \[", output, re.IGNORECASE) else "no usage printed"
                if problem is None and command[-1] == "--help":
                    unknown = [option for option in options(argv)
                               if not re.search(rf"{re.escape(option)}(?![\w-])", output)]
                    problem = f"{', '.join(unknown)} not in its --help" if unknown else None
            if problem:
                found.append(f"{page}:{number}: {shlex.join(argv)}: {problem}")
    return found


def test_every_recipe_command_answers_its_usage_check():
    page = ROOT / RECIPES
    if not page.is_file():
        pytest.skip(f"{RECIPES} does not exist yet")
    recipes = sections(page.read_text(encoding="utf8"))
    assert recipes and all(recipes.values()), f"a recipe of {RECIPES} without a ```sh command: {recipes}"
    found = problems(ROOT, page.read_text(encoding="utf8"), str(RECIPES))
    assert found == [], "\n".join(found)


def test_the_readme_links_the_recipes():
    if not (ROOT / RECIPES).is_file():
        pytest.skip(f"{RECIPES} does not exist yet")
    assert re.search(r"\]\(docs/recipes\.md(#[\w-]+)?\)", (ROOT / "README.md").read_text(encoding="utf8"))


def test_a_broken_recipe_fails():
    page = ("# Recipes\n\n## A baseline\n\n```sh\n"
            ".venv/bin/python -m pytest --benchmark-only \\\n    --benchmark-save=before  # the baseline\n"
            "env PHASEBENCH_NO_INSTALL=1 .ci/bench-pr-count ../a ../b ../out && git worktree add --detach ../a HEAD\n"
            "```\n\n```python\nnot_a_command()\n```\n\n## Broken\n\n```sh\n"
            "$ .venv/bin/python -m phasebench.nosuch\n$ .ci/no-such-script a b\noutput, not a command\n"
            "$ git worktre add ../a | no-such-program-anywhere\n"
            "$ .venv/bin/python -m pytest --benchmark-only --no-such-option=3\n```\n")
    assert sections(page)["A baseline"] == [
        (6, [".venv/bin/python", "-m", "pytest", "--benchmark-only", "--benchmark-save=before"]),
        (8, ["env", "PHASEBENCH_NO_INSTALL=1", ".ci/bench-pr-count", "../a", "../b", "../out"]),
        (8, ["git", "worktree", "add", "--detach", "../a", "HEAD"])]
    found = problems(ROOT, page, "recipes.md")
    assert [line.split(": ")[0:2] for line in found] == [
        ["recipes.md:18", ".venv/bin/python -m phasebench.nosuch"],
        ["recipes.md:19", ".ci/no-such-script a b"],
        ["recipes.md:21", "git worktre add ../a"],
        ["recipes.md:21", "no-such-program-anywhere"],
        ["recipes.md:22", ".venv/bin/python -m pytest --benchmark-only --no-such-option=3"]], "\n".join(found)
    assert found[-1].endswith("--no-such-option not in its --help")


# ---- The recipes run end to end, in the order a reader follows them ----------------------------------------------
# Each command runs as the page writes it, from the root of a checkout (a copy of this one, or a clone), with the
# additions a test needs and nothing else, each said in the test: options that shrink the run (fewer rounds, fewer
# cases) and, where tiny runs cannot hold them, wider thresholds. The count gate's recipe takes minutes under
# Valgrind: its CI job (.github/workflows/recipes.yml) runs it, through `python -m tests.test_docs_recipes`.

SMALL_RUN = ["--rounds", "1", "--warmup-rounds", "0", "-p", "no:cacheprovider"]  # one counted round, no warm-up


def run_recipe(page: Path, title: str, cwd: Path, shrink=lambda argv: argv, env: dict | None = None,
               timeout: float = 600) -> list[tuple[list[str], subprocess.CompletedProcess]]:
    """The commands of one recipe (a `## ` or `### ` section of a page), run in order from cwd, each as
    shrink(argv) with $VARIABLES expanded as bash expands them (PWD is cwd), the shell's builtins left out; the
    first that fails fails the recipe, naming the page's line and the command as written."""
    text = page.read_text(encoding="utf8").replace("\n### ", "\n## ")
    recipe = sections(text).get(title)
    assert recipe, f"{page}: no section {title!r} with a ```sh command"
    env = {**os.environ, **(env or {}), "PWD": str(cwd)}
    done = []
    for number, argv in recipe:
        if not strip_prefixes(argv) or strip_prefixes(argv)[0] in BUILTINS:
            continue
        command = [re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda name: env.get(name[1] or name[2], ""), arg)
                   for arg in shrink(argv)]
        began = time.monotonic()
        ran = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        print(f"{page.name}:{number}: {shlex.join(command)}: exit status {ran.returncode} in "
              f"{time.monotonic() - began:.1f} s", flush=True)
        assert ran.returncode == 0, (f"{page}:{number}: {shlex.join(argv)} (run as {shlex.join(command)}) exited "
                                     f"{ran.returncode}:\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}")
        done.append((argv, ran))
    return done


def checkout_copy(tree: Path, mnist_root: Path) -> Path:
    """A copy of this working tree (git's tracked and untracked-but-not-ignored files) to run recipes in, as a
    reader's checkout: phasebench's default storage is the copy's own `.benchmarks/` (ROOT, which phasebench reads
    from its own files' place, is the copy), so nothing is saved into this checkout. build/ is a link to this
    checkout's, whose C++ library the copy's identical sources hash to; data/ is this run's data; .venv is
    this_venv's."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file() and not (ROOT / name).is_symlink():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    (tree / "build").symlink_to(ROOT / "build")
    (tree / "data").symlink_to(mnist_root.resolve())
    this_venv(tree)
    return tree


def this_venv(tree: Path) -> None:
    """tree/.venv/bin: scripts that run this environment's programs (a link to the venv would put torch under
    another path, which the C++ library's hash covers, and build it again)."""
    bin_dir = tree / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for program in ("python", "pytest", "pytest-benchmark", "pip"):
        real = Path(sys.executable) if program == "python" else Path(sys.executable).parent / program
        (bin_dir / program).write_text(f'#!/bin/sh\nexec {shlex.quote(str(real))} "$@"\n')
        (bin_dir / program).chmod(0o755)


def clean_env() -> dict[str, str]:
    """This process's environment without what a run of the suite or a gate reads (a reader's shell has none)."""
    return {name: value for name, value in os.environ.items()
            if not name.startswith(("PYTEST_", "PHASEBENCH_", "HISTORY_", "GATE_", "BENCH_PR", "HEAD_ENV"))}


def test_every_long_module_runs_in_its_ci_job(pytestconfig):
    """What runs for minutes is named outside test_*.py, so that the README's test command does not collect it: the
    recipes of the README's quick start with the baseline and of the wall-time gate (tests/long_recipes.py), the count
    mode under Valgrind (tests/long_count_mode.py), the cold compiles (tests/equivalence/long_compiled.py). The job
    `recipe` of .github/workflows/recipes.yml runs every such module, on every push and pull request, and no pattern
    of the test command's python_files names one."""
    workflow = (ROOT / ".github" / "workflows" / "recipes.yml").read_text(encoding="utf8")
    run = " ".join(line for line in workflow.splitlines() if ".venv/bin/python -m pytest" in line).split()
    long = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("long_*.py"))
    assert {"tests/long_recipes.py", "tests/long_count_mode.py", "tests/equivalence/long_compiled.py"} <= set(long)
    assert [path for path in long if path not in run] == [], workflow
    for path in long:
        assert re.search(r"^def test_\w+\(", (ROOT / path).read_text(encoding="utf8"), re.M), f"{path}: no test"
        assert not any(fnmatch.fnmatch(Path(path).name, pattern) for pattern in pytestconfig.getini("python_files"))


def test_the_count_gate_recipe_runs_in_its_ci_job():
    """The count gate's recipe takes minutes under Valgrind (docs/recipes.md states its cost): the job `recipe` of
    .github/workflows/recipes.yml runs it, every command in its order, through this module's command line; and
    docs/gating.md's count-gate command is the recipe's."""
    workflow = (ROOT / ".github" / "workflows" / "recipes.yml").read_text(encoding="utf8")
    assert re.search(r'\.venv/bin/python -m tests\.test_docs_recipes docs/recipes\.md[\s\\]+"Gate a pull request on '
                     r'instruction counts"', workflow), workflow
    recipe = [argv for _, argv in sections((ROOT / RECIPES).read_text(encoding="utf8"))[
        "Gate a pull request on instruction counts"]]
    gating = sections((ROOT / "docs" / "gating.md").read_text(encoding="utf8"))["The instruction-count gate"]
    for _, argv in gating:
        assert ["env", "PHASEBENCH_NO_INSTALL=1", *argv] in recipe or argv in recipe, argv


def test_a_recipe_that_fails_as_written_fails(tmp_path):
    """run_recipe stops at the first command that fails, naming the page's line and the command as written: here a
    gate asked for saved runs that the storage does not hold, after a command that runs."""
    this_venv(tmp_path)
    page = tmp_path / "page.md"
    page.write_text(f"## A recipe\n\n```sh\ncd .\n.venv/bin/python -c 'print(1)'\n"
                    f".venv/bin/python -m phasebench.gate --storage file://{tmp_path}/none before after\n"
                    f".venv/bin/python -c 'never ran'\n```\n")
    with pytest.raises(AssertionError) as failed:
        run_recipe(page, "A recipe", tmp_path)
    message = str(failed.value)
    assert message.startswith(f"{page}:6: .venv/bin/python -m phasebench.gate --storage file://{tmp_path}/none "
                              "before after"), message
    assert "before: no such file" in message and "never ran" not in message, message


def main(argv: list[str]) -> int:
    """CI's recipe job: `python -m tests.test_docs_recipes PAGE SECTION [PYTEST OPTIONS…]` runs the section's
    commands in order from the current folder, the options after each .ci/ gate script's arguments (a smaller
    selection); apt-get's commands are the job's own step (they need root)."""
    page, title, *extra = argv

    def shrink(command: list[str]) -> list[str]:
        if strip_prefixes(command)[0] == "apt-get":
            return ["true"]
        return command + extra if any(arg.startswith(".ci/bench-pr") for arg in command) else command

    for command, done in run_recipe(Path(page), title, Path.cwd(), shrink, timeout=3600):
        print(f"$ {shlex.join(command)}\n{done.stdout}{done.stderr}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

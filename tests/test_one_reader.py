"""One reader of saved results: in the package's source (its syntax trees), JSON is parsed (json.load, json.loads)
in phasebench/saved.py, which owns pytest-benchmark's saved results, and elsewhere only where what is parsed is no
saved result, each place named below with what it parses. The same holds for the lab's modules (lab/, its tests
aside, as the suite's tests are), where a parse handed straight to SavedResult.from_json (a member of an archive) is
read through SavedResult, and for the scripts of .ci/, whose Python parses no JSON by hand: they read results through
SavedResult. pytest-benchmark's own --benchmark-compare parses the baselines in pytest-benchmark, outside the
package."""

from __future__ import annotations

import ast
import re

from phasebench.repository import ROOT

PACKAGE = ROOT / "phasebench"
OWNER = "saved.py"
LAB = ROOT / "lab"
CI = ROOT / ".ci"

# (module, the function that parses): what it parses, when it is no saved result.
NOT_SAVED_RESULTS = {
    ("history/points.py", "read_compact"): "the history's compact series (the named exception: a series file)",
    ("history/points.py", "_append_locked"): "the compact series file it extends",
    ("gate/counts.py", "load_spreads"): "count_spread.json, the measured spread per case",
    ("gate/comment.py", "load"): "a gate's verdict file (gate.json)",
    ("gate/post.py", "*"): "GitHub's answers, and the pull request's number and head (pr.json)",
    ("worker/protocol.py", "*"): "the worker protocol's lines",
    ("worker/client.py", "*"): "the worker's reply lines",
    ("worker/torchrun.py", "*"): "torchrun's rank files",
    ("worker/torchrun_rank.py", "*"): "a rank's options",
    ("plugin/machine.py", "*"): "the machine probe's output",
    ("handed_down.py", "handed_down"): "an answer handed down in the environment under its key (the build's make "
                                       "variables, torch's probe)",
    ("plain/__init__.py", "*"): "the plain program's output line",
}
# The same for the lab's modules, by their path under lab/.
LAB_NOT_SAVED_RESULTS = {
    ("study.py", "read"): "an intervention study's file",
    ("studies/count_study.py", "*"): "the count gate's verdict files (gate.json)",
    ("studies/interventions.py", "load_schedule"): "the study's schedule.json",
    ("studies/interventions.py", "logged"): "the study's runs.jsonl",
    ("studies/ndebug/compare.py", "*"): "a child process's line of phase times",
    ("studies/paired/run_pairs.py", "read_kept"): "the training-run rounds it kept (run-pairs.json)",
    ("studies/paired/forward_drift.py", "read_kept"): "the figures it kept (forward-drift.json)",
    ("studies/paired/spread_floor.py", "read_kept"): "the draws it kept (spread-floor.json)",
}
# JSON parsed by hand in a script's embedded Python (or by jq).
HAND_PARSED = re.compile(r"\bjson\.loads?\(|\bfrom json import\b|\bjq\b")


def json_parses(source: str, filename: str = "<source>") -> list[tuple[str, int, str]]:
    """(enclosing function, line, code) of every json.load or json.loads that parses something other than json.dumps'
    own output (a round trip through JSON is no reading): called, or handed on as a function (map(json.loads, ...))."""
    tree = ast.parse(source, filename)
    # SavedResult.from_json(json.load(...)): parsed for SavedResult, which reads it
    handed = {id(node.args[0]) for node in ast.walk(tree) if isinstance(node, ast.Call) and node.args
              and ast.unparse(node.func).endswith("SavedResult.from_json")}
    modules = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names if alias.name == "json"}
    names = {alias.asname or alias.name for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and node.module == "json"
             for alias in node.names if alias.name in ("load", "loads")}
    found = []

    def parser(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in ("load", "loads") and isinstance(node.value, ast.Name)
                and node.value.id in modules) or (isinstance(node, ast.Name) and node.id in names
                                                  and isinstance(node.ctx, ast.Load))

    def visit(node, function: str):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call) and parser(child.func):
                round_trip = child.args and isinstance(child.args[0], ast.Call) and \
                    ast.unparse(child.args[0].func).endswith("dumps")
                if not round_trip and id(child) not in handed:
                    found.append((function, child.lineno, ast.unparse(child)))
                for part in (*child.args, *child.keywords):  # not its func: that is the call itself
                    visit(part, inner)
                continue
            if parser(child):  # handed on as a function
                found.append((function, child.lineno, ast.unparse(node)))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_the_check_finds_every_way_of_parsing_json():
    source = ("import json\nimport json as j\nfrom json import loads as parse\n"
              "def a(p):\n    return json.load(open(p))\n"
              "def b(t):\n    return j.loads(t), parse(t)\n"
              "def c(x):\n    return json.loads(json.dumps(x))\n"
              "def d(t):\n    return SavedResult.from_json(json.loads(t), 'x'), json.loads(t)\n"
              "def e(lines):\n    return list(map(j.loads, lines))\n")
    assert [(function, line) for function, line, _ in json_parses(source)] == [("a", 5), ("b", 7), ("b", 7),
                                                                                ("d", 11), ("e", 13)]


def test_only_the_saved_result_module_parses_saved_results():
    found, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for function, line, code in json_parses(path.read_text(encoding="utf8"), str(path)):
            allowed = next((key for key in ((module, function), (module, "*")) if key in NOT_SAVED_RESULTS), None)
            if module == OWNER:
                used.add(OWNER)
            elif allowed:
                used.add(allowed)
            else:
                found.append(f"phasebench/{module}:{line} in {function}: {code}")
    assert not found, ("JSON parsed outside phasebench/saved.py; read a saved result through SavedResult, or name "
                       "what is parsed in NOT_SAVED_RESULTS:\n" + "\n".join(found))
    assert OWNER in used, "phasebench/saved.py parses no JSON: the check sees nothing"
    stale = sorted(f"{module} {function}" for module, function in set(NOT_SAVED_RESULTS) - used)
    assert not stale, f"named, but parses no JSON any more: {stale}"


def test_the_lab_reads_saved_results_through_saved_result():
    found, used = [], set()
    for path in sorted(LAB.rglob("*.py")):
        module = path.relative_to(LAB).as_posix()
        if module.startswith("tests/"):
            continue
        for function, line, code in json_parses(path.read_text(encoding="utf8"), str(path)):
            allowed = next((key for key in ((module, function), (module, "*")) if key in LAB_NOT_SAVED_RESULTS), None)
            if allowed:
                used.add(allowed)
            else:
                found.append(f"lab/{module}:{line} in {function}: {code}")
    assert not found, ("JSON parsed by hand in the lab; read a saved result through phasebench.saved.SavedResult, or "
                       "name what is parsed in LAB_NOT_SAVED_RESULTS:\n" + "\n".join(found))
    stale = sorted(f"{module} {function}" for module, function in set(LAB_NOT_SAVED_RESULTS) - used)
    assert not stale, f"named, but parses no JSON any more: {stale}"


def test_the_ci_scripts_parse_no_json_by_hand():
    scripts = [path for path in sorted(CI.iterdir()) if path.is_file()]
    assert any("SavedResult" in path.read_text(encoding="utf8") for path in scripts)  # the check sees the scripts
    found = [f".ci/{path.name}:{number}: {line.strip()}" for path in scripts
             for number, line in enumerate(path.read_text(encoding="utf8").splitlines(), 1)
             if HAND_PARSED.search(line)]
    assert not found, ("JSON parsed by hand in .ci/; read a saved result through phasebench.saved.SavedResult:\n"
                       + "\n".join(found))

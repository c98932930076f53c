"""One reader of saved results: in the package's source (its syntax trees), JSON is parsed (json.load, json.loads)
in phasebench/saved.py, which owns pytest-benchmark's saved results, and elsewhere only where what is parsed is no
saved result, each place named below with what it parses. pytest-benchmark's own --benchmark-compare parses the
baselines in pytest-benchmark, outside the package."""

from __future__ import annotations

import ast

from phasebench.repository import ROOT

PACKAGE = ROOT / "phasebench"
OWNER = "saved.py"

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


def json_parses(source: str, filename: str = "<source>") -> list[tuple[str, int, str]]:
    """(enclosing function, line, code) of every json.load or json.loads call that parses something other than
    json.dumps' own output (a round trip through JSON is no reading)."""
    tree = ast.parse(source, filename)
    modules = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names if alias.name == "json"}
    names = {alias.asname or alias.name for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and node.module == "json"
             for alias in node.names if alias.name in ("load", "loads")}
    found = []

    def visit(node, function: str):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                func = child.func
                parses = (isinstance(func, ast.Attribute) and func.attr in ("load", "loads")
                          and isinstance(func.value, ast.Name) and func.value.id in modules) or (
                          isinstance(func, ast.Name) and func.id in names)
                round_trip = child.args and isinstance(child.args[0], ast.Call) and \
                    ast.unparse(child.args[0].func).endswith("dumps")
                if parses and not round_trip:
                    found.append((function, child.lineno, ast.unparse(child)))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_the_check_finds_every_way_of_parsing_json():
    source = ("import json\nimport json as j\nfrom json import loads as parse\n"
              "def a(p):\n    return json.load(open(p))\n"
              "def b(t):\n    return j.loads(t), parse(t)\n"
              "def c(x):\n    return json.loads(json.dumps(x))\n")
    assert [(function, line) for function, line, _ in json_parses(source)] == [("a", 5), ("b", 7), ("b", 7)]


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

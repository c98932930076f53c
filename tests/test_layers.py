"""The package's layering: imports go one way. Every module belongs to one layer of LAYERS and imports only from its
own layer or those below it, at its top or inside a function; no phasebench module imports one that imports it
back. phasebench.results is the leaf that reads saved results; phasebench.report and phasebench.gate read results
through it and import no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from phasebench.repository import ROOT

PACKAGE = ROOT / "phasebench"
# What the report and the gate may import of the suite: the leaves and themselves (never a trainer or a worker).
READERS_MAY_IMPORT = {"phasebench.results", "phasebench.saved", "phasebench.schema", "phasebench.record",
                      "phasebench.distributed_records", "phasebench.method", "phasebench.spec", "phasebench.registry",
                      "phasebench.data", "phasebench.utilization", "phasebench.gpu_sampling", "phasebench.cpu_windows",
                      "phasebench.repository", "phasebench.stats", "phasebench.programs"}
# What phasebench.results may import of the suite (phasebench.schema, the format, its base phasebench.record and its
# data-parallel records phasebench.distributed_records are).
LEAVES = {"phasebench.saved", "phasebench.schema", "phasebench.record", "phasebench.distributed_records",
          "phasebench.method", "phasebench.spec", "phasebench.registry", "phasebench.repository"}
# The layers, lowest first, each by the modules and packages it holds: a module imports from its own layer and
# those below, never from one above (test_no_import_runs_back_up). Inside a layer, test_no_import_cycle orders them.
LAYERS = (
    ("the vocabulary and the saved format (no torch)",
     {"phasebench", "phasebench.repository", "phasebench.handed_down", "phasebench.spec", "phasebench.programs",
      "phasebench.method", "phasebench.registry", "phasebench.devices", "phasebench.determinism", "phasebench.data",
      "phasebench.provenance", "phasebench.phase_round", "phasebench.record", "phasebench.distributed_records",
      "phasebench.schema", "phasebench.saved", "phasebench.results", "phasebench.cpu_windows",
      "phasebench.gpu_sampling", "phasebench.utilization", "phasebench.stats", "phasebench.fitness"}),
    ("the Python trainer", {"phasebench.train"}),
    ("the workers, which run either trainer", {"phasebench.worker"}),
    ("the commands on saved results and on the workers", {"phasebench.gate", "phasebench.report", "phasebench.history",
                                                          "phasebench.plain"}),
    ("the pytest plugin", {"phasebench.plugin"}),
    ("the reference pages, generated from the plugin's options and the schema", {"phasebench.reference"}),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The import nodes under `if TYPE_CHECKING:`, which never run."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return skipped


def _known(name: str) -> str | None:
    """The phasebench module `name` is, or the package of it that is one (a name imported from a module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str) -> set[str]:
    """The phasebench modules a module imports anywhere in it (at its top, in functions), `from P import m` as P.m
    where m is a module; what `import P.m` runs of P's __init__ is P's own business, not an edge."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf8"), str(path))
    skipped = _type_checking_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {_known(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else _known(source))
    return {module for module in found if module and module != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def closure(name: str) -> set[str]:
    seen, stack = set(), [name]
    while stack:
        for imported in GRAPH[stack.pop()]:
            if imported not in seen:
                seen.add(imported)
                stack.append(imported)
    return seen - {name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (Tarjan), as a path."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    found = []
    for component in components:  # a path from its first module back to it, inside the component
        start = min(component)
        paths, seen = {start: [start]}, {start}
        frontier = [start]
        while frontier:
            node = frontier.pop(0)
            for target in sorted(graph[node] & component):
                if target == start:
                    found.append(paths[node] + [start])
                    frontier = []
                    break
                if target not in seen:
                    seen.add(target)
                    paths[target] = paths[node] + [target]
                    frontier.append(target)
    return found


def test_report_and_gate_import_no_torch():
    code = ("import phasebench.report, phasebench.gate, phasebench.gate.cli, phasebench.report.cli, phasebench.results; "
            "import sys; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout
    assert out.strip() == "False"


def test_no_import_cycle():
    assert "phasebench.results" in GRAPH["phasebench.gate.decide"]  # the graph sees what it should
    assert "phasebench.report.cases" in GRAPH["phasebench.report.cli"]
    found = cycles(GRAPH)
    assert not found, "import cycles between phasebench modules:\n" + "\n".join(" -> ".join(c) for c in found)


def layer_of(name: str) -> int | None:
    """The index in LAYERS of the layer that holds module `name` (itself or the package it is in), None if none does."""
    for index, (_, members) in enumerate(LAYERS):
        if any(name == member or (member != "phasebench" and name.startswith(member + ".")) for member in members):
            return index
    return None


def upward_imports(graph: dict[str, set[str]], layer=layer_of) -> list[str]:
    """Each import of a module from a layer above its own, as 'importer -> imported'."""
    return [f"{name} -> {imported}" for name, imports in sorted(graph.items()) for imported in sorted(imports)
            if layer(imported) > layer(name)]


def test_every_module_has_a_layer():
    assert not [name for name in MODULES if layer_of(name) is None], "place each of these in LAYERS"


def test_no_import_runs_back_up():
    """No module imports one of a layer above its own: a trainer never imports a worker, a worker never the plugin."""
    assert "phasebench.phase_round" in GRAPH["phasebench.train.trainer"]  # the graph sees what it should
    found = upward_imports(GRAPH)
    assert not found, "imports that run back up the layers (LAYERS):\n" + "\n".join(found)


def test_the_layer_check_finds_an_import_that_runs_back_up():
    layers = {"low": 0, "low.b": 0, "high": 1}
    graph = {"low": {"low.b"}, "low.b": {"high"}, "high": {"low"}}
    assert upward_imports(graph, layers.get) == ["low.b -> high"]


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]


def test_results_is_a_leaf():
    assert closure("phasebench.results") <= LEAVES, sorted(closure("phasebench.results") - LEAVES)


def test_report_and_gate_import_only_the_leaves_and_not_each_other():
    for package, other in (("phasebench.report", "phasebench.gate"), ("phasebench.gate", "phasebench.report")):
        own = {name for name in MODULES if name == package or name.startswith(package + ".")}
        assert own, package
        for name in own:
            beyond = {module for module in closure(name) if module not in own and module not in READERS_MAY_IMPORT}
            assert not beyond, f"{name} imports {sorted(beyond)}"
            assert not any(module == other or module.startswith(other + ".") for module in closure(name))


def test_the_product_never_imports_the_lab():
    """lab/ (its studies, plugin and tests) imports the product; no phasebench module imports it, anywhere."""
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"), str(path))):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                imported = [node.module or ""]
            else:
                continue
            found += [f"{name} imports {module}" for module in imported if module.partition(".")[0] == "lab"]
    assert not found, found


RAW_KEYS = {"extra_info", "machine_info"}  # read through phasebench.schema's records (info_of, machine_of) alone


def raw_reads(source: str, filename: str = "<source>") -> list[str]:
    """Where `source` reads a saved result's extra_info or machine_info by key: `x["extra_info"]`,
    `x.get("machine_info")`, `x.pop(...)`, `x.setdefault(...)`, as 'line: code'."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and node.func.attr in ("get", "pop", "setdefault"):
            key = node.args[0]
        else:
            continue
        if isinstance(key, ast.Constant) and key.value in RAW_KEYS:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_raw_read_check_finds_raw_reads():
    source = ("a = bench['extra_info']['phase']\nb = (result.get('machine_info') or {}).get('phasebench')\n"
              "c = schema.info_of(bench).phase\nd = 'extra_info'\n")
    assert raw_reads(source) == ["1: bench['extra_info']", "2: result.get('machine_info')"]


def test_report_and_gate_read_saved_records_only_through_the_schema():
    """phasebench.report and phasebench.gate read a benchmark's extra_info and a result's machine_info as
    phasebench.schema's typed records (schema.info_of, schema.machine_of), never by key."""
    found = [f"{name}:{line}" for name, path in MODULES.items()
             if name.startswith(("phasebench.report", "phasebench.gate"))
             for line in raw_reads(path.read_text(encoding="utf8"), str(path))]
    assert not found, found


# -- rules by role: a name has one owner, and is imported from it ---------------------------------------------------
SOURCES = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "bench").rglob("*.py"), *(ROOT / "tests").rglob("*.py"),
                  *(ROOT / "lab").rglob("*.py"), ROOT / "conftest.py"])
OWNERS = {"ROOT": "phasebench.repository", "METHOD_VERSION": "phasebench.method"}  # a name: the module that defines it


def re_exports(source: str, filename: str = "<source>") -> list[str]:
    """Where `source` imports a name for others to import from it, as 'line: code': a `from M import name` kept with
    `# noqa: F401`, or a module-level __all__ that lists names the module imports. (`import M  # noqa: F401`, a module
    imported for what importing it does, is no re-export.)"""
    tree, lines = ast.parse(source, filename), source.splitlines()
    found = [f"{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and any("noqa: F401" in line for line in lines[node.lineno - 1:node.end_lineno])]
    imported = {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", None) == "__all__" for target in node.targets):
            names = [element.value for element in getattr(node.value, "elts", []) if isinstance(element, ast.Constant)]
            found += [f"{node.lineno}: __all__ names {name}, imported" for name in names if name in imported]
    return found


def stray_definitions(source: str, module: str, filename: str = "<source>") -> list[str]:
    """Where `source` (module `module`) defines a name of OWNERS it does not own, imports one from another module,
    or finds the repository from its own path (`Path(__file__)...parents[N]`), as 'line: code'. A script run by its
    path may put its checkout on sys.path (`sys.path.insert(0, ...)`) so as to import phasebench: that is no root."""
    found, tree = [], ast.parse(source, filename)
    bootstrap = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and ast.unparse(node.func) == "sys.path.insert" for inner in ast.walk(node)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(OWNERS.get(getattr(target, "id", None), module) != module for target in targets):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and any(OWNERS.get(alias.name, node.module) != node.module
                                                       for alias in node.names):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents"
              and "__file__" in ast.unparse(node.value) and module != OWNERS["ROOT"] and id(node) not in bootstrap):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda where: int(where.partition(":")[0]))


def test_the_rule_checks_find_what_they_look_for():
    shim = "from a import b  # noqa: F401\nimport c  # noqa: F401\nfrom d import (  # noqa: F401\n    e,\n)\n"
    assert re_exports(shim) == ["1: from a import b", "3: from d import e"]
    assert re_exports("from a import b, c\n__all__ = ['b', 'f']\ndef f(): pass\n") == ["2: __all__ names b, imported"]
    stray = ("from pathlib import Path\nROOT = Path(__file__).resolve().parents[1]\n"
             "from phasebench.results import ROOT\nfrom phasebench.method import METHOD_VERSION\n")
    assert stray_definitions(stray, "tests.x") == ["2: ROOT = Path(__file__).resolve().parents[1]",
                                                   "2: Path(__file__).resolve().parents[1]",
                                                   "3: from phasebench.results import ROOT"]
    assert stray_definitions("METHOD_VERSION = 5\n", "phasebench.method") == []
    assert stray_definitions("sys.path.insert(0, str(Path(__file__).resolve().parents[3]))\n", "lab.x") == []


def test_no_re_export_shims():
    """Each name is imported from the module that defines it: no module keeps an import for others to take."""
    found = [f"{path.relative_to(ROOT)}:{where}" for path in SOURCES
             for where in re_exports(path.read_text(encoding="utf8"), str(path))]
    assert not found, "re-exports (import these names from their owners instead):\n" + "\n".join(found)


def test_one_definition_of_the_repository_root_and_the_method_version():
    """ROOT is phasebench.repository's and METHOD_VERSION phasebench.method's: defined there alone, imported from
    there alone, and no other module finds the repository from its own path."""
    found = []
    for path in SOURCES:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found += [f"{path.relative_to(ROOT)}:{where}"
                  for where in stray_definitions(path.read_text(encoding="utf8"), module, str(path))]
    assert not found, "\n".join(found)

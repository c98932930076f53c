"""The package's layering: imports go one way. phasebench.results is the leaf that
reads saved results; phasebench.report and phasebench.gate read results through it and import no torch; no
phasebench module imports, at its top or inside a function, one that imports it back."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "phasebench"
# What the report and the gate may import of the suite: the leaves and themselves (never a trainer or a worker).
READERS_MAY_IMPORT = {"phasebench.results", "phasebench.schema", "phasebench.record", "phasebench.distributed_records",
                      "phasebench.method", "phasebench.spec", "phasebench.registry", "phasebench.data",
                      "phasebench.utilization", "phasebench.gpu_sampling", "phasebench.cpu_windows"}
# What phasebench.results may import of the suite (phasebench.schema, the format, its base phasebench.record and its
# data-parallel records phasebench.distributed_records are).
LEAVES = {"phasebench.schema", "phasebench.record", "phasebench.distributed_records", "phasebench.method",
          "phasebench.spec", "phasebench.registry"}


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


def test_the_product_never_imports_the_studies():
    """studies/ measures the gates; no phasebench module imports it, at its top or in a function."""
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"), str(path))):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                imported = [node.module or ""]
            else:
                continue
            found += [f"{name} imports {module}" for module in imported if module.partition(".")[0] == "studies"]
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

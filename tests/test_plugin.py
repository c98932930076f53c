"""The plugin owns its contract (docs/architecture.md): the root conftest.py is its entry and
nothing else, the session is built once by a short pytest_configure, and one hook decides what is collected."""

from __future__ import annotations

import ast
import inspect

from phasebench import plugin
from phasebench.plugin import cases, counting, session
from phasebench.repository import ROOT


def test_the_root_conftest_is_only_the_plugins_entry():
    module = ast.parse((ROOT / "conftest.py").read_text())
    body = [node for node in module.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    assert len(body) == 1 and isinstance(body[0], ast.Assign), ast.dump(module)
    assert [target.id for target in body[0].targets] == ["pytest_plugins"]
    assert ast.literal_eval(body[0].value) == ["phasebench.plugin"]


def test_pytest_configure_only_builds_the_session():
    lines = inspect.getsource(plugin.pytest_configure).splitlines()
    assert len(lines) <= 8, lines
    assert "PhasebenchSession.from_config(config)" in "\n".join(lines)


def test_one_collection_hook():
    modules = [plugin, cases, counting, session] + [__import__(f"phasebench.plugin.{name}", fromlist=["_"])
                                                   for name in ("options", "fixtures", "terminal", "gating")]
    owners = [module.__name__ for module in modules if hasattr(module, "pytest_collection_modifyitems")]
    assert owners == ["phasebench.plugin.cases"]


def test_the_fixtures_live_in_the_package():
    from phasebench.plugin import fixtures

    for name in ("settings", "cpp_library", "worker_for", "new_worker", "world_for", "utilization_of", "progress"):
        assert hasattr(fixtures, name), name

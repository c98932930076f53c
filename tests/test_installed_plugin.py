"""The plugin as pytest finds it (docs/usage.md#the-plugin): installed under its module name, loaded wherever pytest
is started, creating nothing in the directory it is started from, and importing no torchvision into pytest."""

from __future__ import annotations

import subprocess
import sys

import pytest

from phasebench.plugin import guards, session
from phasebench.repository import ROOT
from tests.child_runs import _data_options


def test_the_plugin_is_installed_under_its_module_name():
    """requirements.txt installs this checkout (-e .): pytest loads phasebench/plugin/__init__.py from its pytest11 entry point,
    before it parses the command line, wherever it is started (docs/usage.md#the-plugin)."""
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group="pytest11") if ep.value == "phasebench.plugin"]
    if not found:
        pytest.skip("phasebench is not installed in this environment: pip install -r requirements.txt")
    assert [ep.name for ep in found] == ["phasebench.plugin"], "conftest.py's pytest_plugins must find it registered"
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                          str(ROOT / "tests" / "test_registry.py"), "--impl", "all"],
                         cwd="/", capture_output=True, text=True, timeout=300)
    assert run.returncode == pytest.ExitCode.OK, run.stdout + run.stderr


def test_run_from_another_directory_creates_nothing_there(pytestconfig, tmp_path):
    """The default data/ and .benchmarks/ are the repository's, wherever pytest is started
    (docs/usage.md#the-plugin)."""
    data = [] if pytestconfig.getoption("mnist_root") == str(session.DEFAULT_DATA) else _data_options(pytestconfig)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--device=cpu",
                          str(ROOT / "tests" / "test_registry.py"), "-k", "every_implementation", *data],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == pytest.ExitCode.OK, run.stdout + run.stderr
    assert list(tmp_path.iterdir()) == []
    if "--benchmark-storage" not in guards.given_options(pytestconfig):
        assert pytestconfig.option.benchmark_storage == session.DEFAULT_STORAGE == f"file://{ROOT / '.benchmarks'}"


def test_pytest_itself_does_not_import_torchvision():
    """Its import costs about as much as torch's: only a process that reads data (a Python worker) pays it; the
    version in the header and machine_info is still torchvision's own."""
    code = ("import sys; from phasebench import plugin, report; from phasebench.train import trainer; "
            "from phasebench.plugin import machine; print(machine.torchvision_version()); "
            "print('torchvision' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    import torchvision

    assert out == [torchvision.__version__, "False"]

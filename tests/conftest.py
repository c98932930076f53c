"""The test command's own arrangements, apart from the product's plugin: the order of the tests (the Python bench
cases first, while the C++ library builds beside them; the tests of the library's testing build late), the
libraries' builds started as soon as collection ends, the groups pytest-xdist keeps on one worker, the testing
build's fixture, and the recorder of every benchmark's extra_info (tests/recorder.py). Only where the run times
nothing: beside a timed case any of it would be inside its clock."""

from __future__ import annotations

import os
import threading

import pytest

from phasebench import registry
from phasebench.repository import ROOT
from phasebench.worker import build
from tests import recorder
from tests.child_runs import forget_xdist

BENCH_DIR = str(ROOT / "bench") + os.sep
# Fixtures of these scopes are made once per module (or package, class) in each process that runs one of its
# tests: under pytest-xdist the tests sharing one stay together, or each worker would make it again.
SHARED_SCOPES = {"module", "package", "class"}


def pytest_configure(config):
    forget_xdist()
    if not config.pluginmanager.is_registered(recorder):
        config.pluginmanager.register(recorder, "tests.recorder")


def nothing_timed(config, items) -> bool:
    """Whether this run times nothing: benchmarks disabled (the test command), or none selected."""
    return config.getoption("benchmark_disable") or not any(
        "benchmark" in getattr(item, "fixturenames", ()) for item in items)


def asks_for(items, fixture: str) -> bool:
    return any(fixture in getattr(item, "fixturenames", ()) for item in items)


def library_free_first(items) -> list:
    """The bench cases of Python implementations (and those of none) before the C++ ones, each group in its
    order: the C++ library builds beside the first tests (pytest_collection_finish), and the Python cases give it
    about as long as it takes, where the C++ cases would wait on it. The bench cases share session-scoped fixtures
    only, so no fixture is made twice. The tests/ modules keep their order: their module-scoped workers would be."""
    def is_cpp_case(item) -> bool:
        impl = getattr(getattr(item, "callspec", None), "params", {}).get("impl")
        return impl in registry.NAMES and registry.get(impl).language != "python"

    bench = [item for item in items if str(item.path).startswith(BENCH_DIR)]
    if items[:len(bench)] != bench:  # bench cases not all first (another order was asked for): left as they are
        return items
    return ([item for item in bench if not is_cpp_case(item)] + [item for item in bench if is_cpp_case(item)]
            + items[len(bench):])


def shared_fixture_group(item) -> str | None:
    """The xdist group of a test that shares something costly with others: a bench case, the worker process of its
    implementation and device (the session's worker pool, of which each xdist worker would start its own); a test
    using a fixture narrower than the session (a module's worker, a module's child run), the fixture's module (or
    package), so that one xdist worker makes it once. None for a test that shares nothing costly."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if str(item.path).startswith(BENCH_DIR) and "impl" in params:
        return f"worker {params['impl']} {params.get('device', '')}".rstrip()
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for definitions in info.name2fixturedefs.values():
        if definitions and definitions[-1].scope in SHARED_SCOPES:
            return (item.path.parent if definitions[-1].scope == "package" else item.path).relative_to(
                ROOT).as_posix()
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the xdist_group markers
def pytest_collection_modifyitems(config, items):
    """Where nothing is timed, the Python bench cases run before the C++ ones (library_free_first); the tests of
    the testing build go late (it compiles after the production library); tests sharing a fixture narrower than
    the session get its xdist group."""
    if nothing_timed(config, items):
        items[:] = library_free_first(items)
    items[:] = ([item for item in items if "testing_library" not in getattr(item, "fixturenames", ())]
                + [item for item in items if "testing_library" in getattr(item, "fixturenames", ())])
    for item in items:
        group = shared_fixture_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session):
    """Where nothing is timed, the C++ library's build starts as soon as collection ends, beside the first tests;
    the cpp_library fixture waits on its lock and finds it built, and so do the other xdist workers' (one build
    folder, one writer: phasebench/worker/build.py locks it). Then the plain program (where a test asks for it)
    and the testing build (where a test asks for it). The thread only builds: what fails, the fixture's own call
    raises in the test that needs it."""
    items = session.items
    if session.config.option.collectonly or not items or not nothing_timed(session.config, items):
        return
    if not any(asks_for(items, name) for name in ("cpp_library", "cpp_plain_program", "testing_library")):
        return
    variant = session.config.phasebench.library_variant

    def build_all() -> None:
        if not _quietly(lambda: build.library_path(variant=variant)):
            return
        if asks_for(items, "cpp_plain_program"):
            _quietly(build.plain_program_path)
        if asks_for(items, "testing_library"):
            _quietly(lambda: build.library_path(variant="testing"))

    threading.Thread(target=build_all, name="phasebench-build", daemon=True).start()


def _quietly(build_it) -> bool:
    try:
        build_it()
    except Exception:  # noqa: BLE001  (the fixture's own call raises it, in the test that needs it)
        return False
    return True


@pytest.fixture(scope="session")
def testing_library() -> str:
    """The library's testing build (phasebench/worker/build.py's variant "testing": the production library and
    include/phasebench_testing.h's entry points), for the tests of the knobs it holds; skipped where no C++ toolchain
    is installed."""
    try:
        return str(build.library_path(variant="testing"))
    except build.BuildUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def saved_extra_info() -> dict[str, dict]:
    """{node id: extra_info} of the benchmarks this session ran so far (tests/recorder.py)."""
    return recorder.SAVED

"""The test command's own arrangements, apart from the product's plugin: its order (the Python bench cases first,
while the C++ library builds beside them; the tests of the library's testing build late; the tests marked `beside`
last), the libraries' builds started as soon as collection ends, the testing build's fixture, the second lane that runs the marked tests' slow work (tests/beside.py), and the recorder of
every benchmark's extra_info (tests/recorder.py). Only where the run times nothing: beside a timed case any of it
would be inside its clock."""

from __future__ import annotations

import os
import threading

import pytest

from phasebench import registry
from phasebench.worker import build
from tests import beside, recorder

BENCH_DIR = str(build.ROOT / "bench") + os.sep


def pytest_configure(config):
    config.addinivalue_line("markers", "beside(start, once=False, cost_s=0): start(item, folder, library) starts "
                                       "the test's work, in a second lane once the C++ library is built; cost_s, its "
                                       "rough seconds here, orders the marked tests (tests/beside.py)")
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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The tests marked beside run last, longest work first (the marker's cost_s): their work starts in the second
    lane as soon as the library is built, and by the time the other tests are done most of it is (tests/beside.py).
    Where nothing is timed, the Python bench cases run before the C++ ones (library_free_first)."""
    if nothing_timed(config, items):
        items[:] = library_free_first(items)
    # The testing build compiles after the production library, beside the tests: its tests go late, not waiting on it.
    items[:] = ([item for item in items if "testing_library" not in getattr(item, "fixturenames", ())]
                + [item for item in items if "testing_library" in getattr(item, "fixturenames", ())])
    marked = [item for item in items if item.get_closest_marker("beside")]
    if marked:
        # Longest work first: the lane takes it from the near end, and ends on short work, which is what the last
        # tests wait on.
        marked.sort(key=lambda item: -item.get_closest_marker("beside").kwargs.get("cost_s", 0))
        items[:] = [item for item in items if not item.get_closest_marker("beside")] + marked


def pytest_collection_finish(session):
    """Where nothing is timed, the C++ library's build starts as soon as collection ends, beside the first tests;
    the cpp_library fixture waits on its lock and finds it built. Once built, the plain program's build (where a
    test asks for it) and the lane of the marked tests' work start beside the tests, and the testing build (where a
    test asks for it) follows in this thread."""
    items = session.items
    if session.config.option.collectonly or not items or not nothing_timed(session.config, items):
        return
    if not any(asks_for(items, name) for name in ("cpp_library", "started_beside", "testing_library")):
        return
    variant = session.config.phasebench.library_variant

    def build_then_start() -> None:
        try:
            library = str(build.library_path(variant=variant))
        except Exception:  # noqa: BLE001  (the cpp_library fixture's own call raises it, in the test that needs it)
            return
        if asks_for(items, "cpp_plain_program"):
            threading.Thread(target=_quietly, args=(build.plain_program_path,), name="phasebench-plain-build",
                             daemon=True).start()
        if any(item.get_closest_marker("beside") for item in items):
            beside.start(items, library, lane=True)
        if asks_for(items, "testing_library"):
            _quietly(lambda: build.library_path(variant="testing"))

    threading.Thread(target=build_then_start, name="phasebench-build", daemon=True).start()


def _quietly(build_it) -> None:
    try:
        build_it()
    except Exception:  # noqa: BLE001  (the fixture's own call raises it)
        pass


@pytest.fixture(scope="session")
def testing_library() -> str:
    """The library's testing build (phasebench/worker/build.py's variant "testing": the production library and
    include/phasebench_testing.h's entry points), for the tests of the knobs it holds; skipped where no C++ toolchain
    is installed."""
    try:
        return str(build.library_path(variant="testing"))
    except build.BuildUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture
def started_beside(request):
    """The Future of this test's beside(start) work (tests/beside.py), done now where the lane has not taken it."""
    if beside.key(request.node) not in beside.WORK:
        try:
            library = request.getfixturevalue("cpp_library")
        except pytest.skip.Exception:
            library = None
        beside.start([request.node], library, lane=False)
    return beside.result_for(request.node)


@pytest.fixture(scope="session")
def saved_extra_info() -> dict[str, dict]:
    """{node id: extra_info} of the benchmarks this session ran so far (tests/recorder.py)."""
    return recorder.SAVED


def pytest_sessionfinish(session):
    beside.stop_all()

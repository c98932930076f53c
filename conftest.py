"""phasebench's fixtures: the settings, the C++ library, and the workers (docs/architecture.md#the-c-abi-and-the-build).

The options and hooks live in phasebench/plugin/__init__.py, installed as a pytest plugin (docs/options.md#options); a
checkout that was not installed loads it from here.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from functools import partial
from typing import TYPE_CHECKING

import pytest

from phasebench import registry
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import Workload
from phasebench.worker import build
from phasebench.worker.client import Worker, WorkerPool

if TYPE_CHECKING:  # an annotation only: the plugin is loaded by pytest, not imported here
    from phasebench.plugin import Settings
    from phasebench.worker.world import World

BENCH_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench") + os.sep

pytest_plugins = ["phasebench.plugin"]  # already registered under this name when installed (pyproject.toml)


@pytest.fixture(scope="session")
def settings(pytestconfig):
    """What the options resolved to (phasebench.plugin.Settings)."""
    return pytestconfig.phasebench


@pytest.fixture(scope="session")
def cpp_library(pytestconfig, request) -> str:
    """The built C++ library; the cpp cases skip when no C++ toolchain is installed. A build says so on the
    terminal while it runs, not only after."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")

    def announce(line: str) -> None:
        if capture is None:  # -p no:capture
            pytestconfig.get_terminal_writer().line(line)
            return
        with capture.global_and_fixture_disabled():
            pytestconfig.get_terminal_writer().line(line)

    if _early_build is not None:
        _early_build.join(timeout=2)  # where the library was built before, the thread only finds it (no build to announce)
        if _early_build.is_alive():
            announce("phasebench: waiting for the C++ library's build, started when collection ended "
                     "(once per source and toolchain; about a minute on 2 cores) ...")
    try:
        library = str(build.library_path(announce=announce))
    except build.BuildUnavailable as error:
        pytest.skip(str(error))
    build_plain_program_beside(request.session.items)  # after the library's: the tests wait on that one
    start_beside(request.session.items, library)
    return library


def nothing_timed(config, items) -> bool:
    """Whether this run times nothing: benchmarks disabled (the test command), or none selected. Only then does work
    run beside the tests: beside a timed case it would be inside its clock."""
    return config.getoption("benchmark_disable") or not any(
        "benchmark" in getattr(item, "fixturenames", ()) for item in items)


# The library's build started when collection ended, where the run times nothing (pytest_collection_finish).
_early_build: threading.Thread | None = None


def pytest_collection_finish(session):
    """Where nothing is timed, the C++ library's build starts as soon as collection ends, beside the first tests (a
    fresh clone's first minute: the first bench cases are Python's). cpp_library waits for it and raises its
    failure."""
    global _early_build
    if session.config.option.collectonly or not session.items or not nothing_timed(session.config, session.items):
        return
    if any("cpp_library" in getattr(item, "fixturenames", ()) for item in session.items):
        _early_build = in_background(build.library_path, "phasebench-build")


def start_beside(items, library: str | None) -> None:
    """The work of the selected tests marked beside (tests/beside.py), queued now; the lane runs it where nothing is
    timed, else each test does its own. Only where such a test is selected is tests/ imported: a tree without it
    (bench/ alone) runs with this conftest too."""
    if any(item.get_closest_marker("beside") for item in items):
        importlib.import_module("tests.beside").start(items, library, lane=nothing_timed(items[0].config, items))


@pytest.fixture
def started_beside(request):
    """The Future of this test's beside(start) work (tests/beside.py), done now where the lane has not taken it
    (cpp_library's setup queues the work of every selected test; start gets None for a library where none can be
    built)."""
    beside = importlib.import_module("tests.beside")
    if beside.key(request.node) not in beside.WORK:
        try:
            library = request.getfixturevalue("cpp_library")  # which queues it, where the library can be built
        except pytest.skip.Exception:
            library = None
        beside.start([request.node], library, lane=False)
    return beside.result_for(request.node)


def pytest_configure(config):
    config.addinivalue_line("markers", "beside(start, once=False, cost_s=0): start(item, folder, library) starts "
                                       "the test's work, in a second lane once the C++ library is built; cost_s, its "
                                       "rough seconds here, orders the marked tests (tests/beside.py)")


def library_free_first(items) -> list:
    """The bench cases of Python implementations (and those of none) before the C++ ones, each group in its
    order: where nothing is timed the C++ library builds beside the first tests (pytest_collection_finish), and the
    Python cases give it about as long as it takes, where the C++ cases would wait on it (24 s in a fresh clone's
    run). The bench cases share session-scoped fixtures only, so no fixture is made twice. The tests/ modules keep
    their order: their module-scoped workers would be."""
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
    """The tests marked beside run last, longest work first (the marker's cost_s): their work starts in a second lane
    as soon as the library is built, and by the time the other tests are done most of it is (tests/beside.py).
    Where nothing is timed, the Python bench cases run before the C++ ones (library_free_first)."""
    if nothing_timed(config, items):
        items[:] = library_free_first(items)
    marked = [item for item in items if item.get_closest_marker("beside")]
    if marked:
        # Longest work first: the lane takes it from the near end, and ends on short work, which is what the last
        # tests wait on (tests/beside.py).
        marked.sort(key=lambda item: -item.get_closest_marker("beside").kwargs.get("cost_s", 0))
        items[:] = [item for item in items if not item.get_closest_marker("beside")] + marked


# {node id: the extra_info each benchmark of this session saved}: tests/test_utilization.py reads it instead of
# running the benchmarks again in a child pytest. A child it runs writes its own to PHASEBENCH_TEST_EXTRA_INFO.
_SAVED_EXTRA_INFO: dict[str, dict] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    benchmark = getattr(item, "funcargs", {}).get("benchmark")
    if benchmark is not None:
        _SAVED_EXTRA_INFO[item.nodeid] = dict(benchmark.extra_info)
        if os.environ.get("PHASEBENCH_TEST_EXTRA_INFO"):
            with open(os.environ["PHASEBENCH_TEST_EXTRA_INFO"], "a") as out:
                out.write(json.dumps({"test": item.nodeid, **benchmark.extra_info}) + "\n")


@pytest.fixture(scope="session")
def saved_extra_info() -> dict[str, dict]:
    """{node id: extra_info} of the benchmarks this session ran so far, as pytest-benchmark's fixture held it when
    the test's call ended."""
    return _SAVED_EXTRA_INFO


def pytest_sessionfinish(session):
    if "tests.beside" in sys.modules:
        sys.modules["tests.beside"].stop_all()


def in_background(build_it, name: str) -> threading.Thread:
    """build_it() in a daemon thread, its failure dropped: the fixture that needs the build calls it again, waits on
    the build's lock while this one runs, and raises the failure."""
    def quietly() -> None:
        try:
            build_it()
        except Exception:  # noqa: BLE001  (the fixture's own call raises it)
            pass

    thread = threading.Thread(target=quietly, name=name, daemon=True)
    thread.start()
    return thread


def build_plain_program_beside(items) -> None:
    """Where a test of this run asks for the plain C++ program (cpp_plain_program), start building it now, once the
    library is built, beside the tests: the library is one compiler (cpp/Makefile), and this machine has a second
    core."""
    if any("cpp_plain_program" in getattr(item, "fixturenames", ()) for item in items):
        in_background(build.plain_program_path, "phasebench-plain-build")


@pytest.fixture(scope="session")
def cpp_plain_program(cpp_library) -> str:
    """The built plain C++ program (cpp/plain/mnist_plain.cpp; phasebench/plain), its build started beside the
    library's; skipped as the library is where no C++ toolchain is installed."""
    try:
        return str(build.plain_program_path())
    except build.BuildUnavailable as error:
        pytest.skip(str(error))


def pool_key(item) -> tuple | None:
    """The (implementation, device, workload) of the pooled worker a collected test asks for, where its
    parameters say so; None for a test that asks for no pooled worker or names its own."""
    params = getattr(item, "callspec", None) and item.callspec.params or {}
    if "worker_for" not in getattr(item, "fixturenames", ()) or not {"impl", "device"} <= params.keys():
        return None
    return params["impl"], params["device"], params.get("workload") or DEFAULT_WORKLOAD


@pytest.fixture(scope="session")
def last_user(request) -> dict:
    """{pooled worker's key: the last test of this run that asks for it}: after that test the worker stops.
    Each worker holds about 0.7 GB here; `--impl all --width 1,4,16 --batch-size 64,256` keeps 54 keys, which
    held until the session's end filled this machine's 24 GiB and slowed every clock."""
    return last_users(request.session.items)


def last_users(items) -> dict:
    return {key: item for item in items if (key := pool_key(item)) is not None}


@pytest.fixture(scope="session")
def worker_pool(settings, tmp_path_factory):
    logs = tmp_path_factory.mktemp("progress-logs")

    def make(impl: str, device: str, workload: Workload, library: str | None) -> Worker:
        log = logs / f"{'-'.join(filter(None, (impl, device, workload.id)))}.log"
        options = settings.worker_options(device, log_path=str(log), impl=impl, workload=workload)
        return Worker(impl, device, options, settings.round_timeout, library)

    pool = WorkerPool(make)
    yield pool
    pool.stop_all()


def _library_or_skip(request, settings: Settings, impl: str, device: str) -> str | None:
    """The C++ library a worker of that pair loads (None for python); skips what cannot run here."""
    if device == "cuda" and settings.cuda_reason:
        pytest.skip(settings.cuda_reason)
    # --count instructions: both languages call the count bracket in the C++ library.
    needs_library = registry.get(impl).language == "cpp" or settings.count
    return request.getfixturevalue("cpp_library") if needs_library else None


@pytest.fixture
def worker_for(request, settings, worker_pool, last_user):
    """worker_for(impl, device, workload=the published one): the long-lived worker for that case, skipping
    what cannot run here. After the last test of the run that asks for that worker, it is stopped."""
    asked = set()

    def get(impl: str, device: str, workload: Workload = DEFAULT_WORKLOAD) -> Worker:
        asked.add((impl, device, workload))
        return worker_pool.get(impl, device, workload, _library_or_skip(request, settings, impl, device))

    yield get
    for key in asked:
        if last_user.get(key) is request.node:
            worker_pool.release(*key)


@pytest.fixture
def new_worker(request, settings, tmp_path):
    """new_worker(impl, device, workload=the published one, **options) -> spawn: each spawn() starts a worker
    process of that case of its own, made as the pool's are but for `options` (trainer options such as
    threads or log_path), that the caller stops; skips what cannot run here."""

    def spawner(impl: str, device: str, workload: Workload = DEFAULT_WORKLOAD, **overrides):
        library = _library_or_skip(request, settings, impl, device)
        options = settings.worker_options(device, log_path=str(tmp_path / f"{impl}-{device}.log"), impl=impl,
                                          workload=workload)
        return partial(Worker, impl, device, options | overrides, settings.round_timeout, library)

    return spawner


@pytest.fixture(scope="session")
def world_pool(settings, tmp_path_factory):
    """Data-parallel worlds (docs/distributed.md): one at a time, W of the suite's workers of one implementation."""
    from phasebench.worker.world import World, WorldPool, rank_device  # here: only a data-parallel run needs it

    logs = tmp_path_factory.mktemp("world-logs")

    def make(impl: str, device: str, size: int, workload: Workload, library: str | None) -> World:
        threads = settings.rank_threads(device, size)

        def spawn(rank: int):
            log = logs / f"{'-'.join(filter(None, (impl, device, f'world{size}', workload.id)))}-rank{rank}.log"
            options = settings.worker_options(rank_device(device, rank, size), log_path=str(log), impl=impl,
                                              workload=workload)
            return partial(Worker, impl, device, options | {"threads": threads}, settings.round_timeout, library)

        return World([spawn(rank) for rank in range(size)], device, settings.dist_timeout)

    pool = WorldPool(lambda impl, device, size, workload, library: make(impl, device, size, workload, library))
    yield pool
    pool.release()


@pytest.fixture
def world_for(request, settings, world_pool):
    """world_for(impl, device, world_size, workload=the published one): the data-parallel world for that case (one at
    a time: asking for another stops the last), skipping what cannot run here."""

    def get(impl: str, device: str, size: int, workload: Workload = DEFAULT_WORKLOAD) -> World:
        library = _library_or_skip(request, settings, impl, device)
        return world_pool.get((impl, device, size, workload, library))

    return get


@pytest.fixture
def utilization_of(benchmark, settings):
    """`with utilization_of(worker): benchmark.pedantic(...)`: the worker's GPU and CPU utilization
    during the rounds, in extra_info["gpu"] and ["cpu"] (phasebench/utilization.py)."""
    return partial(settings.utilization.watch, benchmark)


@pytest.fixture
def progress(request):
    """progress(text): a line on the terminal now, while the test runs (output capture set aside for it), for
    what takes long (the training run: docs/results.md#the-published-table-redone). Written from pytest, never from
    a worker: nothing inside a clock."""
    config = request.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def say(text: str) -> None:
        if reporter is None or capture is None:
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"{request.node.name}: {text}")

    return say

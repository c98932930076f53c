"""The plugin's fixtures: the session's settings, the C++ library, and the workers the cases time
(docs/architecture.md#the-c-abi-and-the-build)."""

from __future__ import annotations

import threading
from functools import partial

import pytest

from phasebench import registry, schema
from phasebench.plugin import calibration
from phasebench.plugin.pairing import PAIRED_WITH
from phasebench.plugin.session import PhasebenchSession
from phasebench.programs import DEFAULT_PROGRAM, split_case_phase
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import Workload
from phasebench.utilization import CaseWatch
from phasebench.worker import build
from phasebench.worker.client import Worker, WorkerPool


@pytest.fixture(scope="session")
def settings(pytestconfig) -> PhasebenchSession:
    """What the options resolved to (phasebench.plugin.session.PhasebenchSession)."""
    return pytestconfig.phasebench


def terminal_line(config):
    """line(text): a line on the terminal now, output capture set aside for it (what takes long says so while it
    runs, not after), on a line of its own: the terminal reporter's write_line ends the row of progress dots first,
    and the next test's result starts a new row."""
    capture = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")

    def write(text: str) -> None:
        if reporter is None:  # -p no:terminal
            config.get_terminal_writer().line(text)
        else:
            reporter.write_line(text)

    def line(text: str) -> None:
        if capture is None:  # -p no:capture
            write(text)
            return
        with capture.global_and_fixture_disabled():
            write(text)

    return line


@pytest.fixture(scope="session")
def baseline_iterations(pytestconfig) -> dict[str, int]:
    """{case fullname: its calls per round} in the baseline --benchmark-compare loaded ({} without one), so that a
    compared run times each case as its baseline did (phasebench/plugin/calibration.py)."""
    return calibration.baseline_iterations(getattr(pytestconfig.pluginmanager.getplugin("pytest-benchmark"),
                                                   "compared_mapping", None))


@pytest.fixture(scope="session")
def phase_iterations() -> dict[tuple, int]:
    """{(phase, device, workload label): calls per round} of each phase's first-timed case in this run, which the
    phase's other implementations take (phasebench/plugin/calibration.py)."""
    return {}


@pytest.fixture(scope="session")
def cpp_library(pytestconfig, settings) -> str:
    """The built C++ library (the variant the session's workers load); the cpp cases skip when no C++ toolchain is
    installed. A build says so on the terminal while it runs."""
    try:
        return str(build.library_path(announce=terminal_line(pytestconfig), variant=settings.library_variant))
    except build.BuildUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def cpp_plain_program(cpp_library) -> str:
    """The built plain C++ program (cpp/plain/mnist_plain.cpp; phasebench/plain); skipped as the library is where
    no C++ toolchain is installed."""
    try:
        return str(build.plain_program_path())
    except build.BuildUnavailable as error:
        pytest.skip(str(error))


def pool_key(item) -> tuple | None:
    """The (implementation, device, workload, program) of the pooled worker a collected test asks for, where its
    parameters say so (a per-phase case's program is its phase's: phasebench/programs.py split_case_phase); None for
    a test that asks for no pooled worker or names its own."""
    params = getattr(item, "callspec", None) and item.callspec.params or {}
    if "worker_for" not in getattr(item, "fixturenames", ()) or not {"impl", "device"} <= params.keys():
        return None
    program = split_case_phase(params["phase"])[0].name if params.get("phase") else params.get("program",
                                                                                                DEFAULT_PROGRAM)
    return params["impl"], params["device"], params.get("workload") or DEFAULT_WORKLOAD, program


def last_users(items) -> dict:
    """{pooled worker's key: the last item that asks for it}: a paired case asks for its whole group's workers, its
    partners' that were not selected too (phasebench/plugin/pairing.py)."""
    last = {}
    for item in items:
        key = pool_key(item)
        if key is None:
            continue
        stash = getattr(item, "stash", None)
        for impl in dict.fromkeys((key[0],) + (stash.get(PAIRED_WITH, ()) if stash is not None else ())):
            last[(impl,) + key[1:]] = item
    return last


@pytest.fixture(scope="session")
def last_user(request) -> dict:
    """{pooled worker's key: the last test of this run that asks for it}: after that test the worker stops.
    Each worker holds about 0.7 GB; `--impl all --width 1,4,16 --batch-size 64,256` keeps 54 keys, which held until
    the session's end fill 24 GiB and slow every clock."""
    return last_users(request.session.items)


def spawner(settings: PhasebenchSession, impl: str, device: str, options: dict, library: str | None,
            program: str = DEFAULT_PROGRAM):
    """A Worker of the session's worker program, not started yet: calling it starts one."""
    return partial(Worker, impl, device, options, settings.round_timeout, library, module=settings.worker_module,
                   conditions=settings.conditions, program=program)


@pytest.fixture(scope="session")
def worker_pool(settings, tmp_path_factory):
    logs = tmp_path_factory.mktemp("progress-logs")

    def make(impl: str, device: str, workload: Workload, library: str | None, slot: int,
             program: str = DEFAULT_PROGRAM) -> Worker:
        of = "" if program == DEFAULT_PROGRAM else program
        log = logs / f"{'-'.join(filter(None, (of, impl, device, workload.id, f'slot{slot}' if slot else '')))}.log"
        options = settings.worker_options(device, log_path=str(log), impl=impl, workload=workload, program=program)
        return spawner(settings, impl, device, options, library, program)()

    pool = WorkerPool(make)
    yield pool
    pool.stop_all()


def library_or_skip(request, settings: PhasebenchSession, impl: str, device: str) -> str | None:
    """The C++ library a worker of that pair loads (None for python); skips what cannot run here."""
    if device == "cuda" and settings.cuda_reason:
        pytest.skip(settings.cuda_reason)
    # --count instructions: both languages call the count bracket in the C++ library.
    needs_library = registry.get(impl).language == "cpp" or settings.count
    return request.getfixturevalue("cpp_library") if needs_library else None


def say_replaced(request, fresh: str, replaced: str) -> None:
    """A case that runs on a worker or world that replaced a dead one: said on the terminal, and in the case's
    `worker_replaced` where the test is a benchmark."""
    terminal_line(request.config)(f"phasebench: {request.node.name} runs on {fresh}: {replaced}")
    benchmark = request.node.funcargs.get("benchmark")
    if benchmark is not None:
        schema.write(benchmark, schema.Case, worker_replaced=replaced)


@pytest.fixture
def worker_for(request, settings, worker_pool, last_user):
    """worker_for(impl, device, workload=the published one, slot=0, program=the seed's): the long-lived worker for
    that case (slot 0, or another of its key's, which a paired phase rotates its sweeps through), skipping what cannot
    run here. After the last test of the run that asks for that worker, it is stopped. A worker that
    replaced a dead one says so on the terminal, and in the case's `worker_replaced` where the test is a benchmark."""
    asked = set()
    fixtures = threading.Lock()  # a paired phase starts its workers from threads; pytest's fixtures are not for them

    def get(impl: str, device: str, workload: Workload = DEFAULT_WORKLOAD, slot: int = 0,
            program: str = DEFAULT_PROGRAM) -> Worker:
        with fixtures:
            asked.add((impl, device, workload, program))
            library = library_or_skip(request, settings, impl, device)
        worker = worker_pool.get(impl, device, workload, library, slot, program)
        replaced = worker_pool.take_replaced(worker)
        if replaced:
            with fixtures:
                say_replaced(request, f"a fresh {worker.name} (pid {worker.pid})", replaced)
        return worker

    yield get
    for key in asked:
        if last_user.get(key) is request.node:
            worker_pool.release(*key)


@pytest.fixture
def new_worker(request, settings, tmp_path):
    """new_worker(impl, device, workload=the published one, program=the seed's, **options) -> spawn: each spawn()
    starts a worker process of that case of its own, made as the pool's are but for `options` (trainer options such
    as threads or log_path), that the caller stops; skips what cannot run here."""

    def make(impl: str, device: str, workload: Workload = DEFAULT_WORKLOAD, program: str = DEFAULT_PROGRAM,
             **overrides):
        library = library_or_skip(request, settings, impl, device)
        of = "" if program == DEFAULT_PROGRAM else f"{program}-"
        options = settings.worker_options(device, log_path=str(tmp_path / f"{of}{impl}-{device}.log"), impl=impl,
                                          workload=workload, program=program)
        return spawner(settings, impl, device, options | overrides, library, program)

    return make


@pytest.fixture(scope="session")
def world_pool(settings, tmp_path_factory):
    """Data-parallel worlds (docs/distributed.md): one at a time, W of the suite's workers of one implementation."""
    from phasebench.devices import rank_device
    from phasebench.worker.world import World, WorldPool  # here: only a data-parallel run needs it

    logs = tmp_path_factory.mktemp("world-logs")

    def make(impl: str, device: str, size: int, workload: Workload, library: str | None) -> World:
        threads = settings.rank_threads(device, size)

        def spawn(rank: int):
            log = logs / f"{'-'.join(filter(None, (impl, device, f'world{size}', workload.id)))}-rank{rank}.log"
            options = settings.worker_options(rank_device(device, rank), log_path=str(log), impl=impl,
                                              workload=workload)
            return spawner(settings, impl, device, options | {"threads": threads}, library)

        return World([spawn(rank) for rank in range(size)], device, settings.dist_timeout)

    pool = WorldPool(make)
    yield pool
    pool.release()


@pytest.fixture
def world_for(request, settings, world_pool):
    """world_for(impl, device, world_size, workload=the published one): the data-parallel world for that case (one at
    a time: asking for another stops the last), skipping what cannot run here."""

    def get(impl: str, device: str, size: int, workload: Workload = DEFAULT_WORKLOAD):
        library = library_or_skip(request, settings, impl, device)
        world = world_pool.get((impl, device, size, workload, library))
        replaced = world_pool.take_replaced(world)
        if replaced:
            say_replaced(request, f"a fresh {world.name}", replaced)
        return world

    return get


@pytest.fixture
def utilization_of(benchmark, settings):
    """`with utilization_of(worker): benchmark.pedantic(...)`: the worker's GPU and CPU utilization
    during the rounds, in extra_info["gpu"] and ["cpu"] (phasebench/utilization.py). Where every round is a fresh
    worker (the training run), `with utilization_of.rounds(impl, device) as each:` and `with each(worker):` around
    each round's request: the rounds' windows together; `utilization_of.beside(worker, name, into)` samples a run
    reported beside the rounds into a dict of its own."""
    return CaseWatch(settings.utilization, benchmark)


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

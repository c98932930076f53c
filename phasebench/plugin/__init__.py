"""phasebench's pytest plugin: the options, what they resolve to, what every saved result records, and how
the cases are made (docs/options.md#options; "Implementations and workloads").

Installed as a `pytest11` entry point named "phasebench.plugin" (pyproject.toml; `pip install -e .`, which
requirements.txt does), so pytest knows the options wherever it is started, before it parses the command
line. conftest.py keeps the fixtures and lists this module in pytest_plugins for a checkout that was not
installed; under the entry point's name that listing does nothing.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass, field

import pytest

from phasebench import data, gate, registry, utilization
from phasebench.plugin import machine
from phasebench.plugin.cases import (  # noqa: F401  (the case hooks are this plugin's; RUN_ORDER for the cases)
    RUN_ORDER,
    SELECTIONS,
    chosen_selections,
    left_out_line,
    pytest_collection_modifyitems,
    pytest_generate_tests,
    pytest_ignore_collect,
)
from phasebench.plugin.guards import (  # noqa: F401  (the tests read them here)
    REFUSED_BENCHMARK_OPTIONS,
    given_options,
    histogram_unavailable,
    misread_path_option,
    refused_option,
)
from phasebench.registry import DEVICES
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import Workload, parse_sizes, workloads
from phasebench.worker import build

# --phase-ratio-fail and baseline checks (docs/gating.md#baselines-and-ci-gating); --count instructions
# (docs/instruction-counts.md)
pytest_plugins = ["phasebench.plugin.gating", "phasebench.plugin.counting"]

COMMIT_ENV, DIRTY_ENV = "PHASEBENCH_COMMIT", "PHASEBENCH_DIRTY"  # for a copy without git history
DEFAULT_DATA = build.ROOT / "data"  # the repository's, wherever pytest is started
DEFAULT_STORAGE = f"file://{build.ROOT / '.benchmarks'}"  # phasebench.report and phasebench.gate read it too
PYTEST_BENCHMARK_STORAGE = "file://./.benchmarks"  # pytest-benchmark's default, relative to where pytest started
# test_concurrent_jobs' N per device when --jobs is not given: on cpu the jobs share the intra-op threads.
DEFAULT_JOBS = {"cpu": (1, 2), "cuda": (1, 2, 4)}
DEFAULT_MODELS = (1, 4, 16)  # test_ensemble's M when --models is not given


@dataclass
class Settings:
    """What the options resolved to; `config.phasebench`."""

    impls: tuple[str, ...]
    devices: tuple[str, ...]
    workloads: tuple[Workload, ...]
    threads: int
    rounds: int
    warmup_rounds: int
    round_timeout: float
    epochs: int  # what each training_run trains
    run_rounds: int  # each training_run round is a fresh worker process
    processes: int  # fresh workers per phase case; 1: the long-lived worker per implementation and device
    source: data.DataSource | None
    cuda_reason: str | None  # why cuda cases skip; None when a GPU is usable
    machine: dict = field(default_factory=dict)
    utilization: utilization.Monitor | None = None  # GPU/CPU samplers (phasebench/utilization.py)
    slow: gate.SlowPhase | None = None  # the test-only PHASEBENCH_TEST_SLOW_PHASE knob
    jobs: dict[str, tuple[int, ...]] = field(default_factory=lambda: dict(DEFAULT_JOBS))  # per device (--jobs)
    models: tuple[int, ...] = DEFAULT_MODELS  # test_ensemble's M (--models)
    count: dict | None = None  # --count instructions (phasebench/plugin/counting.py): the workers' Valgrind prefix
    extras: frozenset[str] = frozenset(SELECTIONS)  # the selections this run includes (--extra; all when checking)

    @property
    def free_running(self) -> bool:
        return "free-running" in self.extras
    # Data parallel (docs/distributed.md): --world-size; empty: no distributed case exists (bench/test_distributed.py
    # is not collected). dist_timeout: the process group's timeout, which bounds how long a dead rank's peers wait.
    world_sizes: tuple[int, ...] = ()
    dist_timeout: float = 60.0

    def rank_threads(self, device: str, world_size: int) -> int:
        """A rank's intra-op threads: on cpu the ranks split --threads as concurrent jobs do; on cuda each keeps it."""
        return max(1, self.threads // world_size) if device == "cpu" else self.threads

    def worker_options(self, device: str, log_path: str, impl: str, workload: Workload = DEFAULT_WORKLOAD) -> dict:
        """What a worker of `impl` on `device` trains: its implementation's pipeline on this workload."""
        options = {"root": self.source.root, "device": device, "threads": self.threads, "seed": 1,
                   "log_path": log_path}
        options |= registry.get(impl).trainer_options() | workload.as_options()
        options |= {"count": self.count} if self.count else {}
        return options | (self.slow.trainer_options(impl) if self.slow else {})


def pytest_addoption(parser):
    group = parser.getgroup("phasebench", "phasebench: Python vs C++ training phases")
    group.addoption("--impl", default=None,
                    help=f"implementations to run, comma-separated, or all: {', '.join(registry.NAMES)} "
                         f"(default: {','.join(registry.DEFAULT_IMPLS)}, the published pair)")
    group.addoption("--width", default="1",
                    help="workload: the Net's hidden sizes multiplied by W, comma-separated (default: 1, as published)")
    group.addoption("--batch-size", default="64",
                    help="workload: batch sizes, comma-separated (default: 64, as published); every width runs "
                         "every batch size")
    group.addoption("--device", default=None,
                    help="devices to run, comma-separated: cpu,cuda (default: both; cuda skips without a GPU; a device "
                         "left out is deselected, and naming only devices that cannot run here is a usage error)")
    group.addoption("--threads", type=int, default=0,
                    help="intra-op threads for both workers (default: what torch picks on this machine)")
    group.addoption("--mnist-root", default=None, help=f"data folder (default: {DEFAULT_DATA})")
    group.addoption("--dataset", default="auto",
                    help=f"data source: {', '.join(data.DATASET_CHOICES)} (default: auto; docs/data.md#data)")
    group.addoption("--rounds", type=int, default=100, help="counted rounds per phase benchmark (default: 100)")
    group.addoption("--warmup-rounds", type=int, default=10,
                    help="uncounted rounds before them (default: 10)")
    group.addoption("--processes", type=int, default=1,
                    help="fresh worker processes per phase case, each timing its share of the rounds after its own "
                         "warm-up, as pyperf does (default: 1, the long-lived worker of each implementation and device)")
    group.addoption("--round-timeout", type=float, default=300.0,
                    help="seconds a worker may take to answer one request before it is killed (default: 300)")
    group.addoption("--epochs", type=int, default=1,
                    help="epochs of each training_run (default: 1; 10 is the published run)")
    group.addoption("--run-rounds", type=int, default=1,
                    help="rounds of each training_run, each a fresh worker process (default: 1; the published figures "
                         "take 3)")
    group.addoption("--free-running", action="store_true",
                    help="also train each training_run once with no phase timers (the loop alone)")
    group.addoption("--jobs", default=None,
                    help="run test_concurrent_jobs: how many jobs share the device, comma-separated (--extra jobs: 1,2 "
                         "on cpu, the intra-op threads split between them; 1,2,4 on cuda)")
    group.addoption("--models", default=None,
                    help="run test_ensemble: how many models train together, comma-separated (--extra ensembles: "
                         "1,4,16)")
    group.addoption("--extra", default=None,
                    help=f"benchmarks the default run leaves out, comma-separated, or all: {', '.join(SELECTIONS)} "
                         f"(docs/options.md#what-the-default-run-leaves-out); the test command (--benchmark-disable) "
                         f"checks them all")
    group.addoption("--world-size", default=None,
                    help="data parallel: world sizes, comma-separated (e.g. 1,2); without it no distributed case "
                         "exists (docs/distributed.md). On cpu the ranks split the intra-op threads; on cuda one GPU "
                         "a rank")
    group.addoption("--dist-timeout", type=float, default=60.0,
                    help="data parallel: the process group's timeout in seconds: a rank that dies or hangs makes "
                         "its peers fail within it (default: 60)")
    group.addoption("--no-utilization", action="store_true",
                    help="do not sample GPU and worker CPU utilization (extra_info gpu and cpu are null)")


def _say(line: str) -> None:
    """A line before pytest's own output starts (no capture yet): what the run is doing that takes a while."""
    print(line, file=sys.stderr, flush=True)


def _choices(config, option: str, valid: tuple[str, ...]) -> tuple[str, ...]:
    value = config.getoption(option) or ",".join(valid)
    chosen = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in chosen if v not in valid]
    if bad or not chosen:
        raise pytest.UsageError(f"--{option} {value!r}: valid values are {', '.join(valid)} (comma-separated)")
    return chosen


def nothing_can_run(impls: tuple[str, ...], devices: tuple[str, ...], cuda_reason: str | None) -> str | None:
    """Why none of the chosen implementations can run on any chosen device here, or None when some can
    (the default devices and implementations always include one that can: cpu, python)."""
    reasons = {"cuda": cuda_reason}
    if all(reasons.get(device) for device in devices):
        return f"--device {','.join(devices)}: {'; '.join(reasons[device] for device in devices)}"
    if all(registry.get(impl).language == "cpp" for impl in impls):
        missing = build.toolchain_missing()
        if missing:
            return f"--impl {','.join(impls)}: {missing}"
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark makes its session from the options
def pytest_configure(config):
    config.addinivalue_line("markers", "needs_data: the test reads the workload's data")
    misread = misread_path_option(config) or refused_option(config) or histogram_unavailable(config)
    if misread:
        raise pytest.UsageError(misread)
    if config.option.mnist_root is None:
        config.option.mnist_root = str(DEFAULT_DATA)  # the repository's data/, wherever pytest started
    if getattr(config.option, "benchmark_storage", None) == PYTEST_BENCHMARK_STORAGE \
            and "--benchmark-storage" not in given_options(config):
        config.option.benchmark_storage = DEFAULT_STORAGE  # the repository's .benchmarks, wherever pytest started
    try:
        impls = registry.parse(config.getoption("impl") or ",".join(registry.DEFAULT_IMPLS))
        widths = parse_sizes(config.getoption("width"), "--width")
        batch_sizes = parse_sizes(config.getoption("batch_size"), "--batch-size")
        jobs = config.getoption("jobs")
        jobs = dict.fromkeys(DEVICES, parse_sizes(jobs, "--jobs")) if jobs else dict(DEFAULT_JOBS)
        models = parse_sizes(config.getoption("models") or ",".join(map(str, DEFAULT_MODELS)), "--models")
        extras = chosen_selections(config)
        world_sizes = parse_sizes(text, "--world-size") if (text := config.getoption("world_size")) else ()
        unsplit = [w.shard_problem(n) for n in world_sizes for w in workloads(widths, batch_sizes) if w.shard_problem(n)]
        if unsplit:
            raise ValueError(f"--world-size: {unsplit[0]}")
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    devices = _choices(config, "device", DEVICES)
    dataset = config.getoption("dataset")
    if dataset not in data.DATASET_CHOICES:
        raise pytest.UsageError(f"--dataset {dataset!r}: valid values are {', '.join(data.DATASET_CHOICES)}")
    for option in ("threads", "rounds", "warmup_rounds", "round_timeout", "epochs", "run_rounds", "processes"):
        minimum = 1 if option in ("rounds", "epochs", "run_rounds", "processes") else 0
        if config.getoption(option) < minimum:
            raise pytest.UsageError(f"--{option.replace('_', '-')} must be at least {minimum}")
    if config.getoption("benchmark_disable", False):
        # Nothing is timed under --benchmark-disable (the test command): idle OpenMP threads sleep instead of spinning,
        # which on a loaded machine takes a third off the equivalence tests (docs/options.md#the-test-command).
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # A run asks torch (in a probe process) what it picks and whether it can use a GPU; a collection does not.
    probed = not (config.option.help or config.option.collectonly)
    cuda_reason = machine.cuda_reason(confirm=probed and "cuda" in devices)
    if world_sizes and "cuda" in devices and cuda_reason is None and max(world_sizes) > machine.gpu_count():
        raise pytest.UsageError(f"--world-size {max(world_sizes)} on cuda: one GPU a rank, and {machine.gpu_count()} "
                                f"usable GPU(s) here; leave cuda out (--device cpu) or ask for at most that many")
    if config.getoption("dist_timeout") <= 0:
        raise pytest.UsageError("--dist-timeout must be above 0")
    unrunnable = nothing_can_run(impls, devices, cuda_reason)
    if unrunnable and not config.option.help:
        raise pytest.UsageError(unrunnable)
    if config.option.help or config.option.collectonly:
        source = None
    else:
        try:
            source = data.resolve(dataset, config.getoption("mnist_root"), announce=_say)
        except data.DataError as error:
            raise pytest.UsageError(str(error)) from None
    from phasebench.spec import TRAINING_PHASES as PHASE_NAMES

    if os.environ.get(COMMIT_ENV) and os.environ.get(DIRTY_ENV) not in ("0", "1"):
        raise pytest.UsageError(f"{COMMIT_ENV} needs {DIRTY_ENV}=0 (the tree it names was clean) or 1, "
                                f"not {os.environ.get(DIRTY_ENV)!r}")
    slow_text = os.environ.get(gate.SLOW_PHASE_ENV)
    try:
        slow = gate.parse_slow_phase(slow_text, PHASE_NAMES, registry.NAMES) if slow_text else None
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    config.phasebench = Settings(
        impls=impls, devices=devices, workloads=workloads(widths, batch_sizes),
        # 0 where not probed (a collection): torch's default, which no worker is started to use.
        threads=config.getoption("threads") or (machine.probe()["threads"] if probed else 0),
        rounds=config.getoption("rounds"), warmup_rounds=config.getoption("warmup_rounds"),
        round_timeout=config.getoption("round_timeout"),
        epochs=config.getoption("epochs"), run_rounds=config.getoption("run_rounds"),
        processes=config.getoption("processes"), source=source, cuda_reason=cuda_reason, slow=slow,
        jobs=jobs, models=models, extras=extras, world_sizes=world_sizes,
        dist_timeout=config.getoption("dist_timeout"),
    )
    config.phasebench.machine = machine.machine_info(config.phasebench, probed)
    config.phasebench.utilization = utilization.Monitor(
        sampling=not config.getoption("no_utilization"),
        gpu_expected="cuda" in devices and config.phasebench.cuda_reason is None)
    config.add_cleanup(config.phasebench.utilization.close)
    from phasebench.plugin import counting  # a plugin of its own (pytest_plugins): imported by then

    counting.configure(config)  # --count instructions (phasebench/plugin/counting.py)


@pytest.hookimpl(wrapper=True)
def pytest_report_header(config):
    """phasebench's lines, and pytest-benchmark's own line without the defaults the suite does not use (its timer,
    rounds, warm-up and calibration): the header states the timing actually used."""
    results = yield
    settings: Settings = config.phasebench
    m = settings.machine
    source = settings.source.description if settings.source else "-"
    gpu = m["gpu"]["name"] if m["gpu"] else f"none ({settings.cuda_reason})"
    timing = (f"phasebench: timing: each phase inside its worker process, python by time.perf_counter_ns, cpp by "
              f"std::chrono::steady_clock (the device synchronized at both ends on cuda), one call a round, "
              f"{settings.rounds} rounds after {settings.warmup_rounds} warm-up"
              f"{f' over {settings.processes} fresh workers per case' if settings.processes > 1 else ''}; "
              f"training_run: {settings.epochs} epoch(s), {settings.run_rounds} rounds, no warm-up")
    ours = [
        f"phasebench: data: {source}",
        f"phasebench: torch {m['torch']}, torchvision {m['torchvision']}, CUDA {m['cuda']}, cuDNN {m['cudnn']}; "
        f"GPU {gpu}; {settings.threads or 'not probed (a collection):'} intra-op threads",
        timing,
        f"phasebench: implementations {', '.join(settings.impls)}; workloads "
        f"{'; '.join(workload.label for workload in settings.workloads)}",
    ] + ([f"phasebench: TEST KNOB {gate.SLOW_PHASE_ENV}={settings.slow.text}: these timings are slowed on purpose"]
         if settings.slow else [])
    results = [f"{line.split(' (defaults:')[0]} (its timer, rounds, warm-up and calibration are not used: see "
               f"phasebench: timing)" if isinstance(line, str) and line.startswith("benchmark: ") and "(defaults:" in line
               else line for line in results]
    return [ours] + results  # pytest prints the results in reverse: ours last


def pytest_benchmark_update_commit_info(config, commit_info):
    """A copy without git history (a borrowed GPU machine's) cannot see its commit: the commit id and
    whether that tree was clean come in from where the copy was made (docs/results.md#what-every-saved-result-carries), and the result says so."""
    commit = os.environ.get(COMMIT_ENV)
    if not commit:
        return
    commit_info.update(id=commit, dirty=os.environ[DIRTY_ENV] == "1",
                       commit_source=f"{COMMIT_ENV} (a copy without git history)")


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["phasebench"] = config.phasebench.machine | {"gpu_sampling": config.phasebench.utilization.reason}


@pytest.hookimpl(wrapper=True)  # after pytest-benchmark's tables, even when it raised "Performance has regressed"
def pytest_terminal_summary(terminalreporter, config):
    try:
        return (yield)
    finally:
        lines = config.phasebench.utilization.summary_lines()
        if lines:
            terminalreporter.section("phasebench utilization: GPU busy % mean/max, worker CPU in cores", sep="-")
            for line in lines:
                terminalreporter.write_line(line)
        _write_answer(terminalreporter, config)


def _write_answer(terminalreporter, config) -> None:
    """The answer at a glance after pytest-benchmark's tables (docs/options.md#options): per device, each
    implementation's median and its ratio to its reference with the direction in words; the training run's
    published rows; and what makes the figures less than they look (synthetic data)."""
    from phasebench import report

    session = config.pluginmanager.getplugin("pytest-benchmark")
    benchmarks = [bench.as_dict(include_data=False) for bench in getattr(session, "benchmarks", None) or []
                  if bench and not bench.has_error]
    for title, lines in report.answer(benchmarks):
        terminalreporter.section(title, sep="-", bold=True)
        for line in lines:
            terminalreporter.write_line(line)
    unsaved = [f"{option}={value}" for option, value in (("--benchmark-json", getattr(session, "json", None)),
                                                          ("--benchmark-save", getattr(session, "save", None)))
               if value] + (["--benchmark-autosave"] if getattr(session, "autosave", False) else [])
    if unsaved and not getattr(session, "benchmarks", None):
        skipped = len(terminalreporter.stats.get("skipped", []))
        why = f"no benchmark ran ({skipped} skipped)" if skipped else "no benchmark ran"
        if getattr(session, "disabled", False):
            why = "benchmarks are disabled (--benchmark-disable)"
        terminalreporter.write_line(f"phasebench: {', '.join(unsaved)}: nothing written: {why}", yellow=True, bold=True)
    settings: Settings = config.phasebench
    if settings.source is not None and settings.source.name == "synthetic" and benchmarks:
        terminalreporter.write_line(f"phasebench: WARNING: {data.SYNTHETIC_WARNING} ({settings.source.raw_dir})",
                                    yellow=True, bold=True)
    left_out = left_out_line(settings.extras) if benchmarks else None
    if left_out:
        terminalreporter.write_line(left_out)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Ctrl-C or SIGTERM in the middle of a benchmark: pytest-benchmark would save its cut-short rounds as a
    result, or, with none yet, fail to save anything. Marked as an error, it is left out, as failed ones are,
    and the cases that finished are saved (--benchmark-json, --benchmark-autosave)."""
    try:
        return (yield)
    except KeyboardInterrupt:
        benchmark = getattr(item, "funcargs", {}).get("benchmark")
        if benchmark is not None:
            benchmark.has_error = True
        raise


def _ignore_sigterm(signum, frame):
    pass


def pytest_sessionstart(session):
    """SIGTERM (`kill`, `timeout`, a cancelled CI job) ends the run as Ctrl-C does: the finished cases are
    saved, the workers stopped, the exit status 2 (docs/faults.md#faults-and-bad-input)."""

    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, _ignore_sigterm)  # only the first one interrupts
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    session.config.add_cleanup(lambda: signal.signal(signal.SIGTERM, previous))


@pytest.hookimpl(tryfirst=True)  # before pytest's report of the interrupt, which takes a while
def pytest_keyboard_interrupt(excinfo):
    # The run is ending and saving: a later SIGTERM (CI sends SIGINT, then SIGTERM) must not cut that short.
    signal.signal(signal.SIGTERM, _ignore_sigterm)

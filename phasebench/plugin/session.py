"""The phasebench session: what the options resolved to, built once from pytest's config (`config.phasebench`),
as pytest-benchmark builds its BenchmarkSession. Everything a run decides before its first test is decided here, in
order: the command is checked, the options are parsed and validated, torch is probed where a run needs it, the data
is resolved, the instruction-count mode makes its changes, and machine_info is recorded (docs/reference/options.md)."""

from __future__ import annotations

import dataclasses
import os
import secrets
import sys
from dataclasses import dataclass, field

import pytest

from phasebench import data, programs, registry, utilization
from phasebench.plugin import counting, machine, switches
from phasebench.plugin.cases import Selection, chosen_selections, selections
from phasebench.plugin.guards import (
    blocking_launches,
    given_options,
    histogram_unavailable,
    misread_path_option,
    refused_option,
)
from phasebench.plugin.pairing import PAIR_WORKERS
from phasebench.programs import DEFAULT_PROGRAM
from phasebench.registry import DEVICES
from phasebench.repository import ROOT
from phasebench.results import DEFAULT_STORAGE
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import Workload, parse_sizes, workloads
from phasebench.worker import build
from phasebench.worker import counting as count_mode
from phasebench.worker.client import Conditions

ERRORED = pytest.StashKey[list]()  # the error benchmarks taken out of pytest-benchmark's session at its end (names)
COMMIT_ENV, DIRTY_ENV = "PHASEBENCH_COMMIT", "PHASEBENCH_DIRTY"  # for a copy without git history
DEFAULT_DATA = ROOT / "data"  # the repository's, wherever pytest is started
PYTEST_BENCHMARK_STORAGE = "file://./.benchmarks"  # pytest-benchmark's default, relative to where pytest started
# test_concurrent_jobs' N per device when --jobs is not given: on cpu the jobs share the intra-op threads.
DEFAULT_JOBS = {"cpu": (1, 2), "cuda": (1, 2, 4)}
DEFAULT_MODELS = (1, 4, 16)  # test_ensemble's M when --models is not given
PRODUCTION_WORKER = "phasebench.worker.server"
# Options with a lower bound, and the bound.
MINIMUMS = {"threads": 0, "rounds": 1, "warmup_rounds": 0, "round_timeout": 0, "epochs": 1, "run_rounds": 1,
            "processes": 1, "pair_workers": 1}


@dataclass
class PhasebenchSession:
    """What the options resolved to; `config.phasebench`, the `settings` fixture."""

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
    pair_workers: int = PAIR_WORKERS  # long-lived workers a side that a paired phase rotates its sweeps through
    programs: tuple[str, ...] = (DEFAULT_PROGRAM,)  # --program: the programs whose cases the run makes
    given: frozenset[str] = frozenset()  # the options the command names (guards.given_options)
    machine: dict = field(default_factory=dict)  # machine_info["phasebench"] (phasebench/plugin/machine.py)
    utilization: utilization.Monitor | None = None  # GPU/CPU samplers (phasebench/utilization.py)
    jobs: dict[str, tuple[int, ...]] = field(default_factory=lambda: dict(DEFAULT_JOBS))  # per device (--jobs)
    models: tuple[int, ...] = DEFAULT_MODELS  # test_ensemble's M (--models)
    count: dict | None = None  # --count instructions (phasebench/plugin/counting.py): the workers' Valgrind prefix,
    # and the simulated caches' geometry and branch simulation where asked for (--count-i1/-d1/-ll, --count-branches)
    # The suite's selections (phasebench/plugin/cases.py selections) and those this run includes (--extra; all when
    # checking).
    selections: dict[str, Selection] = field(default_factory=dict)
    extras: frozenset[str] = frozenset()
    # Data parallel (docs/distributed.md): --world-size; empty: no distributed case exists (bench/test_distributed.py
    # is not collected). dist_timeout: the process group's timeout, which bounds how long a dead rank's peers wait.
    world_sizes: tuple[int, ...] = ()
    dist_timeout: float = 60.0
    # The worker program and library build the workers run. A testing plugin may swap in its own (the suite's tests
    # do: tests/knobs.py); what it changed is recorded in machine_info, so that such a run never passes as a real one.
    worker_module: str = PRODUCTION_WORKER
    library_variant: str = "production"
    testing: dict | None = None
    # The seed of each phase's run order (phasebench/plugin/cases.py run_order): --order-seed, else the baseline's
    # under --benchmark-compare (take_baseline_order), else one drawn per run; pytest-xdist's workers take their
    # controller's (ORDER_SEED_INPUT), so that they collect the same order. order_seed_from says which.
    order_seed: int = 0
    order_seed_from: str = "drawn"
    # The intervention study's switches (phasebench/plugin/switches.py: --round-checks, --omp-wait-policy, --pins),
    # and what the timed workers run under because of them (None: nothing beyond the environment's).
    switches: switches.Switches = field(default_factory=switches.Switches)
    conditions: Conditions | None = None

    @property
    def free_running(self) -> bool:
        return "free-running" in self.extras

    def rank_threads(self, device: str, world_size: int) -> int:
        """A rank's intra-op threads: on cpu the ranks split --threads as concurrent jobs do; on cuda each keeps it."""
        return max(1, self.threads // world_size) if device == "cpu" else self.threads

    def worker_options(self, device: str, log_path: str, impl: str, workload: Workload = DEFAULT_WORKLOAD,
                       program: str = DEFAULT_PROGRAM) -> dict:
        """What a worker of `impl` on `device` trains: its implementation's pipeline on this workload; for a program
        other than the seed's, that program's trainer of its language (the seed's data, log and workload are the seed
        program's own)."""
        if program != DEFAULT_PROGRAM:
            # log_path always: where the trainer writes no progress lines, the worker writes a run's last loss there
            options = {"device": device, "threads": self.threads, "seed": 1, "log_path": log_path}
            options |= {"data_root": self.source.root} if "data_root" in programs.program(program).settings else {}
        else:
            options = {"root": self.source.root, "device": device, "threads": self.threads, "seed": 1,
                       "log_path": log_path}
            options |= registry.get(impl).trainer_options() | workload.as_options()
        return options | ({"count": self.count} if self.count else {})

    def for_program(self, name: str) -> PhasebenchSession:
        """These settings for a per-phase case of program `name`: its declared rounds and warm-up rounds
        (phasebench/programs.py) where the command names neither --rounds nor --warmup-rounds nor counts
        instructions."""
        declared = programs.program(name)
        if self.count or not (declared.rounds or declared.warmup_rounds):
            return self
        taken = {"rounds": declared.rounds, "warmup_rounds": declared.warmup_rounds}
        for option in ("rounds", "warmup_rounds"):
            if f"--{option.replace('_', '-')}" in self.given or not taken[option]:
                del taken[option]
        return dataclasses.replace(self, **taken) if taken else self

    def machine_info(self) -> dict:
        """machine_info["phasebench"] as this session saves it."""
        return self.machine | {"gpu_sampling": self.utilization.reason, "testing": self.testing}

    def take_baseline_order(self, baseline_machine_info: dict) -> None:
        """Under --benchmark-compare, unless the command gives --order-seed: the run order of the first baseline that
        records one, so that each worker runs its phases in the sequence the baseline's did. What a worker ran
        before a phase changes what the phase costs (Python's loss counts about 19.6 or 25.2 thousand instructions
        by its predecessors, docs/method.md#order), and a compare of two orders would judge that as the code's."""
        seed = (baseline_machine_info.get("phasebench") or {}).get("order_seed")
        if self.order_seed_from in ("given", "baseline") or not isinstance(seed, int):
            return
        self.order_seed, self.order_seed_from = seed, "baseline"
        self.machine["order_seed"] = seed

    def close(self) -> None:
        if self.utilization is not None:
            self.utilization.close()

    @classmethod
    def from_config(cls, config) -> PhasebenchSession:
        """The session, or pytest.UsageError in one line for a command the suite cannot honour as written."""
        try:
            return cls._from_config(config)
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None

    @classmethod
    def _from_config(cls, config) -> PhasebenchSession:
        option = config.getoption
        refused = (misread_path_option(config) or refused_option(config) or histogram_unavailable(config)
                   or blocking_launches(config))
        if refused:
            raise ValueError(refused)
        impls = registry.parse(option("impl") or ",".join(registry.DEFAULT_IMPLS))
        chosen_programs = programs.parse(option("program"))
        refused = option("count") and uncounted_program(chosen_programs)
        if refused:
            raise ValueError(refused)
        simulated = counting.simulation(option)  # --count-i1/-d1/-ll, --count-branches: ValueError where malformed
        if option("count"):
            refused = counting.refusal(option("device"), impls, option("processes"))
            if refused:
                raise ValueError(refused)
        _default_paths(config)
        widths, batch_sizes = parse_sizes(option("width"), "--width"), parse_sizes(option("batch_size"), "--batch-size")
        chosen_workloads = workloads(widths, batch_sizes)
        jobs = dict.fromkeys(DEVICES, parse_sizes(option("jobs"), "--jobs")) if option("jobs") else dict(DEFAULT_JOBS)
        models = parse_sizes(option("models") or ",".join(map(str, DEFAULT_MODELS)), "--models")
        world_sizes = parse_sizes(option("world_size"), "--world-size") if option("world_size") else ()
        unsplit = [w.shard_problem(n) for n in world_sizes for w in chosen_workloads if w.shard_problem(n)]
        if unsplit:
            raise ValueError(f"--world-size: {unsplit[0]}")
        devices = _choices(option("device"), "device", DEVICES)
        if option("dataset") not in data.DATASET_CHOICES:
            raise ValueError(f"--dataset {option('dataset')!r}: valid values are {', '.join(data.DATASET_CHOICES)}")
        for name, minimum in MINIMUMS.items():
            if option(name) < minimum:
                raise ValueError(f"--{name.replace('_', '-')} must be at least {minimum}")
        if option("dist_timeout") <= 0:
            raise ValueError("--dist-timeout must be above 0")
        switched = switches.parse(option, option("threads"), option("count"), option("benchmark_disable", False))
        if os.environ.get(COMMIT_ENV) and os.environ.get(DIRTY_ENV) not in ("0", "1"):
            raise ValueError(f"{COMMIT_ENV} needs {DIRTY_ENV}=0 (the tree it names was clean) or 1, "
                             f"not {os.environ.get(DIRTY_ENV)!r}")
        if option("benchmark_disable", False):
            # Nothing is timed under --benchmark-disable (the test command): idle OpenMP threads sleep instead of
            # spinning, which on a loaded machine takes a third off the equivalence tests
            # (docs/usage.md#the-test-command).
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        # A run asks torch (in a probe process) what it picks and whether it can use a GPU; a collection does not.
        probed = not (config.option.help or config.option.collectonly)
        cuda_reason = machine.cuda_reason(confirm=probed and "cuda" in devices)
        if world_sizes and "cuda" in devices and cuda_reason is None and max(world_sizes) > machine.gpu_count():
            raise ValueError(f"--world-size {max(world_sizes)} on cuda: one GPU a rank, and {machine.gpu_count()} "
                             f"usable GPU(s) here; leave cuda out (--device cpu) or ask for at most that many")
        unrunnable = nothing_can_run(impls, devices, cuda_reason)
        if unrunnable and not config.option.help:
            raise ValueError(unrunnable)
        source = None
        if probed:
            try:
                source = data.resolve(option("dataset"), option("mnist_root"), announce=_say)
            except data.DataError as error:
                raise ValueError(str(error)) from None
        named = selections(config)
        session = cls(
            impls=impls, devices=devices, workloads=chosen_workloads,
            # 0 where not probed (a collection): torch's default, which no worker is started to use; --pins count
            # times on the count mode's one thread.
            threads=option("threads") or (1 if switched.pinned else default_threads(
                machine.probe()["threads"], timed=not option("benchmark_disable", False)) if probed else 0),
            rounds=option("rounds"), warmup_rounds=option("warmup_rounds"), round_timeout=option("round_timeout"),
            epochs=option("epochs"), run_rounds=option("run_rounds"), processes=option("processes"),
            pair_workers=option("pair_workers"), programs=chosen_programs, source=source, cuda_reason=cuda_reason, jobs=jobs, models=models, selections=named, extras=chosen_selections(config, named),
            world_sizes=world_sizes, dist_timeout=option("dist_timeout"), order_seed=order_seed(config),
            order_seed_from="given" if option("order_seed") is not None else "drawn", switches=switched)
        session.given = frozenset(given_options(config))
        counted = session._count_instructions(session.given, probed, simulated) if option("count") else {}
        aslr = count_mode.aslr_off() if probed and switched.pinned else []
        session.conditions = switches.conditions(switched, aslr)
        capability = counting.pinned_capability() if probed and switched.pinned else None
        session.machine = (machine.machine_info(session, probed) | counted
                           | switches.machine_info(switched, aslr, capability))
        session.utilization = utilization.Monitor(sampling=not option("no_utilization"),
                                                  gpu_expected="cuda" in devices and cuda_reason is None)
        return session

    def _count_instructions(self, given: set[str], probed: bool, simulated: dict | None = None) -> dict:
        """--count instructions (phasebench/plugin/counting.py): cpu, one thread, and the mode's own rounds unless
        the command (its line, PYTEST_ADDOPTS or the ini file's addopts) names them; `simulated`: the caches'
        geometry and the branch simulation asked for (counting.simulation). Returns the mode's machine_info."""
        self.devices, self.threads = ("cpu",), 1
        if "--rounds" not in given:
            self.rounds = count_mode.ROUNDS
        if "--warmup-rounds" not in given:
            self.warmup_rounds = count_mode.WARMUP_ROUNDS
        prefix = count_mode.aslr_off() if probed else []
        self.count = {"prefix": prefix} | ({"caches": simulated.get("caches"), "branches": simulated.get("branches")}
                                           if simulated else {})
        return counting.machine_info(prefix, probed, simulated)


def uncounted_program(names: tuple[str, ...]) -> str | None:
    """--count's one-line refusal of the first of these programs that declares why it cannot be counted, or None."""
    for name in names:
        if programs.program(name).not_counted:
            return f"--count cannot count program {name}: {programs.program(name).not_counted}"
    return None


ORDER_SEED_INPUT = "phasebench_order_seed"  # how pytest-xdist's controller hands its workers the run's order seed


def harness_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_threads(picked: int, timed: bool) -> int:
    """The workers' intra-op threads where --threads is not given: torch's pick, and in a timed run at most one fewer
    than the cores, so that pytest and the idle side of a pair keep a core while a block runs: with every core a
    parallel region's, whatever else runs holds the whole region up, and on a loaded 2-core machine no ratio could be
    decided (results/paired-defaults/summary.md; docs/method.md#a-machine-unfit-to-measure)."""
    return min(picked, max(1, harness_cores() - 1)) if timed else picked


def order_seed(config) -> int:
    """--order-seed, else the seed pytest-xdist's controller handed this worker, else one drawn for this run."""
    given = config.getoption("order_seed")
    if given is not None:
        return given
    handed = getattr(config, "workerinput", {}).get(ORDER_SEED_INPUT)
    return handed if handed is not None else secrets.randbelow(2**32)


def _default_paths(config) -> None:
    """The repository's data/ and .benchmarks, wherever pytest started, unless the command names others."""
    if config.option.mnist_root is None:
        config.option.mnist_root = str(DEFAULT_DATA)
    if getattr(config.option, "benchmark_storage", None) == PYTEST_BENCHMARK_STORAGE \
            and "--benchmark-storage" not in given_options(config):
        config.option.benchmark_storage = DEFAULT_STORAGE


def _say(line: str) -> None:
    """A line before pytest's own output starts (no capture yet): what the run is doing that takes a while."""
    print(line, file=sys.stderr, flush=True)


def _choices(value: str | None, option: str, valid: tuple[str, ...]) -> tuple[str, ...]:
    value = value or ",".join(valid)
    chosen = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in chosen if v not in valid]
    if bad or not chosen:
        raise ValueError(f"--{option} {value!r}: valid values are {', '.join(valid)} (comma-separated)")
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

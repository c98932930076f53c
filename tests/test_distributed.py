"""Data parallel (docs/distributed.md): equivalence, faults, and what the options make of the cases. Cheap on purpose:
world size 2, a few steps, the worlds shared by the module's tests; the torchrun agents and the suite run with a
killed rank are long checks (tests/long_distributed.py).

Equivalence, with dropout off and on:
- after N steps every rank holds bit-identical parameters (each rank applies SGD to the same all-reduced gradients);
- python-allreduce and cpp-allreduce agree bit for bit: the same per-rank batches, the same kernels as the published
  pair (tests/equivalence/ shows python and cpp train bit-identically), the same all-reduce (Gloo's sum of two
  float32 values is exact-order: a + b), then the same division by 2;
- world size 2 against one process training on the same global batches (dropout off), within DERIVED_TOLERANCE.
  With dropout on, each rank draws its own masks (every rank seeds 1, so both draw the same stream, for 32 rows each)
  while the one process draws 64 rows' worth from one stream: the masks differ, so only the first two hold.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import threading
import time
import types
from array import array
from functools import partial

import pytest

from phasebench.repository import ROOT
from phasebench.spec import DEFAULT
from phasebench.worker.client import Worker, WorkerDied, WorkerError
from phasebench.worker.protocol import DistJoin, GetParams, Phase, TrainSteps
from phasebench.worker.world import GRACE_S, World, WorldFailed
from tests.knobs_worker import Fault

WORLD = 2
STEPS = 3
TIMEOUT_S = 20.0  # the process group's timeout in these tests
LEARNING_RATE, MOMENTUM_SUM = 0.01, 2.0  # SGD's lr; momentum 0.5's buffer is at most 1 / (1 - 0.5) = 2 gradients
# The longest sum in the backward pass: conv1.weight's gradient adds up batch × 24 × 24 products per element. Two
# orders of the same sum differ by at most that many roundings of float32 (eps 2^-24) of the largest partial sum.
LONGEST_SUM = DEFAULT.batch_size * 24 * 24
EPS32 = 2.0 ** -24


def derived_tolerance(max_grad: float, steps: int = STEPS) -> float:
    """How far a parameter of W=2 may be from the one process's after `steps` steps: per step, SGD moves it by lr × the
    momentum buffer (at most MOMENTUM_SUM gradients); the two gradients are the same sums in other orders (per-rank
    means of 32, summed, halved; against one mean of 64), so they differ by at most LONGEST_SUM × EPS32 × the
    largest gradient. The later steps' forward passes start from weights that already differ by that much; over a
    few steps at lr 0.01 that adds less than the bound itself, so the bound is doubled."""
    return 2 * steps * LEARNING_RATE * MOMENTUM_SUM * LONGEST_SUM * EPS32 * max_grad


def params_of(worker: Worker) -> array:
    return array("f", base64.b64decode(worker.request(GetParams()).data))


@pytest.fixture(scope="module")
def worlds(settings, cpp_library, tmp_path_factory):
    """python-allreduce and cpp-allreduce worlds of 2, and one python-batched process, all with dropout off; started at
    once. Each rank keeps 1 intra-op thread (the ranks split the machine's)."""
    logs = tmp_path_factory.mktemp("distributed")

    def options(impl: str, name: str, dropout: float) -> dict:
        return settings.worker_options("cpu", str(logs / f"{name}.log"), impl=impl) | {"dropout": dropout,
                                                                                       "threads": 1}

    def world(impl: str, library: str | None) -> World:
        # The testing worker (tests/knobs_worker.py): a rank of the python world is killed with its fault request.
        spawns = [partial(Worker, impl, "cpu", options(impl, f"{impl}-{rank}", 0.0), settings.round_timeout, library,
                          module="tests.knobs_worker") for rank in range(WORLD)]
        made = World(spawns, "cpu", TIMEOUT_S)
        made.options = lambda dropout: [options(impl, f"{impl}-{rank}-{dropout}", dropout) for rank in range(WORLD)]
        return made

    made, errors = {}, []

    def start(name, make):
        try:
            made[name] = make()
        except Exception as error:  # noqa: BLE001  (raised below, in the fixture)
            errors.append(error)

    starts = {"python": lambda: world("python-allreduce", None), "cpp": lambda: world("cpp-allreduce", cpp_library),
              "one": lambda: Worker("python-batched", "cpu", options("python-batched", "one", 0.0) | {"threads": 2},
                                    settings.round_timeout)}
    threads = [threading.Thread(target=start, args=item) for item in starts.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        if errors:
            raise errors[0]
        yield made
    finally:
        for thing in made.values():
            if isinstance(thing, World):
                if not thing.broken:
                    thing.stop()
            else:
                thing.stop()


def train_world(world: World, steps: int = STEPS) -> list[array]:
    world.request_all(TrainSteps(steps))
    return [params_of(worker) for worker in world.workers]


def differing(a: array, b: array) -> int:
    return sum(x != y for x, y in zip(a, b))


def test_dropout_off_ranks_identical_languages_identical_one_process_within_tolerance(worlds):
    python, cpp = train_world(worlds["python"]), train_world(worlds["cpp"])
    for name, ranks in (("python-allreduce", python), ("cpp-allreduce", cpp)):
        assert ranks[0] == ranks[1], f"{name}: ranks differ in {differing(*ranks)} of {len(ranks[0])} parameters"
    assert python[0] == cpp[0], f"python-allreduce and cpp-allreduce differ in {differing(python[0], cpp[0])} values"
    one = worlds["one"]
    initial = params_of(one)  # the seed-1 weights every trainer starts from
    one.request(TrainSteps(STEPS))
    alone = params_of(one)
    # G, the largest gradient: no more than the largest move of a parameter over the steps, over lr.
    max_grad = max(abs(a - b) for a, b in zip(alone, initial)) / LEARNING_RATE
    tolerance = derived_tolerance(max_grad)
    worst = max(abs(a - b) for a, b in zip(python[0], alone))
    assert worst <= tolerance, f"world 2 against one process: {worst:.3g} apart, derived tolerance {tolerance:.3g}"


def test_dropout_on_ranks_identical_languages_identical(worlds):
    for name in ("python", "cpp"):
        worlds[name].restart(worlds[name].options(0.5))
    python, cpp = train_world(worlds["python"]), train_world(worlds["cpp"])
    assert python[0] == python[1] and cpp[0] == cpp[1], "ranks differ with dropout on"
    assert python[0] == cpp[0], f"with dropout on, the languages differ in {differing(python[0], cpp[0])} values"


def test_shard_is_distributed_samplers_order():
    """Rank r's k-th batch (SplitBatches' slice) holds the indices DistributedSampler(shuffle=False) gives it."""
    import torch
    from torch.utils.data import DistributedSampler

    from phasebench.train.loaders import SplitBatches

    for rank in range(WORLD):
        loader = object.__new__(SplitBatches)
        loader.images = loader.targets = torch.arange(60_000)
        loader.batch_size, loader.rank, loader.world = DEFAULT.batch_size, rank, WORLD
        ours = torch.cat([images for images, _ in loader]).tolist()
        sampler = list(DistributedSampler(range(60_000), num_replicas=WORLD, rank=rank, shuffle=False))
        assert ours == sampler


def test_a_failed_store_is_one_line(worlds):
    """A rank that cannot reach the store fails in one line that says why, within the store's timeout."""
    one = worlds["one"]
    started = time.monotonic()
    with pytest.raises(WorkerError) as failed:
        one.request(DistJoin(rank=1, world=2, device="cpu", timeout_s=2, port=1))
    message = str(failed.value)
    assert "rank 1 could not reach the store at 127.0.0.1:1 within 2 s" in message and "\n" not in message, message
    assert time.monotonic() - started < 30


def test_a_killed_rank_fails_its_peers_within_the_timeout(worlds):
    """Rank 1 dies while rank 0 starts grad_sync: rank 0's collective fails (its barrier or all-reduce sees the peer
    gone, at the latest after the group's timeout); the failure names rank 1 and its death first. Last: it breaks
    the python world."""
    world = worlds["python"]
    started = time.monotonic()
    with pytest.raises(WorldFailed) as failed:
        world.request_all([Phase("grad_sync"), Fault("kill")])
    elapsed = time.monotonic() - started
    message = str(failed.value)
    assert message.index("rank 1: python-allreduce worker on cpu died with signal SIGKILL") < message.index("rank 0:"), \
        message
    assert elapsed < TIMEOUT_S + GRACE_S, f"{elapsed:.1f} s"
    assert not world.alive()


def test_options_make_distributed_cases_only_when_asked():
    """Without --world-size no distributed case is collected (their module is not); with it, every implementation's
    per-phase and training-run cases per world size; a world size that cannot split the batch is a usage error."""
    def collect(*options):
        return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "bench", *options], capture_output=True, text=True, cwd=ROOT)

    plain = collect("--benchmark-only", "--impl", "all")
    assert plain.returncode == 0 and "test_distributed" not in plain.stdout, plain.stdout[-2000:]
    asked = collect("--world-size", "2", "--impl", "cpp-allreduce,python-ddp", "--device", "cpu")
    assert "bench/test_distributed.py::test_dist_phase[grad_sync-cpp-allreduce-cpu-world2]" in asked.stdout
    assert "bench/test_distributed.py::test_dist_training_run[python-ddp-cpu-world2]" in asked.stdout
    assert "grad_sync-python-ddp" not in asked.stdout  # DDP's all-reduce runs inside backward
    bad = collect("--world-size", "3", "--device", "cpu")
    assert bad.returncode != 0 and "world size 3 must divide the batch (64)" in bad.stderr, bad.stderr[-1000:]



def test_the_report_tables_the_data_parallel_cases_apart():
    """The Beyond one machine table reads the data-parallel cases (keyed by world size) and the one-process tables and
    the answer at a glance never mistake them for a workload."""
    from phasebench.report.distributed import beyond_table
    from phasebench.report.findings import answer
    from phasebench.saved import SavedResult

    def case(phase, impl, world, median, **info):
        return {"fullname": f"bench/test_distributed.py::x[{phase}-{impl}-cpu-world{world}]", "stats": {"median": median},
                "extra_info": {"phase": phase, "implementation": impl, "device": "cpu", "width": 1, "batch_size": 64,
                               "workload": "", "world_size": world, "sync": "allreduce", **info}}

    run = {"step_p50_s": 0.004, "step_p95_s": 0.006}
    benchmarks = [case("training_run", "cpp-allreduce", 1, 20.0, images_per_s=1000.0, scaling_efficiency=1.0, **run),
                  case("training_run", "cpp-allreduce", 2, 12.0, images_per_s=1800.0, scaling_efficiency=0.9, **run),
                  case("grad_sync", "cpp-allreduce", 2, 0.001), case("train_step", "cpp-allreduce", 2, 0.004)]
    result = SavedResult.from_json({"benchmarks": benchmarks}, "distributed.json")
    assert result.cases == {} and len(result.distributed_cases) == 4
    table = beyond_table(result.distributed_cases, "cpu")
    assert [row[:2] for row in table.rows] == [["cpp-allreduce", 1], ["cpp-allreduce", 2]]
    assert table.rows[1][5] == pytest.approx(1.0) and table.rows[1][6] == pytest.approx(25.0)
    assert table.rows[1][7:] == [1800.0, 0.9]
    titles = [title for title, _ in answer(result)]
    assert titles == ["phasebench: beyond one machine on cpu"]


class FakeRank:
    """A rank for World.request_all alone: it answers after `answer_s` (with `error` raised, if given), or, with
    answer_s None, never, until it is killed."""

    def __init__(self, answer_s: float | None, error: Exception | None = None):
        self.answer_s, self.error, self.killed = answer_s, error, threading.Event()
        self.process = types.SimpleNamespace(kill=self.killed.set)

    def send(self, message):
        pass

    def receive(self, message, timeout=None):
        if self.answer_s is None:
            self.killed.wait(60)
            raise WorkerDied(f"rank killed during '{message.what}'")
        time.sleep(self.answer_s)
        if self.error:
            raise self.error
        return {"ns": 1}

    def kill(self):
        self.killed.set()

    def close(self):
        pass


def test_a_hanging_rank_is_killed_after_the_group_timeout_and_named_first(monkeypatch):
    """Rank 1 never answers grad_sync; rank 0's collective fails at the group's timeout: request_all waits the timeout
    plus GRACE_S more for rank 1, kills it, and names it first as hung. (Fake ranks with a timeout of 0.3 s: the
    waiting is World's own; the real ranks' side, a collective failing at the group's timeout, is Gloo's.)"""
    from phasebench.worker import world as world_module

    monkeypatch.setattr(world_module, "GRACE_S", 0.3)
    world = World.__new__(World)
    world.device, world.timeout_s, world.size, world.broken = "cpu", 0.3, 2, False
    world.workers = [FakeRank(0.3, WorkerError("gloo: Timed out waiting 300ms for recv operation")), FakeRank(None)]
    world.workers[0].impl = "python-allreduce"
    started = time.monotonic()
    with pytest.raises(WorldFailed) as failed:
        world.request_all(Phase("grad_sync"))
    elapsed = time.monotonic() - started
    message = str(failed.value)
    hung = "rank 1: hung: no answer 0.6 s after a peer failed (the group's timeout, --dist-timeout 0.3 s, + 0.3 s), killed"
    assert hung in message and message.index(hung) < message.index("rank 0: gloo: Timed out"), message
    assert world.workers[1].killed.is_set() and world.broken
    assert 0.5 < elapsed < 5, f"{elapsed:.1f} s"

"""Pairs of workers on cpu (or cuda) and the comparisons the equivalence tests make of them: the same network,
batches and training, to the bit or within a tolerance. The workers come from conftest.py's kept workers or are
started for the pair."""

from __future__ import annotations

import base64
import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest

from phasebench import registry
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import Workload
from phasebench.worker import protocol
from phasebench.worker.client import Worker, WorkerError

IMPLEMENTATIONS = registry.DEFAULT_IMPLS  # the published pair: python, cpp
PARAM_COUNT = DEFAULT_WORKLOAD.parameter_count  # 21,840
EPOCH_BATCHES = DEFAULT_WORKLOAD.steps_per_epoch  # 938: 60,000 images in batches of 64, the last of 32
# A workload other than the published one: a wider Net and another batch size.
OTHER_WORKLOAD = Workload(width=2, batch_size=100)
IMAGE_TOLERANCE = 1e-6  # absolute, on normalized pixels
STEPS = 100
# A whole epoch per request: on this 2-core machine, loaded by other jobs, one took over 300 s
# (--round-timeout's default, which the other requests keep).
EPOCH_TIMEOUT_S = 1800
PUBLISHED_DROPOUT = 0.5
# The xdist group of the tests that borrow conftest.py's kept workers (or fill the reference caches below): one
# process makes the pool once.
POOL_GROUP = "tests/equivalence"


@dataclass
class Pair:
    """Two workers on cpu, started with the same options but their implementation: the published pair, or a
    variant (second) and its language's published implementation (first)."""

    first: Worker
    second: Worker
    initial: np.ndarray  # the first model's seed-1 weights, read before any test changes them
    dropout: float
    workload: Workload

    @property
    def workers(self) -> tuple[Worker, Worker]:
        return self.first, self.second

    @property
    def names(self) -> tuple[str, str]:
        return self.first.impl, self.second.impl

    # The published pair's tests read them by language.
    python = property(lambda self: self.first)
    cpp = property(lambda self: self.second)

    def ask_both(self, message: protocol.Request, timeout: float | None = None) -> dict:
        """One worker after the other: each runs --threads intra-op threads, and two such pools at once on the
        cores meant for one spin against each other (one epoch took minutes instead of about a minute here)."""
        return {worker.impl: worker.request(message, timeout=timeout) for worker in self.workers}

    @staticmethod
    def ask_at_once(workers, message: protocol.Request, timeout: float | None = None) -> dict:
        """Each worker is sent the request before any reply is read: for single-threaded work (a loader's batch),
        where two workers at once use two cores instead of one."""
        for worker in workers:
            worker.send(message)
        replies, refused = {}, None
        for worker in workers:  # every reply is read, so that a refusal leaves no answer out of turn
            try:
                replies[worker.impl] = worker.receive(message, timeout)
            except WorkerError as error:
                refused = refused or error
        if refused:
            raise refused
        return replies


def equivalence_options(settings, device: str, log_path: str, impl: str, workload: Workload = DEFAULT_WORKLOAD) -> dict:
    """What an equivalence test's worker trains: a timed worker's options (settings.worker_options) under the
    deterministic numerics (phasebench/determinism.py), which every equivalence worker runs under and no timed
    worker does: on cuda, without them, two eager runs of one training can differ in the last bits."""
    return settings.worker_options(device, log_path, impl=impl, workload=workload) | {"deterministic": True}


def restart(worker: Worker, options: dict, impl: str | None = None) -> None:
    """A fresh trainer with these options in the same worker process, as a new process would build it: nothing of
    the last one is kept. `impl`: the implementation the options are (another of the worker's language)."""
    worker.info = worker.request(protocol.Start(options=options))
    worker.impl, worker.log_path = impl or worker.impl, options.get("log_path")


@contextlib.contextmanager
def worker_pair(settings, library: str | None, logs, dropout: float, impls: tuple[str, str] = IMPLEMENTATIONS,
                workload: Workload = DEFAULT_WORKLOAD, device: str = "cpu", options: dict | None = None,
                kept=None):
    """options: more Trainer options for the second worker (a Python one). kept: conftest.py's KeptWorkers, new
    trainers in the package's workers (cpu only) instead of new processes."""
    if device not in settings.devices:
        pytest.skip(f"--device {','.join(settings.devices)}: this equivalence test compares implementations on {device}")
    if device == "cuda" and settings.cuda_reason:
        pytest.skip(settings.cuda_reason)
    borrowed = kept is not None and device == "cpu"

    def start(impl: str) -> Worker:
        language = registry.get(impl).language
        given = equivalence_options(settings, device, str(logs / f"{impl}.log"), impl, workload)
        given |= {"dropout": dropout} | ((options or {}) if impl == impls[1] else {})
        if borrowed:
            return kept.fresh(impl, given)
        return Worker(impl, device, given, settings.round_timeout, library if language == "cpp" else None)

    with contextlib.ExitStack() as stack:
        # The two start side by side (each imports torch and builds its trainer; nothing is compared yet): a pair
        # costs one start, not two.
        with ThreadPoolExecutor(len(impls)) as pool:
            futures = {impl: pool.submit(start, impl) for impl in impls}
        for future in futures.values():
            if future.exception() is None:
                stack.callback(partial(kept.give_back, future.result()) if borrowed else future.result().stop)
        for future in futures.values():
            if future.exception() is not None:
                raise future.exception()
        workers = {impl: future.result() for impl, future in futures.items()}
        yield Pair(workers[impls[0]], workers[impls[1]], get_params(workers[impls[0]]), dropout, workload)


def get_params(worker: Worker) -> np.ndarray:
    return np.frombuffer(base64.b64decode(worker.request(protocol.GetParams()).data), dtype=np.float32)


def set_params(worker: Worker, values: np.ndarray) -> None:
    worker.request(protocol.SetParams(base64.b64encode(values.astype(np.float32).tobytes()).decode()))


def parameters(layout, flat: np.ndarray) -> dict[str, np.ndarray]:
    """The flat buffer cut into named parameters, in layout order."""
    named, offset = {}, 0
    for name, shape in layout:
        size = int(np.prod(shape))
        named[name] = flat[offset:offset + size]
        offset += size
    return named


def bit_differences(layout, a: np.ndarray, b: np.ndarray, labels=IMPLEMENTATIONS) -> str:
    """'' when the buffers are bit-identical, else which parameters differ and where first."""
    if a.shape != b.shape:
        return f"{labels[0]} has {a.size} floats, {labels[1]} {b.size}"
    lines = []
    for (name, x), y in zip(parameters(layout, a).items(), parameters(layout, b).values()):
        differ = np.flatnonzero(x.view(np.uint32) != y.view(np.uint32))
        if differ.size:
            i = differ[0]
            lines.append(f"{name}: {differ.size} of {x.size} values differ, first [{i}]: "
                         f"{labels[0]} {float(x[i]):.9g}, {labels[1]} {float(y[i]):.9g}")
    return "; ".join(lines)


def assert_bit_identical(layout, python: np.ndarray, cpp: np.ndarray, what: str, labels=IMPLEMENTATIONS) -> None:
    differences = bit_differences(layout, python, cpp, labels)
    assert not differences, f"{what} differ: {differences}"


# A published loader's batches, by (implementation, workload, index): every pair's workers start with seed 1 on the
# same data, so a reference's batches are the same in every pair, and each variant's test need not wait for the
# reference to load its epoch again (the torchvision pipeline takes about 20 s for one).
REFERENCE_BATCHES: dict[tuple[str, str, int], dict] = {}


def reference_batches(pair: Pair, workload: Workload, index: int) -> dict[str, dict]:
    """Batch `index` from both workers: the published implementations' from REFERENCE_BATCHES once fetched."""
    known = {impl: REFERENCE_BATCHES[impl, workload.id, index] for impl in pair.names
             if (impl, workload.id, index) in REFERENCE_BATCHES}
    asked = [worker for worker in pair.workers if worker.impl not in known]
    replies = known | Pair.ask_at_once(asked, protocol.Batch(index=index))
    for impl in pair.names:
        if impl in IMPLEMENTATIONS:
            REFERENCE_BATCHES[impl, workload.id, index] = replies[impl]
    return replies


def assert_same_batches(pair: Pair, workload: Workload = DEFAULT_WORKLOAD, tolerance: float = IMAGE_TOLERANCE,
                        walk: bool = True) -> None:
    """The same number of batches per epoch; the first, middle and last batch (the first alone without `walk`: the
    others cost a walk through the epoch's loader, every image through the published pipeline's transforms in
    Python): labels exact, images within `tolerance` (0: to the bit)."""
    a, b = pair.names
    counts = pair.ask_both(protocol.EpochBatches())
    assert {impl: reply.count for impl, reply in counts.items()} == {impl: workload.steps_per_epoch for impl in pair.names}
    last = workload.steps_per_epoch - 1
    checked = {0: workload.batch_size} | ({last // 2: workload.batch_size, last: workload.last_batch} if walk else {})
    for index, size in checked.items():
        batches = reference_batches(pair, workload, index)
        labels = {impl: np.array(batch.labels) for impl, batch in batches.items()}
        images = {impl: np.frombuffer(base64.b64decode(batch.images), dtype=np.float32).reshape(-1, 28, 28)
                  for impl, batch in batches.items()}
        sizes = {impl: (len(labels[impl]), len(images[impl])) for impl in pair.names}
        assert sizes == {impl: (size, size) for impl in pair.names}, (
            f"batch {index}: (labels, images) {sizes}, expected {size} of each")
        wrong = np.flatnonzero(labels[a] != labels[b])
        assert not wrong.size, (f"batch {index}: labels differ at {wrong.tolist()}: "
                                f"{a} {labels[a][wrong].tolist()}, {b} {labels[b][wrong].tolist()}")
        difference = np.abs(images[a] - images[b])
        worst = np.unravel_index(difference.argmax(), difference.shape)
        assert difference.max() <= tolerance, (
            f"batch {index}: images differ by up to {difference.max():.3g} (tolerance {tolerance:g}), "
            f"worst at image {worst[0]} pixel ({worst[1]}, {worst[2]})")


# A published implementation's training from given weights, by (implementation, workload, dropout, steps, the
# weights' hash): (losses, weights after). Every variant of a language is compared with the same training of its
# reference, so the reference trains once, not once per variant (STEPS steps of Python take about 1.5 s here).
REFERENCE_TRAINING: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def train_from_same_weights(pair: Pair, steps: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list]:
    """Both workers loaded with the pair's initial weights, then `steps` steps each, one after the other: their
    losses, their weights after, and the layout. A published implementation's comes from REFERENCE_TRAINING once
    it trained so."""
    losses, weights = {}, {}
    for worker in pair.workers:
        key = (worker.impl, pair.workload.id, pair.dropout, steps, hash(pair.initial.tobytes()))
        if worker.impl in IMPLEMENTATIONS and key in REFERENCE_TRAINING:
            losses[worker.impl], weights[worker.impl] = REFERENCE_TRAINING[key]
            continue
        set_params(worker, pair.initial)
        losses[worker.impl] = np.array(worker.request(protocol.TrainSteps(steps=steps)).losses)
        weights[worker.impl] = get_params(worker)
        if worker.impl in IMPLEMENTATIONS:
            REFERENCE_TRAINING[key] = losses[worker.impl], weights[worker.impl]
    return losses, weights, pair.first.request(protocol.Layout()).layout


def assert_same_training(pair: Pair, what: str, steps: int = STEPS) -> None:
    """`steps` steps from the same weights: the same losses and the same weights after, to the bit."""
    a, b = pair.names
    losses, weights, layout = train_from_same_weights(pair, steps)
    problems = []
    differ = np.flatnonzero(losses[a].view(np.uint64) != losses[b].view(np.uint64))
    if differ.size:
        first = differ[0]
        problems.append(f"losses differ from step {first} on ({differ.size} of {steps} steps): step {first} "
                        f"{a} {losses[a][first]:.17g}, {b} {losses[b][first]:.17g} "
                        f"(difference {abs(losses[a][first] - losses[b][first]):.3g})")
    differences = bit_differences(layout, weights[a], weights[b], pair.names)
    if differences:
        problems.append(f"after the last step: {differences}")
    assert not problems, f"{a} and {b}, {steps} steps from the same weights, {what}:\n  " + "\n  ".join(problems)


# Those that train a single model; python-vmap, which trains ensembles only, is compared in test_ensembles.py.
VARIANTS = [impl.name for impl in registry.REGISTRY if impl.name not in IMPLEMENTATIONS and impl.single_model]
# The variants that execute the step as published (eagerly): the same kernels, so the same bits.
EAGER_VARIANTS = [name for name in VARIANTS if registry.get(name).step == "eager"]

# A variant that keeps its language's loader (python-foreach, python-fused change the optimizer only) gets its
# batches from the reference's own code: only another loader has its batches compared. A loader is the same code
# (phasebench/train/loaders.py, cpp/src/sources.cpp) whatever the step does with its batches, so each (language, loader)
# is compared once, with the first eager variant in the registry that has it and runs on cpu: the batched loader
# of python-ddp, python-allreduce, the graph and compiled variants is python-batched's.
LOADER_VARIANTS: dict[tuple[str, str], str] = {}
for _name in EAGER_VARIANTS:
    _variant = registry.get(_name)
    if _variant.loader != registry.language_reference(_variant).loader and not _variant.absent_reason("cpu"):
        LOADER_VARIANTS.setdefault((_variant.language, _variant.loader), _name)

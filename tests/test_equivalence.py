"""Both implementations train the same model (docs/method.md#both-implementations-train-the-same-model).

A Python-vs-C++ time difference means something only if both sides compute the same thing, so
these tests put a Python and a C++ worker side by side on cpu and compare, request by request:
the threads, the network, the weights, the data, 100 training steps and a one-epoch run. Every
failure names what differs and by how much. `pytest -k equivalence` runs just these.

What they show: seed 1 draws bit-identical initial weights in both; both draw their dropout masks
from the same seeded generator with the same operations (Python's DataLoader has a generator of its
own, so a new epoch draws nothing from the global one); and so the two train bit-identically, with
dropout off and with the published dropout on: the same losses, the same weights after 100 steps and
after a whole epoch, and the same test accuracy.

Every other implementation in the registry (bench/registry.py) is compared the same way with the
published implementation of its language: the same batches where its loader is its own, and 100 steps with
the published dropout from the same weights, to the bit (docs/implementations.md#implementations-and-workloads). These run
whatever --impl says: they are tests, not benchmarks.

Ensembles (phasebench/train/ensemble.py; docs/gpu.md#concurrent-jobs-and-ensembles): member k of every ensemble starts from
the weights seed k gives a model alone; with dropout off, the Python loop's member k trains as model k trained
alone, to the bit; the C++ loop's members train as the Python loop's, to the bit, with dropout off and on; and
python-vmap's member k stays within a tolerance of model k alone, justified where it is defined.
The compiled and CUDA-graph variants run other kernels or draw their masks
otherwise: they are compared within a rounding tolerance, CUDA graphs on cuda only (the bottom of this file).
"""

from __future__ import annotations

import base64
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest

from phasebench import registry
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import Workload
from phasebench.worker import protocol
from phasebench.worker.client import Worker, WorkerDied, WorkerError

IMPLEMENTATIONS = registry.DEFAULT_IMPLS  # the published pair: python, cpp
PARAM_COUNT = DEFAULT_WORKLOAD.parameter_count  # 21,840
EPOCH_BATCHES = DEFAULT_WORKLOAD.steps_per_epoch  # 938: 60,000 images in batches of 64, the last of 32
BATCH_SIZES = {0: 64, EPOCH_BATCHES // 2: 64, EPOCH_BATCHES - 1: 32}  # first, middle and last batch
# A workload other than the published one: a wider Net and another batch size.
OTHER_WORKLOAD = Workload(width=2, batch_size=100)
IMAGE_TOLERANCE = 1e-6  # absolute, on normalized pixels
STEPS = 100
# A whole epoch per request: on this 2-core machine, loaded by other jobs, one took over 300 s
# (--round-timeout's default, which the other requests keep).
EPOCH_TIMEOUT_S = 1800
PUBLISHED_DROPOUT = 0.5


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

    def ask_both(self, message: protocol.Request, timeout: float | None = None) -> dict[str, dict]:
        """One worker after the other: each runs --threads intra-op threads, and two such pools at once on the
        cores meant for one spin against each other (one epoch took minutes instead of about a minute here)."""
        return {worker.impl: worker.request(message, timeout=timeout) for worker in self.workers}

    @staticmethod
    def ask_at_once(workers, message: protocol.Request, timeout: float | None = None) -> dict[str, dict]:
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


def restart(worker: Worker, options: dict, impl: str | None = None) -> None:
    """A fresh trainer with these options in the same worker process, as a new process would build it: nothing of
    the last one is kept. `impl`: the implementation the options are (another of the worker's language)."""
    worker.info = worker.request(protocol.Start(options=options))
    worker.impl, worker.log_path = impl or worker.impl, options.get("log_path")


class KeptWorkers:
    """cpu workers kept for the module, per language, that each pair borrows with a fresh trainer: the worker is
    sent `start` again, which closes its trainer and builds a new one from the seed, as a new process would. The
    trainer a worker builds is wholly the `start` request's options (Implementation.trainer_options), so a worker
    that trained one implementation of its language is restarted as another (python-foreach after python);
    test_a_restarted_trainer_trains_as_a_new_process checks both. A pair then costs a trainer's build, not a
    process's start: a Python worker imports torch and torchvision in about 3 s of cpu here
    (docs/test-times/costs.md), and this module started 46 workers before kept workers, 18 before they were kept
    per language.

    `fresh` lends an idle worker (a new process where none is idle) and `give_back` returns it: two workers of one
    language can be out at once (a variant and its reference). A worker that died or refused is replaced by a new
    process on next use."""

    def __init__(self, settings, library: str | None):
        self.settings, self.library = settings, library
        self.idle: dict[str, list[Worker]] = {language: [] for language in registry.LANGUAGES}
        self.started: list[Worker] = []
        self.lock = threading.Lock()  # a pair borrows its two workers from two threads

    def new_process(self, impl: str, options: dict) -> Worker:
        language = registry.get(impl).language
        worker = Worker(impl, "cpu", options, self.settings.round_timeout, self.library if language == "cpp" else None)
        with self.lock:
            self.started.append(worker)
        return worker

    def fresh(self, impl: str, options: dict) -> Worker:
        with self.lock:
            idle = self.idle[registry.get(impl).language]
            worker = idle.pop() if idle else None
        if worker is not None and worker.alive():
            try:
                restart(worker, options, impl)
                return worker
            except (WorkerError, WorkerDied):  # refused or died: a new process instead
                pass
        if worker is not None:
            worker.stop()
        return self.new_process(impl, options)

    def give_back(self, worker: Worker) -> None:
        with self.lock:
            self.idle[registry.get(worker.impl).language].append(worker)

    def stop(self) -> None:
        """Each worker closes its trainer, then is killed rather than awaited: a Python worker's interpreter takes
        about 1 s of cpu here to tear torch down on its way out (docs/test-times/costs.md), which no test looks at."""
        for worker in self.started:
            with contextlib.suppress(WorkerError, WorkerDied):  # one that died is closed all the same
                if worker.alive():
                    worker.request(protocol.Stop(), timeout=30)
            worker.kill()
            worker.close()


@pytest.fixture(scope="module")
def kept_workers(settings, cpp_library):
    kept = KeptWorkers(settings, cpp_library)
    yield kept
    kept.stop()


@contextlib.contextmanager
def worker_pair(settings, library: str | None, logs, dropout: float, impls: tuple[str, str] = IMPLEMENTATIONS,
                workload: Workload = DEFAULT_WORKLOAD, device: str = "cpu", options: dict | None = None,
                kept: KeptWorkers | None = None):
    """options: more Trainer options for the second worker (a Python one). kept: new trainers in the module's
    workers (cpu only) instead of new processes."""
    if device not in settings.devices:
        pytest.skip(f"--device {','.join(settings.devices)}: this equivalence test compares implementations on {device}")
    if device == "cuda" and settings.cuda_reason:
        pytest.skip(settings.cuda_reason)
    borrowed = kept is not None and device == "cpu"

    def start(impl: str) -> Worker:
        language = registry.get(impl).language
        given = settings.worker_options(device, str(logs / f"{impl}.log"), impl=impl, workload=workload)
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


@pytest.fixture(scope="module")
def deterministic(settings, cpp_library, tmp_path_factory):
    """Dropout off, so that every result depends on weights and data alone. Only
    test_same_training_dropout_off trains this pair: it finds both loaders at batch 0 and both
    optimizers without momentum yet."""
    with worker_pair(settings, cpp_library, tmp_path_factory.mktemp("equivalence-deterministic"), 0.0) as pair:
        yield pair


@pytest.fixture
def fresh_pair(settings, cpp_library, kept_workers, tmp_path):
    """fresh_pair(dropout): new trainers; nothing has drawn from their generators but the model built at start."""
    with contextlib.ExitStack() as stack:
        yield lambda dropout: stack.enter_context(worker_pair(settings, cpp_library, tmp_path, dropout,
                                                              kept=kept_workers))


def get_params(worker: Worker) -> np.ndarray:
    return np.frombuffer(base64.b64decode(worker.request(protocol.GetParams())["data"]), dtype=np.float32)


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


def test_same_thread_count(deterministic, settings):
    threads = {worker.impl: worker.info["threads"] for worker in deterministic.workers}
    assert threads == {impl: settings.threads for impl in IMPLEMENTATIONS}, (
        f"intra-op threads in effect {threads}, --threads asks for {settings.threads} in both")


def test_same_network(deterministic):
    layouts = {impl: reply["layout"] for impl, reply in deterministic.ask_both(protocol.Layout()).items()}
    assert layouts["python"] == layouts["cpp"], (
        f"parameter names or shapes differ:\n  python {layouts['python']}\n  cpp    {layouts['cpp']}")
    counts = {impl: sum(int(np.prod(shape)) for _, shape in layout) for impl, layout in layouts.items()}
    buffers = {worker.impl: get_params(worker).size for worker in deterministic.workers}
    assert counts == buffers == {impl: PARAM_COUNT for impl in IMPLEMENTATIONS}, (
        f"parameter counts by layout {counts}, by buffer {buffers}; the Net has {PARAM_COUNT}")


def test_parameters_round_trip_bit_exact(deterministic):
    layout = deterministic.python.request(protocol.Layout())["layout"]
    # Seed 1 already gives C++ the Python weights, so a set_params that did nothing would pass the
    # round trip of Python's weights alone: load other values first, with a -0.0 and a subnormal.
    other = np.random.default_rng(1).standard_normal(PARAM_COUNT).astype(np.float32)
    other[:2] = -0.0, np.finfo(np.float32).smallest_subnormal
    for what, values in (("other weights", other), ("Python's initial weights", deterministic.initial)):
        set_params(deterministic.cpp, values)
        differences = bit_differences(layout, values, get_params(deterministic.cpp), ("sent", "returned"))
        assert not differences, f"{what} loaded into C++ came back changed: {differences}"

    for worker in deterministic.workers:
        with pytest.raises(WorkerError, match=f"holds {PARAM_COUNT - 1} floats, the model has {PARAM_COUNT}"):
            set_params(worker, deterministic.initial[:-1])


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
    assert {impl: reply["count"] for impl, reply in counts.items()} == {impl: workload.steps_per_epoch for impl in pair.names}
    last = workload.steps_per_epoch - 1
    checked = {0: workload.batch_size} | ({last // 2: workload.batch_size, last: workload.last_batch} if walk else {})
    for index, size in checked.items():
        batches = reference_batches(pair, workload, index)
        labels = {impl: np.array(batch["labels"]) for impl, batch in batches.items()}
        images = {impl: np.frombuffer(base64.b64decode(batch["images"]), dtype=np.float32).reshape(-1, 28, 28)
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


def test_same_batches(deterministic):
    assert_same_batches(deterministic)


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
        losses[worker.impl] = np.array(worker.request(protocol.TrainSteps(steps=steps))["losses"])
        weights[worker.impl] = get_params(worker)
        if worker.impl in IMPLEMENTATIONS:
            REFERENCE_TRAINING[key] = losses[worker.impl], weights[worker.impl]
    return losses, weights, pair.first.request(protocol.Layout())["layout"]


def assert_same_training(pair: Pair, what: str, steps: int = STEPS) -> None:
    """`steps` steps from the same weights: the same losses and the same weights after, to the bit."""
    a, b = pair.names
    losses, weights, layout = train_from_same_weights(pair, steps)
    problems = []
    differ = np.flatnonzero(losses[a].view(np.uint64) != losses[b].view(np.uint64))
    if differ.size:
        first = differ[0]
        problems.append(f"losses differ from step {first} on ({differ.size} of {steps} steps): step {first} "
                        f"{a} {losses[a][first]:.17g}, {b} {losses[b][first]:.17g}")
    differences = bit_differences(layout, weights[a], weights[b], pair.names)
    if differences:
        problems.append(f"after the last step: {differences}")
    assert not problems, f"{a} and {b}, {steps} steps from the same weights, {what}:\n  " + "\n  ".join(problems)


def test_same_training_dropout_off(deterministic):
    """From the same weights, STEPS steps in both languages end in the same losses and weights, to the bit. Why it
    takes 14-54 s here (load 4-6): STEPS steps in each language, one after the other (two intra-op pools at
    once spin against each other), the steps test_variant_same_training takes too; the pair is the module's own."""
    assert_same_training(deterministic, "dropout off")


def test_a_restarted_trainer_trains_as_a_new_process(kept_workers, settings, tmp_path):
    """What KeptWorkers relies on, in both languages: a new process trains 3 steps with the published dropout (its
    generator, loader and optimizer move on), is sent `start` as another implementation of its language (the first
    with a loader of its own, LOADER_VARIANTS) and trains 3 steps so, then is sent `start` as the first again: the
    new trainer repeats the new process's initial weights, losses and weights after, to the bit."""
    def options(impl: str) -> dict:
        return settings.worker_options("cpu", str(tmp_path / f"{impl}.log"), impl=impl) | {"dropout": PUBLISHED_DROPOUT}

    def three_steps(worker: Worker) -> tuple:
        initial = get_params(worker)
        losses = np.array(worker.request(protocol.TrainSteps(steps=3))["losses"])
        return initial, losses, get_params(worker)

    for impl in IMPLEMENTATIONS:
        language = registry.get(impl).language
        other = next(name for (of, _), name in LOADER_VARIANTS.items() if of == language)
        worker = kept_workers.new_process(impl, options(impl))
        try:
            new = three_steps(worker)
            restart(worker, options(other), other)
            three_steps(worker)
            restart(worker, options(impl), impl)
            restarted = three_steps(worker)
            layout = worker.request(protocol.Layout())["layout"]
        finally:
            kept_workers.give_back(worker)
        labels = ("new process", f"restarted after {other}")
        assert_bit_identical(layout, new[0], restarted[0], f"{impl}: initial weights", labels)
        assert new[1].tobytes() == restarted[1].tobytes(), (
            f"{impl}: 3 steps' losses, {labels[0]} {new[1].tolist()}, {labels[1]} {restarted[1].tolist()}")
        assert_bit_identical(layout, new[2], restarted[2], f"{impl}: weights after 3 steps", labels)


def test_same_losses_with_dropout(fresh_pair):
    """The graph that is timed: the published dropout, masks and all: two fresh trainers, so that both generators
    start at the seed, and STEPS steps in each, one after the other."""
    assert_same_training(fresh_pair(PUBLISHED_DROPOUT), f"dropout {PUBLISHED_DROPOUT}")


def one_epoch_run(item, folder, library):
    """test_same_one_epoch_run's work, started as soon as the library is built (tests/beside.py): a minute of
    training in two fresh workers that needs nothing from the tests before it."""
    def run() -> None:
        with worker_pair(item.config.phasebench, library, folder, PUBLISHED_DROPOUT) as pair:
            layout = pair.python.request(protocol.Layout())["layout"]
            # train() starts the published run by building a new model from the generator, so set_params
            # cannot choose its weights. Seed 1 draws the same weights in both, and in fresh workers both
            # generators are in step: check it on the model built at start and on one train() builds.
            assert_bit_identical(layout, pair.initial, get_params(pair.cpp), "seed-1 initial weights")
            pair.ask_both(protocol.Train(epochs=0, synchronize=True))
            assert_bit_identical(layout, get_params(pair.python), get_params(pair.cpp),
                                 "weights train() starts from")

            runs = pair.ask_both(protocol.Train(epochs=1, synchronize=True), timeout=EPOCH_TIMEOUT_S)
            steps = {impl: run["steps"] for impl, run in runs.items()}
            assert steps == {impl: EPOCH_BATCHES for impl in IMPLEMENTATIONS}, f"steps in one epoch: {steps}"
            assert_bit_identical(layout, get_params(pair.python), get_params(pair.cpp),
                                 f"weights after one epoch with dropout {PUBLISHED_DROPOUT}")
            results = pair.ask_both(protocol.Evaluate())
            accuracy = {impl: result["accuracy"] for impl, result in results.items()}
            assert accuracy["python"] == accuracy["cpp"], (
                f"test accuracy after one epoch from the same weights: python {accuracy['python']:.2f} %, "
                f"cpp {accuracy['cpp']:.2f} %")

    return run


@pytest.mark.beside.with_args(one_epoch_run, cost_s=35)  # with_args: a lone callable would be marked, not passed
def test_same_one_epoch_run(started_beside):
    """The published run itself, a whole epoch in both languages, ends in bit-identical weights and accuracy.
    Why it cannot be cheaper (about 30 s here, mostly beside other tests: tests/beside.py): the short runs of the
    other tests stop before the epoch's short last batch, its log lines and the evaluation; only a whole epoch
    proves that train() walks the epoch as the published programs do, to the bit."""
    started_beside.result(timeout=EPOCH_TIMEOUT_S)


# -- every other implementation against its language's published one ---------------------------------

# Those that train a single model; python-vmap, which trains ensembles only, is compared below.
VARIANTS = [impl.name for impl in registry.REGISTRY if impl.name not in IMPLEMENTATIONS and impl.single_model]
# The variants that execute the step as published (eagerly): the same kernels, so the same bits.
EAGER_VARIANTS = [name for name in VARIANTS if registry.get(name).step == "eager"]


@pytest.fixture
def variant_pair(settings, cpp_library, kept_workers, tmp_path):
    """variant_pair(variant, dropout, workload): the variant and its language's published implementation,
    fresh trainers in the module's workers."""
    with contextlib.ExitStack() as stack:
        def make(variant: str, dropout: float, workload: Workload = DEFAULT_WORKLOAD) -> Pair:
            reference = registry.language_reference(registry.get(variant)).name
            logs = tmp_path / f"{variant}-{dropout}-{workload.id or 'default'}"
            logs.mkdir()
            return stack.enter_context(worker_pair(settings, cpp_library, logs, dropout, (reference, variant), workload,
                                                   kept=kept_workers))
        yield make


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


@pytest.mark.parametrize("variant", LOADER_VARIANTS.values())
def test_variant_same_batches(variant_pair, variant):
    """The same batches as its language's published pipeline: images to the bit, labels exact."""
    assert_same_batches(variant_pair(variant, 0.0), tolerance=0.0)


def test_every_loader_is_compared():
    """Every loader a variant uses, but its language's published one, is in LOADER_VARIANTS: a new loader cannot
    go unchecked."""
    used = {(impl.language, impl.loader) for impl in registry.REGISTRY}
    published = {(impl.language, impl.loader) for impl in map(registry.get, IMPLEMENTATIONS)}
    assert used - published <= set(LOADER_VARIANTS), f"loaders no variant test compares: {used - published - set(LOADER_VARIANTS)}"


# python-tensor's loader (ScaledMNIST: per index (image - mean) / std with tensors made once) against the published
# pipeline (torchvision's ToTensor and Normalize per image), in this process, so that it reads more than a worker's
# three batches: the first batch of an epoch of 64, the middle one, the last, and every 97th image.
TENSOR_CHECKED_INDEXES = sorted({*range(64), *range(29952, 30016), *range(59968, 60000), *range(0, 60000, 97)})


def test_tensor_loader_same_items(settings):
    """python-tensor's images to the bit (compared as int32 bit patterns, so -0.0 is not 0.0) and its labels exact,
    item by item and collated by the same DataLoader; and the comparison is sharp: the same dataset with a std of
    0.3082 instead of 0.3081 differs."""
    import torch

    from phasebench.train import loaders

    published, tensor = loaders.mnist(settings.source.root, True), loaders.ScaledMNIST(settings.source.root)
    expected = {index: published[index] for index in TENSOR_CHECKED_INDEXES}

    def differing(dataset) -> list[int]:
        return [index for index, (image, label) in expected.items()
                if not (torch.equal(dataset[index][0].view(torch.int32), image.view(torch.int32))
                        and dataset[index][1] == label)]

    assert len(tensor) == len(published)
    assert tensor[0][0].dtype == torch.float32 and tensor[0][0].shape == (1, 28, 28)
    wrong = differing(tensor)
    assert not wrong, f"python-tensor's items differ from the published pipeline's at {len(wrong)} of " \
                      f"{len(expected)} indexes, first {wrong[:5]}"
    first = [next(iter(loaders.data_loader(dataset, 64))) for dataset in (published, tensor)]
    assert torch.equal(first[0][0].view(torch.int32), first[1][0].view(torch.int32)) and \
        torch.equal(first[0][1], first[1][1]), "the first batch, collated, differs"

    tensor.std = torch.tensor(0.3082, dtype=torch.float32).view(1, 1, 1)
    assert len(differing(tensor)) > len(expected) // 2, "a std of 0.3082 went unnoticed: the comparison is not sharp"


@pytest.mark.parametrize("variant", EAGER_VARIANTS)
def test_variant_same_training(variant_pair, variant):
    """From the same weights, the same losses and the same weights after STEPS steps, to the bit, with the
    published dropout: the variant changes how the work is done, not what is computed, masks included. (With
    dropout off the same steps skip only the masks: a run that matches with them matches without.) STEPS steps,
    the fewest that reach an update with momentum and a log line; the reference's come from REFERENCE_TRAINING
    once it trained so."""
    assert_same_training(variant_pair(variant, PUBLISHED_DROPOUT), f"dropout {PUBLISHED_DROPOUT}")


@pytest.mark.parametrize("impls", [IMPLEMENTATIONS, ("python-batched", "cpp-batched")], ids="-vs-".join)
def test_same_training_on_another_workload(settings, cpp_library, kept_workers, tmp_path, impls):
    """The workload reaches both languages alike: on a wider Net with batches of 100, the same network, the same
    number of batches and the same first batch, and the same training, to the bit. (The walk through an epoch, to
    its middle and last batch, is the published workload's, test_same_batches: the batch size changes only where
    the loaders cut; 20 steps of the same losses need the first 20 batches alike.)"""
    with worker_pair(settings, cpp_library, tmp_path, PUBLISHED_DROPOUT, impls, OTHER_WORKLOAD,
                     kept=kept_workers) as pair:
        layouts = {impl: reply["layout"] for impl, reply in pair.ask_both(protocol.Layout()).items()}
        assert layouts[impls[0]] == layouts[impls[1]], f"parameter names or shapes differ: {layouts}"
        assert pair.initial.size == OTHER_WORKLOAD.parameter_count, (
            f"{pair.initial.size} parameters at {OTHER_WORKLOAD.label}, expected {OTHER_WORKLOAD.parameter_count}")
        assert_same_batches(pair, OTHER_WORKLOAD, walk=False)
        assert_same_training(pair, f"{OTHER_WORKLOAD.label}, dropout {PUBLISHED_DROPOUT}", steps=20)


# -- ensembles (docs/gpu.md#concurrent-jobs-and-ensembles) ----------------------------------------------------

ENSEMBLE_MODELS = 3  # member 1 starts from the published model's seed-1 weights, members 2 and 3 from seeds 2, 3
ENSEMBLE_STEPS = 10
# python-vmap's member k against model k trained alone, dropout off. vmap runs the M members' conv1 as one
# convolution with M times the output channels, conv2 as one grouped convolution and the linear layers as
# batched matrix products: the same products, summed in another order, so float32 results differ in their last
# bits. Measured on this 2-core cpu (fashion-mnist, M = 16, one and two threads, the same figures):
# - after one step from the same weights the losses differed by at most 2.4e-7 (one ulp of a loss near 2.3)
#   and every weight by at most 1.5e-8 (one ulp of the largest weights, about 0.2): the first-step bounds
#   below leave a margin of 4x and 7x;
# - after that, a max-pool or ReLU whose inputs nearly tie can come out the other way in one of them, which
#   sends one gradient element elsewhere (member 1 jumped from 7e-9 to 9e-7 at step 2), and training amplifies
#   the difference, about 2.5x every 5 steps: after 10 steps the weights differed by up to 1.7e-5 and the
#   losses of any step by up to 4.8e-6; after 20 steps 8.0e-5, after 50 4.3e-4, after 100 3.8e-3. The 10-step
#   bound leaves a margin of 11x, and stays far below what tells two members apart (checked: more than 100x).
VMAP_FIRST_STEP_LOSS_TOLERANCE = 1e-6
VMAP_FIRST_STEP_WEIGHT_TOLERANCE = 1e-7
VMAP_TOLERANCE = 2e-4  # every step's loss and every weight after ENSEMBLE_STEPS steps
MEMBERS_APART = 100  # two members' weights differ by more than this many times VMAP_TOLERANCE


@dataclass
class Trained:
    """What one way of training produced, per member (a model trained alone is one member)."""

    initial: list[np.ndarray]  # the weights before the first step
    first: list[np.ndarray]  # after the first step
    last: list[np.ndarray]  # after ENSEMBLE_STEPS steps
    losses: np.ndarray  # [step, member]


def ensemble_params(worker: Worker, models: int) -> list[np.ndarray]:
    return [np.frombuffer(base64.b64decode(worker.request(protocol.EnsembleParams(member=k))["data"]),
                          dtype=np.float32) for k in range(models)]


def train_ensemble(worker: Worker, options: dict, models: int = ENSEMBLE_MODELS, steps: int = ENSEMBLE_STEPS) -> Trained:
    restart(worker, options)
    worker.request(protocol.EnsembleStart(models=models))
    initial = ensemble_params(worker, models)
    losses = [worker.request(protocol.EnsembleStep())["losses"]]
    first = ensemble_params(worker, models)
    losses += [worker.request(protocol.EnsembleStep())["losses"] for _ in range(steps - 1)]
    return Trained(initial, first, ensemble_params(worker, models), np.array(losses))


def train_alone(worker: Worker, options: dict, steps: int = ENSEMBLE_STEPS) -> Trained:
    restart(worker, options)
    initial = get_params(worker)
    losses = worker.request(protocol.TrainSteps(steps=1))["losses"]
    first = get_params(worker)
    losses += worker.request(protocol.TrainSteps(steps=steps - 1))["losses"]
    return Trained([initial], [first], [get_params(worker)], np.array(losses)[:, None])


@pytest.fixture(scope="module")
def ensembles(settings, kept_workers, tmp_path_factory) -> tuple[list, dict[str, Trained]]:
    """(the Net's layout, {way: Trained}): models 1..ENSEMBLE_MODELS trained alone, one fresh trainer each
    ("alone"), and as ensembles with dropout off ("python", "python-vmap", "cpp") and with the published dropout
    ("python-dropout", "cpp-dropout"), all from batch 0 of the published workload on cpu.

    The module's Python worker and C++ worker, each restarted with a fresh trainer for every run; the batches come
    from the batched loader, bit-identical to the published ones (test_variant_same_batches) and cheaper: an
    ensemble step's batch is loaded before its clock, so the loader does not change what is compared. Why it
    takes 13-34 s here (load 4-6): every way of training above, each from a fresh trainer, ENSEMBLE_STEPS steps;
    the module's ensemble tests share it, so each way trains once."""
    if "cpu" not in settings.devices:
        pytest.skip(f"--device {','.join(settings.devices)}: the equivalence tests compare implementations on cpu")
    logs = tmp_path_factory.mktemp("equivalence-ensembles")
    options = {impl: settings.worker_options("cpu", str(logs / f"{impl}.log"), impl=impl)
               | {"dropout": 0.0, "loader": "batched"} for impl in ("python", "python-vmap", "cpp")}
    runs = {}
    workers = {impl: kept_workers.fresh(impl, options[impl]) for impl in ("python", "cpp")}
    workers["python-vmap"] = workers["python"]  # restarted with python-vmap's options
    layout = workers["python"].request(protocol.Layout())["layout"]
    alone = [train_alone(workers["python"], options["python"] | {"seed": seed})
             for seed in range(1, ENSEMBLE_MODELS + 1)]
    runs["alone"] = Trained(*([member for run in alone for member in getattr(run, field)]
                              for field in ("initial", "first", "last")),
                            np.concatenate([run.losses for run in alone], axis=1))
    for impl in options:
        runs[impl] = train_ensemble(workers[impl], options[impl])
    for impl in ("python", "cpp"):
        runs[f"{impl}-dropout"] = train_ensemble(workers[impl], options[impl] | {"dropout": PUBLISHED_DROPOUT})
        kept_workers.give_back(workers[impl])
    return layout, runs


def loss_differences(a: np.ndarray, b: np.ndarray, labels) -> str:
    """'' when every step's losses are bit-identical, else the first that differs."""
    differ = np.argwhere(a.view(np.uint64) != b.view(np.uint64))
    if not differ.size:
        return ""
    step, member = differ[0]
    return (f"losses differ in {len(differ)} of {a.size} (step, member) pairs, first at step {step} member {member}: "
            f"{labels[0]} {a[step, member]:.17g}, {labels[1]} {b[step, member]:.17g}")


def member_differences(layout, a: Trained, b: Trained, labels, fields=("first", "last")) -> list[str]:
    problems = []
    for field in fields:
        for k, (x, y) in enumerate(zip(getattr(a, field), getattr(b, field))):
            differences = bit_differences(layout, x, y, labels)
            if differences:
                problems.append(f"member {k} ({field}): {differences}")
    return problems


def test_ensemble_members_start_from_their_seeds(ensembles):
    """Member k of every ensemble starts from the weights a model alone draws with seed k."""
    layout, runs = ensembles
    problems = []
    for way in ("python", "python-vmap", "cpp", "python-dropout", "cpp-dropout"):
        problems += [f"{way} {problem}" for problem in
                     member_differences(layout, runs["alone"], runs[way], ("alone", way), fields=("initial",))]
    assert not problems, "\n".join(problems)


def test_ensemble_loop_members_train_as_models_alone(ensembles):
    """Dropout off: the Python loop's member k is model k trained alone, to the bit (the same kernels in the same
    order; nothing of one member reaches another)."""
    layout, runs = ensembles
    problems = member_differences(layout, runs["alone"], runs["python"], ("alone", "python loop"))
    problems += [loss_differences(runs["alone"].losses, runs["python"].losses, ("alone", "python loop"))]
    problems = [problem for problem in problems if problem]
    assert not problems, f"{ENSEMBLE_STEPS} steps, dropout off:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("dropout", ["", "-dropout"], ids=["dropout-off", "dropout-on"])
def test_cpp_ensemble_trains_as_python_ensemble(ensembles, dropout):
    """The C++ loop's members train as the Python loop's, to the bit: the same kernels, and with dropout the same
    masks, drawn member after member from the same generator."""
    layout, runs = ensembles
    python, cpp = runs[f"python{dropout}"], runs[f"cpp{dropout}"]
    problems = member_differences(layout, python, cpp, ("python", "cpp"))
    problems += [loss_differences(python.losses, cpp.losses, ("python", "cpp"))]
    problems = [problem for problem in problems if problem]
    assert not problems, f"{ENSEMBLE_STEPS} steps{dropout.replace('-', ', ')}:\n  " + "\n  ".join(problems)


def test_vmap_ensemble_members_match_models_alone(ensembles):
    """Dropout off: python-vmap's member k stays within the tolerances above of model k trained alone, and
    those tolerances are far smaller than the distance between two members."""
    layout, runs = ensembles
    alone, vmap = runs["alone"], runs["python-vmap"]
    problems = []

    def within(what: str, x: np.ndarray, y: np.ndarray, tolerance: float, where) -> None:
        difference = np.abs(x.astype(np.float64) - y.astype(np.float64))
        if not difference.max() <= tolerance:
            problems.append(f"{what}: up to {difference.max():.3g} apart (tolerance {tolerance:g}) {where(difference)}")

    def weight_at(difference):
        index = int(difference.argmax())
        named = parameters(layout, np.arange(difference.size))
        name = next(name for name, indices in named.items() if indices[0] <= index <= indices[-1])
        return f"at {name}[{index - named[name][0]}]"

    def loss_at(difference):
        step, member = np.unravel_index(difference.argmax(), difference.shape)
        return f"at step {step}, member {member}"

    within("first step's losses", alone.losses[:1], vmap.losses[:1], VMAP_FIRST_STEP_LOSS_TOLERANCE, loss_at)
    within(f"{ENSEMBLE_STEPS} steps' losses", alone.losses, vmap.losses, VMAP_TOLERANCE, loss_at)
    for k in range(ENSEMBLE_MODELS):
        within(f"member {k} after the first step", alone.first[k], vmap.first[k], VMAP_FIRST_STEP_WEIGHT_TOLERANCE,
               weight_at)
        within(f"member {k} after {ENSEMBLE_STEPS} steps", alone.last[k], vmap.last[k], VMAP_TOLERANCE, weight_at)
    apart = min(np.abs(alone.last[i] - alone.last[j]).max()
                for i in range(ENSEMBLE_MODELS) for j in range(i + 1, ENSEMBLE_MODELS))
    if not apart > MEMBERS_APART * VMAP_TOLERANCE:
        problems.append(f"two models trained alone are only {apart:.3g} apart: the tolerance {VMAP_TOLERANCE:g} "
                        f"could not tell members apart")
    assert not problems, "python-vmap against models trained alone, dropout off:\n  " + "\n  ".join(problems)


# -- CUDA graphs and torch.compile against eager (docs/gpu.md#cuda-graphs-and-torchcompile) ---------------------

# Where the kernels differ, the same training can differ by float32 rounding alone: inductor fuses relu, max-pool,
# log-softmax, nll_loss and their backward into loops of its own (its own exp and log, its own summation order
# for the loss and the bias gradients), each a few ulp from ATen's; on cuda, cuDNN's weight-gradient kernels may
# add in any order (atomics), so two eager runs can differ too. Such differences start at an ulp or two (a loss
# near 2 has ulps of 2.4e-7) and stay there until one of them tips a max-pool's choice between two near-equal
# values or a relu at zero; from then on the two trainings drift apart, faster each step. Measured on this cpu,
# python-compile against python with the published dropout: the losses agreed within 2.4e-7 for the first 60
# steps, then differed by up to 9.5e-7, 1.2e-5, 6e-5 and 5.1e-4 over the next four tens of steps, and the
# weights by 2.9e-4 after 100. So the test is two-fold. Early, where nothing can have tipped yet, every loss must
# agree within a few ulp: another dropout mask, a skipped or doubled update or a wrong learning rate moves a loss
# by 1e-4 or more at once (the losses fall by about 3e-3 a step here). After 100 steps, losses and weights must
# stay within 4x of the drift measured above: a bound on divergence, not a proof of sameness.
EARLY_STEPS, EARLY_TOLERANCE = 50, 1e-6
DRIFT_TOLERANCE = 2e-3


def assert_close_training(pair: Pair, what: str, steps: int = STEPS) -> None:
    """`steps` steps from the same weights: the first EARLY_STEPS losses within EARLY_TOLERANCE, every loss and
    every parameter after them within DRIFT_TOLERANCE; the failure names the largest gaps, and the log says how
    close they came (and whether to the bit)."""
    a, b = pair.names
    losses, weights, layout = train_from_same_weights(pair, steps)
    loss_gaps = np.abs(losses[a] - losses[b])
    named = {impl: parameters(layout, weights[impl]) for impl in pair.names}
    param_gaps = {name: float(np.abs(named[a][name] - named[b][name]).max()) for name in named[a]}
    worst = max(param_gaps, key=param_gaps.get)
    print(f"{a} vs {b}, {what}: loss gaps, largest per ten steps "
          f"{[float(f'{gap:.2g}') for gap in loss_gaps.reshape(-1, 10).max(1)] if steps % 10 == 0 else loss_gaps.max()}; "
          f"largest parameter gap {param_gaps[worst]:.3g} ({worst}); bit-identical: "
          f"{not bit_differences(layout, weights[a], weights[b])}")
    problems = []
    early = loss_gaps[:EARLY_STEPS]
    if not early.max() <= EARLY_TOLERANCE:
        first = int(np.argmax(early > EARLY_TOLERANCE))
        problems.append(f"losses of the first {EARLY_STEPS} steps differ by up to {early.max():.3g} (tolerance "
                        f"{EARLY_TOLERANCE:g}), first at step {first}: {a} {losses[a][first]:.9g}, "
                        f"{b} {losses[b][first]:.9g}")
    if not loss_gaps.max() <= DRIFT_TOLERANCE:
        problems.append(f"losses drift apart by up to {loss_gaps.max():.3g} (tolerance {DRIFT_TOLERANCE:g}), at step "
                        f"{int(loss_gaps.argmax())}")
    beyond = {name: gap for name, gap in param_gaps.items() if not gap <= DRIFT_TOLERANCE}
    if beyond:
        problems.append(f"after the last step, parameters differ by more than {DRIFT_TOLERANCE:g}: "
                        + ", ".join(f"{name} {gap:.3g}" for name, gap in beyond.items()))
    assert not problems, f"{a} and {b}, {steps} steps from the same weights, {what}:\n  " + "\n  ".join(problems)


COMPILED = [impl.name for impl in registry.REGISTRY if impl.step == "compile"]


def compiled_training(item, folder, library):
    """test_compiled_same_training's work, started as soon as the library is built (tests/beside.py): a cold
    compile and STEPS steps in two fresh workers, which need nothing from the tests before them."""
    variant, dropout = item.callspec.params["variant"], item.callspec.params["dropout"]
    settings = item.config.phasebench

    def run() -> None:
        if dropout == 0.0 and variant not in settings.impls:
            pytest.skip(f"a second cold compile is beyond the test command's budget: run with --impl {variant}")
        reference = registry.language_reference(registry.get(variant)).name
        with worker_pair(settings, None, folder, dropout, (reference, variant),
                         options={"fallback_random": True}) as pair:
            assert_close_training(pair, f"dropout {dropout}, fallback_random")

    return run


@pytest.mark.parametrize("variant", COMPILED)
@pytest.mark.parametrize("dropout", [PUBLISHED_DROPOUT, 0.0], ids=["dropout-on", "dropout-off"])
@pytest.mark.beside.with_args(compiled_training, cost_s=35)
def test_compiled_same_training(started_beside, variant, dropout):
    """The compiled model trains as eager Python, within the rounding of the kernels inductor fuses (above). With
    torch._inductor.config.fallback_random the compiled code draws eager's dropout masks, so the published
    dropout is compared too. One cold compile per test: dropout-on, the graph that is timed, runs in the test
    command; dropout-off runs where --impl names the variant (a second compile takes 70-110 s here). Why it
    cannot be cheaper (about 30 s here, mostly beside other tests: tests/beside.py): the compile phase must be
    cold (a cache of its own, docs/gpu.md), and only a compile proves the compiled step trains as eager does."""
    started_beside.result(timeout=EPOCH_TIMEOUT_S)


WHOLE_STEP_VARIANTS = [impl.name for impl in registry.REGISTRY if impl.step != "eager"]


@pytest.mark.parametrize("variant", WHOLE_STEP_VARIANTS)
def test_same_training_on_cuda(request, settings, tmp_path, variant):
    """On cuda, with dropout off: CUDA graphs (the first steps eager warm-up, then replays of the captured step)
    and the compiled model train as eager in their language, within the rounding tolerance. With dropout on a
    captured graph draws its own masks: it advances the generator's Philox offset by its own rule on each
    replay, not by the eager kernels' amounts, so the masks differ from eager's by design (docs/method.md#both-implementations-train-the-same-model). The
    tolerances are the compiled variant's (above): this test has not yet run on a GPU."""
    variant_impl = registry.get(variant)
    reference = registry.language_reference(variant_impl).name
    library = request.getfixturevalue("cpp_library") if variant_impl.language == "cpp" else None
    options = {"fallback_random": True} if variant_impl.step.startswith("compile") else None
    with worker_pair(settings, library, tmp_path, 0.0, (reference, variant), device="cuda", options=options) as pair:
        assert_close_training(pair, "dropout off, on cuda")

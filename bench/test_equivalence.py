"""Both implementations train the same model (README, "Fairness / equivalence").

A Python-vs-C++ time difference means something only if both sides compute the same thing, so
these tests put a Python and a C++ worker side by side on cpu and compare, request by request:
the threads, the network, the weights, the data, 100 training steps and a one-epoch run. Every
failure names what differs and by how much. `pytest -k equivalence` runs just these.

What they show: seed 1 draws bit-identical initial weights in both; both draw their dropout masks
from the same seeded generator with the same operations (Python's DataLoader has a generator of its
own, so a new epoch draws nothing from the global one); and so the two train bit-identically, with
dropout off and with the published dropout on: the same losses, the same weights after 100 steps and
after a whole epoch, and the same test accuracy.
"""

from __future__ import annotations

import base64
import contextlib
from dataclasses import dataclass

import numpy as np
import pytest

from bench.client import Worker, WorkerError
from conftest import IMPLEMENTATIONS

PARAM_COUNT = 21840  # the Net's parameters
EPOCH_BATCHES = 938  # 60,000 images in batches of 64, the last of 32
BATCH_SIZES = {0: 64, EPOCH_BATCHES // 2: 64, EPOCH_BATCHES - 1: 32}  # first, middle and last batch
IMAGE_TOLERANCE = 1e-6  # absolute, on normalized pixels
STEPS = 100
PUBLISHED_DROPOUT = 0.5


@dataclass
class Pair:
    """A Python and a C++ worker on cpu, started with the same options."""

    python: Worker
    cpp: Worker
    initial: np.ndarray  # the Python model's seed-1 weights, read before any test changes them

    @property
    def workers(self) -> tuple[Worker, Worker]:
        return self.python, self.cpp

    def ask_both(self, message: dict) -> dict[str, dict]:
        return {worker.impl: worker.request(message) for worker in self.workers}


@contextlib.contextmanager
def worker_pair(settings, library: str, logs, dropout: float):
    if set(IMPLEMENTATIONS) - set(settings.impls) or "cpu" not in settings.devices:
        pytest.skip(f"--impl {','.join(settings.impls)} --device {','.join(settings.devices)}: "
                    f"the equivalence tests compare python and cpp on cpu")
    with contextlib.ExitStack() as stack:
        workers = {}
        for impl in IMPLEMENTATIONS:
            options = settings.worker_options("cpu", str(logs / f"{impl}.log")) | {"dropout": dropout}
            workers[impl] = Worker(impl, "cpu", options, settings.round_timeout, library if impl == "cpp" else None)
            stack.callback(workers[impl].stop)
        yield Pair(workers["python"], workers["cpp"], get_params(workers["python"]))


@pytest.fixture(scope="module")
def deterministic(settings, cpp_library, tmp_path_factory):
    """Dropout off, so that every result depends on weights and data alone. Only
    test_same_training_dropout_off trains this pair: it finds both loaders at batch 0 and both
    optimizers without momentum yet."""
    with worker_pair(settings, cpp_library, tmp_path_factory.mktemp("equivalence-deterministic"), 0.0) as pair:
        yield pair


@pytest.fixture
def fresh_pair(settings, cpp_library, tmp_path):
    """fresh_pair(dropout): new workers; nothing has drawn from their generators but the model built at start."""
    with contextlib.ExitStack() as stack:
        yield lambda dropout: stack.enter_context(worker_pair(settings, cpp_library, tmp_path, dropout))


def get_params(worker: Worker) -> np.ndarray:
    return np.frombuffer(base64.b64decode(worker.request({"cmd": "get_params"})["data"]), dtype=np.float32)


def set_params(worker: Worker, values: np.ndarray) -> None:
    worker.request({"cmd": "set_params", "data": base64.b64encode(values.astype(np.float32).tobytes()).decode()})


def parameters(layout, flat: np.ndarray) -> dict[str, np.ndarray]:
    """The flat buffer cut into named parameters, in layout order."""
    named, offset = {}, 0
    for name, shape in layout:
        size = int(np.prod(shape))
        named[name] = flat[offset:offset + size]
        offset += size
    return named


def bit_differences(layout, a: np.ndarray, b: np.ndarray, labels=("python", "cpp")) -> str:
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


def assert_bit_identical(layout, python: np.ndarray, cpp: np.ndarray, what: str) -> None:
    differences = bit_differences(layout, python, cpp)
    assert not differences, f"{what} differ: {differences}"


def test_same_thread_count(deterministic, settings):
    threads = {worker.impl: worker.info["threads"] for worker in deterministic.workers}
    assert threads == {impl: settings.threads for impl in IMPLEMENTATIONS}, (
        f"intra-op threads in effect {threads}, --threads asks for {settings.threads} in both")


def test_same_network(deterministic):
    layouts = {impl: reply["layout"] for impl, reply in deterministic.ask_both({"cmd": "layout"}).items()}
    assert layouts["python"] == layouts["cpp"], (
        f"parameter names or shapes differ:\n  python {layouts['python']}\n  cpp    {layouts['cpp']}")
    counts = {impl: sum(int(np.prod(shape)) for _, shape in layout) for impl, layout in layouts.items()}
    buffers = {worker.impl: get_params(worker).size for worker in deterministic.workers}
    assert counts == buffers == {impl: PARAM_COUNT for impl in IMPLEMENTATIONS}, (
        f"parameter counts by layout {counts}, by buffer {buffers}; the Net has {PARAM_COUNT}")


def test_parameters_round_trip_bit_exact(deterministic):
    layout = deterministic.python.request({"cmd": "layout"})["layout"]
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


def test_same_batches(deterministic):
    counts = deterministic.ask_both({"cmd": "epoch_batches"})
    assert {impl: reply["count"] for impl, reply in counts.items()} == {impl: EPOCH_BATCHES for impl in IMPLEMENTATIONS}
    for index, size in BATCH_SIZES.items():
        batches = deterministic.ask_both({"cmd": "batch", "index": index})
        labels = {impl: np.array(batch["labels"]) for impl, batch in batches.items()}
        images = {impl: np.frombuffer(base64.b64decode(batch["images"]), dtype=np.float32).reshape(-1, 28, 28)
                  for impl, batch in batches.items()}
        sizes = {impl: (len(labels[impl]), len(images[impl])) for impl in IMPLEMENTATIONS}
        assert sizes == {impl: (size, size) for impl in IMPLEMENTATIONS}, (
            f"batch {index}: (labels, images) {sizes}, expected {size} of each")
        wrong = np.flatnonzero(labels["python"] != labels["cpp"])
        assert not wrong.size, (f"batch {index}: labels differ at {wrong.tolist()}: "
                                f"python {labels['python'][wrong].tolist()}, cpp {labels['cpp'][wrong].tolist()}")
        difference = np.abs(images["python"] - images["cpp"])
        worst = np.unravel_index(difference.argmax(), difference.shape)
        assert difference.max() <= IMAGE_TOLERANCE, (
            f"batch {index}: images differ by up to {difference.max():.3g} (tolerance {IMAGE_TOLERANCE:g}), "
            f"worst at image {worst[0]} pixel ({worst[1]}, {worst[2]})")


def assert_same_training(pair: Pair, what: str) -> None:
    """STEPS steps from the same weights: the same losses and the same weights after, to the bit."""
    for worker in pair.workers:
        set_params(worker, pair.initial)
    losses = {impl: np.array(reply["losses"])
              for impl, reply in pair.ask_both({"cmd": "train_steps", "steps": STEPS}).items()}
    layout = pair.python.request({"cmd": "layout"})["layout"]
    problems = []
    differ = np.flatnonzero(losses["python"].view(np.uint64) != losses["cpp"].view(np.uint64))
    if differ.size:
        first = differ[0]
        problems.append(f"losses differ from step {first} on ({differ.size} of {STEPS} steps): step {first} "
                        f"python {losses['python'][first]:.17g}, cpp {losses['cpp'][first]:.17g}")
    differences = bit_differences(layout, get_params(pair.python), get_params(pair.cpp))
    if differences:
        problems.append(f"after the last step: {differences}")
    assert not problems, f"{STEPS} steps from the same weights, {what}:\n  " + "\n  ".join(problems)


def test_same_training_dropout_off(deterministic):
    assert_same_training(deterministic, "dropout off")


def test_same_losses_with_dropout(fresh_pair):
    """The graph that is timed: the published dropout, masks and all."""
    assert_same_training(fresh_pair(PUBLISHED_DROPOUT), f"dropout {PUBLISHED_DROPOUT}")


def test_same_one_epoch_run(fresh_pair):
    pair = fresh_pair(PUBLISHED_DROPOUT)
    layout = pair.python.request({"cmd": "layout"})["layout"]
    # train() starts the published run by building a new model from the generator, so set_params
    # cannot choose its weights. Seed 1 draws the same weights in both, and in fresh workers both
    # generators are in step: check it on the model built at start and on one train() builds.
    assert_bit_identical(layout, pair.initial, get_params(pair.cpp), "seed-1 initial weights")
    pair.ask_both({"cmd": "train", "epochs": 0, "synchronize": True})
    assert_bit_identical(layout, get_params(pair.python), get_params(pair.cpp),
                         "weights train() starts from")

    runs = pair.ask_both({"cmd": "train", "epochs": 1, "synchronize": True})
    steps = {impl: run["steps"] for impl, run in runs.items()}
    assert steps == {impl: EPOCH_BATCHES for impl in IMPLEMENTATIONS}, f"steps in one epoch: {steps}"
    assert_bit_identical(layout, get_params(pair.python), get_params(pair.cpp),
                         f"weights after one epoch with dropout {PUBLISHED_DROPOUT}")
    results = pair.ask_both({"cmd": "evaluate"})
    accuracy = {impl: result["accuracy"] for impl, result in results.items()}
    assert accuracy["python"] == accuracy["cpp"], (
        f"test accuracy after one epoch from the same weights: python {accuracy['python']:.2f} %, "
        f"cpp {accuracy['cpp']:.2f} %")

"""Both implementations train the same model (README, "Fairness / equivalence").

A Python-vs-C++ time difference means something only if both sides compute the same thing, so
these tests put a Python and a C++ worker side by side on cpu and compare, request by request:
the threads, the network, the weights, the data, 100 training steps and a one-epoch run. Every
failure names what differs and by how much. `pytest -k equivalence` runs just these.

What they found: seed 1 draws bit-identical initial weights in both, and with dropout off the two
train bit-identically (the tolerances below are the issue's, not what is needed). With dropout on
the masks differ from the first step (test_dropout_masks_differ), and one epoch's test accuracy
then varies by points between the two, as between any two masks; so the one-epoch run is compared
with dropout off.
"""

from __future__ import annotations

import base64
import contextlib
from dataclasses import dataclass

import numpy as np
import pytest

from bench.client import Worker, WorkerError
from conftest import IMPLEMENTATIONS

PARAM_COUNT = 21840  # the Net's parameters (SPEC §1)
EPOCH_BATCHES = 938  # 60,000 images in batches of 64, the last of 32
BATCH_SIZES = {0: 64, EPOCH_BATCHES // 2: 64, EPOCH_BATCHES - 1: 32}  # first, middle and last batch
IMAGE_TOLERANCE = 1e-6  # absolute, on normalized pixels
STEPS = 100
RELATIVE_TOLERANCE = 1e-4  # losses and parameters after STEPS steps
ACCURACY_POINTS = 0.5  # test accuracy after one epoch, in percentage points
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


def test_same_training_dropout_off(deterministic):
    for worker in deterministic.workers:
        set_params(worker, deterministic.initial)
    losses = {impl: np.array(reply["losses"])
              for impl, reply in deterministic.ask_both({"cmd": "train_steps", "steps": STEPS}).items()}
    layout = deterministic.python.request({"cmd": "layout"})["layout"]
    after = {worker.impl: parameters(layout, get_params(worker)) for worker in deterministic.workers}

    problems = []
    relative = np.abs(losses["python"] - losses["cpp"]) / np.abs(losses["cpp"])
    off = np.flatnonzero(relative > RELATIVE_TOLERANCE)
    if off.size:
        first = off[0]
        problems.append(f"losses differ from step {first} on ({off.size} of {STEPS} steps, at most {relative.max():.3g} "
                        f"relative): step {first} python {losses['python'][first]:.8g}, cpp {losses['cpp'][first]:.8g}")
    for name, python in after["python"].items():
        cpp = after["cpp"][name]
        # Relative to the parameter's largest magnitude: elementwise, values near 0 would dominate.
        difference = np.abs(python - cpp).max()
        if difference / np.abs(cpp).max() > RELATIVE_TOLERANCE:
            problems.append(f"after the last step, {name} differs by up to {difference:.3g} "
                            f"({difference / np.abs(cpp).max():.3g} of its largest value)")
    assert not problems, (f"{STEPS} steps from the same weights, dropout off, beyond {RELATIVE_TOLERANCE:g} relative:\n  "
                          + "\n  ".join(problems))


def test_dropout_masks_differ(fresh_pair):
    """A finding, kept as a test so that a change to it is seen. Both sides draw dropout masks from
    the same seeded CPU generator with the same operations (with the generators in step, Python's
    losses equal C++'s to the bit), but each new DataLoader iterator draws a base seed from that
    generator, which LibTorch's loader does not: from the first step on, Python's masks are drawn
    further along the stream. The loss of a step from the same weights and batch therefore differs
    with dropout on, where with dropout off it agrees (test_same_training_dropout_off)."""
    pair = fresh_pair(PUBLISHED_DROPOUT)
    for worker in pair.workers:
        set_params(worker, pair.initial)
    first = {impl: reply["losses"][0] for impl, reply in pair.ask_both({"cmd": "train_steps", "steps": 1}).items()}
    relative = abs(first["python"] - first["cpp"]) / abs(first["cpp"])
    assert relative > RELATIVE_TOLERANCE, (
        f"with dropout on, the first step's losses now agree ({first}): the dropout masks match. "
        f"Make this an equality check and update the README's equivalence section")


def test_same_one_epoch_run(fresh_pair):
    pair = fresh_pair(0.0)
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
    results = pair.ask_both({"cmd": "evaluate"})
    accuracy = {impl: result["accuracy"] for impl, result in results.items()}
    assert abs(accuracy["python"] - accuracy["cpp"]) < ACCURACY_POINTS, (
        f"test accuracy after one epoch from the same weights: python {accuracy['python']:.2f} %, "
        f"cpp {accuracy['cpp']:.2f} %; more than {ACCURACY_POINTS} points apart")

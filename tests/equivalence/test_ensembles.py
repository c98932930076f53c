"""Ensembles (phasebench/train/ensemble.py; docs/gpu.md#concurrent-jobs-and-ensembles): member k of every ensemble
starts from the weights seed k gives a model alone; with dropout off the Python loop's member k trains as model k
alone, to the bit; the C++ loop's members train as the Python loop's, to the bit, with dropout off and on; and
python-vmap's member k stays within a tolerance of model k alone, justified where it is defined."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np
import pytest

from phasebench.worker import protocol
from phasebench.worker.client import Worker
from tests.equivalence.pairs import (
    POOL_GROUP,
    PUBLISHED_DROPOUT,
    bit_differences,
    equivalence_options,
    get_params,
    parameters,
    restart,
)

# The module's ensembles are trained with the package's kept workers, once, in the pool's process.
pytestmark = pytest.mark.xdist_group(POOL_GROUP)

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
    return [np.frombuffer(base64.b64decode(worker.request(protocol.EnsembleParams(member=k)).data),
                          dtype=np.float32) for k in range(models)]


def train_ensemble(worker: Worker, options: dict, models: int = ENSEMBLE_MODELS, steps: int = ENSEMBLE_STEPS) -> Trained:
    restart(worker, options)
    worker.request(protocol.EnsembleStart(models=models))
    initial = ensemble_params(worker, models)
    losses = [worker.request(protocol.EnsembleStep()).losses]
    first = ensemble_params(worker, models)
    losses += [worker.request(protocol.EnsembleStep()).losses for _ in range(steps - 1)]
    return Trained(initial, first, ensemble_params(worker, models), np.array(losses))


def train_alone(worker: Worker, options: dict, steps: int = ENSEMBLE_STEPS) -> Trained:
    restart(worker, options)
    initial = get_params(worker)
    losses = worker.request(protocol.TrainSteps(steps=1)).losses
    first = get_params(worker)
    losses += worker.request(protocol.TrainSteps(steps=steps - 1)).losses
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
    options = {impl: equivalence_options(settings, "cpu", str(logs / f"{impl}.log"), impl)
               | {"dropout": 0.0, "loader": "batched"} for impl in ("python", "python-vmap", "cpp")}
    runs = {}
    workers = {impl: kept_workers.fresh(impl, options[impl]) for impl in ("python", "cpp")}
    workers["python-vmap"] = workers["python"]  # restarted with python-vmap's options
    layout = workers["python"].request(protocol.Layout()).layout
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

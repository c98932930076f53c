"""The suite's vocabulary, importable without torch: the phases (names, labels, what the training run calls
them) and what is trained (the Net's width and the batch size; docs/implementations.md#implementations-and-workloads).

Every layer may import this module; it imports nothing of the suite.

Both languages receive the same two numbers (Trainer kwargs; pb_options for C++) and derive every size
from them the same way. The default workload is the published one, and its id is empty, so the
published cases keep their test ids and saved baselines still compare.
"""

from __future__ import annotations

from dataclasses import dataclass

# The training phases, in order; each language's phase table (phasebench/train/phases.py, cpp/src/phases.cpp)
# says what each prepares, times and produces.
PHASE_LABELS = {
    "data_loading": "Data Loading",
    "copy_to_device": "Copying To Device",
    "optimizer_init": "Optimizer Init",
    "forward": "Model Forward",
    "loss": "Loss Calculation",
    "backward": "Backward Pass",
    "param_update": "Parameter Update",
    "progress_print": "Progress Printing",
    "train_step": "Train Step",
}
TRAINING_PHASES = tuple(PHASE_LABELS)
# Timed once per worker, the first time the step needs them (docs/gpu.md#cuda-graphs-and-torchcompile): capturing
# the step into CUDA graphs, compiling the model. Never inside a step phase's clock.
ONE_SHOT_LABELS = {"graph_capture": "Graph Capture", "compile": "Compile"}
ONE_SHOT_PHASES = tuple(ONE_SHOT_LABELS)
# Not training phases: the empty timed region (the timer floor, worker_overhead), and the C++ example's per-step
# loss.item() (docs/method.md#how-our-trainers-differ-from-pytorchexamples-and-why).
EXTRA_LABELS = {"loss_item": "loss.item()", "noop": "No-op"}
# Data parallel only (docs/distributed.md): the all-reduce of the gradients after backward, timed alone.
GRAD_SYNC = "grad_sync"
SYNC_LABELS = {GRAD_SYNC: "Gradient Sync"}



# -- the pieces an implementation is made of, and what follows from each (no torch: the registry derives an
# implementation's phases and devices from them; phasebench/train/steps.py and loaders.py are the pieces) --
@dataclass(frozen=True)
class StepFacts:
    """How a training step executes."""

    whole: bool = False  # replayed whole (one graph): no forward, loss, backward, update or log line of its own
    one_shot: str | None = None  # its phase timed once per worker, before its first step: ONE_SHOT_PHASES
    static_inputs: bool = False  # each batch is copied into the graph's static input buffers
    cuda_only: str | None = None  # why it cannot run on cpu, where it cannot


CUDA_ONLY_GRAPHS = "CUDA graphs capture CUDA work: there is nothing to capture on cpu"
# Eagerly (as published); captured whole into CUDA graphs and replayed; the model through torch.compile, in its
# default mode or with mode="reduce-overhead" (CUDA graphs made by the compiler, the optimizer eager).
STEPS = {
    "eager": StepFacts(),
    "graphs": StepFacts(whole=True, one_shot="graph_capture", static_inputs=True, cuda_only=CUDA_ONLY_GRAPHS),
    "compile": StepFacts(one_shot="compile"),
    "compile-cudagraphs": StepFacts(whole=True, one_shot="compile", cuda_only=(
        "mode=\"reduce-overhead\" is CUDA graphs: without CUDA it is the default mode, which python-compile measures")),
}
# Data pipelines; split_on_device: on an accelerator the whole split lives there, so copy_to_device copies nothing
# (unless the step copies each batch into static buffers).
LOADERS = {"published": False, "tensor": False, "batched": True, "workers": False}
OPTIMIZERS = ("sgd", "foreach", "fused")


@dataclass(frozen=True)
class SyncFacts:
    """How a data-parallel implementation synchronizes its gradients (docs/distributed.md)."""

    phase: str | None  # its own phase after backward, or None where the all-reduce runs inside backward
    how: str


# "ddp": DistributedDataParallel, whose bucketed all-reduce runs inside backward (autograd hooks), so it has no
# grad_sync phase; "allreduce": pytorch/examples' dist-mnist.cpp, each gradient all-reduced after backward, then
# divided by the world size.
SYNCS = {
    "ddp": SyncFacts(None, "DistributedDataParallel: its bucketed all-reduce runs inside backward"),
    "allreduce": SyncFacts(GRAD_SYNC, "each gradient all-reduced (summed) after backward, then divided by the world "
                                      "size, as pytorch/examples' cpp/distributed/dist-mnist.cpp does"),
}
ENSEMBLES = ("loop", "vmap")


def step_phases(step: str) -> tuple[str, ...]:
    """The phases of a trainer whose step is `step`: a step replayed whole has no parts of its own to time."""
    facts = STEPS[step]
    if facts.whole:
        return ("data_loading", "copy_to_device", facts.one_shot, "train_step")
    return TRAINING_PHASES + ((facts.one_shot,) if facts.one_shot else ())


# The training run's in-loop total of a step replayed whole (a graph): the step and its log line, without the
# loading and copying that the per-phase case train_step also holds. Results saved before it had its own name
# recorded it as "train_step"; run_total reads both.
STEP_IN_RUN = "step_in_run"
RUN_LABELS = {STEP_IN_RUN: "Step In Run"}
LABELS = PHASE_LABELS | ONE_SHOT_LABELS | EXTRA_LABELS | RUN_LABELS | SYNC_LABELS


def run_total(phase_total: dict, name: str):
    """A training run's total under a phase name (phase_total_s or phase_ns), reading the old key of step_in_run."""
    if name == STEP_IN_RUN and name not in phase_total:
        return phase_total.get("train_step")
    return phase_total.get(name)


LOG_INTERVAL = 10  # a log line every 10 batches, as published
TRAIN_IMAGES = 60_000  # the split LibTorch's MNIST requires
IMAGE_SIDE = 28


@dataclass(frozen=True, order=True)
class Workload:
    width: int = 1  # every hidden size multiplied by it: conv1 10·W, conv2 20·W channels, fc1 50·W units
    batch_size: int = 64

    def __post_init__(self):
        if self.width < 1 or self.batch_size < 1:
            raise ValueError(f"width and batch size must be at least 1, got {self.width} and {self.batch_size}")

    @property
    def is_default(self) -> bool:
        return self == DEFAULT

    @property
    def id(self) -> str:
        """'' for the published workload, else 'w4-b256': the test-id suffix and the report's label."""
        return "" if self.is_default else f"w{self.width}-b{self.batch_size}"

    @property
    def label(self) -> str:
        return f"width {self.width}, batch {self.batch_size}"

    # The Net's sizes, in one place (phasebench/train/model.py's Net and cpp/src/model.h's follow them).
    @property
    def conv1_channels(self) -> int:
        return 10 * self.width

    @property
    def conv2_channels(self) -> int:
        return 20 * self.width

    @property
    def fc1_inputs(self) -> int:
        return self.conv2_channels * 4 * 4  # 28 → conv 24 → pool 12 → conv 8 → pool 4

    @property
    def fc1_units(self) -> int:
        return 50 * self.width

    @property
    def parameter_count(self) -> int:
        c1, c2, f1 = self.conv1_channels, self.conv2_channels, self.fc1_units
        return (c1 * 25 + c1) + (c2 * c1 * 25 + c2) + (self.fc1_inputs * f1 + f1) + (f1 * 10 + 10)

    @property
    def steps_per_epoch(self) -> int:
        return -(-TRAIN_IMAGES // self.batch_size)

    @property
    def last_batch(self) -> int:
        return TRAIN_IMAGES - (self.steps_per_epoch - 1) * self.batch_size

    def shard_problem(self, world_size: int) -> str | None:
        """Why a world of this size cannot split this workload's global batches (None when it can): every rank takes
        batch / W images of each, so W must divide the batch and the epoch's last batch."""
        if self.batch_size % world_size or self.last_batch % world_size:
            return (f"world size {world_size} must divide the batch ({self.batch_size}) and the epoch's last batch "
                    f"({self.last_batch}): each rank trains batch / world size images of every global batch")
        return None

    def as_options(self) -> dict:
        return {"width": self.width, "batch_size": self.batch_size}

    def as_info(self) -> dict:
        """What every saved result records of it (extra_info)."""
        return {"width": self.width, "batch_size": self.batch_size, "workload": self.id}


DEFAULT = Workload()


def parse_sizes(text: str, option: str) -> tuple[int, ...]:
    """'1,4,16' -> (1, 4, 16); a usage error names the option."""
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        sizes = ()
    if not sizes or any(size < 1 for size in sizes):
        raise ValueError(f"{option} {text!r}: expected positive whole numbers, comma-separated (e.g. 1,4,16)")
    return tuple(dict.fromkeys(sizes))


def workloads(widths, batch_sizes) -> tuple[Workload, ...]:
    """Every (width, batch size) pair, the default first where it is among them."""
    return tuple(sorted((Workload(w, b) for w in widths for b in batch_sizes), key=lambda w: (not w.is_default, w)))


def of_info(info: dict) -> Workload:
    """The workload a saved benchmark ran (extra_info); results from before workloads existed are the default."""
    return Workload(int(info.get("width") or 1), int(info.get("batch_size") or 64))

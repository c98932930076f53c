"""The registry of implementations (docs/implementations.md#implementations-and-workloads).

One record per implementation: its name on the command line, its language (which worker runs it), what
it changes against the published pipeline of its language, the implementation it is compared with (the
report's ratios, the ratio gate, the equivalence tests), the devices it runs on with the reason it is
absent elsewhere, and its phases. An implementation is made of pieces (language, loader, step, optimizer,
ensemble); its phases, the devices it runs on and whether its split lives on the device follow from the pieces
(phasebench/spec.py says what each piece implies) and are derived here, never stored. The worker pool, the test
parametrization, the report and the gate iterate over this registry and never name two languages: adding an
implementation is one entry here, plus its piece in one language where the piece is new (docs/architecture.md,
"Adding an implementation").

This module imports neither torch nor the trainers, so that the report and the gate can read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from phasebench.spec import (
    ENSEMBLES,
    LOADERS,
    OPTIMIZERS,
    STEP_IN_RUN,
    STEPS,
    SYNCS,
    step_phases,
)

LANGUAGES = ("python", "cpp")
DEVICES = ("cpu", "cuda")
STEP_KINDS = tuple(STEPS)
WHOLE_STEP_KINDS = tuple(kind for kind, facts in STEPS.items() if facts.whole)

# What python-workers' data_loading times (recorded in its results' extra_info["note"]).
WORKERS_DATA_LOADING = ("data_loading times taking a batch the loader process already prepared off its queue (or "
                        "waiting for it); the loader process's own work and CPU are in no phase's clock or CPU figure")


@dataclass(frozen=True)
class Implementation:
    """An implementation is language × loader × step × optimizer (× ensemble): everything else follows."""

    name: str
    language: str  # "python" or "cpp": which worker (phasebench/worker/server.py) runs it
    changes: str  # what it changes against the published pipeline of its language, in a few words
    reference: str | None  # what it is compared with (None: the published pair, compared with each other)
    loader: str = "published"  # the data pipeline: spec.LOADERS (phasebench/train/loaders.py, cpp/src/sources.cpp)
    step: str = "eager"  # how a step executes: spec.STEPS (phasebench/train/steps.py, cpp/src/step*.cpp)
    optimizer: str = "sgd"  # "sgd" as published, "foreach" or "fused" (Python's torch.optim.SGD flags)
    # How its test_ensemble trains M models (docs/gpu.md#concurrent-jobs-and-ensembles): "loop" (one model after
    # another) or "vmap" (one vectorized ensemble, Python only); None: no ensemble cases. An ensemble step's
    # data loading is untimed, so only the implementations that differ in the step itself have one.
    ensemble: str | None = None
    # False: it trains ensembles only, so no phase, training-run, concurrent-jobs or worker cases are made for it.
    single_model: bool = True
    # Per device, what a reader of its results must know (recorded in extra_info["note"]).
    notes: dict[str, str] = field(default_factory=dict)
    # Data parallel (docs/distributed.md): how its ranks synchronize gradients, spec.SYNCS; None: one process.
    # A data-parallel implementation has cases only where --world-size asks for them (bench/test_distributed.py).
    sync: str | None = None
    bucket_mb: float | None = None  # DDP's bucket_cap_mb (None: DDP's default, 25 MiB, the first bucket 1 MiB)

    def __post_init__(self):
        assert self.language in LANGUAGES, f"{self.name}: unknown language {self.language}"
        assert self.loader in LOADERS and self.step in STEPS and self.optimizer in OPTIMIZERS, self.name
        assert set(self.notes) <= set(DEVICES)
        assert self.ensemble in (None, *ENSEMBLES) and (self.ensemble != "vmap" or self.language == "python"), (
            f"{self.name}: ensemble {self.ensemble!r}")
        assert self.single_model or self.ensemble, f"{self.name}: trains nothing"
        assert self.language == "python" or self.optimizer == "sgd", f"{self.name}: SGD's flags are Python's"
        assert self.sync in (None, *SYNCS) and (not self.sync or (self.loader == "batched" and self.step == "eager"
                                                                  and not self.ensemble)), self.name
        assert self.sync != "ddp" or self.language == "python", f"{self.name}: DDP is Python's"

    @property
    def distributed(self) -> bool:
        return self.sync is not None

    @property
    def phases(self) -> tuple[str, ...]:
        """Its per-phase cases: its step's phases (none where it trains ensembles only), and its gradient
        synchronization's own phase after backward where it has one."""
        phases = step_phases(self.step) if self.single_model else ()
        own = SYNCS[self.sync].phase if self.sync else None
        if own:
            at = phases.index("backward") + 1
            phases = phases[:at] + (own,) + phases[at:]
        return phases

    @property
    def split_on_device(self) -> bool:
        """On an accelerator the whole split lives there and copy_to_device copies nothing: its loader keeps the
        split on the device and its step reads batches where they are."""
        return LOADERS[self.loader] and not STEPS[self.step].static_inputs

    @property
    def absent(self) -> dict[str, str]:
        """The devices it does not run on, with the reason its cases skip there."""
        reason = STEPS[self.step].cuda_only
        return {"cpu": reason} if reason else {}

    @property
    def one_shot(self) -> str | None:
        """Its phase timed once per worker (graph_capture, compile), or None."""
        return STEPS[self.step].one_shot

    @property
    def run_phases(self) -> tuple[str, ...]:
        """The totals its training run records: the model's construction, its one-shot phase, and step_in_run
        where the step is one graph, else the step's parts."""
        whole = STEPS[self.step].whole
        timed = [STEP_IN_RUN if phase == "train_step" else phase for phase in self.phases
                 if whole or phase != "train_step"]
        return tuple(dict.fromkeys(["optimizer_init"] + timed))  # every run builds its model first

    def absent_reason(self, device: str) -> str | None:
        return self.absent.get(device)

    def trainer_options(self) -> dict:
        """What the trainer of its language is told (Trainer kwargs; pb_options for C++)."""
        options = {"loader": self.loader, "step": self.step}
        if self.language == "python":
            options |= {"optimizer": self.optimizer} | ({"ensemble": self.ensemble} if self.ensemble else {})
        if self.sync and self.language == "python":
            options |= {"sync": self.sync} | ({"bucket_mb": self.bucket_mb} if self.bucket_mb else {})
        return options

    def runs_in(self, fixtures) -> bool:
        """Whether a test taking these fixtures has cases for it: ensemble tests (they take `models`) for
        implementations with an ensemble, data-parallel tests (they take `world_size`) for the data-parallel ones,
        every other test for those that train a single model in one process."""
        if ("world_size" in fixtures) != self.distributed:
            return False
        return bool(self.ensemble) if "models" in fixtures else self.single_model

    @property
    def pair(self) -> str:
        """The implementation its ratio is taken against: its reference, or for the published pair the other side."""
        return self.reference or ("cpp" if self.language == "python" else "python")


REGISTRY: tuple[Implementation, ...] = (
    Implementation("python", "python", "the published Python pipeline: torchvision's MNIST, ToTensor and Normalize "
                   "per image, a DataLoader of 64", None, ensemble="loop"),
    Implementation("cpp", "cpp", "the published C++ pipeline: LibTorch's MNIST (the split converted to float / 255 "
                   "once), Normalize and Stack per batch", None, ensemble="loop"),
    Implementation("python-tensor", "python", "LibTorch's loader design in Python: the split converted to float / 255 "
                   "once, per index LibTorch's Normalize ((image - mean) / std), a DataLoader that stacks the batch",
                   "cpp", loader="tensor"),
    Implementation("python-batched", "python", "the split normalized once; each batch is a slice of it", "cpp-batched",
                   loader="batched"),
    Implementation("cpp-batched", "cpp", "the split normalized once; each batch is a slice of it", "cpp",
                   loader="batched"),
    Implementation("python-workers", "python", "the published pipeline in one persistent DataLoader worker process "
                   "(pin_memory on cuda), as pytorch/examples runs on accelerators", "python", loader="workers",
                   notes=dict.fromkeys(("cpu", "cuda"), WORKERS_DATA_LOADING)),
    Implementation("python-foreach", "python", "the published pipeline with torch.optim.SGD(foreach=True)", "python",
                   optimizer="foreach",
                   notes={"cuda": "foreach is already torch.optim.SGD's default on cuda: python-foreach trains as "
                                  "python does there"}),
    Implementation("python-fused", "python", "the published pipeline with torch.optim.SGD(fused=True)", "python",
                   optimizer="fused"),
    Implementation("python-vmap", "python", "an ensemble of M models as one vectorized model: torch.func's "
                   "stack_module_state, functional_call and vmap, one SGD over the stacked parameters", "python",
                   ensemble="vmap", single_model=False),
    # CUDA graphs and torch.compile (docs/gpu.md#cuda-graphs-and-torchcompile): the batched loader, so that the host
    # feeds the GPU as little as possible; each batch is copied into the graph's static input buffers.
    Implementation("python-graphs", "python", "the batched loader; the whole step (forward, loss, backward, SGD) "
                   "captured into CUDA graphs (torch.cuda.CUDAGraph), one per batch shape, replayed per batch",
                   "cpp-graphs", loader="batched", step="graphs"),
    Implementation("cpp-graphs", "cpp", "the batched loader; the whole step captured into CUDA graphs "
                   "(at::cuda::CUDAGraph), one per batch shape, replayed per batch", "cpp-batched",
                   loader="batched", step="graphs"),
    Implementation("python-compile", "python", "the batched loader; the model through torch.compile (default "
                   "mode, both batch shapes compiled before the first step)", "python-batched", loader="batched",
                   step="compile"),
    Implementation("python-compile-cudagraphs", "python", "the batched loader; the model through "
                   "torch.compile(mode=\"reduce-overhead\"): the compiler's CUDA graphs of forward and backward, "
                   "the optimizer eager", "python-graphs", loader="batched",
                   step="compile-cudagraphs"),
    # Data parallel (docs/distributed.md): W ranks, each training batch / W images of every global batch (the
    # batched loader's split, DistributedSampler(shuffle=False)'s order), one update of the global batch a step.
    Implementation("python-ddp", "python", "data parallel: the batched loader's shard of each global batch, the model "
                   "in DistributedDataParallel (its all-reduce inside backward)", "python-allreduce",
                   loader="batched", sync="ddp"),
    # The Net's 87 KB of gradients fit in DDP's first bucket (1 MiB), so by default nothing overlaps backward: 0.02 MiB
    # buckets split them (fc1.weight's 64 KB alone, the rest in a few more), each all-reduced as backward reaches it.
    Implementation("python-ddp-buckets", "python", "python-ddp with bucket_cap_mb=0.02: the gradients in several "
                   "buckets, each all-reduced while backward goes on", "python-ddp", loader="batched", sync="ddp",
                   bucket_mb=0.02),
    Implementation("python-allreduce", "python", "data parallel: the batched loader's shard of each global batch, each "
                   "gradient all-reduced after backward and divided by the world size (dist-mnist.cpp's algorithm)",
                   "cpp-allreduce", loader="batched", sync="allreduce"),
    Implementation("cpp-allreduce", "cpp", "data parallel: the batched loader's shard of each global batch, each "
                   "gradient all-reduced through c10d after backward and divided by the world size (dist-mnist.cpp)",
                   "python-allreduce", loader="batched", sync="allreduce"),
)
BY_NAME = {impl.name: impl for impl in REGISTRY}
NAMES = tuple(BY_NAME)
DEFAULT_IMPLS = ("python", "cpp")  # the published pair


def get(name: str) -> Implementation:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown implementation '{name}': {', '.join(NAMES)}") from None


def parse(text: str) -> tuple[str, ...]:
    """--impl's value: names comma-separated, or 'all'; a ValueError lists the valid ones."""
    chosen = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if chosen == ("all",):
        return NAMES
    bad = [name for name in chosen if name not in BY_NAME]
    if bad or not chosen:
        raise ValueError(f"--impl {text!r}: valid values are {', '.join(NAMES)} (comma-separated), or all")
    return chosen


def variants() -> tuple[Implementation, ...]:
    """Every one-process implementation that has a reference: what the equivalence tests compare with it (the
    data-parallel ones have tests/test_distributed.py)."""
    return tuple(impl for impl in REGISTRY if impl.reference and not impl.distributed)


def language_reference(impl: Implementation) -> Implementation:
    """The published implementation of its language, which it must train bit-identically to (docs/method.md#both-implementations-train-the-same-model)."""
    return BY_NAME[impl.language]

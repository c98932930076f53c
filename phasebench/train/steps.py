"""How a training step executes: eagerly (as published), captured whole into CUDA graphs and replayed, or with the
model through torch.compile (docs/gpu.md#cuda-graphs-and-torchcompile). A step is a piece of an implementation
(phasebench/spec.py's STEPS say what each implies): the trainer asks its step and never tests a name. Its C++ twin
is the Step interface in cpp/src/step.h (the eager step in cpp/src/step.cpp, the CUDA-graph step in cpp/src/graph_step.cpp).

Every step offers the same operations on its trainer `t`:
- `module(t)`: what the forward runs (the model, or the compiled model), and `forward(t)` runs it on the batch;
- `copy(t)`: the batch on the device (into the graph's static buffers once captured);
- `compute(t)`: forward, loss, backward and update of the batch on the device;
- `one_shot_prepare(t)` and `one_shot(t)`: the phase timed once per worker (capture, compile), and what it needs
  before its clock; `ensure_ready(t)` runs both, untimed, before the first phase that steps;
- `one_shot_at_start`: whether a run of steps starts with the one-shot phase (compile), or else meets it when
  `due(t)` (the capture, after its warm-up steps);
- `static_tensors()`: what lives as long as the step (a graph's static tensors), never a round's leftover;
- `one_shot_product(t)`: what the one-shot phase produced, for the plain tests.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import NamedTuple

import torch
import torch.nn.functional as F

from phasebench.spec import STEPS, StepFacts
from phasebench.train.products import all_finite, product

# Eager steps before a capture, as torch's whole-network capture recipe does on a side stream: the first
# creates SGD's momentum buffers, and the later ones settle the lazy initializations (cuBLAS workspaces, cuDNN
# plans) so that none happens during capture. They are the run's first real batches: they train and count.
GRAPH_WARMUP_STEPS = 3
# reduce-overhead's CUDA graph trees run a new shape eagerly once, then record it, then replay: calls per
# shape (forward and backward) before the first timed step.
CUDAGRAPH_TREE_CALLS = 3


class Step:
    """The eager step, and what every step shares."""

    kind = "eager"
    one_shot_at_start = False

    def __init__(self, device: torch.device):
        facts: StepFacts = STEPS[self.kind]
        if facts.cuda_only and device.type != "cuda":
            raise ValueError(f"step '{self.kind}' needs a cuda device (CUDA graphs), not {device}")
        self.whole, self.one_shot_phase = facts.whole, facts.one_shot
        self.ready = self.one_shot_phase is None  # a new model needs its own capture or compile

    def new_model(self, t) -> None:
        """The trainer built a new model: what the step held of the old one goes."""
        self.ready = self.one_shot_phase is None

    def module(self, t):
        return t.model if t.ddp is None else t.ddp  # data parallel: DistributedDataParallel around the model

    def forward(self, t) -> None:
        t.output = self.module(t)(t.data)

    def copy(self, t) -> None:
        t.data, t.target = t.host[0].to(t.device), t.host[1].to(t.device)

    def compute(self, t) -> None:
        t.eager_step()

    def one_shot_prepare(self, t) -> None:
        pass

    def one_shot(self, t) -> None:
        raise ValueError(f"a step '{self.kind}' trainer has no one-shot phase")

    def ensure_ready(self, t) -> None:
        if not self.ready:
            self.one_shot_prepare(t)
            self.one_shot(t)
            self.ready = True

    def due(self, t) -> bool:
        return False

    def static_tensors(self) -> set[int]:
        return set()

    def one_shot_product(self, t) -> dict:
        raise ValueError(f"a step '{self.kind}' trainer has no one-shot phase")

    def close(self) -> None:
        pass


class CapturedStep(NamedTuple):
    """One batch shape's CUDA graph of a whole training step and its static tensors: each batch is copied into
    data and target, and a replay leaves its output and loss in output and loss."""

    graph: torch.cuda.CUDAGraph
    data: torch.Tensor
    target: torch.Tensor
    output: torch.Tensor
    loss: torch.Tensor


class GraphStep(Step):
    """The whole step captured into CUDA graphs, one per batch shape, after warm-up steps, and replayed."""

    kind = "graphs"

    def new_model(self, t) -> None:
        super().new_model(t)
        self.graphs: dict[int, CapturedStep] = {}
        self.warmup_steps = 0
        self.warmed_shapes: set[int] = set()  # the batch rows a warm-up ran on a side stream, for this model

    def __init__(self, device: torch.device):
        super().__init__(device)
        self.graphs, self.warmup_steps, self.warmed_shapes = {}, 0, set()

    def copy(self, t) -> None:
        if not self.graphs:
            return super().copy(t)
        captured = self.graphs[len(t.host[0])]  # into the static buffers of the graph of this batch's shape
        captured.data.copy_(t.host[0])
        captured.target.copy_(t.host[1])
        t.data, t.target = captured.data, captured.target

    def compute(self, t) -> None:
        """A replay once the graphs are captured; before that a warm-up step on a side stream (torch's
        whole-network capture recipe)."""
        if self.graphs:
            captured = self.graphs[len(t.data)]
            captured.graph.replay()
            t.output, t.loss = captured.output, captured.loss
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            t.eager_step()
        torch.cuda.current_stream().wait_stream(side)
        self.warmup_steps += 1
        self.warmed_shapes.add(len(t.data))

    def due(self, t) -> bool:
        return not self.ready and self.warmup_steps >= GRAPH_WARMUP_STEPS

    def one_shot_prepare(self, t) -> None:
        """The warm-up steps a capture needs, where fewer have run: the next real batches, trained."""
        while self.warmup_steps < GRAPH_WARMUP_STEPS:
            t.step()
            t.steps += 1

    def one_shot(self, t) -> None:
        """One CUDA graph per batch shape, each capturing forward, loss, backward and SGD's step. Capture runs
        nothing: the model does not train here. Each graph gets a private memory pool (they replay in no fixed
        order), and captures with the gradients unset, so that its backward allocates and then overwrites
        its own gradients on every replay instead of accumulating into another graph's. A shape no warm-up step
        ran is warmed up first (warm_up_shape)."""
        for rows in t.batch_shapes():
            if rows not in self.warmed_shapes:
                self.warm_up_shape(t, rows)
            data = torch.zeros(rows, 1, 28, 28, device=t.device)
            target = torch.zeros(rows, dtype=torch.int64, device=t.device)
            graph = torch.cuda.CUDAGraph()
            t.optimizer.zero_grad(set_to_none=True)
            # The same work as the C++ trainer's capture (at::cuda::CUDAGraph): a full synchronization on each
            # side, a side stream, capture_begin and capture_end. Not torch.cuda.graph, which also runs gc.collect()
            # and empties the allocator's cache on entry, work C++'s capture does not do.
            torch.cuda.synchronize(t.device)
            with torch.cuda.stream(torch.cuda.Stream(t.device)):
                graph.capture_begin()
                output = t.model(data)
                loss = F.nll_loss(output, target)
                loss.backward()
                t.optimizer.step()
                graph.capture_end()
            torch.cuda.synchronize(t.device)
            self.graphs[rows] = CapturedStep(graph, data, target, output, loss)
        t.optimizer.zero_grad(set_to_none=True)

    def warm_up_shape(self, t, rows: int) -> None:
        """Forward, loss and backward of a batch of `rows` zeros on a side stream: torch's capture recipe runs every
        shape it captures eagerly on a side stream first, and the warm-up steps run the shapes of their batches only
        (full ones), never the remainder that ends an epoch. It trains nothing: no optimizer step (SGD's work does not depend on the
        batch's rows, and the warm-up steps ran it), the gradients are unset again, and the device's generator is
        put back, so the steps draw the dropout masks they would have drawn. The C++ GraphStep does the same
        (cpp/src/graph_step.cpp)."""
        data = torch.zeros(rows, 1, 28, 28, device=t.device)
        target = torch.zeros(rows, dtype=torch.int64, device=t.device)
        generator = t.rng_state()
        t.optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize(t.device)
        with torch.cuda.stream(torch.cuda.Stream(t.device)):
            F.nll_loss(t.model(data), target).backward()
        torch.cuda.synchronize(t.device)
        t.optimizer.zero_grad(set_to_none=True)
        t.set_rng_state(generator)
        self.warmed_shapes.add(rows)

    def static_tensors(self) -> set[int]:
        return {id(tensor) for captured in self.graphs.values() for tensor in captured[1:]}

    def one_shot_product(self, t) -> dict:
        """A graph per batch shape, the full batch's first; the output tensor a replay fills has its shape."""
        shapes = [len(self.graphs[rows].data) for rows in t.batch_shapes()]
        assert shapes == t.batch_shapes(), f"graphs captured for {shapes} rows, the epoch feeds {t.batch_shapes()}"
        return product(self.graphs[t.batch_size].output, all_finite(t.model.parameters()))


class CompiledStep(Step):
    """The model through torch.compile (default mode), every batch shape compiled before the first step.
    Every worker compiles cold: a cache of its own, removed at close, so that the compile phase times a first
    compile, never what an earlier worker left on disk. fallback_random makes compiled code draw eager's random
    numbers (the equivalence tests)."""

    kind = "compile"
    one_shot_at_start = True
    mode = "default"
    calls_per_shape = 1

    def __init__(self, device: torch.device, fallback_random: bool = False):
        super().__init__(device)
        self.compiled = None
        self.inductor_cache = tempfile.mkdtemp(prefix="phasebench-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = self.inductor_cache
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.inductor_cache, "triton")
        import torch._inductor.config

        torch._inductor.config.fallback_random = fallback_random

    def new_model(self, t) -> None:
        super().new_model(t)
        self.compiled = None

    def module(self, t):
        return t.model if self.compiled is None else self.compiled

    def one_shot(self, t) -> None:
        """torch.compile the model and compile every batch shape of an epoch, forward and backward, so that no
        step phase ever compiles (dynamic=False: each shape gets its own static kernels, as the first shape
        alone would). The model does not train here: its gradients are unset again and the generators put
        back, so the dropout masks the compile drew are drawn again by the steps."""
        self.compiled = torch.compile(t.model, mode=self.mode, dynamic=False)
        cpu_rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state(t.device) if t.device.type == "cuda" else None
        for rows in t.batch_shapes():
            data = torch.zeros(rows, 1, 28, 28, device=t.device)
            target = torch.zeros(rows, dtype=torch.int64, device=t.device)
            for _ in range(self.calls_per_shape):
                t.data = data
                t.forward()
                F.nll_loss(t.output, target).backward()
                t.optimizer.zero_grad(set_to_none=True)
            if rows == t.batch_size:
                # A clone: the next shape's cudagraph-trees generation may overwrite this output's memory.
                full_output = t.output.detach().clone()
        t.data = None
        t.output = full_output  # the product's: the full batch's output of the compiled model
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state(cuda_rng, t.device)

    def one_shot_product(self, t) -> dict:
        return product(t.output, all_finite([t.output]))

    def close(self) -> None:
        shutil.rmtree(self.inductor_cache, ignore_errors=True)


class CompiledGraphStep(CompiledStep):
    """torch.compile(mode="reduce-overhead"): the compiler's CUDA graph trees of forward and backward."""

    kind = "compile-cudagraphs"
    mode = "reduce-overhead"
    calls_per_shape = CUDAGRAPH_TREE_CALLS

    def forward(self, t) -> None:
        torch.compiler.cudagraph_mark_step_begin()  # a new iteration: the previous step's graph outputs may go
        super().forward(t)


KINDS = {step.kind: step for step in (Step, GraphStep, CompiledStep, CompiledGraphStep)}
assert set(KINDS) == set(STEPS), "every step of phasebench/spec.py has its piece"


def make(kind: str, device: torch.device, fallback_random: bool = False) -> Step:
    if kind not in KINDS:
        raise ValueError(f"unknown step '{kind}': {', '.join(KINDS)}")
    step = KINDS[kind]
    return step(device, fallback_random) if issubclass(step, CompiledStep) else step(device)

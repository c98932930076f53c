"""The Python implementation: the pytorch/examples MNIST workload, cut into the timed phases.

It is written as the examples' users write it (README, "How our trainers differ from pytorch/examples"):
torchvision's MNIST with ToTensor and Normalize, a DataLoader of 64 without shuffling, the C++
example's Net, SGD(0.01, 0.5), and a log line every 10 batches. The other Python implementations change
the loader (phasebench/train/loaders.py) or the optimizer's flags, and every workload the Net's width and the batch
size (README, "Implementations and workloads"). Its twin is cpp/phasebench.cpp;
PHASES at the bottom is the suite's single list of phases, and how each is timed is README,
"What is measured".
"""

from __future__ import annotations

import math
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef

from phasebench.data import check_split
from phasebench.registry import ONE_SHOT_PHASES, STEP_KINDS, WHOLE_STEP_KINDS
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import TRAIN_IMAGES, Workload
from phasebench.train import loaders
from phasebench.train.ensemble import KINDS as ENSEMBLE_KINDS

LOG_INTERVAL = 10
LEARNING_RATE, MOMENTUM = 0.01, 0.5
OPTIMIZER_FLAGS = {"sgd": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}
FLOOR_ROUNDS = 2000  # empty-phase rounds whose median is a worker's timer floor
# Eager steps before a capture, as torch's whole-network capture recipe does on a side stream: the first
# creates SGD's momentum buffers, and the later ones settle the lazy initializations (cuBLAS workspaces, cuDNN
# plans) so that none happens during capture. They are the run's first real batches: they train and count.
GRAPH_WARMUP_STEPS = 3
# reduce-overhead's CUDA graph trees run a new shape eagerly once, then record it, then replay: calls per
# shape (forward and backward) before the first timed step.
CUDAGRAPH_TREE_CALLS = 3
# Phases that use no step: they never trigger the one-shot phase (capture or compile) before their clock.
NEEDS_NO_STEP = ("data_loading", "optimizer_init", "noop") + ONE_SHOT_PHASES

# The checks a phase's product may carry (README, "What is measured"); None where a phase has none.
CHECKS = ("batch", "on_device", "matches_host", "resident", "recompute_error", "zero_before", "nonzero_grads",
          "update_error", "moved", "distinct", "leftovers")


class Net(nn.Module):
    """The network of examples/cpp/mnist, parameter for parameter; width W multiplies every hidden size."""

    def __init__(self, dropout: float = 0.5, workload: Workload = DEFAULT_WORKLOAD):
        super().__init__()
        w = workload
        self.conv1 = nn.Conv2d(1, w.conv1_channels, kernel_size=5)
        self.conv2 = nn.Conv2d(w.conv1_channels, w.conv2_channels, kernel_size=5)
        self.conv2_drop = nn.Dropout2d(dropout)
        self.fc1 = nn.Linear(w.fc1_inputs, w.fc1_units)
        self.fc2 = nn.Linear(w.fc1_units, 10)
        self.dropout, self.fc1_inputs = dropout, w.fc1_inputs

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, self.fc1_inputs)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def product(main: torch.Tensor, finite: bool, loss: float | None = None, **checks) -> dict:
    """What a phase produced, for plain tests to check (the C++ side reports the same fields)."""
    unknown = checks.keys() - set(CHECKS)
    assert not unknown, f"unknown product checks {unknown}"
    return {"shape": list(main.shape), "finite": bool(finite), "loss": loss} | dict.fromkeys(CHECKS) | checks


def all_finite(tensors) -> bool:
    return all(t is not None and bool(torch.isfinite(t).all()) for t in tensors)


class CapturedStep(NamedTuple):
    """One batch shape's CUDA graph of a whole training step and its static tensors: each batch is copied into
    data and target, and a replay leaves its output and loss in output and loss."""

    graph: torch.cuda.CUDAGraph
    data: torch.Tensor
    target: torch.Tensor
    output: torch.Tensor
    loss: torch.Tensor


def page_faults() -> tuple[int, int]:
    """The process's (minor, major) page faults so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_majflt


def busy_wait(ns: int) -> None:
    """Spin, not sleep: a test slowdown must compete for the CPU as real work does."""
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def slowed(body: Callable, ns: int, fraction: float = 0.0) -> Callable:
    """The body, then a spin of ns, or with a fraction above 0 of that fraction of the time the body just took
    (a relative slowdown that scales with whatever else the machine is doing, as a slower phase would)."""
    def body_then_spin(trainer):
        body(trainer)
        busy_wait(ns)

    def body_then_spin_its_fraction(trainer):
        start = time.perf_counter_ns()
        body(trainer)
        busy_wait(int((time.perf_counter_ns() - start) * fraction))

    return body_then_spin_its_fraction if fraction > 0 else body_then_spin


class Trainer:
    def __init__(self, root: str, device: str = "cpu", threads: int = 0, seed: int = 1,
                 log_path: str | None = None, dropout: float = 0.5,
                 slow_phase: str = "", slow_ns: int = 0, slow_fraction: float = 0.0, width: int = 1, batch_size: int = 64,
                 loader: str = "published", optimizer: str = "sgd", ensemble: str = "loop", step: str = "eager",
                 fallback_random: bool = False):
        check_split(f"{root}/MNIST/raw", "train")
        check_split(f"{root}/MNIST/raw", "t10k")
        if optimizer not in OPTIMIZER_FLAGS:
            raise ValueError(f"unknown optimizer '{optimizer}': {', '.join(OPTIMIZER_FLAGS)}")
        if ensemble not in ENSEMBLE_KINDS:
            raise ValueError(f"unknown ensemble '{ensemble}': {', '.join(ENSEMBLE_KINDS)}")
        if step not in STEP_KINDS:
            raise ValueError(f"unknown step '{step}': {', '.join(STEP_KINDS)}")
        if step in ("graphs", "compile-cudagraphs") and not str(device).startswith("cuda"):
            raise ValueError(f"step '{step}' needs a cuda device (CUDA graphs), not {device}")
        self.step_kind, self.whole_step = step, step in WHOLE_STEP_KINDS
        self.one_shot = {"graphs": "graph_capture", "compile": "compile", "compile-cudagraphs": "compile"}.get(step)
        self.inductor_cache = None
        if step.startswith("compile"):
            self._prepare_inductor(fallback_random)
        self.root, self.dropout = root, dropout
        self.workload, self.loader_kind, self.optimizer_flags = Workload(width, batch_size), loader, OPTIMIZER_FLAGS[optimizer]
        self.batch_size = batch_size
        self.device = torch.device(device)
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError(f"device {device} requested but CUDA is not available")
            torch.cuda.set_device(self.device)  # so that the cheapest synchronization is the right one
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.loader = loaders.make(loader, root, batch_size, self.device)
        # Both splits before training, as the published programs open them (cpp/phasebench.cpp says what
        # this does to glibc's heap in the C++ worker; docs/page-faults.md).
        self.test_set = loaders.mnist(root, train=False)
        if threads > 0:
            torch.set_num_threads(threads)
        torch.manual_seed(seed)
        self.log = open(log_path, "w") if log_path else sys.stdout
        self.batches = None
        self.batch_pass = None  # batch_at's pass over an epoch of its own: [next index, iterator]
        self.epoch = self.seen = self.steps = 0
        self.host_index = -1  # the index in its epoch of the batch in self.host
        self.host = self.data = self.target = self.output = self.loss = None
        self.fresh = self.update_check = self.rng_before = None
        self.zero_before = None
        self.last_phase = None
        self.ensemble_kind, self.ensemble, self.ensemble_losses = ensemble, None, None
        self.log_due = False  # the training run's whole step: whether this batch logs
        # torch.cuda.synchronize() is this call inside a device guard; the device is set above.
        self.timed = self._timed_cuda if self.device.type == "cuda" else self._timed_cpu
        self.bodies = {phase.name: slowed(phase.body, slow_ns, slow_fraction) if phase.name == slow_phase else phase.body
                       for phase in PHASE_BY_NAME.values()}
        self.run_bodies = {name: slowed(body, slow_ns, slow_fraction) if name == slow_phase else body
                           for name, body in RUN_BODIES.items()}
        self.build_model()

    def _prepare_inductor(self, fallback_random: bool) -> None:
        """Every worker compiles cold: a cache of its own, removed at close, so that the compile phase times a
        first compile, never what an earlier worker left on disk (README, "CUDA graphs and torch.compile").
        fallback_random makes compiled code draw eager's random numbers (the equivalence tests)."""
        self.inductor_cache = tempfile.mkdtemp(prefix="phasebench-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = self.inductor_cache
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.inductor_cache, "triton")
        import torch._inductor.config

        torch._inductor.config.fallback_random = fallback_random

    def close(self):
        if self.log is not sys.stdout:
            self.log.close()
        if self.inductor_cache:
            shutil.rmtree(self.inductor_cache, ignore_errors=True)

    # -- the operations the phases are made of ------------------------------------------
    def new_model(self):
        model = Net(self.dropout, self.workload).to(self.device)
        return model, torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM, **self.optimizer_flags)

    def build_model(self):
        self.model, self.optimizer = self.new_model()
        # A new model needs its own capture or compile.
        self.graphs: dict[int, CapturedStep] = {}
        self.warmup_steps = 0
        self.compiled = None
        self.one_shot_done = False

    def next_batch(self):
        """The next batch, starting a new epoch when the last one ends."""
        if self.batches is not None:
            batch = next(self.batches, None)
            if batch is not None:
                self.seen += len(batch[0])
                self.host_index += 1
                return batch
        self.batches = iter(self.loader)
        self.epoch += 1
        batch = next(self.batches)
        self.seen, self.host_index = len(batch[0]), 0
        return batch

    def load_batch(self):
        self.host = self.next_batch()

    def load_in_epoch(self):
        """The training run's data loading: None at the end of the epoch."""
        self.host = next(self.batches, None)

    def copy_batch(self):
        if self.graphs:  # into the static buffers of the graph of this batch's shape
            captured = self.graphs[len(self.host[0])]
            captured.data.copy_(self.host[0])
            captured.target.copy_(self.host[1])
            self.data, self.target = captured.data, captured.target
        else:
            self.data, self.target = self.host[0].to(self.device), self.host[1].to(self.device)

    def forward(self):
        if self.step_kind == "compile-cudagraphs":  # a new iteration: the previous step's graph outputs may go
            torch.compiler.cudagraph_mark_step_begin()
        self.output = (self.model if self.compiled is None else self.compiled)(self.data)

    def compute_loss(self):
        self.loss = F.nll_loss(self.output, self.target)

    def backward(self):
        self.loss.backward()

    def update(self):
        self.optimizer.step()
        self.optimizer.zero_grad()

    def print_progress(self):
        print(f"Train Epoch: {self.epoch} [{self.seen:5d}/{TRAIN_IMAGES:5d}]\tLoss: {self.loss.item():.4f}",
              file=self.log)

    def read_loss(self):
        """What the C++ example does after every step (an isnan check): a device sync on cuda."""
        self.loss.item()

    def on_device(self):
        self.load_batch()
        self.copy_batch()

    def forwarded(self):
        self.on_device()
        self.forward()
        self.compute_loss()

    def fresh_model(self):
        self.fresh = self.new_model()

    def step(self):
        """One training step, without its log line."""
        self.load_batch()
        self.copy_batch()
        self.compute_step()

    def compute_step(self):
        """Forward, loss, backward and update of the batch on the device: a replay once the graphs are captured;
        before that, on the graph variant, a warm-up step on a side stream (torch's whole-network capture
        recipe)."""
        if self.graphs:
            captured = self.graphs[len(self.data)]
            captured.graph.replay()
            self.output, self.loss = captured.output, captured.loss
        elif self.step_kind == "graphs":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.eager_step()
            torch.cuda.current_stream().wait_stream(side)
            self.warmup_steps += 1
        else:
            self.eager_step()

    def eager_step(self):
        self.forward()
        self.compute_loss()
        self.backward()
        self.update()

    def whole_step_in_run(self):
        """The training run's train_step where the step is one graph: the step, and the log line when due."""
        self.compute_step()
        if self.log_due:
            self.print_progress()

    # -- the one-shot phases: capture, compile (README, "CUDA graphs and torch.compile") ----------------
    def capture_due(self) -> bool:
        return self.step_kind == "graphs" and not self.graphs and self.warmup_steps >= GRAPH_WARMUP_STEPS

    def graph_warm_up(self):
        """The warm-up steps a capture needs, where fewer have run: the next real batches, trained."""
        while self.warmup_steps < GRAPH_WARMUP_STEPS:
            self.step()
            self.steps += 1

    def batch_shapes(self) -> list[int]:
        """The batch sizes an epoch feeds the step: the full one, and the remainder that ends the epoch."""
        return sorted({self.batch_size, self.workload.last_batch}, reverse=True)

    def capture_graphs(self):
        """One CUDA graph per batch shape, each capturing forward, loss, backward and SGD's step. Capture runs
        nothing: the model does not train here. Each graph gets a private memory pool (they replay in no fixed
        order), and captures with the gradients unset, so that its backward allocates and then overwrites
        its own gradients on every replay instead of accumulating into another graph's."""
        for rows in self.batch_shapes():
            data = torch.zeros(rows, 1, 28, 28, device=self.device)
            target = torch.zeros(rows, dtype=torch.int64, device=self.device)
            graph = torch.cuda.CUDAGraph()
            self.optimizer.zero_grad(set_to_none=True)
            # The same work as the C++ trainer's capture (at::cuda::CUDAGraph): a full synchronization on each
            # side, a side stream, capture_begin and capture_end. Not torch.cuda.graph, which also runs gc.collect()
            # and empties the allocator's cache on entry, work C++'s capture does not do.
            torch.cuda.synchronize(self.device)
            with torch.cuda.stream(torch.cuda.Stream(self.device)):
                graph.capture_begin()
                output = self.model(data)
                loss = F.nll_loss(output, target)
                loss.backward()
                self.optimizer.step()
                graph.capture_end()
            torch.cuda.synchronize(self.device)
            self.graphs[rows] = CapturedStep(graph, data, target, output, loss)
        self.optimizer.zero_grad(set_to_none=True)

    def compile_model(self):
        """torch.compile the model and compile every batch shape of an epoch, forward and backward, so that no
        step phase ever compiles (dynamic=False: each shape gets its own static kernels, as the first shape
        alone would). The model does not train here: its gradients are unset again and the generators put
        back, so the dropout masks the compile drew are drawn again by the steps."""
        mode = "reduce-overhead" if self.step_kind == "compile-cudagraphs" else "default"
        self.compiled = torch.compile(self.model, mode=mode, dynamic=False)
        cpu_rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        calls = CUDAGRAPH_TREE_CALLS if mode == "reduce-overhead" else 1
        for rows in self.batch_shapes():
            data = torch.zeros(rows, 1, 28, 28, device=self.device)
            target = torch.zeros(rows, dtype=torch.int64, device=self.device)
            for _ in range(calls):
                self.data = data
                self.forward()
                F.nll_loss(self.output, target).backward()
                self.optimizer.zero_grad(set_to_none=True)
            if rows == self.batch_size:
                # A clone: the next shape's cudagraph-trees generation may overwrite this output's memory.
                full_output = self.output.detach().clone()
        self.data = None
        self.output = full_output  # the product's: the full batch's output of the compiled model
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state(cuda_rng, self.device)

    def one_shot_prepare(self):
        if self.step_kind == "graphs":
            self.graph_warm_up()

    def one_shot_body(self):
        (self.capture_graphs if self.step_kind == "graphs" else self.compile_model)()

    def ensure_ready(self):
        """Before a phase that steps: the one-shot phase, untimed, where it has not run in this worker."""
        if self.one_shot and not self.one_shot_done:
            self.one_shot_prepare()
            self.one_shot_body()
            self.one_shot_done = True

    def train_step(self):
        self.step()
        self.steps += 1
        if self.steps % LOG_INTERVAL == 0:
            self.print_progress()

    # -- what a round leaves, and what its preparation releases ------------------------------
    def held(self) -> list[torch.Tensor]:
        """Every tensor a round leaves in the trainer's state, model weights, optimizer state and the graphs'
        static tensors (which live as long as their graphs) aside."""
        tensors = [self.data, self.target, self.output, self.loss]
        tensors += list(self.host or ()) + list(self.update_check or ())
        tensors += [p.grad for p in self.model.parameters()]
        if self.fresh:
            tensors += list(self.fresh[0].parameters())
        static = {id(t) for captured in self.graphs.values() for t in captured[1:]}
        return [t for t in tensors if isinstance(t, torch.Tensor) and id(t) not in static]

    def weak_held(self) -> list[tuple[weakref.ref, StorageWeakRef | None]]:
        """What held() holds, referenced weakly: each tensor and its memory (storage), as the C++ trainer's
        WeakTensor does. A tensor can be freed while a view of it keeps its memory alive; memory the loader keeps
        for good (the split a batched loader slices) outlives every round and is left out."""
        kept = {t.untyped_storage().data_ptr() for t in (getattr(self.loader, "images", None),
                                                          getattr(self.loader, "targets", None)) if t is not None}
        refs = []
        for t in self.held():
            memory = t.untyped_storage()
            refs.append((weakref.ref(t), None if memory.data_ptr() in kept else StorageWeakRef(memory)))
        return refs

    def release(self):
        """Free what earlier rounds left (batches, outputs, losses with their graphs, gradients),
        so that no timed body frees it (README, "What is measured")."""
        self.host = self.data = self.target = self.output = self.loss = None
        self.fresh = self.update_check = self.rng_before = None
        self.optimizer.zero_grad()  # set_to_none, as LibTorch's

    def rng_state(self) -> torch.Tensor:
        return torch.cuda.get_rng_state() if self.device.type == "cuda" else torch.get_rng_state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_rng_state(state)
        else:
            torch.set_rng_state(state)

    # -- timing (README, "What is measured") -------------------------------------------------
    def _timed_cpu(self, body) -> tuple[int, int, int]:
        """(wall ns, process CPU ns, this thread's CPU ns) of body(self); nothing but the body between
        the clock reads, the CPU clocks just outside them."""
        cpu_start, thread_start = time.process_time_ns(), time.thread_time_ns()
        start = time.perf_counter_ns()
        body(self)
        end = time.perf_counter_ns()
        return end - start, time.process_time_ns() - cpu_start, time.thread_time_ns() - thread_start

    def _timed_cuda(self, body) -> tuple[int, int, int]:
        synchronize = torch._C._cuda_synchronize
        synchronize()
        cpu_start, thread_start = time.process_time_ns(), time.thread_time_ns()
        start = time.perf_counter_ns()
        body(self)
        synchronize()
        end = time.perf_counter_ns()
        return end - start, time.process_time_ns() - cpu_start, time.thread_time_ns() - thread_start

    def timer_floor(self, rounds: int = FLOOR_ROUNDS) -> int:
        """The median time of the empty phase: what the clock itself costs in this worker."""
        noop = self.bodies["noop"]
        return int(statistics.median(self.timed(noop)[0] for _ in range(rounds)))

    def threads(self) -> int:
        return torch.get_num_threads()

    def run_phase(self, name: str) -> tuple[int, int, int, dict, dict]:
        """Prepare the phase untimed, time its body; returns (ns, process CPU ns, thread CPU ns, product, the
        process's page faults across the round: {"minor_faults", "major_faults"})."""
        phase = PHASE_BY_NAME.get(name)
        if phase is None:
            raise ValueError(f"unknown phase '{name}'")
        if self.whole_step and name in ("forward", "loss", "backward", "param_update", "progress_print", "loss_item"):
            raise ValueError(f"a step '{self.step_kind}' trainer replays its step whole: it has no '{name}' phase")
        if name in ONE_SHOT_PHASES:
            if name != self.one_shot:
                raise ValueError(f"phase '{name}' is not a phase of a step '{self.step_kind}' trainer")
            if self.one_shot_done:
                raise ValueError(f"'{name}' runs once per worker, and it already ran in this one (untimed, before "
                                 f"the first phase that steps, or timed): time it in a fresh worker")
        elif name not in NEEDS_NO_STEP:
            self.ensure_ready()
        # A training step frees the previous step's tensors itself, as in any training loop.
        continuing = phase.continues_itself and self.last_phase == name
        earlier = [] if continuing else self.weak_held()
        if not continuing:
            self.release()
        if phase.prepare:
            phase.prepare(self)
        leftovers = None if continuing else sum(ref() is not None or (memory is not None and not memory.expired())
                                                for ref, memory in earlier)
        del earlier
        # Page faults across the round, read outside the clock (a system call each).
        before = page_faults()
        ns, cpu_ns, thread_ns = self.timed(self.bodies[name])
        after = page_faults()
        self.last_phase = name
        if name in ONE_SHOT_PHASES:
            self.one_shot_done = True
        faults = {"minor_faults": after[0] - before[0], "major_faults": after[1] - before[1]}
        return ns, cpu_ns, thread_ns, phase.product(self) | {"leftovers": leftovers}, faults

    # -- equivalence and the full run --------------------------------------------------------
    def layout(self) -> list[tuple[str, list[int]]]:
        return [(name, list(p.shape)) for name, p in self.model.named_parameters()]

    def get_params(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1).float().cpu() for p in self.model.parameters()])

    def set_params(self, flat: torch.Tensor):
        total = sum(p.numel() for p in self.model.parameters())
        if flat.numel() != total:
            raise ValueError(f"parameter buffer holds {flat.numel()} floats, the model has {total}")
        with torch.no_grad():
            offset = 0
            for p in self.model.parameters():
                p.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()

    def epoch_batches(self) -> int:
        return len(self.loader)

    def batch_at(self, index: int):
        # A loader of its own: a persistent worker's iterator is shared, so iterating self.loader would
        # move the trainer's epoch. One pass serves indices asked in increasing order (the equivalence tests ask
        # for the first, a middle and the last batch): it is kept until a lower index is asked for.
        if self.batch_pass is None or index < self.batch_pass[0]:
            self.batch_pass = [0, iter(loaders.make(self.loader_kind, self.root, self.batch_size, self.device))]
        for images, labels in self.batch_pass[1]:
            self.batch_pass[0] += 1
            if self.batch_pass[0] - 1 == index:
                return images.cpu(), labels.cpu()  # on the device where the split lives there
        self.batch_pass = None
        raise IndexError(f"batch {index} of an epoch of {len(self.loader)} batches")

    def train_steps(self, steps: int) -> list[float]:
        """`steps` steps and their losses; a graph variant's first ones are its warm-up, then it captures."""
        losses = []
        if self.step_kind.startswith("compile") and not self.one_shot_done:
            self.ensure_ready()
        for _ in range(steps):
            if self.capture_due():
                self.capture_graphs()
                self.one_shot_done = True
            self.step()
            losses.append(self.loss.item())
        return losses

    def evaluate(self) -> tuple[float, float]:
        test_set = self.test_set
        self.model.eval()
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            for data, target in loaders.data_loader(test_set, self.batch_size):
                data, target = data.to(self.device), target.to(self.device)
                output = self.model(data)
                loss_sum += F.nll_loss(output, target, reduction="sum").item()
                correct += output.argmax(1).eq(target).sum().item()
        self.model.train()
        return 100.0 * correct / len(test_set), loss_sum / len(test_set)

    def train(self, epochs: int, synchronize: bool, max_steps: int = 0) -> tuple[dict[str, int], int, int, int]:
        """The published run; with max_steps above 0 it stops after that many steps (a check under
        --benchmark-disable, not a measurement). Returns (phase totals in ns, steps, loop ns, process CPU ns of
        the timed bodies).

        The frees that fall inside a phase's clock stay there, as in the published program. A one-shot phase
        (graph_capture, compile) is inside the loop's time, and timed even free-running: once, outside any
        step, so that a reader can take it out. Where the step is one graph, train_step is timed whole (with
        the log line when due) after its batch's data_loading and copy_to_device."""
        totals = {name: 0 for name in PHASE_NAMES + ONE_SHOT_PHASES}
        cpu_total = 0
        bodies = self.run_bodies

        def run(name):
            nonlocal cpu_total
            if synchronize or name in ONE_SHOT_PHASES:
                ns, cpu_ns, _ = self.timed(bodies[name])
                totals[name] += ns
                cpu_total += cpu_ns
            else:
                bodies[name](self)

        steps = 0
        self.release()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(self.device)
        start = time.perf_counter_ns()
        run("optimizer_init")
        if self.one_shot == "compile":
            run("compile")
        for epoch in range(1, epochs + 1):
            if max_steps and steps >= max_steps:
                break
            self.epoch = epoch
            self.batches = iter(self.loader)
            batch_idx = 0
            while not max_steps or steps < max_steps:
                run("data_loading")
                if self.host is None:
                    break
                if self.capture_due():
                    run("graph_capture")
                run("copy_to_device")
                if self.whole_step:
                    self.seen = (batch_idx + 1) * self.batch_size
                    self.log_due = batch_idx % LOG_INTERVAL == 0
                    run("train_step")
                    batch_idx += 1
                    steps += 1
                    continue
                run("forward")
                run("loss")
                run("backward")
                run("param_update")
                self.seen = (batch_idx + 1) * self.batch_size
                if batch_idx % LOG_INTERVAL == 0:
                    run("progress_print")
                batch_idx += 1
                steps += 1
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        loop_ns = time.perf_counter_ns() - start
        self.batches = None  # the phases start a new epoch
        return totals, steps, loop_ns, cpu_total

    # -- ensembles (README, "Concurrent jobs and ensembles"; phasebench/train/ensemble.py) ------------------------
    def start_ensemble(self, models: int) -> None:
        """M models from seeds 1..M with this trainer's dropout, workload and optimizer flags; replaces the last
        ensemble. It reseeds the global generator; the trainer's own model is left as it is."""
        self.stop_ensemble()  # freed before the new one is built
        self.ensemble = ENSEMBLE_KINDS[self.ensemble_kind](
            models, lambda: Net(self.dropout, self.workload).to(self.device),
            lambda params: torch.optim.SGD(params, lr=LEARNING_RATE, momentum=MOMENTUM, **self.optimizer_flags))

    def stop_ensemble(self) -> None:
        self.ensemble = self.ensemble_losses = None

    def _step_ensemble(self) -> None:
        self.ensemble_losses = self.ensemble.step(self.data, self.target)

    def ensemble_step(self) -> tuple[int, int, int, list[float]]:
        """One step of every member on the next batch, timed as a phase is: the batch is loaded and copied to
        the device before the clock starts, and what the last step left is released before that. Returns
        (ns, process CPU ns, thread CPU ns, each member's loss)."""
        if self.ensemble is None:
            raise RuntimeError("no ensemble: send ensemble_start first")
        self.ensemble_losses = None
        self.release()
        self.on_device()
        ns, cpu_ns, thread_ns = self.timed(Trainer._step_ensemble)
        losses = self.ensemble_losses
        return ns, cpu_ns, thread_ns, (torch.stack(losses) if isinstance(losses, list) else losses).tolist()

    def ensemble_params(self, member: int) -> torch.Tensor:
        if self.ensemble is None:
            raise RuntimeError("no ensemble: send ensemble_start first")
        return self.ensemble.member_params(member)

    def peak_device_memory(self) -> int | None:
        """Peak bytes allocated on the device since train() began; None on cpu (README, "Implementations and
        workloads")."""
        return torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else None


@dataclass(frozen=True)
class Phase:
    name: str
    label: str  # the published table's row
    prepare: Callable[[Trainer], None] | None  # untimed, after Trainer.release()
    body: Callable[[Trainer], None]  # timed
    product: Callable[[Trainer], dict]
    continues_itself: bool = False  # its rounds follow one another as training steps do


# -- products that prove the work (README, "What is measured") ---------------------------------

def _loaded(t: Trainer) -> dict:
    return product(t.host[0], all_finite([t.host[0]]), batch=t.host_index)


def _copied(t: Trainer) -> dict:
    on_device = t.data.device == t.device and t.target.device == t.device
    matches = torch.equal(t.data.cpu(), t.host[0].cpu()) and torch.equal(t.target.cpu(), t.host[1].cpu())
    # Nothing was copied: the batch already lived where it was asked for (always on cpu; on cuda when the
    # whole split lives on the device).
    resident = t.data.data_ptr() == t.host[0].data_ptr() and t.target.data_ptr() == t.host[1].data_ptr()
    return product(t.data, all_finite([t.data]), batch=t.host_index, on_device=on_device, matches_host=matches,
                   resident=resident)


def _prepare_forward(t: Trainer):
    t.on_device()
    t.rng_before = t.rng_state()


def _forwarded_product(t: Trainer) -> dict:
    """The output against the model run again on the same input with the same dropout draws."""
    after = t.rng_state()
    t.set_rng_state(t.rng_before)
    # The compiled model is run again as it was run, with gradients on: under no_grad it would compile anew.
    with torch.no_grad() if t.compiled is None else torch.enable_grad():
        again = (t.model if t.compiled is None else t.compiled)(t.data).detach()
    t.set_rng_state(after)
    error = (again - t.output.detach()).abs().max().item()
    return product(t.output, all_finite([t.output]), recompute_error=error)


def _prepare_backward(t: Trainer):
    t.forwarded()
    t.zero_before = all(p.grad is None or not bool(p.grad.any()) for p in t.model.parameters())


def _backward_product(t: Trainer) -> dict:
    nonzero = sum(p.grad is not None and bool(p.grad.any()) for p in t.model.parameters())
    return product(t.model.conv1.weight.grad, all_finite(p.grad for p in t.model.parameters()),
                   zero_before=t.zero_before, nonzero_grads=nonzero)


def _prepare_update(t: Trainer):
    t.forwarded()
    t.backward()
    weight = t.model.conv1.weight
    momentum = t.optimizer.state.get(weight, {}).get("momentum_buffer")
    t.update_check = (weight.detach().clone(), weight.grad.clone()) + (() if momentum is None else (momentum.clone(),))


def _updated_product(t: Trainer) -> dict:
    """conv1.weight against SGD with momentum: buf = momentum * buf + grad (grad on the first step),
    weight -= lr * buf."""
    before, grad, *momentum = t.update_check
    buffer = grad if not momentum else momentum[0] * MOMENTUM + grad
    expected = before.add(buffer, alpha=-LEARNING_RATE)
    weight = t.model.conv1.weight.detach()
    return product(weight, all_finite(t.model.parameters()),
                   update_error=(weight - expected).abs().max().item(), moved=(weight - before).abs().max().item())


def _fresh_product(t: Trainer) -> dict:
    fresh, live = list(t.fresh[0].parameters()), list(t.model.parameters())
    shared = {p.data_ptr() for p in fresh} & {p.data_ptr() for p in live}
    distinct = not shared and not all(torch.equal(a, b) for a, b in zip(fresh, live))
    return product(torch.empty(sum(p.numel() for p in fresh)), all_finite(fresh), distinct=distinct)


def _captured_product(t: Trainer) -> dict:
    """A graph per batch shape, the full batch's first; the output tensor a replay fills has its shape."""
    shapes = [len(t.graphs[rows].data) for rows in t.batch_shapes()]
    assert shapes == t.batch_shapes(), f"graphs captured for {shapes} rows, the epoch feeds {t.batch_shapes()}"
    return product(t.graphs[t.batch_size].output, all_finite(t.model.parameters()))


def _compiled_product(t: Trainer) -> dict:
    return product(t.output, all_finite([t.output]))


def _loss_product(t: Trainer, main: torch.Tensor, **checks) -> dict:
    loss = t.loss.item()
    return product(main, bool(torch.isfinite(main).all()) and math.isfinite(loss), loss, **checks)


# The one Python place that says what each phase prepares, times and produces (README, "What is
# measured"). Its C++ twin is Trainer::make_phases in cpp/phasebench.cpp.
PHASES = (
    Phase("data_loading", "Data Loading", None, Trainer.load_batch, _loaded),
    Phase("copy_to_device", "Copying To Device", Trainer.load_batch, Trainer.copy_batch, _copied),
    Phase("optimizer_init", "Optimizer Init", None, Trainer.fresh_model, _fresh_product),
    Phase("forward", "Model Forward", _prepare_forward, Trainer.forward, _forwarded_product),
    Phase("loss", "Loss Calculation", lambda t: (t.on_device(), t.forward()), Trainer.compute_loss,
          lambda t: _loss_product(t, t.loss)),
    Phase("backward", "Backward Pass", _prepare_backward, Trainer.backward, _backward_product),
    Phase("param_update", "Parameter Update", _prepare_update, Trainer.update, _updated_product),
    Phase("progress_print", "Progress Printing", Trainer.forwarded, Trainer.print_progress,
          lambda t: _loss_product(t, t.loss)),
    Phase("train_step", "Train Step", None, Trainer.train_step,
          lambda t: _loss_product(t, t.output, batch=t.host_index), continues_itself=True),
)
# Not training phases: the empty timed region (the timer floor, worker_overhead), and the C++
# example's per-step loss.item() (README, "How our trainers differ from pytorch/examples").
NOOP = Phase("noop", "No-op", None, lambda t: None, lambda t: product(torch.empty(0), True))
LOSS_ITEM = Phase("loss_item", "loss.item()", Trainer.forwarded, Trainer.read_loss, lambda t: _loss_product(t, t.loss))
EXTRA_PHASES = (LOSS_ITEM,)
# Timed once per worker, the first time the step needs them (bench/registry.py's ONE_SHOT_PHASES).
ONE_SHOT = (Phase("graph_capture", "Graph Capture", Trainer.one_shot_prepare, Trainer.capture_graphs,
                  _captured_product),
            Phase("compile", "Compile", None, Trainer.compile_model, _compiled_product))
assert tuple(phase.name for phase in ONE_SHOT) == ONE_SHOT_PHASES
PHASE_NAMES = tuple(phase.name for phase in PHASES)
PHASE_BY_NAME = {phase.name: phase for phase in PHASES + EXTRA_PHASES + ONE_SHOT + (NOOP,)}
# What the training run times under each phase's name.
RUN_BODIES = {"optimizer_init": Trainer.build_model, "data_loading": Trainer.load_in_epoch,
              "copy_to_device": Trainer.copy_batch, "forward": Trainer.forward, "loss": Trainer.compute_loss,
              "backward": Trainer.backward, "param_update": Trainer.update, "progress_print": Trainer.print_progress,
              "train_step": Trainer.whole_step_in_run, "graph_capture": Trainer.capture_graphs,
              "compile": Trainer.compile_model}

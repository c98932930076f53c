"""The Python implementation: the pytorch/examples MNIST workload, cut into the timed phases.

It is written as the examples' users write it (SPEC §1): torchvision's MNIST with ToTensor and
Normalize, a DataLoader of 64 without shuffling, the C++ example's Net, SGD(0.01, 0.5), and a
log line every 10 batches. Its twin is cpp/phasebench.cpp; PHASES at the bottom is the suite's
single list of phases.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms

from bench.data import check_split

BATCH_SIZE = 64
LOG_INTERVAL = 10
TRANSFORM = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])


class Net(nn.Module):
    """The network of examples/cpp/mnist (SPEC §1), parameter for parameter."""

    def __init__(self, dropout: float = 0.5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d(dropout)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)
        self.dropout = dropout

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def make_loader(dataset) -> torch.utils.data.DataLoader:
    return torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False, num_workers=0)


def product(main: torch.Tensor, finite: bool, loss: float | None = None) -> dict:
    """What a phase produced, for plain tests to check (the C++ side reports the same)."""
    return {"shape": list(main.shape), "finite": bool(finite), "loss": loss}


def all_finite(tensors) -> bool:
    return all(t is not None and bool(torch.isfinite(t).all()) for t in tensors)


class Trainer:
    def __init__(self, root: str, device: str = "cpu", threads: int = 0, seed: int = 1,
                 log_path: str | None = None, dropout: float = 0.5,
                 slow_phase: str = "", slow_ns: int = 0):
        check_split(f"{root}/MNIST/raw", "train")
        self.root, self.dropout = root, dropout
        self.slow_phase, self.slow_ns = slow_phase, slow_ns
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"device {device} requested but CUDA is not available")
        self.train_set = datasets.MNIST(root, train=True, download=False, transform=TRANSFORM)
        self.loader = make_loader(self.train_set)
        if threads > 0:
            torch.set_num_threads(threads)
        torch.manual_seed(seed)
        self.log = open(log_path, "w") if log_path else sys.stdout
        self.batches = None
        self.epoch = self.seen = self.steps = 0
        self.host = self.data = self.target = self.output = self.loss = None
        self.fresh = None
        self.build_model()

    def close(self):
        if self.log is not sys.stdout:
            self.log.close()

    # -- the operations the phases are made of ------------------------------------------
    def build_model(self):
        self.model = Net(self.dropout).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.5)

    def next_batch(self):
        """The next batch, starting a new epoch when the last one ends."""
        if self.batches is not None:
            batch = next(self.batches, None)
            if batch is not None:
                self.seen += len(batch[0])
                return batch
        self.batches = iter(self.loader)
        self.epoch += 1
        batch = next(self.batches)
        self.seen = len(batch[0])
        return batch

    def copy_batch(self):
        self.data, self.target = self.host[0].to(self.device), self.host[1].to(self.device)

    def forward(self):
        self.output = self.model(self.data)

    def compute_loss(self):
        self.loss = F.nll_loss(self.output, self.target)

    def backward(self):
        self.loss.backward()

    def update(self):
        self.optimizer.step()
        self.optimizer.zero_grad()

    def print_progress(self):
        print(f"Train Epoch: {self.epoch} [{self.seen:5d}/{len(self.train_set):5d}]\tLoss: {self.loss.item():.4f}",
              file=self.log)

    def on_device(self):
        self.host = self.next_batch()
        self.copy_batch()

    def forwarded(self):
        self.on_device()
        self.forward()
        self.compute_loss()

    def fresh_model(self):
        model = Net(self.dropout).to(self.device)
        self.fresh = model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)

    def step(self):
        """One training step, without its log line."""
        self.host = self.next_batch()
        self.copy_batch()
        self.forward()
        self.compute_loss()
        self.backward()
        self.update()

    def train_step(self):
        self.step()
        self.steps += 1
        if self.steps % LOG_INTERVAL == 0:
            self.print_progress()

    def loss_product(self, main):
        loss = self.loss.item()
        return product(main, bool(torch.isfinite(main).all()) and math.isfinite(loss), loss)

    # -- timing (SPEC §3) ------------------------------------------------------------------
    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def timed(self, body: Callable[[], object], name: str) -> int:
        self.sync()
        start = time.perf_counter_ns()
        body()
        if name == self.slow_phase:
            time.sleep(self.slow_ns / 1e9)
        self.sync()
        return time.perf_counter_ns() - start

    def threads(self) -> int:
        return torch.get_num_threads()

    def run_phase(self, name: str) -> tuple[int, dict]:
        phase = PHASE_BY_NAME.get(name)
        if phase is None:
            raise ValueError(f"unknown phase '{name}'")
        if phase.prepare:
            phase.prepare(self)
        ns = self.timed(lambda: phase.body(self), name)
        return ns, phase.product(self)

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
        for i, batch in enumerate(make_loader(self.train_set)):
            if i == index:
                return batch
        raise IndexError(f"batch {index} of an epoch of {len(self.loader)} batches")

    def train_steps(self, steps: int) -> list[float]:
        losses = []
        for _ in range(steps):
            self.step()
            losses.append(self.loss.item())
        return losses

    def evaluate(self) -> tuple[float, float]:
        check_split(f"{self.root}/MNIST/raw", "t10k")
        test_set = datasets.MNIST(self.root, train=False, download=False, transform=TRANSFORM)
        self.model.eval()
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            for data, target in make_loader(test_set):
                data, target = data.to(self.device), target.to(self.device)
                output = self.model(data)
                loss_sum += F.nll_loss(output, target, reduction="sum").item()
                correct += output.argmax(1).eq(target).sum().item()
        self.model.train()
        return 100.0 * correct / len(test_set), loss_sum / len(test_set)

    def train(self, epochs: int, synchronize: bool) -> tuple[dict[str, int], int, int]:
        """The published run. Returns (phase totals in ns, steps, loop ns)."""
        totals = {name: 0 for name in PHASE_NAMES}

        def time_into(name, body):
            if synchronize:
                totals[name] += self.timed(body, name)
            else:
                body()

        steps = 0
        self.sync()
        start = time.perf_counter_ns()
        time_into("optimizer_init", self.build_model)
        for epoch in range(1, epochs + 1):
            self.epoch = epoch
            batches = iter(self.loader)
            batch_idx = 0
            while True:
                time_into("data_loading", lambda: setattr(self, "host", next(batches, None)))
                if self.host is None:
                    break
                time_into("copy_to_device", self.copy_batch)
                time_into("forward", self.forward)
                time_into("loss", self.compute_loss)
                time_into("backward", self.backward)
                time_into("param_update", self.update)
                self.seen = (batch_idx + 1) * BATCH_SIZE
                if batch_idx % LOG_INTERVAL == 0:
                    time_into("progress_print", self.print_progress)
                batch_idx += 1
                steps += 1
        self.sync()
        return totals, steps, time.perf_counter_ns() - start


@dataclass(frozen=True)
class Phase:
    name: str
    label: str  # the published table's row
    prepare: Callable[[Trainer], None] | None  # untimed
    body: Callable[[Trainer], None]  # timed
    product: Callable[[Trainer], dict]


def _zeroed_on_device(t: Trainer):
    t.on_device()
    t.optimizer.zero_grad()


def _set_host(t: Trainer):
    t.host = t.next_batch()


# The one Python place that says what each phase prepares, times and produces (SPEC §2).
# Its C++ twin is Trainer::make_phases in cpp/phasebench.cpp.
PHASES = (
    Phase("data_loading", "Data Loading", None, _set_host,
          lambda t: product(t.host[0], all_finite([t.host[0]]))),
    Phase("copy_to_device", "Copying To Device", _set_host, Trainer.copy_batch,
          lambda t: product(t.data, all_finite([t.data]))),
    Phase("optimizer_init", "Optimizer Init", lambda t: setattr(t, "fresh", None), Trainer.fresh_model,
          lambda t: product(torch.empty(sum(p.numel() for p in t.fresh[0].parameters())),
                            all_finite(t.fresh[0].parameters()))),
    Phase("forward", "Model Forward", _zeroed_on_device, Trainer.forward,
          lambda t: product(t.output, all_finite([t.output]))),
    Phase("loss", "Loss Calculation", lambda t: (_zeroed_on_device(t), t.forward()), Trainer.compute_loss,
          lambda t: t.loss_product(t.loss)),
    Phase("backward", "Backward Pass", lambda t: (t.optimizer.zero_grad(), t.forwarded()), Trainer.backward,
          lambda t: product(t.model.conv1.weight.grad, all_finite(p.grad for p in t.model.parameters()))),
    Phase("param_update", "Parameter Update", lambda t: (t.forwarded(), t.backward()), Trainer.update,
          lambda t: product(t.model.conv1.weight, all_finite(t.model.parameters()))),
    Phase("progress_print", "Progress Printing", Trainer.forwarded, Trainer.print_progress,
          lambda t: t.loss_product(t.loss)),
    Phase("train_step", "Train Step", None, Trainer.train_step, lambda t: t.loss_product(t.output)),
)
# worker_overhead: the timed region with nothing in it. Not a training phase.
NOOP = Phase("noop", "No-op", None, lambda t: None, lambda t: product(torch.empty(0), True))
PHASE_NAMES = tuple(phase.name for phase in PHASES)
PHASE_BY_NAME = {phase.name: phase for phase in PHASES + (NOOP,)}

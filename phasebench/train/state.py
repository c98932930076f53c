"""The Python implementation's training state and the operations its phases are made of: the pytorch/examples
MNIST workload as the examples' users write it (docs/method.md#how-our-trainers-differ-from-pytorchexamples-and-why):
torchvision's MNIST with ToTensor and Normalize, a DataLoader of 64 without shuffling, the C++ example's Net,
SGD(0.01, 0.5), and a log line every 10 batches. An implementation's pieces change the loader
(phasebench/train/loaders.py), the step (steps.py) or the optimizer's flags (model.py), and every workload the
Net's width and the batch size. phases.py says which operations each phase prepares and times; trainer.py
times them.
"""

from __future__ import annotations

import sys
import weakref

import torch
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef

from phasebench import determinism
from phasebench.data import check_split
from phasebench.devices import with_index
from phasebench.spec import LOG_INTERVAL, TRAIN_IMAGES, Workload
from phasebench.train import loaders, steps
from phasebench.train.model import Net, optimizer_flags, sgd


class TrainingState:
    def __init__(self, root: str, device: str = "cpu", threads: int = 0, seed: int = 1,
                 log_path: str | None = None, dropout: float = 0.5, width: int = 1, batch_size: int = 64,
                 loader: str = "published", optimizer: str = "sgd", step: str = "eager", fallback_random: bool = False,
                 sync: str | None = None, bucket_mb: float | None = None, deterministic: bool = False):
        if deterministic:  # the equivalence tests' numerics, set before anything runs on the device
            determinism.make_deterministic()
        check_split(f"{root}/MNIST/raw", "train")
        check_split(f"{root}/MNIST/raw", "t10k")
        self.optimizer_flags = optimizer_flags(optimizer)
        self.device = with_index(device)
        self.step_piece = steps.make(step, self.device, fallback_random)
        self.root, self.dropout = root, dropout
        self.workload, self.loader_kind, self.batch_size = Workload(width, batch_size), loader, batch_size
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # so that the cheapest synchronization is the right one
        self.loader = loaders.make(loader, root, batch_size, self.device)
        # Both splits before training, as the published programs open them (docs/page-faults.md says what this
        # does to glibc's heap).
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
        self.log_due = False  # the training run's whole step: whether this batch logs
        # Data parallel (phasebench/train/distributed.py): how gradients are synchronized, and this rank of how many
        # once attached; bucket_mb is DDP's bucket_cap_mb (None: DDP's default).
        self.sync, self.bucket_mb, self.rank, self.world, self.group_attached = sync, bucket_mb, 0, 1, False
        self.ddp = None
        self.build_model()

    def close(self):
        if self.log is not sys.stdout:
            self.log.close()
        self.step_piece.close()

    # -- the operations the phases are made of ------------------------------------------
    def new_model(self):
        model = Net(self.dropout, self.workload).to(self.device)
        return model, sgd(model.parameters(), self.optimizer_flags)

    def build_model(self):
        self.model, self.optimizer = self.new_model()
        if self.group_attached:
            from phasebench.train import distributed

            self.ddp = distributed.wrap(self, self.model)
        self.step_piece.new_model(self)  # a new model needs its own capture or compile

    def shard(self, rank: int, world: int):
        """This rank's shard of every global batch from now on (phasebench/train/distributed.py)."""
        self.loader = loaders.make(self.loader_kind, self.root, self.batch_size, self.device, (rank, world))
        self.batches = None

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
        self.step_piece.copy(self)

    def forward(self):
        self.step_piece.forward(self)

    def compute_loss(self):
        self.loss = F.nll_loss(self.output, self.target)

    def backward(self):
        self.loss.backward()

    def grad_sync(self):
        from phasebench.train import distributed

        distributed.grad_sync(self)

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
        self.step_piece.compute(self)

    def eager_step(self):
        self.forward()
        self.compute_loss()
        self.backward()
        if self.sync == "allreduce" and self.group_attached:  # data parallel: dist-mnist.cpp's all-reduce
            self.grad_sync()
        self.update()

    def train_step(self):
        self.step()
        self.steps += 1
        if self.steps % LOG_INTERVAL == 0:
            self.print_progress()

    def whole_step_in_run(self):
        """The training run's step_in_run, where the step is one graph: the step, and the log line when due."""
        self.step_piece.compute(self)
        if self.log_due:
            self.print_progress()

    # -- the one-shot phases: capture, compile (docs/gpu.md#cuda-graphs-and-torchcompile) ----------------
    def one_shot_prepare(self):
        self.step_piece.one_shot_prepare(self)

    def run_one_shot(self):
        self.step_piece.one_shot(self)

    def batch_shapes(self) -> list[int]:
        """The batch sizes an epoch feeds the step: the full one, and the remainder that ends the epoch."""
        return sorted({self.batch_size, self.workload.last_batch}, reverse=True)

    # -- what a round leaves, and what its preparation releases ------------------------------
    def held(self) -> list[torch.Tensor]:
        """Every tensor a round leaves in the trainer's state, model weights, optimizer state and the step's
        static tensors (a graph's, which live as long as their graphs) aside."""
        tensors = [self.data, self.target, self.output, self.loss]
        tensors += list(self.host or ()) + list(self.update_check or ())
        tensors += [p.grad for p in self.model.parameters()]
        if self.fresh:
            tensors += list(self.fresh[0].parameters())
        static = self.step_piece.static_tensors()
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
        so that no timed body frees it (docs/method.md#what-is-measured)."""
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

    # -- parameters and batches, for the equivalence tests -----------------------------------
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

    def peak_device_memory(self) -> int | None:
        """Peak bytes allocated on the device since train() began; None on cpu (docs/implementations.md#implementations-and-workloads)."""
        return torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else None

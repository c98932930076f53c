"""Python's data pipelines, one small function each (docs/implementations.md#implementations-and-workloads).

Every loader yields (images, labels) batches of the same values in the same order: the published
normalization, (x / 255 − 0.1307) / 0.3081, computed with the same float32 operations, so that every
implementation trains bit-identically to the published one (tests/equivalence/). Iterating a
loader starts an epoch; len() is its batch count.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # torchvision is imported when data is first read (torchvision() below), not with this module
    from torchvision import datasets

MEAN, STD = 0.1307, 0.3081
PUBLISHED_TRANSFORM = "ToTensor, Normalize"  # mnist()'s default: pytorch/examples' per-image transform


@cache
def torchvision():
    """(datasets, transforms), imported when data is first read: torchvision's import costs about as much CPU as
    torch's, and a process that reads no data (pytest itself, and each suite run a test starts) needs none of it."""
    from torchvision import datasets, transforms

    return datasets, transforms


@cache
def normalize():
    return torchvision()[1].Normalize((MEAN,), (STD,))


def mnist(root: str, train: bool, transform=PUBLISHED_TRANSFORM) -> datasets.MNIST:
    datasets, transforms = torchvision()
    if transform == PUBLISHED_TRANSFORM:
        transform = transforms.Compose([transforms.ToTensor(), normalize()])
    return datasets.MNIST(root, train=train, download=False, transform=transform)


def data_loader(dataset, batch_size: int, **options) -> torch.utils.data.DataLoader:
    # A generator of its own: each new iterator draws a base seed from the loader's generator, which
    # would otherwise be the global one that dropout draws from; LibTorch's loader draws nothing.
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False, generator=torch.Generator(),
                                       **({"num_workers": 0} | options))


def scaled_split(dataset: datasets.MNIST) -> torch.Tensor:
    """The split as float / 255 in one operation, [N, 1, 28, 28]: what ToTensor computes per image, and
    what LibTorch's MNIST constructor computes once."""
    return dataset.data.unsqueeze(1).to(torch.float32).div(255)


def published(root: str, batch_size: int, device: torch.device):
    """torchvision's MNIST with ToTensor and Normalize per image, a DataLoader (pytorch/examples' main.py)."""
    return data_loader(mnist(root, True), batch_size)


class ScaledMNIST(torch.utils.data.Dataset):
    """LibTorch's MNIST in Python: the split converted once (untimed, at construction), per index LibTorch's
    Normalize, stacked by the DataLoader's collate: a map-style Dataset as Python users write one.

    torch::data::transforms::Normalize makes its mean and std tensors once, and per image computes
    (image - mean) / std; so does this, with float32 tensors of shape [1, 1, 1]. torchvision's Normalize does the
    same two operations (sub_ and div_ on a clone) and, on every call, also checks its arguments, makes the two
    tensors again and checks (std == 0).any(): the argument checks are all this leaves out, and the values are
    the same to the bit (tests/equivalence/test_variants.py, test_tensor_loader_same_items and test_variant_same_batches)."""

    def __init__(self, root: str):
        raw = mnist(root, True, transform=None)
        self.images, self.targets = scaled_split(raw), raw.targets
        self.mean, self.std = (torch.tensor(value, dtype=torch.float32).view(1, 1, 1) for value in (MEAN, STD))

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        return (self.images[index] - self.mean) / self.std, int(self.targets[index])


def tensor(root: str, batch_size: int, device: torch.device):
    return data_loader(ScaledMNIST(root), batch_size)


class SplitBatches:
    """The split normalized once, each batch a slice of it; on an accelerator the split lives there, so a
    batch is already on the device (copy_to_device copies nothing; its product says so)."""

    def __init__(self, root: str, batch_size: int, device: torch.device, shard: tuple[int, int] = (0, 1)):
        raw = mnist(root, True, transform=None)
        images = normalize()(scaled_split(raw))  # the same float32 operations as per image
        self.images, self.targets = images.to(device), raw.targets.to(device)
        self.batch_size = batch_size
        # A data-parallel rank's shard (rank, world): of each global batch, the images rank, rank + world, ...;
        # DistributedSampler(shuffle=False)'s order with a batch of batch_size / world (docs/distributed.md).
        self.rank, self.world = shard

    def __len__(self) -> int:
        return -(-len(self.targets) // self.batch_size)

    def __iter__(self):
        images, targets, size, rank, world = self.images, self.targets, self.batch_size, self.rank, self.world
        for start in range(0, len(targets), size):
            yield images[start + rank:start + size:world], targets[start + rank:start + size:world]


def batched(root: str, batch_size: int, device: torch.device, shard: tuple[int, int] = (0, 1)):
    return SplitBatches(root, batch_size, device, shard)


def workers(root: str, batch_size: int, device: torch.device):
    """The published pipeline with pytorch/examples' settings on accelerators: one worker process that stays
    between epochs, and pinned batches on cuda."""
    return data_loader(mnist(root, True), batch_size, num_workers=1, persistent_workers=True,
                       pin_memory=device.type == "cuda")


LOADERS = {"published": published, "tensor": tensor, "batched": batched, "workers": workers}


def make(kind: str, root: str, batch_size: int, device: torch.device, shard: tuple[int, int] = (0, 1)):
    if kind not in LOADERS:
        raise ValueError(f"unknown loader '{kind}': {', '.join(LOADERS)}")
    if shard != (0, 1):
        if kind != "batched":
            raise ValueError("a data-parallel rank's shard needs the batched loader")
        return batched(root, batch_size, device, shard)
    return LOADERS[kind](root, batch_size, device)

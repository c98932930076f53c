"""Where the MNIST-format data comes from, and checks that both trainers can read it.

Every source ends as uncompressed IDX files in `<torchvision root>/MNIST/raw`, the folder
torchvision's MNIST reads and the one handed to LibTorch's MNIST, so both implementations
read the same bytes. Sources, in the order `--dataset auto` tries them (README, "Data"):

- mnist: real MNIST under `ROOT/MNIST/raw`, or downloaded there by torchvision;
- fashion-mnist: Debian's dataset-fashion-mnist, decompressed to `ROOT/fashion-mnist/MNIST/raw`;
- synthetic: generated to `ROOT/synthetic/MNIST/raw`, deterministic, same shapes.
"""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

SOURCES = ("mnist", "fashion-mnist", "synthetic")
DATASET_CHOICES = ("auto",) + SOURCES
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
IMAGE_MAGIC, LABEL_MAGIC = 2051, 2049
SIDE = 28
# LibTorch's MNIST accepts only the full splits.
SPLIT_SIZES = {"train": 60000, "t10k": 10000}
FILES = tuple(f"{split}-{kind}-idx{dims}-ubyte" for split in SPLIT_SIZES for kind, dims in (("images", 3), ("labels", 1)))


class DataError(RuntimeError):
    """Bad or missing data; the message names the file and the problem."""


@dataclass(frozen=True)
class DataSource:
    name: str  # mnist, fashion-mnist or synthetic
    root: str  # torchvision's root: the files are in root/MNIST/raw
    origin: str  # where the files came from

    @property
    def raw_dir(self) -> str:
        return os.path.join(self.root, "MNIST", "raw")

    def as_dict(self) -> dict:
        return asdict(self) | {"raw_dir": self.raw_dir}


def idx_count(path: str | os.PathLike, magic: int) -> int:
    """The item count of an IDX file, after checking its header against its size (reads 16 bytes)."""
    path = str(path)
    header_size = 16 if magic == IMAGE_MAGIC else 8
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as file:
            header = file.read(header_size)
    except OSError as error:
        raise DataError(f"{path}: cannot read ({error.strerror})") from None
    if len(header) < header_size:
        raise DataError(f"{path}: {size} bytes, shorter than the {header_size}-byte IDX header")
    words = struct.unpack(f">{header_size // 4}I", header)
    if words[0] != magic:
        raise DataError(f"{path}: IDX magic {words[0]}, expected {magic}")
    count, item_size = words[1], 1
    if magic == IMAGE_MAGIC:
        if words[2:] != (SIDE, SIDE):
            raise DataError(f"{path}: images are {words[2]}x{words[3]}, expected {SIDE}x{SIDE}")
        item_size = SIDE * SIDE
    if size != header_size + count * item_size:
        raise DataError(
            f"{path}: header claims {count} items ({header_size + count * item_size} bytes) "
            f"but the file has {size} bytes"
        )
    return count


def check_split(raw_dir: str, split: str, full_size: bool = True) -> int:
    """Check one split's image and label files; return the image count."""
    images = idx_count(os.path.join(raw_dir, f"{split}-images-idx3-ubyte"), IMAGE_MAGIC)
    labels_path = os.path.join(raw_dir, f"{split}-labels-idx1-ubyte")
    labels = idx_count(labels_path, LABEL_MAGIC)
    if labels != images:
        raise DataError(f"{labels_path}: {labels} labels for {images} images")
    if full_size and images != SPLIT_SIZES[split]:
        raise DataError(
            f"{raw_dir}/{split}-images-idx3-ubyte: {images} images; the workload needs the full "
            f"split of {SPLIT_SIZES[split]} (LibTorch's MNIST reads no other size)"
        )
    # Both readers accept any byte as a label, and training fails later ("Target 200 is out of bounds.").
    values = np.fromfile(labels_path, dtype=np.uint8, offset=8)
    bad = np.flatnonzero(values > 9)
    if bad.size:
        raise DataError(f"{labels_path}: label {values[bad[0]]} at index {bad[0]} is outside 0–9")
    return images


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write uint8 images (N, 28, 28) or labels (N,) as an IDX file."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    magic = IMAGE_MAGIC if array.ndim == 3 else LABEL_MAGIC
    with open(path, "wb") as file:
        file.write(struct.pack(f">I{array.ndim}I", magic, *array.shape))
        file.write(array.tobytes())


def synthetic_split(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Learnable digit-like data: each class is a fixed random blob pattern plus noise."""
    rng = np.random.default_rng(seed)
    templates = rng.random((10, SIDE, SIDE)) < 0.2
    labels = rng.integers(0, 10, size=count, dtype=np.uint8)
    noise = rng.integers(0, 96, size=(count, SIDE, SIDE), dtype=np.uint8)
    images = np.where(templates[labels], np.uint8(255) - noise, noise)
    return images.astype(np.uint8), labels


def write_synthetic(raw_dir: str, sizes: dict[str, int] = SPLIT_SIZES) -> None:
    os.makedirs(raw_dir, exist_ok=True)
    for seed, (split, count) in enumerate(sizes.items()):
        images, labels = synthetic_split(count, seed)
        write_idx(os.path.join(raw_dir, f"{split}-images-idx3-ubyte"), images)
        write_idx(os.path.join(raw_dir, f"{split}-labels-idx1-ubyte"), labels)


def _complete(raw_dir: str) -> bool:
    try:
        for split in SPLIT_SIZES:
            check_split(raw_dir, split)
        return True
    except DataError:
        return False


def _network_reachable(host: str = "ossci-datasets.s3.amazonaws.com", timeout: float = 3.0) -> bool:
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _provided_mnist(root: str) -> DataSource | None:
    """The MNIST files the user put under root, checked; None when there are none.

    Files that are there but unusable are an error, never a reason to download over them
    or to quietly use another dataset."""
    raw = os.path.join(root, "MNIST", "raw")
    if not any(os.path.lexists(os.path.join(raw, name)) for name in FILES):
        return None
    try:
        for split in SPLIT_SIZES:
            check_split(raw, split)
    except DataError as error:
        raise DataError(f"{error}; fix or remove the MNIST files in {raw}") from None
    return DataSource("mnist", root, raw)


def _mnist(root: str) -> DataSource | None:
    provided = _provided_mnist(root)
    if provided or not _network_reachable():
        return provided
    from torchvision import datasets  # its download prints its own progress bar

    try:
        for train in (True, False):
            datasets.MNIST(root, train=train, download=True)
    except (OSError, RuntimeError) as error:  # torchvision raises RuntimeError when every mirror fails
        raise DataError(f"--dataset mnist: torchvision could not download MNIST to {root}/MNIST/raw ({error}); "
                        f"put the IDX files there yourself, or pass --dataset synthetic") from None
    _provided_mnist(root)  # raises if what came down is unusable
    return DataSource("mnist", root, "downloaded by torchvision")


def _fashion_mnist(root: str) -> DataSource | None:
    target = DataSource("fashion-mnist", os.path.join(root, "fashion-mnist"), str(FASHION_MNIST_DIR))
    if _complete(target.raw_dir):
        return target
    if not all((FASHION_MNIST_DIR / f"{name}.gz").exists() for name in FILES):
        return None
    os.makedirs(target.raw_dir, exist_ok=True)
    for name in FILES:
        partial = os.path.join(target.raw_dir, name + ".partial")
        with gzip.open(FASHION_MNIST_DIR / f"{name}.gz") as source, open(partial, "wb") as out:
            shutil.copyfileobj(source, out)
        os.replace(partial, os.path.join(target.raw_dir, name))
    return target if _complete(target.raw_dir) else None


def _synthetic(root: str) -> DataSource:
    target = DataSource("synthetic", os.path.join(root, "synthetic"), "generated by bench.data")
    if not _complete(target.raw_dir):
        write_synthetic(target.raw_dir)
    return target


def resolve(dataset: str, root: str) -> DataSource:
    """Find or make the data for `dataset` (one of DATASET_CHOICES) under `root`."""
    root = os.path.abspath(root)
    try:
        os.makedirs(root, exist_ok=True)
        probe = os.path.join(root, ".writable")
        open(probe, "w").close()
        os.remove(probe)
    except OSError as error:
        provided = _provided_mnist(root) if dataset in ("auto", "mnist") else None
        if provided:
            return provided
        raise DataError(
            f"--mnist-root {root}: not writable ({error.strerror}) and holds no MNIST; "
            f"pass --mnist-root with a writable folder, or one holding MNIST/raw/{FILES[0]} and the other IDX files"
        ) from None
    finders = {"mnist": _mnist, "fashion-mnist": _fashion_mnist, "synthetic": _synthetic}
    for name in SOURCES if dataset == "auto" else (dataset,):
        source = finders[name](root)
        if source is not None:
            return source
    hints = {
        "mnist": f"put the MNIST IDX files ({', '.join(FILES)}) in {root}/MNIST/raw, run once with internet "
                 f"access so that torchvision downloads them there, or pass --dataset synthetic",
        "fashion-mnist": f"install Debian's dataset-fashion-mnist (IDX files in {FASHION_MNIST_DIR})",
    }
    raise DataError(f"--dataset {dataset}: no data under {root}; {hints[dataset]}")


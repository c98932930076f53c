"""Bad data (docs/faults.md#faults-and-bad-input): the suite (--dataset mnist --mnist-root DIR), the Python
trainer and the C++ trainer each refuse bad IDX files with the same error, naming the file and the
problem. The checks read a file's 16-byte header and its size, so a header claiming terabytes is
refused before anything reads or allocates what it claims; only then are the labels read, to refuse
one outside 0–9.

Each case starts from the suite's own data, linked, and replaces one or two files with small
generated ones (LibTorch's MNIST reads only full-size splits, so the others must be real)."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from phasebench import data, registry
from phasebench.worker.client import Worker, WorkerError
from phasebench.worker.protocol import Evaluate, Start
from tests.child_runs import run_suite

IMAGES, LABELS, TEST_LABELS = "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"
TRAIN = data.SPLIT_SIZES["train"]
SIDE = data.SIDE
TOO_MANY = 2**32 - 1  # the largest count an IDX header holds


def header(magic: int, *dims: int) -> bytes:
    return struct.pack(f">{len(dims) + 1}I", magic, *dims)


def labels_with(count: int, bad: dict[int, int]) -> np.ndarray:
    """`count` labels, 0 to 9 but for the values that `bad` puts at its indexes."""
    labels = (np.arange(count) % 10).astype(np.uint8)
    labels[list(bad)] = list(bad.values())
    return labels


@dataclass(frozen=True)
class BadData:
    changes: dict  # file name -> new content: IDX bytes, an array for data.write_idx, or None to delete it
    named: str  # the file the error must name
    problem: str  # what it must say about it


CASES = {
    "missing-file": BadData({IMAGES: None}, IMAGES, "cannot read (No such file or directory)"),
    "empty-file": BadData({LABELS: b""}, LABELS, "0 bytes, shorter than the 8-byte IDX header"),
    "wrong-magic": BadData({IMAGES: header(data.LABEL_MAGIC, TRAIN, SIDE, SIDE)}, IMAGES,
                           f"IDX magic {data.LABEL_MAGIC}, expected {data.IMAGE_MAGIC}"),
    "truncated-images": BadData({IMAGES: header(data.IMAGE_MAGIC, TRAIN, SIDE, SIDE) + bytes(10 * SIDE * SIDE)},
                                IMAGES, f"header claims {TRAIN} items ({16 + TRAIN * SIDE * SIDE} bytes) "
                                        f"but the file has {16 + 10 * SIDE * SIDE} bytes"),
    "absurd-count": BadData({IMAGES: header(data.IMAGE_MAGIC, TOO_MANY, SIDE, SIDE)}, IMAGES,
                            f"header claims {TOO_MANY} items ({16 + TOO_MANY * SIDE * SIDE} bytes) "
                            f"but the file has 16 bytes"),
    "absurd-image-size": BadData({IMAGES: header(data.IMAGE_MAGIC, TRAIN, 65535, 65535)}, IMAGES,
                                 "images are 65535x65535, expected 28x28"),
    "label-count-differs": BadData({LABELS: np.zeros(TRAIN - 1, np.uint8)}, LABELS,
                                   f"{TRAIN - 1} labels for {TRAIN} images"),
    "not-the-full-split": BadData({IMAGES: np.zeros((100, SIDE, SIDE), np.uint8), LABELS: np.zeros(100, np.uint8)},
                                  IMAGES, f"100 images; the workload needs the full split of {TRAIN}"),
    "bad-test-split": BadData({TEST_LABELS: header(data.IMAGE_MAGIC, 10000, SIDE, SIDE)}, TEST_LABELS,
                              f"IDX magic {data.IMAGE_MAGIC}, expected {data.LABEL_MAGIC}"),
    # The first bad label is named; 10 is the smallest bad value and 9999 the test split's last index.
    "label-out-of-range": BadData({LABELS: labels_with(TRAIN, {17: 200, 40: 255})}, LABELS,
                                  "label 200 at index 17 is outside 0–9"),
    "last-test-label-out-of-range": BadData({TEST_LABELS: labels_with(10000, {9999: 10})}, TEST_LABELS,
                                            "label 10 at index 9999 is outside 0–9"),
}


@pytest.fixture(params=CASES)
def bad_mnist(request, settings, tmp_path) -> tuple[Path, str]:
    """(an --mnist-root holding the case's bad MNIST, the error's expected text)."""
    case = CASES[request.param]
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in data.FILES:
        (raw / name).symlink_to(Path(settings.source.raw_dir) / name)
    for name, content in case.changes.items():
        (raw / name).unlink()
        if isinstance(content, np.ndarray):
            data.write_idx(raw / name, content)
        elif content is not None:
            (raw / name).write_bytes(content)
    return tmp_path, f"{raw}/{case.named}: {case.problem}"


def test_the_suite_refuses_bad_mnist(bad_mnist, request):
    """The check the plugin makes before any test runs names the file and the problem, and downloads nothing
    over the files; for one case, the whole suite run too (a usage error: every case goes through the same
    `raise pytest.UsageError(str(error))`, so one child run per case would only repeat that)."""
    root, expected = bad_mnist
    raw = root / "MNIST" / "raw"
    before = sorted(os.listdir(raw))
    with pytest.raises(data.DataError) as refused:
        data.resolve("mnist", str(root))
    message = str(refused.value)
    assert message.startswith(expected) and message.endswith(f"; fix or remove the MNIST files in {raw}"), message
    if request.node.callspec.id == "missing-file":
        run = _refused_run("--dataset=mnist", f"--mnist-root={root}")
        assert f"ERROR: {expected}; fix or remove the MNIST files in {raw}" in run.stderr
    assert sorted(os.listdir(raw)) == before


def test_auto_does_not_pass_over_bad_mnist(tmp_path):
    """--dataset auto does not quietly use another dataset instead of the user's broken MNIST."""
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / LABELS).write_bytes(b"")
    run = _refused_run("--dataset=auto", f"--mnist-root={tmp_path}")
    assert f"ERROR: {raw}/{IMAGES}: cannot read (No such file or directory)" in run.stderr


def _refused_run(*options: str):
    """A child suite run with these options, checked to stop at once with a usage error."""
    run = run_suite(*options, "-k", "no_test_has_this_name")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    return run


@pytest.fixture(scope="module")
def data_workers(settings, tmp_path_factory):
    """data_workers(impl, library): one worker per implementation for this module, started on the suite's
    data; each case asks it to start again on bad data (a failed start keeps the trainer it had)."""
    logs, workers = tmp_path_factory.mktemp("data-workers"), {}

    def get(impl: str, library: str | None) -> Worker:
        if impl not in workers:
            options = settings.worker_options("cpu", str(logs / f"{impl}.log"), impl=impl)
            workers[impl] = Worker(impl, "cpu", options, settings.round_timeout, library)
        return workers[impl]

    yield get
    for worker in workers.values():
        worker.stop()


@pytest.mark.parametrize("impl", registry.LANGUAGES)  # each language's reader, as published
def test_the_trainers_refuse_bad_mnist(request, settings, data_workers, bad_mnist, impl, tmp_path):
    root, expected = bad_mnist
    worker = data_workers(impl, request.getfixturevalue("cpp_library") if impl == "cpp" else None)
    options = settings.worker_options("cpu", str(tmp_path / "progress.log"), impl=impl) | {"root": str(root)}
    with pytest.raises(WorkerError) as refused:
        worker.request(Start(options=options))
        worker.request(Evaluate())  # the test split is read when the accuracy is
    assert expected in str(refused.value)


def test_no_mnist_and_no_network_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "_network_reachable", lambda: False)
    with pytest.raises(data.DataError) as refused:
        data.resolve("mnist", str(tmp_path))
    message = str(refused.value)
    assert f"--dataset mnist: no data under {tmp_path}; put the MNIST IDX files" in message
    assert f"in {tmp_path}/MNIST/raw, run once with internet access" in message
    assert "or pass --dataset synthetic" in message


def test_an_unusable_mnist_root_says_what_to_do(tmp_path):
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    run = _refused_run("--dataset=synthetic", f"--mnist-root={not_a_folder / 'data'}")
    assert (f"ERROR: --mnist-root {not_a_folder}/data: not writable (Not a directory) and holds no MNIST; "
            f"pass --mnist-root with a writable folder") in run.stderr


def test_generating_synthetic_data_says_so_first_and_names_the_package(tmp_path):
    """Generating the splits takes a few seconds: a line says what is happening and how to get real data instead."""
    said = []
    source = data.resolve("synthetic", str(tmp_path), announce=said.append)
    assert source.name == "synthetic" and len(said) == 1 and "dataset-fashion-mnist" in said[0]
    assert "apt-get install dataset-fashion-mnist" in data.SYNTHETIC_WARNING
    data.resolve("synthetic", str(tmp_path), announce=said.append)
    assert len(said) == 1, "already generated: nothing to say"


def test_runs_that_probe_one_data_folder_at_once_all_find_it_writable(tmp_path):
    """Two child pytests resolving one --mnist-root at once (as the count mode's test starts two) each probe it: a probe
    file of a shared name, removed by the other, failed the second run as "not writable"."""
    from concurrent.futures import ThreadPoolExecutor

    from phasebench.data import make_writable_folder

    root = str(tmp_path / "data")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: make_writable_folder(root), range(2000)))  # raises what any call raised
    assert os.listdir(root) == []


@pytest.mark.skipif(not data.FASHION_MNIST_DIR.is_dir(), reason="dataset-fashion-mnist is not installed")
def test_runs_that_unpack_fashion_mnist_into_one_folder_at_once_all_find_it(tmp_path):
    """Two runs resolving one --mnist-root at once (base and head of .ci/bench-pr-count, counted side by side) each
    unpack the files: a partial file of a shared name, renamed by the other, failed the second with FileNotFoundError."""
    import subprocess
    import sys

    code = f"from phasebench import data; print(data.resolve('fashion-mnist', {str(tmp_path)!r}).raw_dir)"
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    assert not [name for name in os.listdir(out.strip()) if name.endswith(".partial")]

"""Where python-tensor's data_loading goes (results/republish/README.md): one batch of 64 through the DataLoader, against
its parts done by hand: 64 calls of the Dataset's __getitem__, and the default collate of 64 items.

    .venv/bin/python lab/studies/republish/tensor_loader_parts.py [MNIST_ROOT]
"""
import statistics
import sys
import time

import torch
from torch.utils.data import default_collate

sys.path.insert(0, ".")
from bench import data, loaders  # noqa: E402

source = data.resolve("auto", sys.argv[1] if len(sys.argv) > 1 else "data")
dataset = loaders.ScaledMNIST(source.root)
loader = loaders.data_loader(dataset, 64)
items = [dataset[i] for i in range(64)]


def median_ms(work, rounds=300):
    times = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        work()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e6


batches = iter(loader)


def next_batch():
    global batches
    if next(batches, None) is None:
        batches = iter(loader)
        next(batches)


torch.set_num_threads(torch.get_num_threads())
for _ in range(3):  # three interleaved rounds of the three measurements
    whole = median_ms(next_batch)
    per_index = median_ms(lambda: [dataset[i] for i in range(64)])
    collate = median_ms(lambda: default_collate(items))
    print(f"DataLoader batch {whole:.3f} ms; 64 x __getitem__ {per_index:.3f} ms ({per_index / 64 * 1e3:.2f} us each); "
          f"collate {collate:.3f} ms; the rest (sampler, fetcher) {whole - per_index - collate:.3f} ms")

"""What python-batched's data_loading holds, piece by piece: one slice, two slices, a generator step (median of 21
repeats of 2000 calls each, ns per call), on the same normalized split, 2 intra-op threads."""
import statistics
import time

import torch

torch.set_num_threads(2)
images = torch.randn(60000, 1, 28, 28)
targets = torch.randint(0, 10, (60000,))
def per_call(fn, n=2000, repeats=21):
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        out.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(out)
def gen():
    while True:
        for s in range(0, 60000, 64):
            yield images[s:s + 64], targets[s:s + 64]
g = gen()
empty = per_call(lambda: None)
print(f"empty lambda call: {empty:.0f} ns")
print(f"one slice images[a:b]: {per_call(lambda: images[64:128]) - empty:.0f} ns")
print(f"two slices: {per_call(lambda: (images[64:128], targets[64:128])) - empty:.0f} ns")
print(f"next() of the generator of two slices: {per_call(lambda: next(g)) - empty:.0f} ns")
print(f"torch {torch.__version__}")

"""Both implementations train the same model (docs/method.md#both-implementations-train-the-same-model).

A Python-vs-C++ time difference means something only if both sides compute the same thing, so
these tests put a Python and a C++ worker side by side on cpu and compare, request by request:
the threads, the network, the weights, the data, 100 training steps and a one-epoch run. Every
failure names what differs and by how much. `pytest tests/equivalence` (or `-k equivalence`) runs just these.

What they show: seed 1 draws bit-identical initial weights in both; both draw their dropout masks
from the same seeded generator with the same operations (Python's DataLoader has a generator of its
own, so a new epoch draws nothing from the global one); and so the two train bit-identically, with
dropout off and with the published dropout on: the same losses, the same weights after 100 steps and
after a whole epoch, and the same test accuracy.

Every other implementation in the registry (phasebench/registry.py) is compared the same way with the
published implementation of its language: the same batches where its loader is its own, and 100 steps with
the published dropout from the same weights, to the bit (docs/implementations.md#implementations-and-workloads). These run
whatever --impl says: they are tests, not benchmarks.

Ensembles (phasebench/train/ensemble.py; docs/gpu.md#concurrent-jobs-and-ensembles): member k of every ensemble starts from
the weights seed k gives a model alone; with dropout off, the Python loop's member k trains as model k trained
alone, to the bit; the C++ loop's members train as the Python loop's, to the bit, with dropout off and on; and
python-vmap's member k stays within a tolerance of model k alone, justified where it is defined.
The compiled variants run other kernels: they are compared within a rounding tolerance. The CUDA-graph
variants replay the eager step's kernels: on cuda only, with dropout off (a graph draws its masks otherwise), to
the bit.

Every worker here runs under the deterministic numerics (pairs.equivalence_options; phasebench/determinism.py):
deterministic algorithms, cuDNN deterministic without its benchmark mode, no TF32, a fixed cuBLAS workspace. On cuda
they make the same training repeat to the bit, so the published pair and the CUDA graphs are held to the bit there
too (docs/method.md#both-implementations-train-the-same-model); test_numerics.py checks that every equivalence
worker carries them and no timed worker does.

By subject: the published pair (test_published_pair.py), every other implementation against its language's published
one (test_variants.py), ensembles (test_ensembles.py), the compiled and CUDA-graph variants (test_compiled.py on
cuda; long_compiled.py on cpu, a long check that the test command does not collect), the premise of the package's
kept workers (test_kept_workers.py), and the numerics each worker runs under (test_numerics.py). pairs.py holds the
pairs and their comparisons; conftest.py the workers the tests borrow their trainers from.
"""

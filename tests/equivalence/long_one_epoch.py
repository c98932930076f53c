"""The published run itself, a whole epoch in both languages, to the bit (docs/usage.md's long checks). A long check:
its epoch takes about 45 s of the test command's time, so the module is named outside test_*.py and the README's test
command does not collect it; the job `recipe` of .github/workflows/recipes.yml runs it on every push and pull request,
and tests/test_docs_recipes.py checks that it does. The test command's equivalence tests
(tests/equivalence/test_published_pair.py) prove the same threads, network, weights, batches and 100 steps."""

from __future__ import annotations

from phasebench.worker import protocol
from tests.equivalence.pairs import (
    EPOCH_BATCHES,
    EPOCH_TIMEOUT_S,
    IMPLEMENTATIONS,
    PUBLISHED_DROPOUT,
    assert_bit_identical,
    get_params,
    worker_pair,
)


def test_same_one_epoch_run(settings, cpp_library, tmp_path):
    """The published run itself, a whole epoch in both languages, ends in bit-identical weights and accuracy.
    Why it cannot be cheaper (about 30 s here): the short runs of the other tests stop before the epoch's short
    last batch, its log lines and the evaluation; only a whole epoch proves that train() walks the epoch as the
    published programs do, to the bit. Two workers of its own, started for it: it borrows nothing of the pool."""
    with worker_pair(settings, cpp_library, tmp_path, PUBLISHED_DROPOUT) as pair:
        layout = pair.python.request(protocol.Layout()).layout
        # train() starts the published run by building a new model from the generator, so set_params
        # cannot choose its weights. Seed 1 draws the same weights in both, and in fresh workers both
        # generators are in step: check it on the model built at start and on one train() builds.
        assert_bit_identical(layout, pair.initial, get_params(pair.cpp), "seed-1 initial weights")
        pair.ask_both(protocol.Train(epochs=0, synchronize=True))
        assert_bit_identical(layout, get_params(pair.python), get_params(pair.cpp),
                             "weights train() starts from")

        runs = pair.ask_both(protocol.Train(epochs=1, synchronize=True), timeout=EPOCH_TIMEOUT_S)
        steps = {impl: run.steps for impl, run in runs.items()}
        assert steps == {impl: EPOCH_BATCHES for impl in IMPLEMENTATIONS}, f"steps in one epoch: {steps}"
        assert_bit_identical(layout, get_params(pair.python), get_params(pair.cpp),
                             f"weights after one epoch with dropout {PUBLISHED_DROPOUT}")
        results = pair.ask_both(protocol.Evaluate())
        accuracy = {impl: result.accuracy for impl, result in results.items()}
        assert accuracy["python"] == accuracy["cpp"], (
            f"test accuracy after one epoch from the same weights: python {accuracy['python']:.2f} %, "
            f"cpp {accuracy['cpp']:.2f} %")

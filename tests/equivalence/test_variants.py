"""Every other implementation against its language's published one (tests/equivalence/__init__.py): the same
batches where its loader is its own, item by item for python-tensor's, and the same training, to the bit."""

from __future__ import annotations

import pytest

from phasebench import registry
from tests.equivalence.pairs import (
    EAGER_VARIANTS,
    IMPLEMENTATIONS,
    LOADER_VARIANTS,
    POOL_GROUP,
    PUBLISHED_DROPOUT,
    assert_same_batches,
    assert_same_training,
)


@pytest.mark.xdist_group(POOL_GROUP)
@pytest.mark.parametrize("variant", LOADER_VARIANTS.values())
def test_variant_same_batches(variant_pair, variant):
    """The same batches as its language's published pipeline: images to the bit, labels exact."""
    assert_same_batches(variant_pair(variant, 0.0), tolerance=0.0)


def test_every_loader_is_compared():
    """Every loader a variant uses, but its language's published one, is in LOADER_VARIANTS: a new loader cannot
    go unchecked."""
    used = {(impl.language, impl.loader) for impl in registry.REGISTRY}
    published = {(impl.language, impl.loader) for impl in map(registry.get, IMPLEMENTATIONS)}
    assert used - published <= set(LOADER_VARIANTS), f"loaders no variant test compares: {used - published - set(LOADER_VARIANTS)}"


# python-tensor's loader (ScaledMNIST: per index (image - mean) / std with tensors made once) against the published
# pipeline (torchvision's ToTensor and Normalize per image), in this process, so that it reads more than a worker's
# three batches: the first batch of an epoch of 64, the middle one, the last, and every 97th image.
TENSOR_CHECKED_INDEXES = sorted({*range(64), *range(29952, 30016), *range(59968, 60000), *range(0, 60000, 97)})


def test_tensor_loader_same_items(settings):
    """python-tensor's images to the bit (compared as int32 bit patterns, so -0.0 is not 0.0) and its labels exact,
    item by item and collated by the same DataLoader; and the comparison is sharp: the same dataset with a std of
    0.3082 instead of 0.3081 differs."""
    import torch

    from phasebench.train import loaders

    published, tensor = loaders.mnist(settings.source.root, True), loaders.ScaledMNIST(settings.source.root)
    expected = {index: published[index] for index in TENSOR_CHECKED_INDEXES}

    def differing(dataset) -> list[int]:
        return [index for index, (image, label) in expected.items()
                if not (torch.equal(dataset[index][0].view(torch.int32), image.view(torch.int32))
                        and dataset[index][1] == label)]

    assert len(tensor) == len(published)
    assert tensor[0][0].dtype == torch.float32 and tensor[0][0].shape == (1, 28, 28)
    wrong = differing(tensor)
    assert not wrong, f"python-tensor's items differ from the published pipeline's at {len(wrong)} of " \
                      f"{len(expected)} indexes, first {wrong[:5]}"
    first = [next(iter(loaders.data_loader(dataset, 64))) for dataset in (published, tensor)]
    assert torch.equal(first[0][0].view(torch.int32), first[1][0].view(torch.int32)) and \
        torch.equal(first[0][1], first[1][1]), "the first batch, collated, differs"

    tensor.std = torch.tensor(0.3082, dtype=torch.float32).view(1, 1, 1)
    assert len(differing(tensor)) > len(expected) // 2, "a std of 0.3082 went unnoticed: the comparison is not sharp"


@pytest.mark.xdist_group(POOL_GROUP)
@pytest.mark.parametrize("variant", EAGER_VARIANTS)
def test_variant_same_training(variant_pair, variant):
    """From the same weights, the same losses and the same weights after STEPS steps, to the bit, with the
    published dropout: the variant changes how the work is done, not what is computed, masks included. (With
    dropout off the same steps skip only the masks: a run that matches with them matches without.) STEPS steps,
    the fewest that reach an update with momentum and a log line; the reference's come from REFERENCE_TRAINING
    once it trained so."""
    assert_same_training(variant_pair(variant, PUBLISHED_DROPOUT), f"dropout {PUBLISHED_DROPOUT}")

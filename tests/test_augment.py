"""Batched augmentation equals the plain per-sample torchvision version, bit for bit."""

from __future__ import annotations

import torch
import torchvision.transforms.v2.functional as TF

from federated.data import Augmenter, augment_reference, dataset_spec
from federated.data.augment import AugmentParams


def _images(n=16, shape=(3, 32, 32)) -> torch.Tensor:
    return torch.randint(
        0, 256, (n, *shape), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )


def test_batched_crop_flip_equals_per_sample_reference():
    aug = Augmenter(dataset_spec("cifar10"), torch.device("cpu"))
    images = _images()
    params = aug.draw(len(images), torch.Generator().manual_seed(1))
    assert params is not None and params.flip.any() and not params.flip.all()
    assert torch.equal(aug.train_batch(images, params), augment_reference(aug, images, params))


def test_batched_rotation_equals_per_sample_reference():
    aug = Augmenter(dataset_spec("cifar100"), torch.device("cpu"))
    images = _images(8)
    params = aug.draw(len(images), torch.Generator().manual_seed(2))
    assert params.angle is not None and params.angle.abs().max() <= 15
    assert torch.equal(aug.train_batch(images, params), augment_reference(aug, images, params))


def test_crop_is_reflect_pad_then_crop_then_flip():
    aug = Augmenter(dataset_spec("cifar10"), torch.device("cpu"))
    image = _images(1)
    params = AugmentParams(torch.tensor([0]), torch.tensor([8]), torch.tensor([True]), None)
    padded = torch.nn.functional.pad(image.float(), (4, 4, 4, 4), mode="reflect")
    expected = padded[:, :, 0:32, 8:40].flip(3)
    got = aug.train_batch(image, params)
    assert torch.equal(got, aug.normalize_float(expected))


def test_identity_parameters_only_normalise():
    spec = dataset_spec("cifar10")
    aug = Augmenter(spec, torch.device("cpu"))
    images = _images(4)
    params = AugmentParams(
        torch.full((4,), 4), torch.full((4,), 4), torch.zeros(4, dtype=torch.bool), None
    )
    out = aug.train_batch(images, params)
    mean = torch.tensor(spec.mean).view(1, 3, 1, 1)
    std = torch.tensor(spec.std).view(1, 3, 1, 1)
    torch.testing.assert_close(out, TF.normalize(images.float() / 255, spec.mean, spec.std))
    torch.testing.assert_close(out, (images.float() / 255 - mean) / std)


def test_grey_scale_sets_are_not_augmented():
    aug = Augmenter(dataset_spec("fmnist"), torch.device("cpu"))
    assert aug.draw(10, torch.Generator().manual_seed(0)) is None

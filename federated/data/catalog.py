"""Static facts about every dataset fedsweep knows, available without loading any data.

Config validation reads these (class counts, split sizes, the default model), so a bad
configuration is rejected before a single file is opened.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetSpec:
    """What a dataset looks like and how its images are prepared.

    Attributes:
        name: the name used in configs.
        n_classes: number of labels.
        channels, height, width: image shape (images are held as uint8 NCHW).
        train_size, test_size: number of samples in each split.
        default_model: the model the MOON paper uses for it (§4.1).
        mean, std: per-channel normalisation, on the 0..1 scale.
        crop_flip: train-time reflect-pad-4 random crop and horizontal flip.
        rotate_degrees: train-time random rotation range (+/- degrees); 0 for none.
        class_names: label i's name (image folders: the class folder's name).
        party_names: party i's name for a natural partition (image folders with one
            folder per party); empty otherwise.
        left_out_parties: a field's values (``partition_by``) left out of the natural
            parties, under the floor of training images a party needs, with their image
            counts (warned about before a run or sweep starts).
        task: the kind its targets are (a registered name of
            :data:`federated.registry.TASK_PATHS`): the built-in data sets hold class
            labels (``classification``, the default); a folder's or an ``hf:`` column's
            kind is set by the kind's reader or Hub column (``federated/tasks/<kind>/``).
        target_names: a score task's target columns (``score``, then the attributes); a
            detection data set's category names (as ``class_names``); empty for
            classification.
        test_from_parties: no test split of its own (``test_size`` 0; an ``hf:`` data set
            with one split, such as FEMNIST): a run's test set is the union of its
            parties' local test splits (``party_test_fraction``).
    """

    name: str
    n_classes: int
    channels: int
    height: int
    width: int
    train_size: int
    test_size: int
    default_model: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    crop_flip: bool = False
    rotate_degrees: float = 0.0
    class_names: tuple[str, ...] = ()
    party_names: tuple[str, ...] = ()
    left_out_parties: tuple[tuple[str, int], ...] = ()
    task: str = "classification"
    target_names: tuple[str, ...] = ()
    test_from_parties: bool = False

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.channels, self.height, self.width)

    @property
    def outputs(self) -> int:
        """Width of the model's head, as the data's task asks (one logit per class for
        classification, one value per target for a score task)."""
        from federated.registry import load_method  # the tasks import this module

        return load_method("task", self.task).head_size(self)


_CIFAR10_MEAN = tuple(v / 255.0 for v in (125.3, 123.0, 113.9))
_CIFAR10_STD = tuple(v / 255.0 for v in (63.0, 62.1, 66.7))

DATASETS: dict[str, DatasetSpec] = {
    # CIFAR-10: the reference code's transforms (notes/reference-code-facts.md).
    "cifar10": DatasetSpec(
        "cifar10",
        10,
        3,
        32,
        32,
        50_000,
        10_000,
        "simple-cnn",
        _CIFAR10_MEAN,
        _CIFAR10_STD,
        crop_flip=True,
    ),
    # CIFAR-100: the reference code adds a +/-15 degree rotation.
    "cifar100": DatasetSpec(
        "cifar100",
        100,
        3,
        32,
        32,
        50_000,
        10_000,
        "resnet50",
        (0.5071, 0.4865, 0.4409),
        (0.2673, 0.2564, 0.2762),
        crop_flip=True,
        rotate_degrees=15.0,
    ),
    # Tiny-ImageNet: the reference code normalises only.
    "tinyimagenet": DatasetSpec(
        "tinyimagenet",
        200,
        3,
        64,
        64,
        100_000,
        10_000,
        "resnet50",
        (0.5, 0.5, 0.5),
        (0.5, 0.5, 0.5),
    ),
    # Grey-scale 28x28 sets: normalise only, with their usual statistics.
    "fmnist": DatasetSpec(
        "fmnist",
        10,
        1,
        28,
        28,
        60_000,
        10_000,
        "simple-cnn",
        (0.2860,),
        (0.3530,),
    ),
    "mnist": DatasetSpec(
        "mnist",
        10,
        1,
        28,
        28,
        60_000,
        10_000,
        "simple-cnn",
        (0.1307,),
        (0.3081,),
    ),
    # Generated CIFAR-shaped data (class templates plus noise): offline tests and
    # benchmarks.  Learnable, but not a stand-in for any real accuracy.
    "synthetic": DatasetSpec(
        "synthetic",
        10,
        3,
        32,
        32,
        50_000,
        10_000,
        "simple-cnn",
        (0.5, 0.5, 0.5),
        (0.25, 0.25, 0.25),
        crop_flip=True,
    ),
}


def dataset_spec(name: str) -> DatasetSpec:
    """The spec of dataset ``name``; KeyError names the known ones."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r} (known: {', '.join(DATASETS)})") from None

"""Datasets: static specs, loading into uint8 tensors, batched augmentation."""

from federated.data.augment import Augmenter, AugmentParams, augment_reference
from federated.data.catalog import DATASETS, DatasetSpec, dataset_spec
from federated.data.loading import (
    DatasetUnavailableError,
    ImageData,
    default_data_root,
    load_dataset,
    resolve_data_root,
)

__all__ = [
    "DATASETS",
    "AugmentParams",
    "Augmenter",
    "DatasetSpec",
    "DatasetUnavailableError",
    "ImageData",
    "augment_reference",
    "dataset_spec",
    "default_data_root",
    "load_dataset",
    "resolve_data_root",
]

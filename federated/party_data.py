"""A run's data laid out on its device: the training set party by party, the test subset.

Party i's samples are the contiguous rows ``[offset_i, offset_{i+1})`` of one tensor
on the device, so handing a party its data is a view, not a copy.  The test subset is
fixed (seed 0) so that every seed and method sees the same test images.
"""

from __future__ import annotations

import numpy as np
import torch

from federated.config import RunConfig
from federated.data import ImageData
from federated.partition import class_counts, partition_for_run


class PartyData:
    """The partitioned training set and the evaluated test set of one run, on ``device``."""

    def __init__(self, data: ImageData, config: RunConfig, device: torch.device) -> None:
        self.spec = data.spec
        labels = data.train_y.numpy()
        #: per party, indices into the dataset's full training set
        # image folders with one folder per party: each training sample's party
        parties = None if data.train_parties is None else data.train_parties.numpy()
        self.partition = partition_for_run(labels, config, parties)
        self.class_counts = class_counts(self.partition, labels, self.spec.n_classes)
        self.party_sizes = [len(p) for p in self.partition]
        #: first row of each party (and the total) in the laid-out training set
        self.offsets = np.concatenate([[0], np.cumsum(self.party_sizes)]).tolist()
        order = torch.from_numpy(np.concatenate(self.partition))
        self.train_x = data.train_x[order].to(device)
        self.train_y = data.train_y[order].to(device)

        test_idx = torch.arange(data.test_y.shape[0])
        if config.n_test < len(test_idx):
            test_idx = torch.randperm(len(test_idx), generator=torch.Generator().manual_seed(0))
            test_idx = test_idx[: config.n_test].sort().values
        self.test_x = data.test_x[test_idx].to(device)
        self.test_y = data.test_y[test_idx].to(device)

    def party(self, party: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Party ``party``'s (uint8 images, labels): views into the laid-out set."""
        lo, hi = self.offsets[party], self.offsets[party + 1]
        return self.train_x[lo:hi], self.train_y[lo:hi]

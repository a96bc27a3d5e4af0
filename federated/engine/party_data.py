"""A run's data laid out on its device: the training set party by party, the held-out
splits, the test subset.

Party i's training samples are the positions ``[offset_i, offset_{i+1})`` of the
laid-out training set.  On an accelerator that set is one tensor on the device, party
by party, so a position is a row.  On the CPU the run reads the loaded tensors
themselves, which the process keeps for its next trial anyway
(federated/data/memory_cache.py), through ``rows`` (a position's row): a copy in party
order would double the data's memory (748 MiB at 10⁵ parties of 10 images,
docs/results/scale.md), and the batch plan's rows are gathered either way.  A party's
validation and local-test samples (federated/evaluation/holdout.py) are laid out in
tensors of their own.  The test subset is fixed (seed 0) so that every seed and method sees the
same test images.  A data set without a test split of its own (``spec.test_from_parties``:
an ``hf:`` source with one split, FEMNIST) is tested on the union of the parties' local
test splits, LEAF's rule: the same images for every method at a seed (the partition and
the hold-out are seeded), other images at another seed when the parties are a seeded draw.
"""

from __future__ import annotations

import numpy as np
import torch

from federated.config.run_config import RunConfig
from federated.data import ImageData
from federated.evaluation.holdout import PartySplit, hold_out
from federated.heterogeneity.partition import class_counts, partition_for_run, partition_labels


class PartyData:
    """The partitioned training set, its held-out splits and the evaluated test set of
    one run, on ``device``."""

    def __init__(self, data: ImageData, config: RunConfig, device: torch.device) -> None:
        self.spec = data.spec
        labels, groups = partition_labels(data, config.task)
        # image folders with one folder per party: each training sample's party
        parties = None if data.train_parties is None else data.train_parties.numpy()
        drawn = partition_for_run(labels, config, parties)
        held = hold_out(
            drawn,
            labels,
            config.seed,
            config.val_fraction,
            config.val_split,
            config.party_test_fraction,
        )
        #: per party, indices into the dataset's full training set of what it trains on
        self.partition = held.train
        self.class_counts = class_counts(self.partition, labels, groups)
        self.party_sizes = [len(p) for p in self.partition]
        #: first row of each party (and the total) in the laid-out training set
        self.offsets = np.concatenate([[0], np.cumsum(self.party_sizes)]).tolist()
        order = torch.from_numpy(np.concatenate(self.partition).astype(np.int64, copy=False))
        #: the laid-out position's row of ``train_x``/``train_y``; None where they are
        #: laid out party by party already
        self.rows: torch.Tensor | None = None
        if torch.device(device).type == "cpu":
            # the loaded set stays in memory for the process's next trial
            # (federated/data/memory_cache.py): index it instead of copying it
            self.train_x, self.train_y, self.rows = data.train_x, data.train_y, order
        else:
            self.train_x = data.train_x[order].to(device)
            self.train_y = data.train_y[order].to(device)
        #: the parties' validation samples (party split), or the server's slice as one
        #: pseudo-party (server split); None without validation
        self.validation: PartySplit | None = None
        if held.server_val is not None:
            self.validation = PartySplit(data, [held.server_val], device)
        elif config.val_fraction:
            self.validation = PartySplit(data, held.val, device)
        #: each party's own test samples; None unless party_test_fraction is set
        self.local_test = (
            PartySplit(data, held.local_test, device) if config.party_test_fraction else None
        )

        test_x, test_y, n_test = data.test_x, data.test_y, config.n_test
        if data.spec.test_from_parties:
            # one split (FEMNIST): the test set is the union of the parties' own test splits
            union = torch.from_numpy(np.concatenate(held.local_test).astype(np.int64))
            test_x, test_y = data.train_x[union], data.train_y[union]
            n_test = max(1, round(len(union) * config.test_fraction))
        test_idx = torch.arange(len(test_y))
        if n_test < len(test_idx):
            test_idx = torch.randperm(len(test_idx), generator=torch.Generator().manual_seed(0))
            test_idx = test_idx[:n_test].sort().values
        self.test_x = test_x[test_idx].to(device)
        self.test_y = test_y[test_idx].to(device)

    def records(self, party: int) -> torch.Tensor:
        """Party ``party``'s rows of ``train_x``/``train_y`` (long, on their device)."""
        lo, hi = self.offsets[party], self.offsets[party + 1]
        if self.rows is None:
            return torch.arange(lo, hi, device=self.train_x.device)
        return self.rows[lo:hi]

    def party(self, party: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Party ``party``'s (uint8 images, labels): views into the laid-out set, or
        (on the CPU) gathered from the loaded one."""
        lo, hi = self.offsets[party], self.offsets[party + 1]
        if self.rows is None:
            return self.train_x[lo:hi], self.train_y[lo:hi]
        rows = self.rows[lo:hi]
        return self.train_x.index_select(0, rows), self.train_y[rows]

"""The values of a run's party field left out under the floor, known before its data
load: what a sweep's ``--dry-run`` names (docs/sweeps-and-studies.md).

A run whose natural parties come from a field (``partition_by``: a detection image's
camera, a column of a segmentation folder's ``parties.csv`` or of a multi-label folder's
``labels.csv``, an ``hf:`` data set's column) leaves out each value that fewer than
:data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` training images carry
(:func:`~federated.data.party_field.parties_by_value`, the one rule).  Here the field's
values are read from the data's index (the folder's annotation, parties or labels file;
a local ``hf:`` source's columns) and, under ``holdout_fraction``, its targets, with no
image decoded and nothing written, and the same rule applied.  Data sets without such
a field leave no party out: a built-in set's partitions (iid, Dirichlet, labels,
quantity skew) give every party its floor or are refused, and an image folder's party
folders under the floor are refused by name.  An ``hf:`` source on the Hub is known
only once it is read (a download).
"""

from __future__ import annotations

from typing import Any

from federated.data.folder_kinds import folder_reader
from federated.data.folder_layout import folder_path, is_folder_dataset
from federated.data.hub_dataset import HubColumns, hub_party_values, is_hub_dataset
from federated.data.party_field import parties_by_value


def planned_left_out(config: Any) -> tuple[tuple[str, int], ...] | None:
    """The values of ``config.partition_by`` a run of ``config`` (a resolved
    :class:`~federated.config.run_config.RunConfig`) would leave out under the floor,
    each with its training images (the run's ``left_out_parties``); ``()`` where no
    field names the parties; None where only reading the data would tell (an ``hf:``
    source on the Hub).  A data problem is the loader's one-line error."""
    field = config.partition_by
    if field is None:
        return ()
    if is_folder_dataset(config.dataset):
        root = folder_path(config.dataset)
        read = folder_reader(root).party_values
        if read is None:  # a kind whose parties are no field: refused at load, by name
            return ()
        values = read(root, config.image_size, config.holdout_fraction, field)
    elif is_hub_dataset(config.dataset):
        values = hub_party_values(config.dataset, config.holdout_fraction, HubColumns.of(config))
        if values is None:
            return None
    else:
        return ()
    return tuple(parties_by_value(values).left_out)

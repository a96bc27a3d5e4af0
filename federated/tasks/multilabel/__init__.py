"""Multi-label classification: each image carries a *set* of labels (none, one or several).

The whole kind is this package (one line in :data:`federated.registry.TASK_PATHS` names
its task):

* :mod:`.spec` — its metrics and the report's words, torch-free (the sweep's manifest
  records them, the report reads them there);
* :mod:`.scores` — the metrics of a split from its scores and truths: mean average
  precision over labels (scikit-learn's ``average_precision_score``), micro and macro
  F1 at probability 0.5 from true/false positive and false negative counts;
* :mod:`.accumulator` — one evaluation's sums on the device (counts and losses per
  party) and the scores AP needs, read back once;
* :mod:`.task` — the task: multi-hot targets, binary cross-entropy on the logits, what
  partitions group by and what they count;
* :mod:`.labels_file`, :mod:`.layout` and :mod:`.reader` — the folder layout
  (``images/`` and ``labels.csv``) and its checks, read on the folder kinds' base
  (:class:`~federated.data.kind_folder.KindFolder`: the hold-out, parties by a field and
  the decoded cache), and the :class:`~federated.data.folder_kinds.FolderReader` the
  task names;
* :mod:`.hub_column` — an ``hf:`` data set's list column (class label ids, label values
  or multi-hot rows) as multi-hot targets, the :class:`~federated.data.hub_column.HubColumn`
  the task names.

Imports nothing: the report reads :mod:`.spec` without torch.  The layout, the metrics
and what was run: docs/multilabel.md.
"""

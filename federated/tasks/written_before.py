"""What a sweep folder written before manifests recorded a task's declaration meant,
torch-free: such a folder carries only its task's name (the rows' ``task``, or none at
all before tasks existed), so the report reads it by what the built-in kinds declared
then.  Nothing else reads a kind by its name: a sweep written today records its task's
:class:`~federated.contract.task_spec.TaskSpec` in its manifest.

This is the one table of kinds by name, and it is closed: a kind added later always
records its declaration, so it never needs a line here.
"""

from __future__ import annotations

import re

from federated.contract.task_spec import TaskSpec
from federated.tasks.classification import spec as classification
from federated.tasks.detection import spec as detection
from federated.tasks.score import spec as score

#: the task of rows and configs written before tasks existed (they name none)
UNTASKED_ROWS = classification.SPEC
#: a task's name, as a folder without a recorded spec carries it -> its declaration
#: then (rows written before score tasks carry no task at all: classification)
WRITTEN_BEFORE_THE_CONTRACT: dict[str, TaskSpec] = {
    kind.SPEC.name: kind.SPEC for kind in (classification, score, detection)
}
#: metric stems that older runs of a kind recorded under another name: task -> {old
#: stem: today's stem} (a score task's binary accuracy was ``acc``)
RENAMED_STEMS: dict[str, dict[str, str]] = {score.SPEC.name: score.OLD_STEMS}
# the columns a stem names: test_/val_ values and their spread over parties, the row's
# per-party summaries and per-party values, parties.csv's columns and a selection
# record's search_test_<stem>
_STEM_COLUMN = re.compile(
    r"^(?P<head>(?:search_)?(?:party_val|party_test|test|val|party)_)(?P<stem>[a-z0-9]+(?:_[a-z0-9]+)*?)"
    r"(?P<tail>_std|_mean|_min|_worst10|/\d+)?$"
)


def current_column(column: str, task: object) -> str:
    """``column`` of a run of ``task`` under today's name: an older score run's
    ``test_acc`` is ``test_bin_acc`` (likewise ``val_``, ``party_``, ``party_val_``,
    ``search_test_``, ``_std``, ``_mean`` ..., ``/<party>``); any other column, and
    every column of another task, as it is."""
    renamed = RENAMED_STEMS.get(str(task), {})
    if not renamed:
        return column
    for old, new in renamed.items():
        match = _STEM_COLUMN.match(column)
        if match and match["stem"] == old:
            return f"{match['head']}{new}{match['tail'] or ''}"
    return column


def current_stem(stem: str, task: object) -> str:
    """A metric name a run of ``task`` recorded (``primary_metric``) under today's name
    (an older score run's ``acc`` is ``bin_acc``)."""
    return RENAMED_STEMS.get(str(task), {}).get(stem, stem)

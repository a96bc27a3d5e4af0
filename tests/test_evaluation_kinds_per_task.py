"""Every evaluation kind on the tasks without class labels (detection on generated
boxes, segmentation on a folder built from real Fashion-MNIST pixels), with a method
scored by the global model, one whose parties keep their own head (FedPer: the
evaluation loop's shared-stage cache) and one with whole personal models (Ditto): each
pair runs a round whose row holds the kind's values, or is refused in one line before
any work (from the task's declarations, never its name)."""

from __future__ import annotations

import math
import warnings

import pytest

from federated.config.data_checks import with_data_checked
from federated.config.run_config import RunConfig
from federated.contract.task_needs import CLASS_PER_SAMPLE, unmet_need
from federated.engine.round_loop import FederatedRun
from federated.evaluation.party_scores import REWEIGHTING_NEEDS
from federated.params import ConfigError
from federated.tasks.classification.task import Classification
from tests.conftest import tiny
from tests.detection_synthetic import NAME, boxes_data, register
from tests.test_segmentation import load_builder

# kind -> (config overrides, the row columns it must fill with a value; {stem}: the
# task's per-party metric)
KINDS = {
    "fine-tuning": (
        dict(finetune_epochs=1, party_test_fraction=0.3),
        ("party_test_{stem}", "party_test_{stem}_mean"),
    ),
    "per-party scores": (
        dict(party_test_fraction=0.3, party_scores_every=1),
        ("party_{stem}_mean", "party_test_{stem}_worst10"),
    ),
    "validation": (dict(val_fraction=0.3, eval_fraction=0.67), ("val_{stem}", "val_parties")),
    "server validation": (dict(val_fraction=0.3, val_split="server"), ("val_{stem}",)),
    "representations": (dict(representations_at="1"), ()),
}
# what each task refuses, and the refusal's field: the probe colours images by class
REFUSED = {"representations": "representations_at"}
METHODS = {
    "fedavg": {},
    # FedPer keeps the network's last part at each party (a detector's layers are
    # named otherwise: the detector's prediction head)
    "fedper": {"detection": dict(personal_layers="detector.head.classification_head.cls_logits")},
    "ditto": {},
}


@pytest.fixture(scope="module")
def detection_data():
    data = boxes_data(train=36, test=12)
    with pytest.MonkeyPatch.context() as patch:
        register(patch, data)
        yield data


@pytest.fixture(scope="module")
def segmentation_tree(tmp_path_factory):
    from tests.test_segmentation import FMNIST

    if not (FMNIST / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("needs Debian's dataset-fashion-mnist")
    out = tmp_path_factory.mktemp("segmentation") / "task"
    argv = ["--train-images", "36", "--test-images", "9", "--sites", "3"]
    assert load_builder().main([str(out), *argv]) == 0
    return out


def _config(task: str, method: str, kind: str, request) -> tuple[RunConfig, object]:
    common = dict(
        n_parties=3, rounds=1, local_epochs=1, batch_size=8, lr=0.05, threads=1, seed=0,
        execution="sequential", algorithm=method, personal_test_every=1,
    )  # fmt: skip
    if task == "detection":
        data = request.getfixturevalue("detection_data")
        values = dict(common, dataset=NAME, partition="iid")
    else:
        tree = request.getfixturevalue("segmentation_tree")
        data = None
        values = dict(
            common, dataset=f"folder:{tree}", partition="natural", partition_by="site",
            data_root=str(request.getfixturevalue("tmp_path")),
        )  # fmt: skip
    values.update(KINDS[kind][0])
    values.update(METHODS[method].get(task, {}))
    return RunConfig.from_dict(values), data


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("task", ["detection", "segmentation"])
def test_each_evaluation_kind_runs_a_round_or_is_refused_in_one_line(task, method, kind, request):
    config, data = _config(task, method, kind, request)
    if kind in REFUSED:
        with pytest.raises(ConfigError) as err:
            with_data_checked(config)  # the task is the data's: refused once they are read
        line = str(err.value)
        assert line.count("\n") == 0 and err.value.field == REFUSED[kind]
        assert f"which a {task} task does not have" in line
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # segmentation trains one party at a time
        run = FederatedRun(config, data)
    row = run.run_round()
    stem = run.task.party_stem()
    assert not row["diverged"] and math.isfinite(row["train_loss"])
    assert 0.0 <= row[f"test_{stem}"] <= 1.0
    for column in KINDS[kind][1]:
        value = row[column.format(stem=stem)]
        assert math.isfinite(value) and value >= 0.0, column
    if method != "fedavg":  # each party's own model on the test set: its spread
        assert all(0.0 <= row[f"party_{stem}/{p}"] <= 1.0 for p in range(3))


@pytest.mark.parametrize("method", ["fedper", "fedrep", "lg-fedavg"])
def test_layer_splitting_methods_name_a_detectors_layers_or_are_refused_in_one_line(
    method, detection_data
):
    """Their default personal layers name an encoder-and-head network's stages, which a
    detector does not have: refused in one line naming ``personal_layers``."""
    with pytest.raises(ConfigError) as err:
        values = dict(dataset=NAME, n_parties=3, partition="iid", algorithm=method)
        with_data_checked(RunConfig.from_dict(values))  # the rule meets the model here
    assert err.value.field == "personal_layers" and "\n" not in str(err.value)


class Unlabelled(Classification):
    """Classification that does not declare a class per sample."""

    has_classes = False


def test_the_tasks_declaration_decides_the_class_reweighted_party_outcomes(synthetic):
    """Per-party outcomes re-weight the test set by class mix only where the task
    declares a class per sample (``REWEIGHTING_NEEDS``); without, they come from the
    parties' own local test splits, or there are none."""
    unlabelled = f"{__name__}:Unlabelled"
    assert unmet_need(Classification, REWEIGHTING_NEEDS) is None
    assert unmet_need(Unlabelled, REWEIGHTING_NEEDS) is CLASS_PER_SAMPLE
    labelled = FederatedRun(tiny(partition="iid", rounds=1), synthetic).run_round()
    none = FederatedRun(tiny(partition="iid", rounds=1, task=unlabelled), synthetic)
    row = none.run_round()
    assert 0.0 <= labelled["party_acc_mean"] <= 1.0
    assert none.party_scorer.every == 0 and "party_acc_mean" not in row
    assert row["test_acc"] == labelled["test_acc"]  # the same run otherwise
    own = FederatedRun(
        tiny(partition="iid", rounds=1, task=unlabelled, party_test_fraction=0.2), synthetic
    )
    assert 0.0 <= own.run_round()["party_acc_mean"] <= 1.0

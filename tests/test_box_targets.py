"""BoxTargets: ragged per-image boxes held flat (federated/tasks/detection/targets.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from federated.tasks.detection.targets import BoxTargets, BoxTargetsError


def _three_images() -> BoxTargets:
    """Image 0: two boxes (classes 2, 0); image 1: none; image 2: one box (class 1)."""
    return BoxTargets.from_images(
        [
            ([[1, 2, 10, 12], [0, 0, 5, 5]], [2, 0]),
            (np.zeros((0, 4)), []),
            ([[3, 3, 30, 31]], [1]),
        ]
    )


def test_flat_layout_and_per_image_access():
    t = _three_images()
    assert len(t) == 3 and t.n_boxes == 3
    assert t.boxes.dtype == torch.float32 and t.labels.dtype == torch.int64
    assert t.offsets.tolist() == [0, 2, 2, 3]
    boxes, labels = t.image(0)
    assert boxes.tolist() == [[1, 2, 10, 12], [0, 0, 5, 5]] and labels.tolist() == [2, 0]
    boxes, labels = t.image(1)
    assert boxes.shape == (0, 4) and labels.shape == (0,)
    assert t.image(-1)[1].tolist() == [1]
    with pytest.raises(IndexError):
        t.image(3)


def test_indexing_keeps_the_given_order_and_repeats():
    t = _three_images()
    picked = t[torch.tensor([2, 0, 2, 1])]
    assert len(picked) == 4
    assert picked.offsets.tolist() == [0, 1, 3, 4, 4]
    assert picked.labels.tolist() == [1, 2, 0, 1]
    assert picked.image(1)[0].tolist() == [[1, 2, 10, 12], [0, 0, 5, 5]]
    assert t[[1]].n_boxes == 0 and len(t[[1]]) == 1
    assert t[1:].labels.tolist() == [1] and len(t[1:]) == 2
    assert t[np.array([0])].labels.tolist() == [2, 0]
    assert t[torch.tensor([True, False, True])].labels.tolist() == [2, 0, 1]
    assert len(t[torch.tensor([], dtype=torch.int64)]) == 0
    with pytest.raises(TypeError, match="image"):
        t[0]
    with pytest.raises(IndexError):
        t[torch.tensor([3])]


def test_to_dicts_is_torchvisions_target_format():
    dicts = _three_images().to_dicts("cpu")
    assert [d["labels"].tolist() for d in dicts] == [[2, 0], [], [1]]
    assert dicts[1]["boxes"].shape == (0, 4) and dicts[1]["boxes"].dtype == torch.float32
    assert all(set(d) == {"boxes", "labels"} for d in dicts)


def test_counts_per_class():
    t = BoxTargets.from_images([([[0, 0, 1, 1]] * 3, [1, 1, 0]), ([], []), ([[0, 0, 1, 1]], [2])])
    assert t.counts_per_class(4).tolist() == [1, 2, 1, 0]
    assert t.boxes_per_image().tolist() == [3, 0, 1]


def test_concat_renumbers_offsets():
    a, b = _three_images(), BoxTargets.from_images([([[5, 5, 6, 6]], [0])])
    both = BoxTargets.concat([a, BoxTargets.empty(2), b])
    assert len(both) == 6
    assert both.offsets.tolist() == [0, 2, 2, 3, 3, 3, 4]
    assert both.image(5)[1].tolist() == [0]
    assert both[torch.arange(3)].equals(a)


def test_save_and_load_with_weights_only(tmp_path):
    t = _three_images()
    t.save(tmp_path / "targets.pt")
    back = BoxTargets.load(tmp_path / "targets.pt")
    assert back.equals(t)
    assert set(torch.load(tmp_path / "targets.pt", weights_only=True)) == {
        "boxes",
        "labels",
        "offsets",
    }


@pytest.mark.parametrize(
    "boxes, labels, offsets, needle",
    [
        (
            torch.zeros(2, 4, dtype=torch.float64),
            torch.zeros(2, dtype=torch.int64),
            torch.tensor([0, 2]),
            "float32",
        ),
        (torch.zeros(2, 4), torch.zeros(3, dtype=torch.int64), torch.tensor([0, 2]), "one per box"),
        (
            torch.zeros(2, 4),
            torch.zeros(2, dtype=torch.int64),
            torch.tensor([0, 3]),
            "from 0 to the box count",
        ),
        (
            torch.zeros(2, 4),
            torch.zeros(2, dtype=torch.int64),
            torch.tensor([0, 2, 1, 2]),
            "never decreasing",
        ),
    ],
)
def test_bad_tensors_are_one_line(boxes, labels, offsets, needle):
    with pytest.raises(BoxTargetsError, match=needle) as err:
        BoxTargets(boxes, labels, offsets)
    assert "\n" not in str(err.value)

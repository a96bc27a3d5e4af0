"""Average precision of detections, by pycocotools' ``COCOeval`` (the maintained reference).

:func:`average_precision` scores predicted boxes against true boxes, per image, as COCO
does: per class, detections sorted by score are matched greedily to unmatched true boxes
of the same image at IoU >= t (at most 100 detections per image, every box size); the
precision-recall curve is made monotone (each precision the highest at any recall at or
above it) and sampled at the 101 recall points 0, 0.01, ..., 1 ("101-point
interpolation"; a recall point beyond the curve counts 0).  AP is the mean of those 101
precisions; mAP the mean over the classes that hold a true box.  ``map50`` is mAP at
IoU 0.5 (the Street paper's VOC metric, here with COCO's interpolation: VOC2010's takes
the area under the monotone curve instead, VOC2007's 11 points), ``map`` the mean over
IoU 0.5, 0.55, ..., 0.95 (COCO's mAP@[.5:.95]), ``ap50`` each class's AP at IoU 0.5
(NaN for a class without true boxes).

No true box at all leaves every value NaN (AP is undefined without positives).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NAN = float("nan")


@dataclass(frozen=True)
class ImageBoxes:
    """One image's boxes: ``boxes`` float (K, 4) xyxy pixels, ``labels`` int (K,) class
    indices 0..C-1, ``scores`` float (K,) (predictions; None for true boxes)."""

    boxes: np.ndarray
    labels: np.ndarray
    scores: np.ndarray | None = None


@dataclass(frozen=True)
class DetectionAP:
    """mAP@0.5, mAP@[.5:.95] and each class's AP@0.5 (fractions in [0, 1] or NaN)."""

    map50: float
    map: float
    ap50: np.ndarray  # (C,)


def _annotations(images: Sequence[ImageBoxes], with_scores: bool) -> list[dict]:
    found = []
    for image_id, image in enumerate(images):
        xywh = np.asarray(image.boxes, dtype=np.float64).reshape(-1, 4).copy()
        xywh[:, 2:] -= xywh[:, :2]
        for k in range(len(xywh)):
            entry = {
                "id": len(found) + 1,  # COCO's ids start at 1 (0 means unmatched)
                "image_id": image_id,
                "category_id": int(image.labels[k]),
                "bbox": xywh[k].tolist(),
                "area": float(xywh[k, 2] * xywh[k, 3]),
                "iscrowd": 0,
            }
            if with_scores:
                entry["score"] = float(image.scores[k])
            found.append(entry)
    return found


def average_precision(
    predictions: Sequence[ImageBoxes], truths: Sequence[ImageBoxes], n_classes: int
) -> DetectionAP:
    """COCO's AP of ``predictions`` against ``truths`` (one entry each per image, in the
    same order) for classes 0..``n_classes``-1 (module docstring)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    if len(predictions) != len(truths):
        raise ValueError(f"{len(predictions)} predicted images for {len(truths)} true ones")
    nothing = DetectionAP(NAN, NAN, np.full(n_classes, NAN))
    if not any(len(t.labels) for t in truths):
        return nothing
    header = {
        "images": [{"id": i} for i in range(len(truths))],
        "categories": [{"id": c} for c in range(n_classes)],
    }
    # pycocotools prints its progress: keep it off the run's output
    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO()
        truth.dataset = {**header, "annotations": _annotations(truths, False)}
        truth.createIndex()
        found = COCO()
        found.dataset = {**header, "annotations": _annotations(predictions, True)}
        found.createIndex()
        evaluation = COCOeval(truth, found, "bbox")
        evaluation.params.catIds = list(range(n_classes))
        evaluation.evaluate()
        evaluation.accumulate()
    # precision[T, R, K, A, M]: IoU thresholds, 101 recall points, classes, area range
    # (0 = all), detections per image (last = 100); -1 where a class has no true box
    precision = evaluation.eval["precision"][:, :, :, 0, -1]
    per_class = np.full((precision.shape[0], n_classes), NAN)
    held = precision[0, 0, :] > -1
    per_class[:, held] = precision[:, :, held].mean(axis=1)
    if not held.any():
        return nothing
    return DetectionAP(
        map50=float(np.mean(per_class[0, held])),
        map=float(np.mean(per_class[:, held])),
        ap50=per_class[0],
    )

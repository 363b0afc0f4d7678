"""The segmentation adapters' metrics (torchmetrics), apart from :mod:`gate.adapters.segmentation` so that reading an
adapter's declaration (the config checks, a tier's expansion) does not import torchmetrics (seconds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F
from torchmetrics import Metric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score, MulticlassJaccardIndex


def segmentation_metrics(num_classes: int, ignore_index: int | None) -> MetricCollection:
    """A 2-D segmentation adapter's metrics: ``miou``, ``mean_acc`` (over the classes present), ``overall_acc``,
    ``dice``."""
    c, ignore = num_classes, ignore_index
    return MetricCollection({
        "miou": MulticlassJaccardIndex(c, average="macro", ignore_index=ignore),
        "mean_acc": PresentClassAccuracy(c, ignore_index=ignore),
        "overall_acc": MulticlassAccuracy(c, average="micro", ignore_index=ignore),
        "dice": MulticlassF1Score(c, average="macro", ignore_index=ignore),
    })


class PresentClassAccuracy(MulticlassAccuracy):
    """Per-class pixel accuracy (recall, ``tp / (tp + fn)``) averaged over the classes present in the target.

    torchmetrics' macro accuracy averages over every class that is in the target or the prediction, so a class
    predicted but absent from the target enters with accuracy 0 (its 0/0 read as 0). GATE's ``IoUMetric`` and
    mmseg's ``total_area_to_metrics`` leave such a class out; so does this metric. NaN when no class is present
    (nothing to measure: a record refuses it)."""

    def __init__(self, num_classes: int, ignore_index: int | None = None, **kwargs: Any) -> None:
        super().__init__(num_classes, average="macro", ignore_index=ignore_index, **kwargs)

    def compute(self) -> torch.Tensor:
        tp, _, _, fn = self._final_state()
        tp, present = tp.double(), (tp + fn) > 0
        if not bool(present.any()):
            return torch.tensor(float("nan"))
        return (tp[present] / (tp + fn)[present].double()).mean().float()


class VolumeSegmentationMetric(Metric):
    """A segmentation score per 3-D volume, averaged over volumes.

    ``update(logits (B, C, H, W), {"mask": (B, H, W), "volume": (B,)})`` records each slice's per-class
    intersection, prediction and target pixel counts with its volume id; ``compute`` sums them by volume id (so
    the order and batching of slices do not matter), scores every volume and averages over volumes.

    score: ``dice`` (2|P∩T| / (|P| + |T|)), ``miou`` (|P∩T| / |P∪T|), ``mean_acc`` (|P∩T| / |T|), each averaged
    over the classes present in the volume's target or prediction (``mean_acc``: in its target), or
    ``overall_acc`` (the volume's pixel accuracy, all classes). A volume with no scored class present scores 1
    (nothing to find, nothing found). ``include_background``: whether class 0 is among the averaged classes.

    ``class_index``: score that one class alone (``dice``, ``miou`` or ``mean_acc``), per volume, averaged over
    the volumes where it is defined: present in the volume's target or prediction (``mean_acc``: in its
    target). A structure absent from both in a volume is 0/0 there and that volume is left out of its mean; a
    structure predicted where the target has none scores 0 (a false positive). NaN when no volume defines it.
    """

    full_state_update = False
    higher_is_better = True
    is_differentiable = False

    def __init__(self, num_classes: int, score: str = "dice", include_background: bool = False,
                 ignore_index: int | None = None, class_index: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if score not in ("dice", "miou", "mean_acc", "overall_acc"):
            raise ValueError(f"unknown volume score {score!r}")
        if class_index is not None and (score == "overall_acc" or not 0 <= class_index < num_classes):
            raise ValueError(f"class_index={class_index!r} needs a per-class score and a class in 0..{num_classes - 1}")
        self.num_classes = int(num_classes)
        self.score = score
        self.class_index = class_index
        self.include_background = include_background
        self.ignore_index = ignore_index
        for state in ("volumes", "intersection", "predicted", "actual"):
            self.add_state(state, default=[], dist_reduce_fx="cat")

    def update(self, predictions: torch.Tensor, target: Mapping[str, torch.Tensor]) -> None:
        mask, volume = target["mask"], target["volume"]
        labels = predictions.argmax(dim=1) if predictions.dim() == mask.dim() + 1 else predictions
        valid = torch.ones_like(mask, dtype=torch.bool) if self.ignore_index is None else mask != self.ignore_index
        c = self.num_classes
        pred_1h = F.one_hot(labels.clamp(0, c - 1), c) * valid.unsqueeze(-1)
        true_1h = F.one_hot(torch.where(valid, mask, 0).clamp(0, c - 1), c) * valid.unsqueeze(-1)
        dims = tuple(range(1, mask.dim()))
        self.volumes.append(volume.reshape(-1).long())
        self.intersection.append((pred_1h * true_1h).sum(dims))
        self.predicted.append(pred_1h.sum(dims))
        self.actual.append(true_1h.sum(dims))

    def per_volume(self) -> dict[int, float]:
        """Each volume's score, by volume id."""
        cat = (lambda x: torch.cat(x) if isinstance(x, list) else x)  # noqa: E731 (states are lists until synced)
        volumes = cat(self.volumes)
        if volumes.numel() == 0:
            return {}
        ids, index = torch.unique(volumes, return_inverse=True)

        def by_volume(state) -> torch.Tensor:
            stats = cat(state).double()
            return torch.zeros(len(ids), stats.shape[1], dtype=torch.float64).index_add_(0, index.cpu(), stats.cpu())

        inter, pred, true = by_volume(self.intersection), by_volume(self.predicted), by_volume(self.actual)
        if self.score == "overall_acc":
            scores = inter.sum(1) / true.sum(1).clamp(min=1)
            return {int(v): float(s) for v, s in zip(ids.tolist(), scores.tolist())}
        if self.class_index is not None:
            c = self.class_index
            inter, pred, true = inter[:, c:c + 1], pred[:, c:c + 1], true[:, c:c + 1]
        elif not self.include_background:
            inter, pred, true = inter[:, 1:], pred[:, 1:], true[:, 1:]
        if self.score == "dice":
            denom, num, present = pred + true, 2 * inter, (pred + true) > 0
        elif self.score == "miou":
            denom, num, present = pred + true - inter, inter, (pred + true) > 0
        else:  # mean_acc: recall of the classes the volume holds
            denom, num, present = true, inter, true > 0
        per_class = torch.where(present, num / denom.clamp(min=1), torch.zeros_like(num))
        if self.class_index is not None:  # one structure: only the volumes where it is defined
            return {int(v): float(s) for v, s, d in zip(ids.tolist(), per_class[:, 0].tolist(), present[:, 0].tolist())
                    if d}
        count = present.sum(1)
        scores = torch.where(count > 0, per_class.sum(1) / count.clamp(min=1), torch.ones_like(count, dtype=num.dtype))
        return {int(v): float(s) for v, s in zip(ids.tolist(), scores.tolist())}

    def compute(self) -> torch.Tensor:
        scores = list(self.per_volume().values())
        if self.class_index is not None and not scores:
            return torch.tensor(float("nan"))  # no volume defines this structure: nothing to record
        return torch.tensor(float(np.mean(scores)) if scores else 0.0)

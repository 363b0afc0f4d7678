"""The classification adapters' metrics (torchmetrics), apart from the adapters so that reading an adapter's
declaration (its tasks and settings: the config checks, a tier's expansion) does not import torchmetrics, which
takes seconds (its audio, image and text metrics import scipy.signal, torchvision and transformers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torchmetrics import Metric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy


def accuracy_metrics(num_classes: int, top_k) -> MetricCollection:
    """``acc@k`` for each k in ``top_k``: the fraction of examples whose label is among the k highest logits."""
    return MetricCollection({
        f"acc@{k}": MulticlassAccuracy(num_classes=num_classes, top_k=k, average="micro") for k in top_k
    })



class HeadAccuracy(Metric):
    """Top-k accuracy of one head: its slice ``[offset, offset + count)`` of the concatenated logits against
    the target's ``column`` (the fraction of examples whose label is among the slice's k highest logits)."""

    higher_is_better = True
    is_differentiable = False
    full_state_update = False

    def __init__(self, column: str, offset: int, count: int, k: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.column, self.offset, self.count, self.k = column, int(offset), int(count), int(k)
        self.add_state("correct", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, target: Mapping[str, torch.Tensor]) -> None:
        logits = preds[:, self.offset:self.offset + self.count]
        labels = target[self.column]
        top = logits.topk(self.k, dim=-1).indices
        self.correct += (top == labels[:, None]).any(dim=-1).sum()
        self.total += labels.numel()

    def compute(self) -> torch.Tensor:
        return self.correct.float() / self.total.clamp_min(1)

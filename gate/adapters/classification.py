"""Single-label classification: a linear head, cross-entropy, top-k accuracy."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassAccuracy

from .base import Adapter


def accuracy_metrics(num_classes: int, top_k) -> MetricCollection:
    """``acc@k`` for each k in ``top_k``: the fraction of examples whose label is among the k highest logits."""
    return MetricCollection({
        f"acc@{k}": MulticlassAccuracy(num_classes=num_classes, top_k=k, average="micro") for k in top_k
    })


class LinearClassifier(Adapter):
    """A (dropout +) linear head on pooled features; metrics ``acc@1`` and ``acc@5`` (when C > 5).

    Checkpoints are ranked by validation top-1 accuracy.
    """

    tasks = frozenset({"classification"})
    loss_splits_across_devices = True  # a mean over examples (gate.training.distributed)
    monitor = "acc@1"

    def __init__(self, feature_dim: int, num_classes: int, dropout: float = 0.0, label_smoothing: float = 0.0,
                 top_k: tuple[int, ...] = (1, 5)) -> None:
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"LinearClassifier needs num_classes >= 2, got {num_classes}")
        self.num_classes = num_classes
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(feature_dim, num_classes))
        self.label_smoothing = label_smoothing
        self.top_k = tuple(k for k in top_k if k == 1 or k < num_classes)

    def forward(self, encoded, batch) -> torch.Tensor:
        return self.head(encoded.features)

    def loss(self, predictions, target) -> torch.Tensor:
        return F.cross_entropy(predictions.float(), target, label_smoothing=self.label_smoothing)

    def make_metrics(self) -> MetricCollection:
        return accuracy_metrics(self.num_classes, self.top_k)

"""Single-label classification: a linear head, cross-entropy, top-k accuracy; one head per label column where a
dataset declares several (``heads``, e.g. Happywhale's individual and species)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..settings import CLASSES, DROPOUT, SMOOTHING, TOP_K
from .base import Adapter

if TYPE_CHECKING:
    from torchmetrics import MetricCollection


def defined_top_k(top_k, num_classes: int, where: str) -> tuple[int, ...]:
    """The ``top_k`` values that measure something with ``num_classes`` candidates: k = 1, and k < C (with k >= C
    every label is among the top k: ``acc@k`` would be 1 whatever the model). One warning names those left out.
    The rule of every classifier (image, multi-head, video)."""
    kept = tuple(int(k) for k in top_k if k == 1 or k < num_classes)
    dropped = [int(k) for k in top_k if int(k) not in kept]
    if dropped:
        warnings.warn(f"{where}: acc@k for k={dropped} is not recorded: with {num_classes} classes every label is "
                      f"among the top {dropped[0]}, so it would be 1 whatever the model", stacklevel=3)
    return kept


class LinearClassifier(Adapter):
    """A (dropout +) linear head on pooled features; metrics ``acc@1`` and ``acc@5`` (when C > 5).

    Checkpoints are ranked by validation top-1 accuracy.

    With several label columns (``spec.heads``, ``{column: classes}``) there is one linear head per column; the
    predictions are their logits side by side (the columns' order), the target is ``{column: labels}``, the loss
    is the mean of the heads' cross-entropies (as GATE's multi-class adapter takes it, so the loss scale does
    not grow with the number of heads), and the metrics are ``acc@k/<column>`` per head. The first column is the
    primary head: checkpoints are ranked by its ``acc@1/<column>``. A dataset with one label column gets the
    plain ``acc@1`` / ``acc@5`` of a single head.
    """

    tasks = frozenset({"classification"})
    loss_splits_across_devices = True  # a mean over examples (gate.engine.training.distributed)
    monitor = "acc@1"
    settings = {"num_classes": CLASSES, "dropout": DROPOUT, "label_smoothing": SMOOTHING, "top_k": TOP_K}

    def __init__(self, feature_dim: int, num_classes: int, dropout: float = 0.0, label_smoothing: float = 0.0,
                 top_k: tuple[int, ...] = (1, 5), spec=None) -> None:
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"LinearClassifier needs num_classes >= 2, got {num_classes}")
        self.num_classes = num_classes
        self.heads: dict[str, int] = dict(spec.heads) if spec is not None else {}
        if self.heads and next(iter(self.heads.values())) != num_classes:
            raise ValueError(f"LinearClassifier: num_classes={num_classes} differs from the primary head "
                             f"{dict(self.heads)} of dataset {spec.name!r}")
        self.label_column = (spec.label_column if spec is not None else None) or "label"
        outputs = sum(self.heads.values()) if self.heads else num_classes
        # With several heads, one Linear holds them all: the rows of head c are its own logits (slice c).
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(feature_dim, outputs))
        self.label_smoothing = label_smoothing
        where = f"{type(self).__name__} on dataset {getattr(spec, 'name', '?')!r}"
        self.top_k = defined_top_k(top_k, num_classes, where)
        self.requested_top_k = tuple(top_k)
        if self.heads:
            self.monitor = f"acc@1/{self.label_column}"
            counts = list(self.heads.values())
            self.offsets = dict(zip(self.heads, np.cumsum([0, *counts[:-1]]).tolist()))

    def forward(self, encoded, batch) -> torch.Tensor:
        return self.head(encoded.features)

    def target(self, batch: Mapping[str, Any]):
        if not self.heads:
            return batch["label"]
        return {column: batch[column] for column in self.heads}

    def loss(self, predictions, target) -> torch.Tensor:
        if not self.heads:
            return F.cross_entropy(predictions.float(), target, label_smoothing=self.label_smoothing)
        losses = [F.cross_entropy(predictions[:, self.offsets[c]:self.offsets[c] + n].float(), target[c],
                                  label_smoothing=self.label_smoothing) for c, n in self.heads.items()]
        return torch.stack(losses).mean()

    def make_metrics(self) -> MetricCollection:
        from torchmetrics import MetricCollection

        from .classification_metrics import HeadAccuracy, accuracy_metrics

        if not self.heads:
            return accuracy_metrics(self.num_classes, self.top_k)
        where = f"{type(self).__name__}, head {{}}"
        # compute_groups=False: the heads' metrics share state names (correct, total), and torchmetrics would put two
        # whose counts happen to be equal after the first batch in one group and report one's accuracy for both.
        return MetricCollection({
            f"acc@{k}/{column}": HeadAccuracy(column, self.offsets[column], count, k)
            for column, count in self.heads.items()
            for k in defined_top_k(self.requested_top_k, count, where.format(column))
        }, compute_groups=False)

    # ------------------------------------------------------------------------------------------- data
    def example_targets(self, row: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        if not self.heads:
            return {"label": torch.as_tensor(int(row[self.label_column]), dtype=torch.long)}
        return {column: torch.as_tensor(int(row[column]), dtype=torch.long) for column in self.heads}

    def check_split(self, spec, name: str, split) -> None:
        """Every head's labels in range (the base checks the primary one alone)."""
        from ..data.spec import check_split

        for column in self.heads or ([spec.label_column] if spec.label_column else []):
            check_split(spec, name, np.asarray(split.select_columns([column]).with_format("numpy")[:][column]),
                        column)

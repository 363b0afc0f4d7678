"""Multi-label classification (the GATE paper's medical classification family, e.g. CheXpert / NIH chest X-rays).

Design: a (dropout +) linear head on the encoder's pooled features gives one logit per class; the loss is
binary cross-entropy with logits on the multi-hot target. Recorded metrics, as in the paper's medical tasks:

* ``auc_macro`` / ``auc/<class>``: area under the ROC curve (torchmetrics ``MultilabelAUROC``);
* ``aps_macro`` / ``aps/<class>``: average precision (torchmetrics ``MultilabelAveragePrecision``);
* ``auc_classes``: how many classes entered ``auc_macro`` and ``aps_macro`` (below);
* ``brier_macro`` / ``brier/<class>``: Brier score, the mean squared error of the sigmoid probabilities
  (torchmetrics has no multi-label Brier score: :class:`gate.adapters.multilabel_metrics.MultilabelBrierScore`).

A class whose split holds no positive or no negative example has no ROC curve (AUC is 0/0; torchmetrics
returns 0) and a degenerate precision-recall curve (no positive: undefined, torchmetrics returns 0; no negative:
1 whatever the scores). Such a class is LEFT OUT of ``auc_macro`` and ``aps_macro`` (the macro averages the
other classes, one warning per evaluation names it), ``auc_classes`` records how many classes entered, and its
``auc/<class>`` and ``aps/<class>`` are not recorded (once :meth:`MultilabelClassifier.check_split` has seen the
test split, they are made only for classes the test split defines; on other splits such a key computes NaN).
A val or test split where no class is defined is refused before training (``check_split``). GATE's code
(scikit-learn's ``roc_auc_score`` per class) raises on such a class instead.

``<class>`` is the dataset's class name (``spec.class_names``) or the class index. Every key is its own
``Metric`` returning a scalar, so Lightning can log each of them; the per-class metrics subclass the macro ones
with the same states, so a ``MetricCollection`` puts them in one compute group and keeps the scores of an
epoch once. The metrics see sigmoid probabilities (never raw logits: torchmetrics guesses per batch whether
inputs are logits, which would mix scales across batches). Checkpoints are ranked by validation ``auc_macro``.
Test-time ensembles average the logits (the engine's default).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..data.columns import column_values
from ..settings import CLASSES, DROPOUT, Bool
from .base import Adapter

if TYPE_CHECKING:
    from torchmetrics import MetricCollection


def metric_key(name: str) -> str:
    """A class name usable as a metric-key qualifier (no dots: torch module names; no spaces or slashes)."""
    key = re.sub(r"[^0-9A-Za-z_+\-]+", "_", str(name).strip()).strip("_")
    return key or "class"


class MultilabelClassifier(Adapter):
    """A (dropout +) linear head on pooled features, one logit per class; BCE-with-logits; AUROC, average
    precision and Brier score, macro and per class. Checkpoints are ranked by validation ``auc_macro``."""

    tasks = frozenset({"multilabel"})
    loss_splits_across_devices = True  # a mean over examples (gate.engine.training.distributed)
    needs = frozenset({"features"})
    monitor = "auc_macro"
    settings = {"num_classes": CLASSES, "dropout": DROPOUT, "per_class": Bool(meaning="record each class's AUC, AP and Brier score")}

    def __init__(self, feature_dim: int, num_classes: int, spec=None, dropout: float = 0.0,
                 per_class: bool = True) -> None:
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"MultilabelClassifier needs num_classes >= 2, got {num_classes}")
        self.num_classes = num_classes
        self.column = spec.column("multi_hot") if spec is not None else "labels"
        names = list(spec.class_names) if spec is not None and len(spec.class_names) == num_classes else []
        keys = [metric_key(n) for n in names] if names else [str(i) for i in range(num_classes)]
        if len(set(keys)) != len(keys):  # two names that read the same as keys: fall back to indices
            keys = [str(i) for i in range(num_classes)]
        self.class_keys = keys
        self.per_class = per_class
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(feature_dim, num_classes))
        #: split name -> the classes it defines (bool per class), filled by :meth:`check_split`.
        self.split_defined: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------------------------------ model
    def forward(self, encoded, batch) -> torch.Tensor:
        return self.head(encoded.features)

    def target(self, batch: Mapping[str, Any]) -> torch.Tensor:
        return batch[self.column]

    def loss(self, predictions, target) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(predictions.float(), target.float())

    def make_metrics(self) -> MetricCollection:
        from torchmetrics import MetricCollection

        from . import multilabel_metrics as m

        c = self.num_classes
        metrics = {"auc_macro": m.AUROCOnLogits(num_labels=c), "aps_macro": m.APSOnLogits(num_labels=c),
                   "auc_classes": m.DefinedClasses(c, self.class_keys),
                   "brier_macro": m.BrierOnLogits(num_labels=c, average="macro")}
        if self.per_class:
            # AUC and AP per class only where the test split defines them (all classes until it is checked).
            defined = self.split_defined.get("test")
            for i, key in enumerate(self.class_keys):
                if defined is None or defined[i]:
                    metrics[f"auc/{key}"] = m.ClassAUROC(c, i)
                    metrics[f"aps/{key}"] = m.ClassAPS(c, i)
                metrics[f"brier/{key}"] = m.ClassBrier(c, i)
        return MetricCollection(metrics)

    # ------------------------------------------------------------------------------------------- data
    def example_targets(self, row: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        # a copy: Arrow hands out read-only arrays, and a float32 one shared with torch warned on every run
        return {self.column: torch.tensor(np.asarray(row[self.column]), dtype=torch.float32)}

    def target_columns(self, spec) -> list[str]:
        return [spec.column("multi_hot")]

    def stratify_labels(self, spec, split) -> None:
        return None  # a multi-hot target has no single label to stratify by: computed splits are plain

    def check_split(self, spec, name: str, split) -> None:
        """0/1 vectors of the declared width; records which classes the split defines (a positive and a negative
        example: :func:`gate.adapters.multilabel_metrics.defined_classes`). An evaluation split that defines none is
        refused: ``auc_macro``, the checkpoint monitor and the tier metric, would be undefined (e.g.
        ``data.max_test_samples=1``)."""
        from .multilabel_metrics import defined_classes

        rows = check_multi_hot(spec, name, split, spec.column("multi_hot"))
        defined = defined_classes(torch.tensor(np.asarray(rows))).numpy()
        self.split_defined[name] = defined
        if name in ("val", "test") and not defined.any():
            raise ValueError(f"dataset {spec.name!r}: split {name!r} ({len(rows)} examples) has no class with both a "
                             f"positive and a negative example, so auc_macro and aps_macro are undefined on it; "
                             f"evaluate on more examples (data.max_{name}_samples)")


def check_multi_hot(spec, split_name: str, split, column: str) -> np.ndarray:
    """The split's (N, C) multi-hot rows; raise a ValueError naming the dataset, split and first bad example when
    a multi-hot column is not a 0/1 vector of length ``spec.num_classes``."""
    where = f"dataset {spec.name!r}: split {split_name!r}"
    values = column_values(split, column)
    array = np.asarray(values) if not isinstance(values, list) else None
    rows = array if array is not None and array.dtype != object and array.ndim == 2 else None
    if rows is None:  # ragged rows (lists of different lengths): look at them one by one
        for i, row in enumerate(values):
            row = np.asarray(row)
            if row.ndim != 1 or row.shape[0] != spec.num_classes:
                raise ValueError(f"{where}: example {i} has a {column!r} vector of shape {tuple(row.shape)}; the "
                                 f"dataset declares num_classes={spec.num_classes} (a 0/1 vector of that length)")
        rows = np.stack([np.asarray(r) for r in values]) if len(values) else np.zeros((0, spec.num_classes))
    if rows.shape[0] == 0:
        raise ValueError(f"{where} is empty")
    if rows.shape[1] != spec.num_classes:
        raise ValueError(f"{where}: example 0 has a {column!r} vector of length {rows.shape[1]}; the dataset "
                         f"declares num_classes={spec.num_classes} (a 0/1 vector of that length)")
    bad = ~np.isin(rows, (0, 1))
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"{where}: example {i} has {column}[{j}]={rows[i, j].item()!r}; a multi-hot target holds "
                         f"only 0 and 1")
    return rows

"""The multi-label adapter's metrics (torchmetrics), apart from :mod:`gate.adapters.multilabel` so that reading the
adapter's declaration (the config checks, a tier's expansion) does not import torchmetrics (seconds)."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torchmetrics import Metric
from torchmetrics.classification import MultilabelAUROC, MultilabelAveragePrecision
from torchmetrics.utilities import dim_zero_cat


class MultilabelBrierScore(Metric):
    """Brier score per class: mean over examples of ``(p - y)^2`` with ``p = sigmoid(logit)``; ``average="macro"``
    gives the mean over classes, ``average=None`` the per-class vector."""

    higher_is_better = False
    full_state_update = False

    def __init__(self, num_labels: int, average: str | None = "macro", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if average not in ("macro", None):
            raise ValueError(f"MultilabelBrierScore: average must be 'macro' or None, got {average!r}")
        self.num_labels = num_labels
        self.average = average
        self.add_state("squared_error", default=torch.zeros(num_labels, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, probs: torch.Tensor, target: torch.Tensor) -> None:
        if probs.shape != target.shape or probs.ndim != 2 or probs.shape[1] != self.num_labels:
            raise ValueError(f"MultilabelBrierScore expects (N, {self.num_labels}) probabilities and targets, got "
                             f"{tuple(probs.shape)} and {tuple(target.shape)}")
        self.squared_error += ((probs.double() - target.double()) ** 2).sum(dim=0)
        self.count += probs.shape[0]

    def compute(self) -> torch.Tensor:
        per_class = self.squared_error / self.count.clamp(min=1)
        return per_class.mean() if self.average == "macro" else per_class


def defined_classes(target: torch.Tensor) -> torch.Tensor:
    """(C,) bool: the classes of an (N, C) 0/1 target with at least one positive and one negative example."""
    positives = (target == 1).sum(dim=0)
    return (positives > 0) & (positives < target.shape[0])


class _Undefined:
    """Mixin for torchmetrics' multi-label AUROC / average precision (``preds``/``target`` list states): scores
    per class with the undefined classes (:func:`defined_classes`) as NaN, and their mean over defined ones."""

    def _defined(self) -> torch.Tensor:
        target = dim_zero_cat(self.target)
        return defined_classes(target.reshape(-1, self.num_labels))

    def _per_class(self) -> torch.Tensor:
        with warnings.catch_warnings():  # torchmetrics warns per class and per call; the adapter says it once
            warnings.filterwarnings("ignore", message=r"No (positive|negative) samples")
            per_class = super().compute()
        return torch.where(self._defined(), per_class.float(), torch.tensor(float("nan")))

    def compute(self) -> torch.Tensor:
        per_class = self._per_class()
        defined = ~per_class.isnan()
        return per_class[defined].mean() if bool(defined.any()) else torch.tensor(float("nan"))


class _SigmoidInputs:
    """Mixin: feed the metric sigmoid probabilities and integer targets (predictions arrive as logits, targets as
    floats)."""

    def update(self, logits: torch.Tensor, target: torch.Tensor) -> None:
        super().update(torch.sigmoid(logits.float()), target.round().long())


class _OneClass:
    """Mixin: a per-class (``average=None``) metric whose ``compute`` returns the score of one class (a scalar),
    so each class is its own logged key."""

    def __init__(self, num_labels: int, index: int) -> None:
        super().__init__(num_labels=num_labels, average=None)
        self.index = index

    def compute(self) -> torch.Tensor:
        # the AUROC and AP classes compute per class with NaN where the split does not define a class
        per_class = getattr(self, "_per_class", None)
        return (per_class() if per_class is not None else super().compute())[self.index]


class AUROCOnLogits(_SigmoidInputs, _Undefined, MultilabelAUROC):
    """AUROC macro-averaged over the classes the split defines (NaN when none is)."""

    def __init__(self, num_labels: int, **kwargs: Any) -> None:
        kwargs.pop("average", None)  # always per class underneath: the macro is taken over the defined classes
        super().__init__(num_labels=num_labels, average=None, **kwargs)


class APSOnLogits(_SigmoidInputs, _Undefined, MultilabelAveragePrecision):
    """Average precision macro-averaged over the classes the split defines (NaN when none is)."""

    def __init__(self, num_labels: int, **kwargs: Any) -> None:
        kwargs.pop("average", None)
        super().__init__(num_labels=num_labels, average=None, **kwargs)


class BrierOnLogits(_SigmoidInputs, MultilabelBrierScore):
    pass


class ClassAUROC(_OneClass, AUROCOnLogits):
    """One class's AUROC."""


class ClassAPS(_OneClass, APSOnLogits):
    """One class's average precision."""


class DefinedClasses(AUROCOnLogits):
    """``auc_classes``: how many classes entered ``auc_macro`` and ``aps_macro`` (those with a positive and a
    negative example in the split). When some did not, it warns once per evaluation, naming them."""

    def __init__(self, num_labels: int, class_keys: list[str] | None = None) -> None:
        super().__init__(num_labels)
        self.class_keys = list(class_keys) if class_keys else [str(i) for i in range(num_labels)]

    def compute(self) -> torch.Tensor:
        defined = self._defined()
        left_out = [self.class_keys[i] for i in torch.nonzero(~defined).flatten().tolist()]
        if left_out:
            n = int(defined.sum())
            warnings.warn(f"multi-label: {len(left_out)} of {self.num_labels} classes have no positive or no "
                          f"negative example in this split ({left_out}): left out of auc_macro and aps_macro, which "
                          f"average the other {n} (auc_classes={n})"
                          + ("; both are undefined" if n == 0 else ""), stacklevel=2)
        return defined.sum().float()


class ClassBrier(_OneClass, BrierOnLogits):
    pass

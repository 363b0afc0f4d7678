"""The task-adapter contract (DESIGN.md, "Adapter").

An adapter owns everything task-specific: the head on top of encoder features, the loss, the
torchmetrics collection, the validation quantity that picks the best checkpoint, and how the
predictions of several checkpoints combine into an ensemble. One file per task family
(classification, multi-label, segmentation, few-shot, zero-shot image-text, relational, temporal);
the model, the trainer and the ensembling code never look inside.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

import torch
from torch import nn
from torchmetrics import MetricCollection

from .. import metrics
from ..encoders.base import EncoderOutput, GATEEncoder


class Adapter(nn.Module, abc.ABC):
    #: Task families (DatasetSpec.task) this adapter can serve.
    tasks: frozenset[str] = frozenset()
    #: What the encoder must provide: "features" (pooled) or "tokens" (token/spatial maps).
    needs: str = "features"
    #: The validation metric (without the "val/" prefix) that ranks checkpoints; its direction comes from the
    #: metric registry (:mod:`gate.metrics`).
    monitor: str = "loss"

    @abc.abstractmethod
    def forward(self, encoded: EncoderOutput, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Predictions (e.g. logits) for a batch."""

    @abc.abstractmethod
    def loss(self, predictions: torch.Tensor, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The training loss of a batch."""

    @abc.abstractmethod
    def make_metrics(self) -> MetricCollection:
        """A fresh metric collection; keys are the metric names recorded in the results store."""

    @property
    def monitor_mode(self) -> str:
        """``"max"`` or ``"min"``: how checkpoints are ranked by :attr:`monitor`."""
        return metrics.monitor_mode(self.monitor)

    def target(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return batch["label"]

    def batch_size(self, batch: Mapping[str, torch.Tensor]) -> int:
        """How many examples a batch holds (for logging and throughput)."""
        return len(self.target(batch))

    def combine(self, predictions: Sequence[torch.Tensor]) -> torch.Tensor:
        """Ensemble the predictions of several checkpoints (default: average the logits)."""
        return torch.stack(list(predictions)).mean(dim=0)

    def higher_is_better(self, metric: str) -> bool:
        return metrics.higher_is_better(metric)

    def check_compatible(self, task: str, dataset: str, encoder: GATEEncoder) -> None:
        """Raise a clear error if this adapter cannot serve the dataset's task with this encoder."""
        if task not in self.tasks:
            raise ValueError(f"adapter {type(self).__name__} serves tasks {sorted(self.tasks)}, but dataset "
                             f"{dataset!r} is a {task!r} task")
        if self.needs == "tokens" and getattr(encoder, "provides_tokens", True) is False:
            raise ValueError(f"adapter {type(self).__name__} needs token features, which "
                             f"{type(encoder).__name__} does not provide")

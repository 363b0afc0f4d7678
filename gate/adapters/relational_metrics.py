"""The relational adapter's answer heads read out (:func:`own_slices`, for its loss and its metric) and its metric
(torchmetrics), apart from :mod:`gate.adapters.relational` so that reading the adapter's declaration (the config
checks, a tier's expansion) does not import torchmetrics (seconds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torchmetrics import Metric


def own_slices(predictions: torch.Tensor, answer_type: torch.Tensor, offsets: torch.Tensor,
               counts: torch.Tensor) -> torch.Tensor:
    """Each example's own head's logits from the concatenated (B, sum counts) predictions, as (B, max count)
    with the other entries at -inf."""
    width = int(counts.max())
    columns = offsets[answer_type][:, None] + torch.arange(width, device=predictions.device)[None, :]
    valid = torch.arange(width, device=predictions.device)[None, :] < counts[answer_type][:, None]
    picked = predictions.gather(1, columns.clamp(max=predictions.shape[1] - 1))
    return picked.masked_fill(~valid, float("-inf"))


class AnswerAccuracy(Metric):
    """Top-1 accuracy of each example's own head, over all examples or over one answer type."""

    full_state_update = False
    higher_is_better = True

    def __init__(self, counts: Sequence[int], answer_type: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        counts = torch.as_tensor(list(counts), dtype=torch.long)
        self.register_buffer("counts", counts, persistent=False)
        self.register_buffer("offsets", torch.cumsum(counts, 0) - counts, persistent=False)
        self.answer_type = answer_type
        self.add_state("correct", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, predictions: torch.Tensor, target: Mapping[str, torch.Tensor]) -> None:
        answer, kind = target["answer"], target["answer_type"]
        right = own_slices(predictions, kind, self.offsets, self.counts).argmax(dim=1) == answer
        if self.answer_type is not None:
            right = right[kind == self.answer_type]
        self.correct += right.sum()
        self.total += right.numel()

    def compute(self) -> torch.Tensor:
        if float(self.total) == 0:
            return torch.tensor(float("nan"))  # no question of this type: undefined, never 0
        return self.correct / self.total

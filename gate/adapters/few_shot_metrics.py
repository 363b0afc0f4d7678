"""The few-shot adapter's metric (torchmetrics), apart from :mod:`gate.adapters.few_shot` so that reading the
adapter's declaration (the config checks, a tier's expansion) does not import torchmetrics (seconds)."""

from __future__ import annotations

from typing import Any

import torch
from torchmetrics import Metric


class EpisodeAccuracy(Metric):
    """Mean over episodes of the query accuracy of each episode, or the half-width of its 95% confidence interval.

    Each :meth:`update` is one episode: predictions (Q, N_episode), targets (Q,). ``output="mean"`` computes
    ``Σ a_e / n``; ``output="ci95"`` computes ``1.96 · σ / √n``, ``σ`` the population std (ddof 0) of the
    per-episode accuracies ``a_e`` (Meta-Dataset's ``np.std(accuracies) * 1.96 / np.sqrt(len(accuracies))``),
    undefined (NaN) below two episodes. States are sums in float64 (``Σ a_e``, ``Σ a_e²``, ``n``), reduced by
    summing across ranks; both outputs share them (one torchmetrics compute group).
    """

    higher_is_better = True
    is_differentiable = False
    full_state_update = False

    def __init__(self, output: str = "mean", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if output not in ("mean", "ci95"):
            raise ValueError(f"EpisodeAccuracy: output={output!r}; valid: 'mean', 'ci95'")
        self.output = output
        self.add_state("accuracy_sum", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("accuracy_sq_sum", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("episodes", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        if target.numel() == 0:
            raise ValueError("EpisodeAccuracy: an episode with no query has no accuracy")
        accuracy = (preds.argmax(dim=-1) == target).to(torch.float64).mean()
        self.accuracy_sum += accuracy
        self.accuracy_sq_sum += accuracy * accuracy
        self.episodes += 1

    def compute(self) -> torch.Tensor:
        n = self.episodes
        mean = self.accuracy_sum / n if n > 0 else torch.tensor(float("nan"), dtype=torch.float64)
        if self.output == "mean":
            return mean.float()
        if n < 2:
            return torch.tensor(float("nan"))
        variance = (self.accuracy_sq_sum / n - mean * mean).clamp_min(0.0)  # population variance (ddof 0)
        return (1.96 * variance.sqrt() / n.sqrt()).float()

"""Test the best checkpoint and the ensembles of the top-k validation checkpoints in one streaming pass.

GATE-paper style: the ensemble of k checkpoints combines their predictions (the adapter's
:meth:`~gate.adapters.base.Adapter.combine`, logits averaged by default). Evaluation **streams**: for every test
batch each checkpoint of the largest ensemble predicts, the combined predictions of every ensemble size update
that size's metric state, and the batch's predictions are dropped. Nothing holds a split's outputs, so a
paper-size test split (ADE20K's 2000 images × 150 × 256² logits: 73 GiB per checkpoint) costs no more memory than a
small one; the price is that the k checkpoints sit on the device together.

It is a Lightning module run by ``trainer.test``, so Lightning owns the loop and, under several processes (DDP),
each rank scores its share of the batches and the metric states reduce across ranks before they are read.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence

import lightning as L
from torch import nn
from torchmetrics import MeanMetric

from ...adapters.base import target_length
from ..model import GATEModel
from .checkpoints import load_checkpoint


def ranked_checkpoints(checkpoint_callback: L.pytorch.callbacks.ModelCheckpoint) -> list[str]:
    """The saved top-k checkpoint paths, best first (the callback's best model first among ties)."""
    reverse = checkpoint_callback.mode == "max"
    scored = sorted(checkpoint_callback.best_k_models.items(), key=lambda item: float(item[1]), reverse=reverse)
    ranked = [path for path, _ in scored]
    best = checkpoint_callback.best_model_path
    return [best, *(p for p in ranked if p != best)] if best in ranked else ranked


def load_member(model: GATEModel, checkpoint: str) -> GATEModel:
    """A copy of ``model`` holding the weights of ``checkpoint`` (a Lightning checkpoint of this model)."""
    member = copy.deepcopy(model)
    member.load_state_dict(load_checkpoint(checkpoint)["state_dict"])  # data only: a planted pickle never runs
    return member


class EnsembleTester(L.LightningModule):
    """Scores ``members`` (checkpoints ranked best first) on the test split: ``test/<metric>`` and ``test/loss`` of
    the best one, ``test/ensemble_<k>/<metric>`` and ``test/ensemble_<k>/loss`` of the first k for each k in
    ``sizes``. One pass; each batch is predicted once by each member."""

    def __init__(self, members: Sequence[GATEModel], sizes: Sequence[int]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one checkpoint")
        self.members = nn.ModuleList(members)
        self.adapter = members[0].adapter
        self.sizes = [int(k) for k in sizes if int(k) <= len(members)]
        self.best_metrics = self.adapter.make_metrics().clone(prefix="test/")
        self.best_loss = MeanMetric()
        self.ensemble_metrics = nn.ModuleDict({str(k): self.adapter.make_metrics().clone(prefix=f"test/ensemble_{k}/")
                                               for k in self.sizes})
        self.ensemble_losses = nn.ModuleDict({str(k): MeanMetric() for k in self.sizes})

    def test_step(self, batch, batch_idx):
        wanted = max([1, *self.sizes])
        predictions = [member(batch).float() for member in self.members[:wanted]]
        target = self.adapter.target(batch)
        n = target_length(target)
        self.best_metrics.update(predictions[0], target)
        self.best_loss.update(self.adapter.loss(predictions[0], target), weight=n)
        for k in self.sizes:
            combined = self.adapter.combine(predictions[:k])
            self.ensemble_metrics[str(k)].update(combined, target)
            self.ensemble_losses[str(k)].update(self.adapter.loss(combined, target), weight=n)

    def on_test_epoch_end(self) -> None:
        # Metric objects are logged whole: Lightning computes them once per epoch, after reducing their states
        # across ranks.
        self.log_dict(self.best_metrics, on_step=False, on_epoch=True)
        self.log("test/loss", self.best_loss, on_step=False, on_epoch=True)
        for k in self.sizes:
            self.log_dict(self.ensemble_metrics[str(k)], on_step=False, on_epoch=True)
            self.log(f"test/ensemble_{k}/loss", self.ensemble_losses[str(k)], on_step=False, on_epoch=True)


def test_best_and_ensembles(trainer: L.Trainer, model: GATEModel, datamodule: L.LightningDataModule,
                            checkpoints: Sequence[str], sizes: Sequence[int] = (1, 3, 5)) -> dict[str, float]:
    """Metrics of the best checkpoint (``<metric>``) and of the ensembles of the top-k (``ensemble_<k>/<metric>``),
    ``checkpoints`` ranked best first, in one streaming test pass (:class:`EnsembleTester`)."""
    checkpoints = list(checkpoints)[: max([1, *sizes])]
    missing = [k for k in sizes if k > len(checkpoints)]
    if missing:
        warnings.warn(f"only {len(checkpoints)} validation checkpoints were kept; skipping ensembles of "
                      f"size {missing} (validate more often or train longer)", stacklevel=2)
    tester = EnsembleTester([load_member(model, path) for path in checkpoints], sizes)
    tested = trainer.test(tester, datamodule=datamodule, verbose=False)[0]
    return {k.removeprefix("test/"): float(v) for k, v in tested.items() if k.startswith("test/")}

"""GATEModel: the LightningModule joining an encoder, a task adapter and a training recipe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from torchmetrics import MeanMetric

from ..adapters.base import Adapter, target_length
from ..encoders.base import GATEEncoder


def global_batch_loss(trainer, loss: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the loss to backpropagate, the global batch's loss to log) under data parallelism.

    Each rank's loss is a mean over its slice of the global batch and DDP averages gradients over ranks, so a
    rank's loss is weighted by ``world_size · local / global``: the averaged gradient is the one-device gradient.
    The logged loss is the global batch's mean, equal on every rank (a per-step scheduler such as
    ReduceLROnPlateau on ``train/loss`` must see the same value everywhere, or the ranks' learning rates drift
    apart). On one device both are ``loss``; otherwise one all-reduce of two numbers per step."""
    world = int(getattr(trainer, "world_size", 1) or 1) if trainer is not None else 1
    if world == 1:
        return loss, loss.detach()
    local = torch.stack([loss.detach().float() * size, torch.tensor(float(size), device=loss.device)])
    total = trainer.strategy.reduce(local, reduce_op="sum")
    return loss * (world * size / float(total[1])), total[0] / total[1]


class GATEModel(L.LightningModule):
    """Fine-tunes ``encoder`` end to end through ``adapter``.

    optimizer: a partial taking the parameters (e.g. ``torch.optim.AdamW`` with lr and weight decay).
    scheduler: a partial taking the optimizer, or None; stepped every ``scheduler_interval`` on
        ``scheduler_monitor`` (the GATE recipes use ReduceLROnPlateau on the training loss, per step).
    Logged metrics: ``train/loss``, ``val/loss``, ``val/<metric>``, ``test/loss``, ``test/<metric>``.
    """

    def __init__(self, encoder: GATEEncoder, adapter: Adapter, optimizer: Callable, scheduler: Callable | None = None,
                 scheduler_interval: str = "step", scheduler_monitor: str = "train/loss",
                 freeze_encoder: bool = False) -> None:
        super().__init__()
        self.encoder = encoder
        self.adapter = adapter
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.scheduler_interval = scheduler_interval
        self.scheduler_monitor = scheduler_monitor
        self.freeze_encoder = freeze_encoder
        # Fine-tuning starts with every module in training mode: Hugging Face's from_pretrained returns its
        # model in eval mode (no dropout), and Lightning keeps the modes it is given. Frozen parts (a frozen
        # encoder, a stem's frozen body, a frozen text tower) switch themselves to eval in their forward.
        self.train()
        if freeze_encoder:
            self.encoder.requires_grad_(False)
        self.val_metrics = adapter.make_metrics().clone(prefix="val/")
        self.test_metrics = adapter.make_metrics().clone(prefix="test/")
        # Losses averaged by a metric object (weighted by examples), so that under several processes the
        # epoch's loss is reduced across ranks exactly, whatever each rank's share of the batches.
        self.val_loss = MeanMetric()
        self.test_loss = MeanMetric()

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.adapter.predict(self.encoder, batch)

    def training_step(self, batch, batch_idx):
        if self.freeze_encoder:
            self.encoder.eval()
        predictions = self(batch)
        target = self.adapter.target(batch)
        loss = self.adapter.loss(predictions, target)
        size = target_length(target)
        loss, logged = global_batch_loss(self._trainer, loss, size)
        self.log("train/loss", logged, on_step=True, on_epoch=False, prog_bar=True, batch_size=size)
        return loss

    def _evaluate(self, batch, metrics, loss_metric, stage: str):
        predictions = self(batch)
        target = self.adapter.target(batch)
        loss = self.adapter.loss(predictions, target)
        metrics.update(predictions.float(), target)
        loss_metric.update(loss.detach(), weight=target_length(target))
        self.log(f"{stage}/loss", loss_metric, on_step=False, on_epoch=True, prog_bar=True)
        self.log_dict(metrics, on_step=False, on_epoch=True, prog_bar=True)

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, self.val_metrics, self.val_loss, "val")

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, self.test_metrics, self.test_loss, "test")

    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad]
        # An encoder may train some of its own parameters at their own rate (a new modality stem: see
        # GATEEncoder.optimizer_groups); everything else follows the recipe.
        groups = [dict(g, params=[p for p in g["params"] if p.requires_grad]) for g in self.encoder.optimizer_groups()]
        head_lr = self.encoder.head_lr()
        if head_lr is not None:  # the encoder says the recipe's rate does not fit the task head (GATEEncoder.head_lr)
            groups.append({"params": [p for p in self.adapter.parameters() if p.requires_grad], "lr": head_lr})
        if groups:
            taken = {id(p) for g in groups for p in g["params"]}
            params = [{"params": [p for p in params if id(p) not in taken]}] + [g for g in groups if g["params"]]
        optimizer = _built(self.optimizer_factory, "recipe.optimizer", params)
        if self.scheduler_factory is None:
            return optimizer
        scheduler = _built(self.scheduler_factory, "recipe.scheduler", optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {
            "scheduler": scheduler, "interval": self.scheduler_interval, "frequency": 1,
            "monitor": self.scheduler_monitor,
            # Right after resuming mid-epoch Lightning steps schedulers before any metric is logged:
            # skip that one update instead of failing.
            "strict": False}}


def _built(factory: Any, section: str, *args: Any) -> Any:
    """``factory(*args)`` (a recipe's optimizer or scheduler: a partial of its ``_target_``); a value the library
    rejects (torch's "Invalid beta parameter at index 0: 2") is one line naming the keys passed on to it."""
    try:
        return factory(*args)
    except (TypeError, ValueError, RuntimeError, KeyError) as err:
        from gate.errors import ConfigError
        from gate.settings import show

        target = getattr(factory, "func", factory)
        name = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', target)}".lstrip(".")
        given = ", ".join(f"{section}.{k}={show(v)}" for k, v in (getattr(factory, "keywords", None) or {}).items())
        raise ConfigError(f"{section} ({name}) rejected the settings passed on to it ({given or 'none'}): "
                          f"{' '.join(str(err).split())}") from err

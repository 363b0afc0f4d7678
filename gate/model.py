"""GATEModel: the LightningModule joining an encoder, a task adapter and a training recipe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import torch

from .adapters.base import Adapter, target_length, to_cpu
from .encoders.base import GATEEncoder


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
        # The last test pass's predictions and targets (on the CPU), so checkpoint ensembles reuse the
        # best checkpoint's test pass instead of predicting the test split with it a second time.
        self.test_outputs: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.adapter.predict(self.encoder, batch)

    def training_step(self, batch, batch_idx):
        if self.freeze_encoder:
            self.encoder.eval()
        predictions = self(batch)
        target = self.adapter.target(batch)
        loss = self.adapter.loss(predictions, target)
        self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True, batch_size=target_length(target))
        return loss

    def _evaluate(self, batch, metrics, stage: str):
        predictions = self(batch)
        target = self.adapter.target(batch)
        if stage == "test":
            self.test_outputs.append((predictions.detach().float().cpu(), to_cpu(target)))
        loss = self.adapter.loss(predictions, target)
        metrics.update(predictions.float(), target)
        size = target_length(target)
        self.log(f"{stage}/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=size)
        self.log_dict(metrics, on_step=False, on_epoch=True, prog_bar=True, batch_size=size)

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, self.val_metrics, "val")

    def on_test_epoch_start(self) -> None:
        self.test_outputs = []

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, self.test_metrics, "test")

    def predict_step(self, batch, batch_idx) -> dict[str, torch.Tensor]:
        return {"predictions": self(batch).detach().float().cpu(), "target": to_cpu(self.adapter.target(batch))}

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
        optimizer = self.optimizer_factory(params)
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {
            "scheduler": scheduler, "interval": self.scheduler_interval, "frequency": 1,
            "monitor": self.scheduler_monitor,
            # Right after resuming mid-epoch Lightning steps schedulers before any metric is logged:
            # skip that one update instead of failing.
            "strict": False}}

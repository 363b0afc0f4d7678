"""A progress bar that counts what GATE trains by: optimizer steps out of ``max_steps``, not epochs.

Lightning's bar shows ``Epoch 0/-2`` for a step-based run (``max_epochs=-1``) and restarts every epoch.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar


def _metrics_without_version(bar, trainer, pl_module) -> dict:
    metrics = type(bar).__mro__[1].get_metrics(bar, trainer, pl_module)
    metrics.pop("v_num", None)  # the logger's run id: noise on a progress bar
    return metrics


def _steps(trainer) -> int | None:
    steps = trainer.max_steps
    return int(steps) if steps and steps > 0 else None


class StepProgressBar(RichProgressBar):
    """One training bar over ``max_steps`` (resumed runs start where they left off)."""

    @property
    def total_train_batches(self):
        return _steps(self.trainer) or super().total_train_batches

    def get_metrics(self, trainer, pl_module):
        return _metrics_without_version(self, trainer, pl_module)

    def _get_train_description(self, current_epoch: int) -> str:
        return "train" if _steps(self.trainer) else super()._get_train_description(current_epoch)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if _steps(trainer) is None or self.train_progress_bar_id is None:
            super().on_train_epoch_start(trainer, pl_module)
            if _steps(trainer) is not None:
                self._update(self.train_progress_bar_id, trainer.global_step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if _steps(trainer) is not None:
            self._update(self.train_progress_bar_id, trainer.global_step)


class StepTQDMProgressBar(TQDMProgressBar):
    """The same for terminals without ``rich``."""

    def get_metrics(self, trainer, pl_module):
        return _metrics_without_version(self, trainer, pl_module)

    @property
    def total_train_batches(self):
        return _steps(self.trainer) or super().total_train_batches

    def on_train_epoch_start(self, trainer, *_) -> None:
        if _steps(trainer) is None:
            super().on_train_epoch_start(trainer, *_)
            return
        if self.train_progress_bar.total != _steps(trainer):
            self.train_progress_bar.reset(total=_steps(trainer))
            self.train_progress_bar.initial = trainer.global_step
            self.train_progress_bar.set_description("train")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if _steps(trainer) is None:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            return
        bar = self.train_progress_bar
        bar.n = trainer.global_step
        bar.refresh()
        bar.set_postfix(self.get_metrics(trainer, pl_module))


def step_progress_bar():
    """The rich bar where ``rich`` is installed, else the tqdm one."""
    try:
        import rich  # noqa: F401
    except ImportError:
        return StepTQDMProgressBar()
    return StepProgressBar()

"""Assemble the Lightning Trainer: precision by hardware, checkpointing by the adapter's monitor."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Mapping
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint

from ... import signals
from ...files import atomic_torch_save
from .checkpoints import load_checkpoint


def auto_precision(requested: str | None) -> str:
    """bf16 mixed precision on a GPU that supports it, fp32 on the CPU; an explicit choice wins."""
    if requested:
        return requested
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bf16-mixed"
    return "32-true"


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint reads and writes, through gate's: a read is
    :func:`~gate.engine.training.checkpoints.load_checkpoint` (data only, whatever ``weights_only`` Lightning asks
    for), a write is whole or absent (a stop signal waits for its end; :func:`gate.signals.critical`) and a full disk
    is one line naming the file."""

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict[str, Any]:
        return load_checkpoint(path, map_location if map_location is not None else "cpu")

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        """``torch.save`` into a file beside ``path``, renamed into place (:func:`gate.files.atomic_torch_save`): a kill
        leaves the old file or the new one. Lightning's own write serialises the whole checkpoint into memory first,
        then copies it out: a second copy in memory, and twice the time (resnet18 with AdamW, 140 MB: 0.215 s, here
        0.115 s; measurements/bench_checkpoint_write.py)."""
        if storage_options is not None:
            raise TypeError(f"storage_options={storage_options!r} is not supported: checkpoints are local files")
        with signals.critical():
            atomic_torch_save(path, checkpoint, "a checkpoint")


class TopKAndLastCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint, except that ``last.ckpt`` is written at every validation (the newest state, to
    resume from), as a hard link to the top-k checkpoint written at the same step where there is one, instead of
    a second serialisation of the same state (half the checkpoint writes of a run whose validation improves).
    Lightning's own ``save_last="link"`` links to the newest top-k file even when it is older than the current
    step, which would resume a killed run from a stale state.

    Both files must hold the same bytes, so the top-k checkpoint is written with ``last_model_path`` already naming
    ``last.ckpt`` (the one field in which the two states differ), and there is no version counter (``last-v1``):
    top-k names carry their step. A full write of ``last.ckpt`` first removes a linked one, so it can never write
    through the link into a top-k file."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(save_last=True, enable_version_counter=False, **kwargs)

    def _last_path(self) -> str:
        return os.path.join(str(self.dirpath), f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)
        # Lightning 2.6 writes last.ckpt only when a top-k file was written at this validation: a run killed
        # after its validation stopped improving would resume from its best step, not its newest. Write it here.
        if not self._should_skip_saving_checkpoint(trainer) and not self._should_save_on_train_epoch_end(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def _save_topk_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict[str, Any]) -> None:
        self.last_model_path = self._last_path()
        super()._save_topk_checkpoint(trainer, monitor_candidates)

    def _save_last_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict[str, Any]) -> None:
        last, just_saved = self._last_path(), self._last_checkpoint_saved
        linked = False
        if (self._last_global_step_saved == trainer.global_step and just_saved and just_saved != last
                and os.path.isfile(just_saved)):
            if trainer.is_global_zero:
                linked = _hard_link(just_saved, last)
            linked = trainer.strategy.broadcast(linked)
        if linked:
            self.last_model_path = self._last_checkpoint_saved = last
            return
        # written beside and renamed over (SafeCheckpointIO): a link to a top-k file is replaced, never written through
        super()._save_last_checkpoint(trainer, monitor_candidates)


def _hard_link(target: str, link: str) -> bool:
    """``link`` becomes a hard link to ``target`` (made aside, then renamed over: never a missing ``last.ckpt``);
    False where the file system has no hard links (the caller writes the file instead)."""
    tmp = f"{link}.{os.getpid()}.link"
    try:
        os.link(target, tmp)
        os.replace(tmp, link)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


def checkpoint_callback(dirpath: str | os.PathLike, monitor: str, mode: str, top_k: int) -> ModelCheckpoint:
    """Keep the top-k checkpoints by the validation monitor (for best-model and ensemble testing) and the last
    one (to resume an interrupted run)."""
    return TopKAndLastCheckpoint(dirpath=str(dirpath), monitor=f"val/{monitor}", mode=mode, save_top_k=top_k,
                                 filename="step={step}", auto_insert_metric_name=False)


def logging_callbacks(cfg: Mapping[str, Any] | None,
                      since: tuple[float, float] | None = None) -> tuple[Any, list[L.Callback]]:
    """The run's facts callback and its logging callbacks from the ``callbacks`` config group
    (conf/callbacks/default.yaml; docs/logging.md). The facts callback is always there (every record carries
    its facts); with ``hardware.enabled`` it is the :class:`~gate.engine.training.hardware.HardwareMonitor`, which also
    logs ``hw/*`` metrics and meters GPU energy. ``since``: the run's start (:class:`RunFacts`)."""
    from .facts import RunFacts
    from .gradnorms import GradNormLogger
    from .hardware import HardwareMonitor
    from .visuals import VisualLogger

    cfg = dict(cfg or {})
    count_flops = bool(cfg["count_flops"])  # conf/callbacks/*.yaml state it (validated)

    def section(name: str) -> dict[str, Any] | None:
        options = dict(cfg.get(name) or {})
        return options if options.pop("enabled", False) else None

    hardware = section("hardware")
    facts = (HardwareMonitor(count_flops=count_flops, since=since, **hardware) if hardware is not None
        else RunFacts(count_flops=count_flops, since=since))
    extra: list[L.Callback] = []
    if (grad := section("grad_norms")) is not None:
        extra.append(GradNormLogger(**grad))
    if (visuals := section("visuals")) is not None:
        extra.append(VisualLogger(**visuals))
    return facts, extra


def build_trainer(trainer_cfg: dict[str, Any], callbacks: list, logger,
                  default_root_dir: str | os.PathLike) -> L.Trainer:
    """A Trainer from the ``trainer`` config group (plain dict of Trainer arguments)."""
    from .distributed import ddp_strategy

    kwargs = dict(trainer_cfg)
    kwargs.pop("_target_", None)
    kwargs["precision"] = auto_precision(kwargs.get("precision"))
    # gate shares batches out to ranks itself (gate/data/distributed.py): Lightning's sampler would pad splits with
    # repeated examples and reshuffle with its own generator.
    kwargs["use_distributed_sampler"] = False
    strategy = ddp_strategy(kwargs)
    if strategy is not None:
        kwargs["strategy"] = strategy
        # data.batch_size is the global batch: BatchNorm sees its statistics, as on one device. (torch's
        # SyncBatchNorm runs on GPUs only: CPU ranks normalise by their own slice, the one difference left.)
        on_gpu = torch.cuda.is_available() and str(kwargs.get("accelerator", "auto")) in ("auto", "gpu", "cuda")
        kwargs.setdefault("sync_batchnorm", on_gpu)
    max_steps, every = kwargs.get("max_steps", -1), kwargs.get("val_check_interval")
    if isinstance(every, int) and max_steps and max_steps > 0:
        if every > max_steps:
            warnings.warn(f"trainer.val_check_interval={every} > max_steps={max_steps}: validating every "
                          f"{max_steps} steps instead", stacklevel=2)
            kwargs["val_check_interval"] = max_steps
        elif max_steps % every:
            warnings.warn(f"trainer.max_steps={max_steps} is not a multiple of val_check_interval={every}: the last "
                          f"{max_steps % every} steps are never validated", stacklevel=2)
    callbacks = list(callbacks)
    if kwargs.get("enable_progress_bar", True):
        from .progress import step_progress_bar

        callbacks.append(step_progress_bar())
    if logger:
        callbacks.append(LearningRateMonitor(logging_interval="step"))
    from .random_states import RandomStates

    callbacks.append(RandomStates())  # a resumed run draws what the uninterrupted run drew after its checkpoint

    # every checkpoint Lightning reads or writes goes through gate's (data-only loads; whole writes)
    kwargs["plugins"] = [*_as_list(kwargs.get("plugins")), SafeCheckpointIO()]
    try:
        return L.Trainer(callbacks=callbacks, logger=logger or False, default_root_dir=str(default_root_dir), **kwargs)
    except (TypeError, ValueError, RuntimeError) as err:  # Lightning's MisconfigurationException is a ValueError...
        from gate.errors import ConfigError
        from gate.settings import TRAINER, passed_on

        given = passed_on(trainer_cfg, TRAINER, "trainer")
        keys = f" passed on to it ({', '.join(given)})" if given else ""
        raise ConfigError(f"Lightning's Trainer rejected the trainer settings{keys}: {' '.join(str(err).split())}") from err


def _as_list(value: Any) -> list[Any]:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]

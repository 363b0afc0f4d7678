"""Experiment loggers. W&B runs offline by default: no login, no network, a local run directory."""

from __future__ import annotations

import os
from pathlib import Path


def wandb_logger(save_dir: str, project: str = "gate", mode: str = "offline", name: str | None = None,
                 entity: str | None = None, tags: list[str] | None = None, group: str | None = None):
    """Lightning's WandbLogger. ``mode``: offline (default; sync later with ``wandb sync``), online, disabled."""
    from lightning.pytorch.loggers import WandbLogger

    if mode not in ("offline", "online", "disabled"):
        raise ValueError(f"logger.mode must be offline, online or disabled, got {mode!r}")
    Path(save_dir).mkdir(parents=True, exist_ok=True)
    logger = WandbLogger(save_dir=save_dir, project=project, name=name, entity=entity, tags=tags, group=group,
                         offline=mode == "offline", mode=mode, settings=_quiet_settings())
    # Lightning always passes W&B's deprecated `anonymous` argument (as None), which makes W&B warn on every run.
    logger._wandb_init.pop("anonymous", None)
    return logger


def _quiet_settings():
    import wandb

    return wandb.Settings(silent=True, console="off", x_disable_stats=True, x_disable_meta=True)


def csv_logger(save_dir: str, name: str | None = None):
    from lightning.pytorch.loggers import CSVLogger

    return CSVLogger(save_dir=save_dir, name=name or "gate")


def logger_run_dir(logger) -> str | None:
    """Where a logger put this run's files."""
    if logger is None:
        return None
    experiment = getattr(logger, "experiment", None)
    run_dir = getattr(experiment, "dir", None)  # W&B: .../wandb/offline-run-.../files
    if isinstance(run_dir, str):
        return os.path.dirname(run_dir)
    return getattr(logger, "log_dir", None)


def finish(logger) -> str | None:
    """Close the logger's run (W&B writes its run files out on finish) and say where its files are."""
    run_dir = logger_run_dir(logger)
    if logger is not None and hasattr(logger, "experiment") and hasattr(logger.experiment, "finish"):
        logger.experiment.finish()
    return run_dir

"""Checkpoints on disk: which one to resume from (never a truncated one), what to keep afterwards, and the one way
a checkpoint is read (:func:`load_checkpoint`: never a pickle that runs code). Lightning writes them through
:class:`gate.engine.training.trainer.SafeCheckpointIO` (whole or absent; a full disk names the file). Lightning-free:
gate-score's feature cache asks :func:`is_complete_checkpoint` without importing the training stack."""

from __future__ import annotations

import pickle
import re
import shutil
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import GateError
from ...files import regular_file, set_aside
from ...paths import LAST_CHECKPOINT

KEEP = ("best", "all", "none")


def is_complete_checkpoint(path: str | Path) -> bool:
    """Whether a torch checkpoint file was written to the end. ``torch.save`` writes a zip archive whose
    central directory comes last, so a write cut short by a kill leaves no readable directory."""
    path = Path(path)
    try:
        if path.stat().st_size == 0:
            return False
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _step(path: Path) -> int:
    match = re.search(r"step=(\d+)", path.name)
    return int(match.group(1)) if match else -1


def resume_point(ckpt_dir: str | Path, set_aside_damaged: bool = True) -> Path | None:
    """The checkpoint an interrupted run resumes from: ``last.ckpt`` when complete; else the newest complete
    validation checkpoint; else None (train from scratch). Truncated files are moved aside (only skipped when
    ``set_aside_damaged`` is false: the other ranks of a data-parallel run leave files to rank 0 and reach the same
    answer)."""
    ckpt_dir = Path(ckpt_dir)
    last = ckpt_dir / LAST_CHECKPOINT
    if last.exists():
        if is_complete_checkpoint(last):
            return last
        if set_aside_damaged:
            set_aside(last, "truncated (the run was killed while saving it)")
    for path in sorted(ckpt_dir.glob("step=*.ckpt"), key=_step, reverse=True):
        if is_complete_checkpoint(path):
            warnings.warn(f"resuming from {path.name}, the newest complete checkpoint", stacklevel=2)
            return path
        if set_aside_damaged:
            set_aside(path, "truncated")
    return None


def prune(ckpt_dir: str | Path, ranked: Sequence[str], keep: str) -> None:
    """After testing: keep ``all`` checkpoints, only the ``best`` (``ranked[0]``), or ``none`` of them."""
    if keep not in KEEP:
        raise ValueError(f"keep_checkpoints must be one of {list(KEEP)}, got {keep!r}")
    ckpt_dir = Path(ckpt_dir)
    if keep == "all" or not ckpt_dir.exists():
        return
    if keep == "none":
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        return
    best = Path(ranked[0]).resolve() if ranked else None
    for path in ckpt_dir.glob("*.ckpt"):
        if path.resolve() != best:
            path.unlink(missing_ok=True)


def load_checkpoint(path: str | Path, map_location: Any = "cpu") -> dict[str, Any]:
    """A checkpoint's contents, read as data only (``torch.load(weights_only=True)``): tensors, numbers, strings,
    containers. A file that would need anything else to load (a pickle that calls code: one planted as
    ``runs/<id>/checkpoints/step=2.ckpt``) is refused in one line naming it, and nothing in it runs. Every
    checkpoint gate reads goes through here: ensemble members and, through
    :class:`gate.engine.training.trainer.SafeCheckpointIO`, Lightning's resume."""
    import torch

    path = regular_file(path, "checkpoint")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        why = " ".join(str(err).split()).split(" Check the documentation")[0][:300]
        raise GateError(f"checkpoint {path} holds more than weights and training state, so it is not loaded (it "
                        f"would run code: {why}); gate-run never writes such a file: delete it, or rerun with "
                        f"force=true to train from scratch") from None

"""Checkpoints on disk: which one to resume from (never a truncated one), and what to keep afterwards."""

from __future__ import annotations

import re
import shutil
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path

from ...files import set_aside

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
    last = ckpt_dir / "last.ckpt"
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

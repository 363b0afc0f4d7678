"""Files written so that a kill at any moment leaves either the old content or the new, never half of one, and
damaged files set aside (kept for inspection, never read again) instead of failing every later run.

The lowest layer of the package: it imports nothing from gate, so data, training, scoring and tiers all use it.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> Path:
    """Create ``path`` by calling ``write(tmp)`` on a temporary file in the same folder, then ``os.replace`` it into
    place (atomic on POSIX): readers and twin writers see the old file or the new one, and a kill leaves no half
    file (only, at worst, a ``.tmp`` beside it). The one atomic write of the package (text, JSON, torch.save)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write` of a UTF-8 text."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def set_aside(path: str | os.PathLike, why: str, stacklevel: int = 3) -> Path:
    """Rename a damaged file or folder to ``<name>.corrupt-<time>`` with a warning saying why; it is never read
    again and stays there for inspection."""
    path = Path(path)
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    path.replace(target)
    warnings.warn(f"{path} is {why}; moved aside to {target.name}", stacklevel=stacklevel)
    return target

"""Files written so that a kill at any moment leaves either the old content or the new, never half of one, and
damaged files set aside (kept for inspection, never read again) instead of failing every later run.

The lowest layer of the package: it imports nothing from gate, so data, training, scoring and tiers all use it.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from pathlib import Path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and ``os.replace`` (atomic on POSIX):
    readers and twin writers see the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def set_aside(path: str | os.PathLike, why: str, stacklevel: int = 3) -> Path:
    """Rename a damaged file or folder to ``<name>.corrupt-<time>`` with a warning saying why; it is never read
    again and stays there for inspection."""
    path = Path(path)
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    path.replace(target)
    warnings.warn(f"{path} is {why}; moved aside to {target.name}", stacklevel=stacklevel)
    return target

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


def atomic_folder(path: str | os.PathLike, fill: Callable[[Path], object]) -> Path:
    """Create the folder ``path`` as one set of files: ``fill(staging)`` writes them into a new folder beside it,
    which then takes its place (an old folder there is renamed aside first and removed after). Readers see the old
    set or the new one, never a mix; a file the new set lacks does not survive from the old; a failure in ``fill``
    leaves the old folder as it was. A kill between the two renames leaves, at worst, the old folder aside as
    ``.<name>.<hex>.old`` with its files intact. The folder counterpart of :func:`atomic_write`."""
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise FileExistsError(f"{path} exists and is not a folder: gate writes a folder of files there; move it away")

    def beside(suffix: str) -> Path:
        return path.parent / f".{path.name}.{os.urandom(4).hex()}.{suffix}"

    staging = beside("tmp")
    os.mkdir(staging)  # 0777 & ~umask, as any folder the user creates
    try:
        fill(staging)
        for _ in range(10):
            old = None
            if path.exists():
                old = beside("old")
                os.replace(path, old)
            try:
                os.replace(staging, path)
            except OSError:
                if path.exists():  # a twin writer put its folder there between the two renames: set it aside too
                    if old is not None:
                        shutil.rmtree(old, ignore_errors=True)
                    continue
                if old is not None:
                    os.replace(old, path)  # the old folder back, as it was
                raise
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
            return path
        raise FileExistsError(f"{path} was replaced by another writer ten times while this one wrote it")
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)

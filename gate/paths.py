"""Names that become paths: a tier's name (its run folder and job logs, its report folder), gate-rank's output
folder, a dataset's or an encoder's name (split manifests, caches, the local copy under ``paths.data``). Each is
one plain path component, checked here, so that no name written in a config or a tier file (``name: ../../x``)
puts a file outside ``paths.root``.

The base layer: it imports nothing from gate but its errors.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError

_SEPARATORS = tuple(sep for sep in ("/", "\\", os.sep, os.altsep) if sep)


def path_part(name: object, what: str) -> str:
    """``name`` as one file or folder name, or a one-line :class:`ConfigError` naming ``what`` it is: empty,
    ``.``/``..``, a separator (``/``, ``\\``), a NUL or another control character would make it a path, not a
    name."""
    text = str(name)
    bad = (not text or text in (".", "..") or any(sep in text for sep in _SEPARATORS)
           or any(ord(ch) < 32 or ord(ch) == 127 for ch in text))
    if bad:
        raise ConfigError(f"{what} {text!r} cannot become a file or folder name: it must be one plain name (no "
                          f"'/', '\\', '..' or control characters; e.g. my_tier), so that nothing is written "
                          f"outside paths.root")
    return text


def inside(root: str | os.PathLike, *names: object, what: str) -> Path:
    """``root / name / ...``, each name checked by :func:`path_part`: the path stays under ``root``."""
    return Path(root).joinpath(*(path_part(name, what) for name in names))


#: The name of the newest checkpoint in a run's checkpoints folder (written at every validation: what a run resumes
#: from, and what gate-rank's halving continues a shorter run from).
LAST_CHECKPOINT = "last.ckpt"


def run_folder(runs: str | os.PathLike, experiment: str) -> Path:
    """An experiment's folder under ``paths.runs``: its lock, its checkpoints (:func:`checkpoints_folder`), its logs."""
    return Path(runs).expanduser().resolve() / experiment


def checkpoints_folder(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / "checkpoints"

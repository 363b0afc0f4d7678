"""The derived-data cache shared by the stand-ins and the benchmark loaders: a ``datasets.DatasetDict`` built
once, saved under ``<cache_dir>/<kind>/<name>-<hash of its parameters>`` and memory-mapped from there after."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def cached_dataset(kind: str, name: str, params: Mapping[str, Any], cache_dir: str | os.PathLike | None,
                   build: Callable[[], Any]):
    """``build()`` saved once under ``<cache_dir>/<kind>/<name>-<hash of params>`` and loaded from there after;
    ``cache_dir=None`` builds in memory every time. Written to a temporary folder and renamed, so a killed build
    never leaves a half-written copy and twin runs do not collide (the second rename loses and uses the first)."""
    import datasets

    from ..results import stable_hash

    if cache_dir is None:
        return build()
    target = Path(cache_dir).expanduser().resolve() / kind / f"{name}-{stable_hash(dict(params))}"
    if (target / "dataset_dict.json").is_file():
        return datasets.load_from_disk(str(target))
    data = build()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    bars = not datasets.utils.are_progress_bars_disabled()
    try:
        if bars:  # no "Saving the dataset" bars in the middle of a run; restored below
            datasets.utils.disable_progress_bars()
        data.save_to_disk(str(tmp))
        try:
            tmp.rename(target)
        except OSError:  # a twin run finished first: use its copy
            pass
    finally:
        if bars:
            datasets.utils.enable_progress_bars()
        shutil.rmtree(tmp, ignore_errors=True)
    return datasets.load_from_disk(str(target))

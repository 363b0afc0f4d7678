"""Tiny local copies of the GATE benchmarks with their real sources' schemas, written by the tests.

One module per task family; each exposes ``FIXTURES: dict[str, callable(root: Path) -> dict]``: the callable
writes a few rows laid out exactly like the source (same file paths, column names, image struct encoding) under
``root`` and returns extra config overrides (``{"dataset.num_classes": 4}``) the tiny copy needs. Discovery is
generic (every module of this package), so families added later plug in without edits here.
"""

from __future__ import annotations

import importlib
import io
import pkgutil
from collections.abc import Callable
from pathlib import Path

import numpy as np


def all_fixtures() -> dict[str, Callable[[Path], dict]]:
    found: dict[str, Callable[[Path], dict]] = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{module.name}")
        for key, make in getattr(mod, "FIXTURES", {}).items():
            if key in found:
                raise ValueError(f"benchmark fixture {key!r} defined twice")
            found[key] = make
    return found


def png(seed: int, size: int = 8, mode: str = "RGB") -> bytes:
    """A tiny PNG (distinct per seed)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    shape = (size, size, 3) if mode == "RGB" else (size, size)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode=mode).save(buf, format="PNG")
    return buf.getvalue()


def jpeg_file(path: Path, seed: int, size: int = 8) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path, format="JPEG")


def write_parquet(path: Path, columns: dict, image_columns: tuple[str, ...] = ("image",), features=None) -> None:
    """Rows as a parquet file the way the hub stores them: image columns as ``{"bytes", "path"}`` structs with
    datasets' feature metadata."""
    import datasets

    path.parent.mkdir(parents=True, exist_ok=True)
    data = {k: ([{"bytes": b, "path": None} for b in v] if k in image_columns else v) for k, v in columns.items()}
    if features is None:
        ds = datasets.Dataset.from_dict(data)
        for col in image_columns:
            if col in ds.column_names:
                ds = ds.cast_column(col, datasets.Image())
    else:
        ds = datasets.Dataset.from_dict(data, features=features)
    ds.to_parquet(str(path))


def labelled_rows(classes: int, per_class: int, offset: int = 0) -> tuple[list[bytes], list[int]]:
    labels = [c for c in range(classes) for _ in range(per_class)]
    return [png(offset + i) for i in range(len(labels))], labels

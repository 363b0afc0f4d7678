"""Shared helpers of the dense, relational, volume and video benchmark loaders (segmentation.py, relational.py,
volumes.py, video.py): finding a local copy (the message of a missing one comes from the dataset config's
``source`` block through :func:`gate.data.hub.how_to_get`), one-line errors, and the derived-data cache.

Derived data (masks mapped to class ids and resized to the protocol's mask size, video frames decoded and
sampled, MRI slices) is computed once from the local copy and saved under ``<cache_dir>/benchmarks/`` keyed by
the loader's parameters and the size and mtime of **every** source file the build reads (images, label maps,
lists, class-name files), so a changed copy is rebuilt and a read-only ``data_dir`` is never written to.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import DatasetUnavailable, GateError
from ..disk_cache import cached_dataset


def require(data_dir: str | os.PathLike | None, dataset: str, relative: Iterable[str],
            source: Mapping[str, Any]) -> Path:
    """``data_dir`` as a Path when every path in ``relative`` exists under it, else DatasetUnavailable (one line:
    the first missing path, then what to download, from where, and where to put it, from the config's
    ``source`` block: :func:`gate.data.hub.how_to_get`). A copy whose fetch did not end, or whose files changed
    since it did (:func:`gate.data.hub.copy_state`), is refused the same way."""
    from ..hub import copy_state, how_to_get

    root = Path(data_dir).expanduser() if data_dir else None
    state = copy_state(root)
    if state.state in ("incomplete", "damaged"):  # a fetch that did not end, or a file changed since: never read it
        raise DatasetUnavailable(state.message(dataset))
    missing = [r for r in relative if root is None or not (root / r).exists()]
    if root is None or not root.is_dir() or missing:
        first = f"{root}/{missing[0]}" if root is not None and missing else str(root)
        raise DatasetUnavailable(f"dataset {dataset!r}: no local copy at {first}; "
                                 f"{how_to_get(dataset, source, root or '<dataset.data_dir>')}")
    return root


def bad_copy(dataset: str, where: str | os.PathLike, problem: str, fix: str = "re-download or re-extract it") -> GateError:
    """A one-line error about a local copy that is there but wrong."""
    return GateError(f"dataset {dataset!r}: {where}: {problem}; {fix}")


def file_stamp(paths: Iterable[Path]) -> list[tuple[str, int, int]]:
    """(name, size, mtime in ns) of files: part of a cache key, so a changed local copy is rebuilt. A loader
    passes every file its build reads (not only the images): a re-exported label map changes the key too."""
    out = []
    for p in sorted(set(paths)):
        st = p.stat()
        out.append((str(p), int(st.st_size), int(st.st_mtime_ns)))
    return out


def cached(name: str, params: Mapping[str, Any], cache_dir: str | os.PathLike | None, build: Callable[[], Any]):
    """``build()`` cached under ``<cache_dir>/benchmarks/`` (:func:`gate.data.disk_cache.cached_dataset`)."""
    return cached_dataset("benchmarks", name, params, cache_dir, build)


def lookup_table(class_values: Iterable[int], ignore_index: int, size: int = 65536) -> np.ndarray:
    """A raw-label -> class-id table: ``class_values[i]`` maps to class ``i``, every other raw value to
    ``ignore_index``."""
    lut = np.full(size, ignore_index, dtype=np.int64)
    for index, value in enumerate(class_values):
        lut[int(value)] = index
    return lut


def label_ids(raw: np.ndarray, where: str = "label map", dataset: str = "?") -> np.ndarray:
    """A label image as its (H, W) ids. A multi-channel label image is accepted only when every channel holds the
    same ids (a grey id map saved as RGB); channels that differ mean a colour-encoded (palette) map, whose first
    channel is not the class id: refused with one line naming the file."""
    raw = np.asarray(raw)
    if raw.ndim == 3 and raw.shape[-1] == 1:
        return raw[..., 0]
    if raw.ndim == 3:
        if not all(np.array_equal(raw[..., 0], raw[..., c]) for c in range(1, raw.shape[-1])):
            raise bad_copy(dataset, where, f"a {raw.shape[-1]}-channel label image whose channels differ looks "
                           "colour-encoded (a palette of RGB colours), not class ids",
                           "use the source's id-encoded label maps (one id per pixel)")
        return raw[..., 0]
    if raw.ndim != 2:
        raise bad_copy(dataset, where, f"a label map of shape {raw.shape}, expected (height, width)")
    return raw


def remap_mask(raw: np.ndarray, lut: np.ndarray, mask_size: int | None, where: str = "label map",
               dataset: str = "?") -> np.ndarray:
    """A raw label map as class ids (uint8, via ``lut``), resized (nearest) to ``mask_size`` x ``mask_size``
    (:func:`label_ids` refuses a colour-encoded one)."""
    from PIL import Image

    raw = label_ids(raw, where, dataset)
    mask = lut[raw.astype(np.int64)].astype(np.uint8)
    if mask_size:
        mask = np.asarray(Image.fromarray(mask).resize((int(mask_size), int(mask_size)), Image.NEAREST))
    return mask


def png_bytes(array: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.asarray(array)).save(buf, format="PNG")
    return buf.getvalue()


def read_image(source: bytes | str | os.PathLike) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as img:
        return np.asarray(img)

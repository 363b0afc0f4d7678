"""What the stand-ins share: Fashion-MNIST items, seeded canvases with per-pixel masks, and a build-once cache."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..disk_cache import cached_dataset
from ..sources import FASHION_MNIST_CLASSES, FASHION_MNIST_DIR, _find_idx, fashion_mnist, read_idx

ITEM = 28  # Fashion-MNIST items are 28x28
INK = 40  # a pixel brighter than this belongs to the item (its mask); darker is background


_IDX = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def fashion_items(split: str = "train", data_dir: str | None = FASHION_MNIST_DIR) -> tuple[np.ndarray, np.ndarray]:
    """The real Fashion-MNIST ``split`` ("train" 60k or "test" 10k) as (N, 28, 28) uint8 images and int labels.

    Straight from the IDX files when present (milliseconds); otherwise through the same loader as
    ``dataset=fashion_mnist`` (the hub, or its one-line error saying how to install the files)."""
    if data_dir and Path(data_dir).is_dir():
        images, labels = (_find_idx(Path(data_dir), stem) for stem in _IDX[split])
        if images is not None and labels is not None:
            return np.array(read_idx(images)), read_idx(labels).astype(np.int64)
    raw = fashion_mnist(data_dir=data_dir)[split].with_format("numpy")[:]
    images = np.asarray(raw["image"], dtype=np.uint8)
    return images, np.asarray(raw["label"], dtype=np.int64)


def class_name(label: int) -> str:
    """A short readable name of a Fashion-MNIST class ("T-shirt/top" -> "t-shirt")."""
    return FASHION_MNIST_CLASSES[int(label)].split("/")[0].lower()


def place(rng: np.random.Generator, items: np.ndarray, labels: np.ndarray, grid: tuple[int, int] = (2, 2),
          jitter: int = 0) -> dict[str, Any]:
    """Paste ``items`` (k, 28, 28) into distinct cells of a ``grid`` (rows, cols) of 28-px cells, chosen at random.

    Returns ``image`` (H, W) uint8, ``mask`` (H, W) int64 with 0 = background and ``1 + label`` on item pixels,
    ``cells`` (k, 2) the (row, col) of each item and ``labels``. ``jitter`` shifts each item by up to that many
    pixels inside an enlarged cell (cells are then ``28 + 2*jitter`` px).
    """
    rows, cols = grid
    k = len(items)
    if k > rows * cols:
        raise ValueError(f"cannot place {k} items in a {rows}x{cols} grid")
    cell = ITEM + 2 * jitter
    image = np.zeros((rows * cell, cols * cell), np.uint8)
    mask = np.zeros(image.shape, np.int64)
    chosen = rng.choice(rows * cols, size=k, replace=False)
    cells = np.stack([chosen // cols, chosen % cols], axis=1)
    for item, label, (r, c) in zip(items, labels, cells):
        dy, dx = (rng.integers(0, 2 * jitter + 1, size=2) if jitter else (0, 0))
        y, x = r * cell + dy, c * cell + dx
        patch = image[y:y + ITEM, x:x + ITEM]
        np.maximum(patch, item, out=patch)
        mask[y:y + ITEM, x:x + ITEM][item > INK] = 1 + int(label)
    return {"image": image, "mask": mask, "cells": cells, "labels": np.asarray(labels, np.int64)}


def cached(name: str, params: Mapping[str, Any], cache_dir: str | os.PathLike | None, build: Callable[[], Any]):
    """``build()`` cached under ``<cache_dir>/standins/`` (:func:`gate.data.disk_cache.cached_dataset`)."""
    return cached_dataset("standins", name, params, cache_dir, build)

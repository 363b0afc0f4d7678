"""Synthetic data at the GATE paper protocol's shapes, for the paper-scale dry run (tests/test_paper_scale.py):
random images with masks of ADE20K's 150 classes at 256 × 256, and ACDC-like volumes (4 classes, 10 slices of
256 × 256). Images are small (the encoder's transform resizes them to the protocol's 224 px); masks are not (the
adapter's logits take their size)."""

from __future__ import annotations

import datasets
import numpy as np

MASK = 256


def _images(rng, n: int, size: int = 32) -> list[np.ndarray]:
    return [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(n)]


def ade20k_shapes(train: int = 4, val: int = 2, test: int = 6, num_classes: int = 150, seed: int = 0):
    rng = np.random.default_rng(seed)
    features = datasets.Features({"image": datasets.Image(), "mask": datasets.Image()})

    def split(n):
        masks = [rng.integers(0, num_classes, (MASK, MASK), dtype=np.uint8) for _ in range(n)]
        return datasets.Dataset.from_dict({"image": _images(rng, n), "mask": masks}, features=features)

    return datasets.DatasetDict({"train": split(train), "validation": split(val), "test": split(test)})


def acdc_shapes(train: int = 1, val: int = 1, test: int = 2, depth: int = 10, num_classes: int = 4, seed: int = 0):
    """Volumes of ``depth`` slices (one row per slice, ``volume`` id), as the ACDC loader serves them."""
    rng = np.random.default_rng(seed)
    features = datasets.Features({"image": datasets.Image(), "mask": datasets.Image(),
                                  "volume": datasets.Value("int64"), "slice": datasets.Value("int64")})
    next_id = [0]

    def split(volumes):
        rows = {"image": [], "mask": [], "volume": [], "slice": []}
        for _ in range(volumes):
            for z in range(depth):
                rows["image"] += _images(rng, 1)
                rows["mask"].append(rng.integers(0, num_classes, (MASK, MASK), dtype=np.uint8))
                rows["volume"].append(next_id[0])
                rows["slice"].append(z)
            next_id[0] += 1
        return datasets.Dataset.from_dict(rows, features=features)

    return datasets.DatasetDict({"train": split(train), "validation": split(val), "test": split(test)})

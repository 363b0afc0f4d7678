"""``fmnist_pairs``: an offline image-caption stand-in for zero-shot image-text retrieval (GATE's Flickr30K,
NYCC, Winoground family).

How an example is made: two distinct Fashion-MNIST classes are drawn, one real item image of each is pasted
into two distinct random cells of a 2x2 grid of 28-px cells (a 56x56 canvas, :func:`.canvas.place`), and the
caption names both items in reading order (top row first, then left to right) and the relation of their cells:

* same row: ``"a bag left of a sneaker"``;
* same column: ``"a coat above a sandal"``;
* diagonal: ``"a dress above and to the left of a shirt"`` / ``"... above and to the right of ..."``.

So a caption is specific to the pair's order and layout, not just to its classes: "a bag left of a sneaker"
and "a sneaker left of a bag" are different captions of different images, and retrieval is not just
classification. There are 10 x 9 x 4 = 360 distinct captions; the same caption describes several images
(same-row pairs may sit in either row), which the retrieval adapter scores as equally correct matches.

Seeded and deterministic: ``seed`` fixes every draw (each split has its own generator). Items come from
Fashion-MNIST's train images for ``train`` and from the two halves of its test images for ``val`` and
``test``, so no item image is shared between splits. Sizes are builder parameters (CPU defaults 2000 / 300 /
300). Columns: ``image`` (56x56 uint8) and ``caption`` (string). Built once under
``<cache_dir>/standins/`` (:func:`.canvas.cached`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .canvas import cached, class_name, fashion_items, place

SPLITS = ("train", "val", "test")
GRID = (2, 2)
VERSION = 1  # part of the cache key: bump when the generation changes


def article(noun: str) -> str:
    """``noun`` with its indefinite article ("a bag", "an ankle boot")."""
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


class ItemPool:
    """The real Fashion-MNIST item images one split draws from, indexed by class."""

    def __init__(self, split: str) -> None:
        images, labels = fashion_items("train" if split == "train" else "test")
        if split != "train":  # val and test take disjoint halves of Fashion-MNIST's test images
            half = len(images) // 2
            part = slice(0, half) if split == "val" else slice(half, None)
            images, labels = images[part], labels[part]
        self.images = images
        self.by_class = [np.flatnonzero(labels == c) for c in range(10)]

    def draw(self, rng: np.random.Generator, classes: np.ndarray) -> np.ndarray:
        """One random item image of each class in ``classes``: (k, 28, 28) uint8."""
        return self.images[[int(rng.choice(self.by_class[int(c)])) for c in classes]]


def image_dataset(images: np.ndarray, **columns: Any):
    """An HF Dataset of (H, W) uint8 ``image`` arrays (Arrow buffers, no per-row copy) plus plain ``columns``
    (lists of str or int)."""
    import datasets
    import pyarrow as pa

    n, height, width = images.shape
    image = pa.FixedSizeListArray.from_arrays(
        pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(images).reshape(-1)), width), height)
    features = {"image": datasets.List(datasets.List(datasets.Value("uint8"), length=width), length=height)}
    arrays = {"image": image}
    for name, values in columns.items():
        if values and isinstance(values[0], str):
            features[name] = datasets.Value("string")
            arrays[name] = pa.array(list(values), pa.string())
        else:
            features[name] = datasets.Value("int64")
            arrays[name] = pa.array(np.asarray(values, dtype=np.int64))
    return datasets.Dataset(pa.table(arrays), info=datasets.DatasetInfo(features=datasets.Features(features)))


def relation(first: np.ndarray, second: np.ndarray) -> str:
    """How the cell ``first`` (row, col) lies relative to ``second``; ``first`` comes first in reading order."""
    if first[0] == second[0]:
        return "left of"
    if first[1] == second[1]:
        return "above"
    return "above and to the left of" if first[1] < second[1] else "above and to the right of"


def make_pair(rng: np.random.Generator, pool: ItemPool) -> tuple[np.ndarray, str]:
    """One 56x56 canvas with two items of distinct classes and its caption."""
    classes = rng.choice(10, size=2, replace=False)
    canvas = place(rng, pool.draw(rng, classes), classes, grid=GRID)
    cells = canvas["cells"]
    a, b = sorted(range(2), key=lambda i: (int(cells[i][0]), int(cells[i][1])))  # reading order
    caption = f"{article(class_name(classes[a]))} {relation(cells[a], cells[b])} {article(class_name(classes[b]))}"
    return canvas["image"], caption


def build_pairs(sizes: dict[str, int], seed: int):
    import datasets

    out = {}
    for index, split in enumerate(SPLITS):
        rng = np.random.default_rng([seed, index])
        pool = ItemPool(split)
        images, captions = zip(*(make_pair(rng, pool) for _ in range(sizes[split])))
        out[split] = image_dataset(np.stack(images), caption=list(captions))
    return datasets.DatasetDict(out)


def fmnist_pairs(cache_dir: str | None = None, seed: int = 0, train_size: int = 2000, val_size: int = 300,
                 test_size: int = 300):
    """The ``fmnist_pairs`` stand-in (module docstring): a DatasetDict with ``train``, ``val``, ``test`` of
    ``image`` (56x56 uint8) and ``caption``."""
    sizes = {"train": int(train_size), "val": int(val_size), "test": int(test_size)}
    if min(sizes.values()) < 1:
        raise ValueError(f"fmnist_pairs: every split needs at least 1 example, got sizes {sizes}")
    return cached("fmnist_pairs", {"version": VERSION, "seed": int(seed), **sizes}, cache_dir, lambda: build_pairs(sizes, int(seed)))

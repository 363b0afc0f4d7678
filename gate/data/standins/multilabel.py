"""``fmnist_multilabel``: an offline stand-in for the GATE paper's multi-label medical classification
(CheXpert / NIH chest X-rays: several findings may be present in one image).

Each example is a 56x56 grey canvas (a 2x2 grid of 28-px cells, :func:`canvas.place`) holding between
``min_items`` and ``max_items`` real Fashion-MNIST items of *distinct* classes in distinct random cells; the
target ``labels`` is the multi-hot vector (10 classes, uint8 0/1) of the classes present. The number of items
is uniform in [min_items, max_items]; the classes are a uniform random subset of that size, and each class's
item is drawn uniformly from that class's images.

Real Fashion-MNIST splits stay apart: ``train`` canvases use Fashion-MNIST train images; ``val`` and ``test``
use disjoint halves of the Fashion-MNIST test images. Everything is drawn from ``numpy.random.default_rng``
seeded by ``seed`` (one independent stream per split), so the same arguments give the same bytes. Sizes are
builder parameters (CPU defaults 3000/500/500); the result is cached under ``<cache_dir>/standins/``.
"""

from __future__ import annotations

import numpy as np

from ..sources import FASHION_MNIST_DIR
from .canvas import cached, class_name, fashion_items, place

NUM_CLASSES = 10
GRID = (2, 2)




def _canvases(rng: np.random.Generator, images: np.ndarray, labels: np.ndarray, count: int, min_items: int,
              max_items: int) -> tuple[np.ndarray, np.ndarray]:
    by_class = [np.flatnonzero(labels == c) for c in range(NUM_CLASSES)]
    side = 28 * GRID[0], 28 * GRID[1]
    out = np.zeros((count, *side), np.uint8)
    targets = np.zeros((count, NUM_CLASSES), np.uint8)
    for i in range(count):
        k = int(rng.integers(min_items, max_items + 1))
        classes = np.sort(rng.choice(NUM_CLASSES, size=k, replace=False))
        picks = np.array([rng.choice(by_class[c]) for c in classes])
        out[i] = place(rng, images[picks], classes, grid=GRID)["image"]
        targets[i, classes] = 1
    return out, targets


def _dataset(images: np.ndarray, targets: np.ndarray):
    """An HF Dataset of (HxW uint8 image, multi-hot uint8 vector) built from Arrow buffers."""
    import datasets
    import pyarrow as pa

    n, height, width = images.shape
    column = pa.FixedSizeListArray.from_arrays(
        pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(images).reshape(-1)), width), height)
    multi_hot = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(targets).reshape(-1)), NUM_CLASSES)
    features = datasets.Features({
        "image": datasets.List(datasets.List(datasets.Value("uint8"), length=width), length=height),
        "labels": datasets.List(datasets.Value("uint8"), length=NUM_CLASSES),
    })
    return datasets.Dataset(pa.table({"image": column, "labels": multi_hot}),
                            info=datasets.DatasetInfo(features=features))


def fmnist_multilabel(cache_dir: str | None = None, seed: int = 0, train_size: int = 3000, val_size: int = 500,
                      test_size: int = 500, min_items: int = 1, max_items: int = 4,
                      data_dir: str | None = FASHION_MNIST_DIR):
    """The ``fmnist_multilabel`` DatasetDict (``train``/``val``/``test``: ``image`` 56x56 uint8, ``labels``
    10-wide multi-hot uint8), built once per set of arguments and cached under ``cache_dir``."""
    if not 1 <= min_items <= max_items <= GRID[0] * GRID[1]:
        raise ValueError(f"fmnist_multilabel: need 1 <= min_items <= max_items <= {GRID[0] * GRID[1]}, got "
                         f"min_items={min_items}, max_items={max_items}")
    for key, size in (("train_size", train_size), ("val_size", val_size), ("test_size", test_size)):
        if size < 1:
            raise ValueError(f"fmnist_multilabel: {key} must be >= 1, got {size}")
    params = dict(seed=seed, train_size=train_size, val_size=val_size, test_size=test_size, min_items=min_items,
                  max_items=max_items, data_dir=data_dir)

    def build():
        import datasets

        train_images, train_labels = fashion_items("train", data_dir)
        test_images, test_labels = fashion_items("test", data_dir)
        # val and test draw from disjoint halves of the real test images
        order = np.random.default_rng(seed).permutation(len(test_labels))
        halves = {"val": order[: len(order) // 2], "test": order[len(order) // 2:]}
        pools = {"train": (train_images, train_labels),
                 "val": (test_images[halves["val"]], test_labels[halves["val"]]),
                 "test": (test_images[halves["test"]], test_labels[halves["test"]])}
        sizes = {"train": train_size, "val": val_size, "test": test_size}
        streams = np.random.SeedSequence(seed).spawn(3)
        out = {}
        for (split, (images, labels)), stream in zip(pools.items(), streams):
            canvases, targets = _canvases(np.random.default_rng(stream), images, labels, sizes[split], min_items,
                                          max_items)
            out[split] = _dataset(canvases, targets)
        return datasets.DatasetDict(out)

    return cached("fmnist_multilabel", params, cache_dir, build)


CLASS_NAMES = tuple(class_name(c).replace(" ", "_") for c in range(NUM_CLASSES))

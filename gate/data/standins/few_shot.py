"""Few-shot stand-in ``fmnist_fewshot``: meta-train on five Fashion-MNIST classes, evaluate on episodes of the
other five (classes never seen in training), as GATE's few-shot benchmarks hold out their test classes.

How it is generated (deterministic from ``seed``; real Fashion-MNIST images, 28x28 grey, original label ids
0..9 so ``num_classes`` is 10, the union of the two halves):

* ``train``: ``train_per_class`` images of each class in ``train_classes`` (default the even labels
  0 t-shirt, 2 pullover, 4 coat, 6 shirt, 8 bag), drawn without replacement from Fashion-MNIST's train split;
* ``val``: ``val_per_class`` images of each held-out class (the odd labels 1 trouser, 3 dress, 5 sandal,
  7 sneaker, 9 ankle boot), drawn from Fashion-MNIST's *train* split;
* ``test``: ``test_per_class`` images of each held-out class, drawn from Fashion-MNIST's *test* split, so val
  and test share classes but never images.

The episodes themselves (ways, shots, queries) are the adapter's business (:mod:`gate.adapters.few_shot`); a
split only has to hold at least ``min_shots + queries_per_class`` images of each class (7 with GATE's
defaults). Built once under ``<cache_dir>/standins/`` (:func:`.canvas.cached`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..sources import FASHION_MNIST_CLASSES, FASHION_MNIST_DIR, _image_dataset
from .canvas import cached, fashion_items

TRAIN_CLASSES = (0, 2, 4, 6, 8)




def _take(rng: np.random.Generator, images: np.ndarray, labels: np.ndarray, classes: Sequence[int],
          per_class: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    """``per_class`` images of each class, drawn without replacement, in class order."""
    picked = []
    for c in classes:
        pool = np.flatnonzero(labels == c)
        if per_class > pool.size:
            raise ValueError(f"fmnist_fewshot: {where} has {pool.size} images of class {c}, fewer than the "
                             f"{per_class} asked for")
        picked.append(np.sort(rng.choice(pool, size=per_class, replace=False)))
    index = np.concatenate(picked)
    return images[index], labels[index]


def fmnist_fewshot(cache_dir: str | None = None, seed: int = 0, train_classes: Sequence[int] = TRAIN_CLASSES,
                   train_per_class: int = 300, val_per_class: int = 40, test_per_class: int = 100,
                   data_dir: str | None = FASHION_MNIST_DIR):
    """The ``fmnist_fewshot`` DatasetDict (train / val / test), see the module docstring."""
    train_classes = sorted({int(c) for c in train_classes})
    if not train_classes or any(c < 0 or c > 9 for c in train_classes) or len(train_classes) == 10:
        raise ValueError(f"fmnist_fewshot: train_classes must be a proper, non-empty subset of 0..9, got {train_classes}")
    for name, value in (("train_per_class", train_per_class), ("val_per_class", val_per_class),
                        ("test_per_class", test_per_class)):
        if int(value) < 1:
            raise ValueError(f"fmnist_fewshot: {name} must be >= 1, got {value}")
    held_out = [c for c in range(10) if c not in train_classes]
    params = dict(seed=seed, train_classes=train_classes, train_per_class=train_per_class,
                  val_per_class=val_per_class, test_per_class=test_per_class)

    def build():
        import datasets

        rng = np.random.default_rng(seed)
        train_images, train_labels = fashion_items("train", data_dir)
        test_images, test_labels = fashion_items("test", data_dir)
        splits = {
            "train": _take(rng, train_images, train_labels, train_classes, train_per_class, "Fashion-MNIST train"),
            "val": _take(rng, train_images, train_labels, held_out, val_per_class, "Fashion-MNIST train"),
            "test": _take(rng, test_images, test_labels, held_out, test_per_class, "Fashion-MNIST test"),
        }
        return datasets.DatasetDict({name: _image_dataset(images, labels, FASHION_MNIST_CLASSES)
                                     for name, (images, labels) in splits.items()})

    return cached("fmnist_fewshot", params, cache_dir, build)

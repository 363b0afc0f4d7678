"""Few-shot fixtures: GATE-engine parquet conversions, default/{train,validation,test}/0000.parquet with
disjoint classes per split."""

from __future__ import annotations

from pathlib import Path

from . import png, write_parquet


def _few_shot(root: Path) -> dict:
    rows = {"train": range(0, 4), "validation": range(4, 7), "test": range(7, 10)}
    seed = 0
    for split, classes in rows.items():
        labels = [c for c in classes for _ in range(5)]
        images = [png(seed + i) for i in range(len(labels))]
        seed += len(labels)
        write_parquet(root / "default" / split / "0000.parquet", {"image": images, "label": labels})
    return {"dataset.num_classes": 10, "adapter.min_ways": 2, "adapter.max_ways": 3, "adapter.min_shots": 1,
            "adapter.max_shots": 2, "adapter.queries_per_class": 2, "adapter.val_episodes": 2,
            "adapter.test_episodes": 2, "adapter.train_episodes": 2}


FIXTURES = {key: _few_shot for key in ("aircraft", "cubirds", "dtextures", "fungi", "mini_imagenet", "omniglot",
                                       "vgg_flowers")}

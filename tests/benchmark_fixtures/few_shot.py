"""Few-shot fixtures: the GATE-engine parquet conversions of GATE's learn2learn uploads.

Evidence for the schema:

* six sets (aircraft, cubirds, dtextures, fungi, mini_imagenet, vgg_flowers): GATE's uploader
  ``playgrounds/push_fs_to_hub.py`` (GATE repo history, commit before aeb5e87a) iterates learn2learn's dataset
  per split name ``train`` / ``validation`` / ``test`` and writes ``{"image": PIL image, "label": int}``;
  learn2learn numbers a split's classes from 0 within the split (``label = split.index(label)`` in
  ``learn2learn/vision/datasets/fgvc_aircraft.py``, ``vgg_flowers.py``, ``fgvc_fungi.py``; ``enumerate`` of the
  split's classes in ``cu_birds200.py``, ``describable_textures.py``; ``index_classes`` of the split's own
  pickle in ``mini_imagenet.py``). The hub's parquet conversion puts them under
  ``default/{train,validation,test}/NNNN.parquet``.
* omniglot: the hub's dataset card (``GATE-engine/omniglot`` README: features ``image`` (image), ``label``
  (int64); one split ``full`` of 32,460 examples), built from learn2learn's ``FullOmniglot`` (character ids
  0..1622), parquet under ``default/full/``.
"""

from __future__ import annotations

from pathlib import Path

from . import png, write_parquet

# Tiny episodes: 2..3 ways, 1..2 shots, 2 queries, 2 episodes per split.
EPISODES = {"adapter.min_ways": 2, "adapter.max_ways": 3, "adapter.min_shots": 1, "adapter.max_shots": 2,
            "adapter.queries_per_class": 2, "adapter.val_episodes": 2, "adapter.test_episodes": 2,
            "adapter.train_episodes": 2}


def learn2learn_splits(root: Path, classes: dict[str, int] | None = None, per_class: int = 5) -> dict:
    """``default/<split>/0000.parquet`` per split, each split's labels numbered 0..K-1 (learn2learn's scheme)."""
    classes = classes or {"train": 4, "validation": 3, "test": 3}
    seed = 0
    for split, count in classes.items():
        labels = [c for c in range(count) for _ in range(per_class)]
        images = [png(seed + i) for i in range(len(labels))]
        seed += len(labels)
        write_parquet(root / "default" / split / "0000.parquet", {"image": images, "label": labels})
    return {"dataset.num_classes": sum(classes.values()), **EPISODES}


def omniglot(root: Path) -> dict:
    """One ``full`` split of grayscale characters, labels 0..9 (global character ids), carved 4/3/3 by class."""
    labels = [c for c in range(10) for _ in range(5)]
    write_parquet(root / "default" / "full" / "0000.parquet",
                  {"image": [png(i, mode="L") for i in range(len(labels))], "label": labels})
    return {"dataset.num_classes": 10, "dataset.splits.by_class.train": 4, "dataset.splits.by_class.val": 3,
            "dataset.splits.by_class.test": 3, **EPISODES}


FIXTURES = {key: learn2learn_splits for key in ("aircraft", "cubirds", "dtextures", "fungi", "mini_imagenet",
                                                "vgg_flowers")}
FIXTURES["omniglot"] = omniglot

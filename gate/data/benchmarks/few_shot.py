"""Few-shot benchmarks (Aircraft, CUB-200 birds, DTD textures, Fungi, mini-ImageNet, Omniglot, VGG Flowers): the
GATE-engine hub copies, whose train / validation / test splits hold disjoint classes (the original class splits).
Episodes are drawn by the protonet adapter; the loader only serves (image, class id) rows."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import datasets

from ...errors import GateError
from ..hub import load_parquet
from . import encode_labels, rename


def hf_few_shot(data_dir: str | os.PathLike | None, source: Mapping[str, Any], name: str,
                image_column: str = "image", label_column: str = "label",
                cache_dir: str | None = None) -> datasets.DatasetDict:
    """(image, label) rows per source split; class ids shared across splits (the union of their classes), and
    the class splits checked disjoint (a class in two splits would leak into the held-out episodes)."""
    raw = load_parquet(name, source, data_dir, columns=[image_column, label_column], cache_dir=cache_dir,
                       image_columns=[image_column])
    raw = encode_labels(rename(raw, {image_column: "image", label_column: "label"}), "label", name)
    classes = {split: set(ds.unique("label")) for split, ds in raw.items()}
    names = list(classes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = classes[a] & classes[b]
            if shared:
                raise GateError(f"dataset {name!r}: source splits {a!r} and {b!r} share {len(shared)} class(es) "
                                f"(e.g. id {min(shared)}); few-shot splits must hold disjoint classes")
    return raw

"""Few-shot benchmarks (Aircraft, CUB-200 birds, DTD textures, Fungi, mini-ImageNet, Omniglot, VGG Flowers): the
GATE-engine hub copies. Episodes are drawn by the protonet adapter; the loader only serves (image, class id) rows.

Two kinds of source (``label_scope``):

* ``split`` — six sets (aircraft, cubirds, dtextures, fungi, mini_imagenet, vgg_flowers) were uploaded by GATE
  from learn2learn one split at a time (``train``/``validation``/``test``), and learn2learn numbers a split's
  classes from 0 within that split (``label = split.index(label)``): train's label 0 and validation's label 0
  are different classes. A class is therefore the pair (source split, label), as GATE's own few-shot core
  names it (``f"{set_name}-{label}"``): ids are offset per split, so no two splits can share one.
* ``global`` — labels mean the same class in every split (Omniglot's one ``full`` split: 1,623 character ids);
  several splits must then hold disjoint classes, which is checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import GateError
from ..hub import load_parquet
from ..manifest import SPLIT_ALIASES, SPLITS, first_shared
from . import arrow_column, encode_labels, rename, replace_column

if TYPE_CHECKING:
    import datasets

LABEL_SCOPES = ("split", "global")


def split_order(names) -> list[str]:
    """Source splits in a fixed order: train, val, test (by their usual names), then any other by name."""
    rank = {s: i for i, s in enumerate(SPLITS)}
    return sorted(names, key=lambda s: (rank.get(SPLIT_ALIASES.get(s, s), len(SPLITS)), s))


def classes_by_split(raw: Mapping[str, datasets.Dataset], key: str, column: str = "label") -> datasets.DatasetDict:
    """Per-split class numbering made global: the label ``l`` of source split ``s`` becomes the class
    ``offset[s] + l``, named ``"<s>-<l>"``, where the splits' offsets follow :func:`split_order` and each split
    takes ``max label + 1`` ids. Refused unless every split numbers its classes from 0 with integers (a source
    whose later splits continue the numbering is not per-split numbered, and reading it so would make a class
    of two splits look like two classes)."""
    import datasets  # imported where used: reading a dataset config need not load it
    names: list[str] = []
    out = {}
    offsets = {}
    for split in split_order(raw):
        values = arrow_column(raw[split], column)
        if not pa.types.is_integer(values.type) or values.null_count:
            raise GateError(f"dataset {key!r}: split {split!r} column {column!r} holds {values.type} with "
                            f"{values.null_count} missing value(s); per-split class numbering needs integer labels")
        low, high = (pc.min_max(values)[k].as_py() for k in ("min", "max"))
        if low != 0:
            raise GateError(f"dataset {key!r}: split {split!r} numbers its classes {low}..{high}, not from 0: the "
                            f"source does not number classes within each split (learn2learn's scheme); set "
                            f"builder.label_scope=global if its labels mean the same class in every split")
        offsets[split] = len(names)
        names.extend(f"{split}-{label}" for label in range(high + 1))
    feature = datasets.ClassLabel(names=names)
    for split in raw:
        ids = arrow_column(raw[split], column).to_numpy().astype(np.int64) + offsets[split]
        out[split] = replace_column(raw[split], column, ids, feature)
    return datasets.DatasetDict(out)


def check_disjoint_classes(raw: Mapping[str, datasets.Dataset], key: str, column: str = "label") -> None:
    """Refuse source splits that share a class (a class in two splits would leak into held-out episodes)."""
    classes = {split: set(pc.unique(arrow_column(ds, column)).to_pylist()) for split, ds in raw.items()}
    if overlap := first_shared(classes):
        a, b, shared = overlap
        raise GateError(f"dataset {key!r}: source splits {a!r} and {b!r} share {len(shared)} class(es) "
                        f"(e.g. id {min(shared)}); few-shot splits must hold disjoint classes")


def hf_few_shot(data_dir: str | os.PathLike | None, source: Mapping[str, Any], name: str,
                image_column: str = "image", label_column: str = "label", label_scope: str = "global",
                num_classes: int | None = None, cache_dir: str | None = None) -> datasets.DatasetDict:
    """(image, label) rows per source split with class ids unique across splits (module docstring).

    label_scope: ``split`` (learn2learn's per-split numbering: a class is (split, label)) or ``global``.
    num_classes: with ``global``, the labels are already class ids ``0..num_classes-1`` and are kept as they
        are (Omniglot's character ids, whose sorted order GATE's class split follows); without it, labels get
        ids by their sorted union.
    """
    if label_scope not in LABEL_SCOPES:
        raise GateError(f"dataset {name!r}: builder.label_scope={label_scope!r} is not one of {list(LABEL_SCOPES)}")
    raw = load_parquet(name, source, data_dir, columns=[image_column, label_column], cache_dir=cache_dir,
                       image_columns=[image_column])
    raw = rename(raw, {image_column: "image", label_column: "label"})
    if label_scope == "split":
        return classes_by_split(raw, name)
    raw = encode_labels(raw, "label", name, num_classes=num_classes)
    check_disjoint_classes(raw, name)
    return raw

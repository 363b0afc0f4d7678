"""Image classification benchmarks: CIFAR-100, Food-101, Happywhale, ImageNet-1k (hub parquet) and Places365
(the official archives in torchvision's layout)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import DatasetUnavailable, GateError
from ..hub import how_to_get, load_parquet
from . import encode_labels, rename

if TYPE_CHECKING:
    import datasets


def hf_image_classification(data_dir: str | os.PathLike | None, source: Mapping[str, Any], name: str,
                            image_column: str = "image", label_column: str = "label",
                            label_columns: Mapping[str, int] | None = None,
                            cache_dir: str | None = None) -> datasets.DatasetDict:
    """A hub dataset of (image, label) rows from its local parquet copy, as columns ``image`` and ``label``
    (class ids; string labels get ids by their sorted union).

    ``label_columns`` (``{column: number of classes}``, the dataset's ``heads``) reads several label columns
    instead, each kept under its own name and already holding class ids (Happywhale: ``individual`` and
    ``species``, integers written by GATE's uploader); ``label_column`` is then not read."""
    heads = {str(c): int(n) for c, n in (label_columns or {}).items()}
    targets = list(heads) or [label_column]
    raw = load_parquet(name, source, data_dir, columns=[image_column, *targets], cache_dir=cache_dir,
                       image_columns=[image_column])
    if not heads:
        return encode_labels(rename(raw, {image_column: "image", label_column: "label"}), "label", name)
    raw = rename(raw, {image_column: "image"})
    for column, classes in heads.items():
        raw = encode_labels(raw, column, name, num_classes=classes)
    return raw


def places365(data_dir: str | os.PathLike | None, source: Mapping[str, Any], name: str = "places365",
              cache_dir: str | None = None) -> datasets.DatasetDict:
    """Places365-Standard in torchvision's small-image layout (``datasets.Places365(small=True)``):
    ``categories_places365.txt``, ``places365_train_standard.txt`` (``/a/airfield/00000001.jpg 0``) with images
    under ``data_256/``, and ``places365_val.txt`` (``Places365_val_00000001.jpg 165``) with ``val_256/``.
    Splits ``train`` and ``val`` (the official validation set, our test split by the config's roles)."""
    import datasets  # imported where used: reading a dataset config need not load it
    root = Path(data_dir or "")
    if not data_dir or not (root / "categories_places365.txt").is_file():
        raise DatasetUnavailable(f"dataset {name!r} is not on disk (no categories_places365.txt in {root}); "
                                 f"{how_to_get(name, source, root)}")
    classes = [line.split()[0] for line in (root / "categories_places365.txt").read_text().splitlines() if line.strip()]
    layout = {"train": ("places365_train_standard.txt", "data_256"), "val": ("places365_val.txt", "val_256")}
    out = {}
    for split, (listing, folder) in layout.items():
        path = root / listing
        if not path.is_file():
            raise DatasetUnavailable(f"dataset {name!r}: the local copy {root} has no {split!r} split (missing "
                                     f"{listing}); {how_to_get(name, source, root)}")
        images, labels = [], []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rel, label = line.rsplit(maxsplit=1)
                labels.append(int(label))
            except ValueError as err:
                raise GateError(f"dataset {name!r}: {path} line {number} is not '<image> <class id>': {line!r}") from err
            images.append(str(root / folder / rel.lstrip("/")))
        missing = [p for p in images[:1] if not Path(p).is_file()]
        if missing:
            raise DatasetUnavailable(f"dataset {name!r}: {missing[0]} (listed in {listing}) is not on disk; unpack "
                                     f"the {folder} archive into {root}")
        features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=classes)})
        out[split] = datasets.Dataset.from_dict({"image": images, "label": labels}, features=features)
    return datasets.DatasetDict(out)


__all__: Sequence[str] = ("hf_image_classification", "places365")

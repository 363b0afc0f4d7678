"""Deterministic train/val/test splits from a seed, and optional subsampling."""

from __future__ import annotations

import datasets
import numpy as np

SPLIT_ALIASES = {"validation": "val", "valid": "val", "dev": "val"}


def labels_of(ds: datasets.Dataset, column: str) -> np.ndarray:
    """A label column as a numpy array (one Arrow read, no per-row Python copy; respects selections)."""
    return np.asarray(ds.select_columns([column]).with_format("numpy")[:][column])


def _carve(ds: datasets.Dataset, fraction: float, seed: int, label_column: str | None,
           group_column: str | None = None) -> tuple[datasets.Dataset, datasets.Dataset]:
    """Split ``ds`` into (rest, carved) with ``fraction`` carved out, seeded and stratified by ``label_column``
    when there is one and every class has at least 2 members (scikit-learn on the indices). With ``group_column``
    (e.g. the volume id of 2-D slices) whole groups are carved, so no group straddles two splits."""
    from sklearn.model_selection import GroupShuffleSplit, train_test_split

    if group_column:
        groups = labels_of(ds, group_column)
        rest, carved = next(GroupShuffleSplit(n_splits=1, test_size=fraction, random_state=seed)
                            .split(np.arange(len(ds)), groups=groups))
        return ds.select(np.sort(rest)), ds.select(np.sort(carved))

    labels = labels_of(ds, label_column) if label_column else np.array([], dtype=np.int64)
    counts = np.bincount(labels) if labels.size and labels.min() >= 0 else np.array([])
    stratify = labels if counts.size and counts[counts > 0].min() >= 2 else None
    index = np.arange(len(ds))
    try:
        rest, carved = train_test_split(index, test_size=fraction, random_state=seed, stratify=stratify)
    except ValueError:  # too few samples per class for the requested fraction: a plain seeded split
        rest, carved = train_test_split(index, test_size=fraction, random_state=seed)
    return ds.select(np.sort(rest)), ds.select(np.sort(carved))


def make_splits(raw: datasets.DatasetDict, seed: int, val_fraction: float = 0.1, test_fraction: float = 0.2,
                max_samples: dict[str, int | None] | None = None, num_classes: int | None = None,
                name: str = "dataset", label_column: str | None = None,
                group_column: str | None = None) -> datasets.DatasetDict:
    """Return a DatasetDict with exactly ``train``, ``val`` and ``test``.

    Splits the source provides are kept; a missing test split is carved from train (``test_fraction``),
    then a missing val split from what remains (``val_fraction``), both seeded and stratified.
    Computed splits are stratified by ``label_column`` (None: plain seeded splits). ``num_classes`` (for
    single-label tasks) must equal the classes present in the whole training split.
    ``max_samples`` caps a split by a seeded shuffle-and-take (recorded in the config, so the experiment
    id tells capped runs apart from full ones).
    """
    splits = {SPLIT_ALIASES.get(name, name): ds for name, ds in raw.items()}
    if "train" not in splits:
        raise ValueError(f"the dataset source gave splits {sorted(raw)} but no 'train' split")
    if "test" not in splits:
        splits["train"], splits["test"] = _carve(splits["train"], test_fraction, seed, label_column,
                                                   group_column)
    if "val" not in splits:
        splits["train"], splits["val"] = _carve(splits["train"], val_fraction, seed + 1, label_column,
                                                  group_column)
    if num_classes is not None and label_column:  # on the whole training split, before any cap
        present = np.unique(labels_of(splits["train"], label_column))
        if present.size != num_classes:
            raise ValueError(f"dataset {name!r} declares num_classes={num_classes}, but its train split holds "
                             f"{present.size} classes; set dataset.num_classes={present.size}")
    for name, cap in (max_samples or {}).items():
        if cap is None or name not in splits:
            continue
        if cap < 1:
            raise ValueError(f"max_samples for split {name!r} must be >= 1, got {cap}")
        if cap < len(splits[name]):
            splits[name] = splits[name].shuffle(seed=seed).select(range(cap))
    return datasets.DatasetDict({name: splits[name] for name in ("train", "val", "test")})

"""Loaders of the GATE benchmarks, one module per task family.

A loader is ``(data_dir, source, ...) -> datasets.DatasetDict``: the source's own splits (named as the source
names them), read from a local copy laid out like the source (:mod:`gate.data.hub`), with the input column and
the target columns the dataset config declares. It never computes a split: the split manifest does
(:mod:`gate.data.manifest`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import datasets

from ...errors import GateError


def encode_labels(raw: Mapping[str, datasets.Dataset], column: str, key: str,
                  names: Sequence[str] | None = None) -> datasets.DatasetDict:
    """``column`` as integer class ids shared by every split: a ClassLabel kept as is; strings (or ints without
    names) mapped to ids by the sorted union over all splits (or by ``names``, when given)."""
    raw = datasets.DatasetDict(raw)
    first = next(iter(raw.values())).features[column]
    if isinstance(first, datasets.ClassLabel) and names is None:
        return raw
    values = sorted({v for ds in raw.values() for v in ds.unique(column)}, key=str)
    names = [str(n) for n in (names or values)]
    lookup = {n: i for i, n in enumerate(names)}
    unknown = [v for v in values if str(v) not in lookup]
    if unknown:
        raise GateError(f"dataset {key!r}: column {column!r} holds values {unknown[:5]} that are not among its "
                        f"{len(names)} declared classes")
    feature = datasets.ClassLabel(names=names)

    def encode(batch):
        return {column: [lookup[str(v)] for v in batch[column]]}

    out = {}
    for split, ds in raw.items():
        features = ds.features.copy()
        features[column] = feature
        out[split] = ds.map(encode, batched=True, features=features, desc=f"{key}: encoding {column}")
    return datasets.DatasetDict(out)


def rename(raw: Mapping[str, datasets.Dataset], mapping: Mapping[str, str]) -> datasets.DatasetDict:
    """Columns renamed (``source name -> ours``), skipping identities."""
    mapping = {a: b for a, b in mapping.items() if a != b}
    return datasets.DatasetDict({s: ds.rename_columns(mapping) if mapping else ds for s, ds in raw.items()})

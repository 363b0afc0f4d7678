"""Loaders of the GATE benchmarks, one module per task family.

A loader is ``(data_dir, source, ...) -> datasets.DatasetDict``: the source's own splits (named as the source
names them), read from a local copy laid out like the source (:mod:`gate.data.hub`), with the input column and
the target columns the dataset config declares. It never computes a split: the split manifest does
(:mod:`gate.data.manifest`).

Label columns are rewritten on their own Arrow column (:func:`replace_column`): a loader never maps whole rows,
which would copy every image of a split into a new cache file (60 GB for Happywhale) to change one integer each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import GateError

if TYPE_CHECKING:
    import datasets


def arrow_column(ds: datasets.Dataset, column: str) -> pa.ChunkedArray:
    """One column of a split as Arrow (no other column is read, nothing is decoded; respects selections)."""
    return ds.select_columns([column]).with_format("arrow")[:][column]


def replace_column(ds: datasets.Dataset, column: str, values, feature) -> datasets.Dataset:
    """``ds`` with ``column`` replaced by ``values`` typed ``feature``, in its place among the columns. The other
    columns are the same Arrow buffers (no image is decoded or copied, no cache file is written)."""
    import datasets  # imported where used: reading a dataset config need not load it
    order = ds.column_names
    if order == [column]:  # nothing else to keep (and no table of zero columns to add it to)
        return datasets.Dataset.from_dict({column: np.asarray(values)}, features=datasets.Features({column: feature}))
    out = ds.remove_columns([column]).add_column(column, np.asarray(values), feature=feature)
    return out.select_columns(order)


def _integer(values: pa.ChunkedArray) -> bool:
    return pa.types.is_integer(values.type)


def _class_ids(raw: Mapping[str, datasets.Dataset], column: str, key: str, num_classes: int) -> datasets.DatasetDict:
    """An integer column that already holds class ids 0..num_classes-1 (the same ids in every split): checked and
    typed ``ClassLabel(num_classes)``, its values untouched."""
    import datasets  # imported where used: reading a dataset config need not load it
    feature = datasets.ClassLabel(num_classes=int(num_classes))
    out = {}
    for split, ds in raw.items():
        values = arrow_column(ds, column)
        if not _integer(values):
            raise GateError(f"dataset {key!r}: column {column!r} of split {split!r} holds {values.type}, not the "
                            f"integer class ids 0..{num_classes - 1} the config declares")
        if values.null_count:
            raise GateError(f"dataset {key!r}: column {column!r} of split {split!r} has {values.null_count} "
                            f"missing value(s)")
        low, high = (pc.min_max(values)[k].as_py() for k in ("min", "max"))
        if low is not None and (low < 0 or high >= num_classes):
            raise GateError(f"dataset {key!r}: column {column!r} of split {split!r} holds ids {low}..{high}, outside "
                            f"the {num_classes} classes the config declares (0..{num_classes - 1})")
        out[split] = replace_column(ds, column, values.to_numpy(), feature)
    return datasets.DatasetDict(out)


def encode_labels(raw: Mapping[str, datasets.Dataset], column: str, key: str,
                  names: Sequence[str] | None = None, num_classes: int | None = None) -> datasets.DatasetDict:
    """``column`` as integer class ids shared by every split:

    * ``num_classes`` given: the column already holds the ids (integers in ``[0, num_classes)``, the same in
      every split, e.g. Happywhale's ``individual``); checked and kept as they are;
    * a ClassLabel (without ``names``): kept as is;
    * otherwise strings (or ints) mapped to ids by the sorted union (of their text) over all splits, or by the
      order of ``names`` when given.

    Only the label column is read and rewritten (:func:`replace_column`); images are neither decoded nor copied.
    """
    import datasets  # imported where used: reading a dataset config need not load it
    raw = datasets.DatasetDict(raw)
    if num_classes is not None:
        return _class_ids(raw, column, key, num_classes)
    first = next(iter(raw.values())).features[column]
    if isinstance(first, datasets.ClassLabel) and names is None:
        return raw
    columns = {split: arrow_column(ds, column) for split, ds in raw.items()}
    for split, values in columns.items():
        if values.null_count:
            raise GateError(f"dataset {key!r}: column {column!r} of split {split!r} has {values.null_count} "
                            f"missing value(s)")
    encoded = {split: values.combine_chunks().dictionary_encode() if values.num_chunks else
               pa.array([], values.type).dictionary_encode() for split, values in columns.items()}
    values = sorted({v for arr in encoded.values() for v in arr.dictionary.to_pylist()}, key=str)
    names = [str(n) for n in (names or values)]
    lookup = {n: i for i, n in enumerate(names)}
    unknown = [v for v in values if str(v) not in lookup]
    if unknown:
        raise GateError(f"dataset {key!r}: column {column!r} holds values {unknown[:5]} that are not among its "
                        f"{len(names)} declared classes")
    feature = datasets.ClassLabel(names=names)
    out = {}
    for split, ds in raw.items():
        arr = encoded[split]
        table = np.array([lookup[str(v)] for v in arr.dictionary.to_pylist()], dtype=np.int64)
        ids = table[arr.indices.to_numpy(zero_copy_only=False).astype(np.int64)] if len(arr) else np.zeros(0, np.int64)
        out[split] = replace_column(ds, column, ids, feature)
    return datasets.DatasetDict(out)


def rename(raw: Mapping[str, datasets.Dataset], mapping: Mapping[str, str]) -> datasets.DatasetDict:
    """Columns renamed (``source name -> ours``), skipping identities."""
    import datasets  # imported where used: reading a dataset config need not load it
    mapping = {a: b for a, b in mapping.items() if a != b}
    return datasets.DatasetDict({s: ds.rename_columns(mapping) if mapping else ds for s, ds in raw.items()})

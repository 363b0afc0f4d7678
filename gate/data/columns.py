"""Reading a dataset column as numbers: straight from Arrow where the column is numeric.

datasets' numpy formatter turns a nested-list column (images, clips and masks stored as fixed-size lists, as the
offline stand-ins and Fashion-MNIST are) into arrays row by row and level by level in Python: 5 s for the 2,600
64×64 masks of ``fmnist_seg``. Arrow flattens the same column into one array in milliseconds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a column is read: the adapters that read columns are imported without data
    import datasets

__all__ = ["numeric_feature", "arrow_values", "column_values"]


def numeric_feature(feature: Any) -> bool:
    """Whether a dataset feature is stored as plain numbers (a number, a class id, or nested lists/arrays of them),
    which Arrow hands over as one array without decoding."""
    import datasets

    if isinstance(feature, datasets.ClassLabel):
        return True
    if isinstance(feature, datasets.Value):
        return feature.dtype.startswith(("int", "uint", "float", "bool"))
    if isinstance(feature, (datasets.Array2D, datasets.Array3D, datasets.Array4D, datasets.Array5D)):
        return str(feature.dtype).startswith(("int", "uint", "float", "bool"))
    if isinstance(feature, (datasets.List, datasets.LargeList, datasets.Sequence)):
        return numeric_feature(feature.feature)
    return False


def arrow_values(column) -> Any:
    """A column of an Arrow table as per-row values: one numpy array (rows first) where the column is numeric and
    of one shape (nested fixed-length lists), else the rows' Python values (``to_pylist``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(array.type, pa.ExtensionType):  # datasets' ArrayND: nested lists underneath
        array = array.storage
    rows, shape, flat = len(array), [], array
    while pa.types.is_list(flat.type) or pa.types.is_large_list(flat.type) or pa.types.is_fixed_size_list(flat.type):
        if flat.null_count:
            return array.to_pylist()
        lengths = pc.list_value_length(flat).to_numpy(zero_copy_only=False)
        if lengths.size and (lengths != lengths[0]).any():
            return array.to_pylist()  # ragged: each row keeps its own shape
        shape.append(int(lengths[0]) if lengths.size else 0)
        flat = pc.list_flatten(flat)
    if (not (pa.types.is_integer(flat.type) or pa.types.is_floating(flat.type) or pa.types.is_boolean(flat.type))
            or flat.null_count):
        return array.to_pylist()
    return np.asarray(flat.to_numpy(zero_copy_only=False)).reshape(rows, *shape)


def column_values(split: datasets.Dataset, column: str, start: int = 0, stop: int | None = None) -> Any:
    """Rows ``start:stop`` of ``column`` (selections and shuffles respected): one numpy array where the column is
    numeric and of one shape, read through Arrow; otherwise what datasets' numpy formatter gives (decoded images,
    ragged rows, text)."""
    stop = len(split) if stop is None else stop
    if numeric_feature(split.features.get(column)):
        values = arrow_values(split.select_columns([column]).with_format("arrow")[start:stop][column])
        if getattr(values, "flags", None) is not None and not values.flags.writeable:
            values = values.copy()  # Arrow's buffer is read-only; callers may hand it to torch
        return values
    return split.select_columns([column]).with_format("numpy")[start:stop][column]

"""gate.data.columns reads a column through Arrow where it is numeric: the same values as datasets' numpy formatter
(which builds nested-list columns row by row in Python), selections and shuffles respected."""

import datasets
import numpy as np
import pytest

from gate.data.columns import column_values


def _split():
    rng = np.random.default_rng(0)
    masks = rng.integers(0, 11, (12, 5, 4), dtype=np.uint8)
    return datasets.Dataset.from_dict(
        {"mask": masks.tolist(), "label": list(range(12)), "ragged": [[1] * (i % 3 + 1) for i in range(12)],
         "text": [f"t{i}" for i in range(12)]},
        features=datasets.Features({"mask": datasets.List(datasets.List(datasets.Value("uint8"), length=4), length=5),
                                    "label": datasets.Value("int64"),
                                    "ragged": datasets.List(datasets.Value("int64")),
                                    "text": datasets.Value("string")})), masks


@pytest.mark.parametrize("view", ["whole", "selected", "shuffled"])
def test_numeric_columns_equal_the_numpy_formatter_and_respect_selections(view):
    split, masks = _split()
    order = np.arange(12)
    if view == "selected":
        order = np.array([7, 2, 9, 3])
    elif view == "shuffled":
        order = np.random.default_rng(1).permutation(12)
    split = split.select(order.tolist())
    reference = split.with_format("numpy")
    got = column_values(split, "mask", 1, 4)
    assert isinstance(got, np.ndarray) and got.dtype == np.uint8 and got.flags.writeable
    assert np.array_equal(got, masks[order][1:4]) and np.array_equal(got, np.stack(reference[1:4]["mask"]))
    assert np.array_equal(column_values(split, "label"), order)


def test_ragged_and_text_columns_come_out_per_row():
    split, _ = _split()
    assert [list(r) for r in column_values(split, "ragged", 0, 4)] == [[1], [1, 1], [1, 1, 1], [1]]
    assert list(column_values(split, "text", 0, 2)) == ["t0", "t1"]

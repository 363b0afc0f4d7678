"""Streamed builds in the derived-data cache: rows written as they come into one Arrow file per split, read back
memory-mapped, with the same atomic write, record and damage handling as a whole DatasetDict."""

from __future__ import annotations

import json

import datasets
import pytest

from gate.data.disk_cache import RECORD, STREAMED, StreamedSplits, cached_dataset

FEATURES = datasets.Features({"x": datasets.Value("int64"), "name": datasets.Value("string")})


def _build(calls, n=300, fail_at=None):
    def rows(offset):
        def gen():
            for i in range(n):
                if fail_at is not None and i == fail_at:
                    raise RuntimeError("a clip that cannot be read")
                yield {"x": offset + i, "name": f"row{offset + i}"}
        return gen

    def build():
        calls.append(1)
        return StreamedSplits(FEATURES, {"train": rows(0), "test": rows(1000)}, batch_rows=16)

    return build


def test_a_streamed_build_is_written_once_then_memory_mapped(tmp_path):
    calls = []
    first = cached_dataset("kind", "toy", {"a": 1}, tmp_path, _build(calls))
    again = cached_dataset("kind", "toy", {"a": 1}, tmp_path, _build(calls))
    assert len(calls) == 1
    assert again["train"]["x"] == first["train"]["x"] == list(range(300))
    assert again["test"]["name"][:2] == ["row1000", "row1001"]
    folder = next((tmp_path / "kind").glob("toy-*"))
    record = json.loads((folder / RECORD).read_text())
    assert record["format"] == STREAMED and record["splits"] == ["train", "test"]
    assert set(record["files"]) == {"train.arrow", "test.arrow"}
    assert type(again["train"].data).__name__ == "MemoryMappedTable"


def test_without_a_cache_folder_a_streamed_build_is_held_in_memory(tmp_path):
    ds = cached_dataset("kind", "toy", {}, None, _build([], n=5))
    assert ds["train"]["x"] == [0, 1, 2, 3, 4] and ds["train"].features == FEATURES
    assert not list(tmp_path.iterdir())


def test_a_failing_streamed_build_leaves_no_copy(tmp_path):
    with pytest.raises(RuntimeError, match="cannot be read"):
        cached_dataset("kind", "toy", {}, tmp_path, _build([], fail_at=100))
    assert not list((tmp_path / "kind").iterdir())  # neither a half-written copy nor a temporary folder


def test_a_truncated_streamed_split_is_set_aside_and_rebuilt(tmp_path):
    calls = []
    cached_dataset("kind", "toy", {}, tmp_path, _build(calls))
    arrow = next((tmp_path / "kind").rglob("train.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    with pytest.warns(UserWarning, match="damaged derived-data cache.*rebuilt"):
        again = cached_dataset("kind", "toy", {}, tmp_path, _build(calls))
    assert len(calls) == 2 and again["train"]["x"] == list(range(300))
    assert len(list((tmp_path / "kind").glob("toy-*.corrupt-*"))) == 1


def test_batch_rows_must_be_positive():
    with pytest.raises(ValueError, match="batch_rows must be >= 1"):
        StreamedSplits(FEATURES, {"train": lambda: iter(())}, batch_rows=0)

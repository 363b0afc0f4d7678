"""The derived-data cache: keyed on the code that derives the data, a damaged copy set aside and rebuilt."""

from __future__ import annotations

import warnings

import datasets
import pytest

from gate.data import disk_cache
from gate.data.disk_cache import cached_dataset, code_version


def _build(calls):
    def build():
        calls.append(1)
        return datasets.DatasetDict({"train": datasets.Dataset.from_dict({"x": list(range(1000))})})

    return build


def test_built_once_then_read_back(tmp_path):
    calls = []
    first = cached_dataset("kind", "toy", {"a": 1}, tmp_path, _build(calls))
    again = cached_dataset("kind", "toy", {"a": 1}, tmp_path, _build(calls))
    assert len(calls) == 1 and again["train"]["x"] == first["train"]["x"] == list(range(1000))
    cached_dataset("kind", "toy", {"a": 2}, tmp_path, _build(calls))  # other parameters: another copy
    assert len(calls) == 2


def test_a_change_to_the_deriving_code_rebuilds(tmp_path, monkeypatch):
    calls = []
    cached_dataset("kind", "toy", {}, tmp_path, _build(calls))
    assert __name__ in code_version(_build(calls)) and "gate.data.loaders._dense" in code_version(_build(calls))
    # The module that derives the data changed (a fixed label map, say): its source hash differs.
    monkeypatch.setattr(disk_cache, "_module_source_hash", lambda name: "changed" if name == __name__ else "same")
    cached_dataset("kind", "toy", {}, tmp_path, _build(calls))
    assert len(calls) == 2


def test_a_truncated_copy_is_set_aside_and_rebuilt(tmp_path):
    calls = []
    cached_dataset("kind", "toy", {}, tmp_path, _build(calls))
    arrow = next((tmp_path / "kind").rglob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])  # a copy cut short (full disk, killed rsync)
    with pytest.warns(UserWarning, match="damaged derived-data cache.*rebuilt"):
        again = cached_dataset("kind", "toy", {}, tmp_path, _build(calls))
    assert len(calls) == 2 and again["train"]["x"] == list(range(1000))
    assert len(list((tmp_path / "kind").glob("toy-*.corrupt-*"))) == 1  # kept for inspection, never read again
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt copy is whole: no warning, no rebuild
        cached_dataset("kind", "toy", {}, tmp_path, _build(calls))
    assert len(calls) == 2


def test_files_added_later_by_datasets_do_not_count_as_damage(tmp_path):
    calls = []
    ds = cached_dataset("kind", "toy", {}, tmp_path, _build(calls))["train"]
    ds.map(lambda row: {"y": row["x"] + 1})  # datasets writes its map cache next to the loaded files
    cached_dataset("kind", "toy", {}, tmp_path, _build(calls))
    assert len(calls) == 1

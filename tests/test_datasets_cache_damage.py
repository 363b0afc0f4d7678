"""A damaged datasets Arrow cache (the parquet copy converted once under paths.cache/datasets, gate.data.hub
.load_parquet) is named as the damaged thing and converted again from the intact parquet files; before (issue 27)
the error blamed the parquet files, which `gate-data verify` found intact, and `gate-data prepare force=true` could
not rebuild it. The cifar100 fixture is the repo's real layout (tests/benchmark_fixtures: cifar100/train-*.parquet,
test-*.parquet with columns img, fine_label, coarse_label)."""

from __future__ import annotations

import pytest
from benchmark_fixtures import all_fixtures

from gate.cli import data as gate_data
from gate.data import hub

SOURCE = {"files": {"train": ["cifar100/train-*.parquet"], "test": ["cifar100/test-*.parquet"]}}


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a conversion killed mid-write, a full disk


def test_a_truncated_arrow_cache_is_named_and_converted_again(tmp_path):
    all_fixtures()["cifar100"](tmp_path / "copy")
    hub.load_parquet("cifar100", SOURCE, tmp_path / "copy", cache_dir=tmp_path / "cache")
    arrow = sorted((tmp_path / "cache").rglob("*-train.arrow"))[0]
    truncate(arrow)
    with pytest.warns(UserWarning, match=r"a damaged datasets Arrow cache of dataset 'cifar100' .*the parquet files "
                                         r"in .* are intact\): converting them again"):
        raw = hub.load_parquet("cifar100", SOURCE, tmp_path / "copy", cache_dir=tmp_path / "cache")
    assert {k: len(v) for k, v in raw.items()} == {"train": 300, "test": 100}
    assert list(arrow.parent.parent.glob("*.corrupt-*"))  # kept aside for inspection


def test_prepare_force_rebuilds_the_arrow_cache(tmp_path, capsys):
    root = f"paths.root={tmp_path}"
    all_fixtures()["cifar100"](tmp_path / "data" / "cifar100")
    gate_data.main(["prepare", "dataset=cifar100", root])
    arrow = sorted((tmp_path / "cache" / "datasets").rglob("*-train.arrow"))[0]
    stale = arrow.parent / "stale-marker"
    stale.write_text("left by the first conversion")
    capsys.readouterr()
    gate_data.main(["prepare", "dataset=cifar100", "force=true", root])
    out = capsys.readouterr().out
    assert "removed datasets' Arrow cache of cifar100" in out
    assert arrow.is_file() and not stale.exists()  # the folder was removed and converted again

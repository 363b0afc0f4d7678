"""Split caps (data.max_*_samples) keep whole groups: volumes, declared split groups (patients), few-shot classes."""

from __future__ import annotations

from collections import Counter

import datasets
import numpy as np
import pytest

from gate.data.splits import cap_splits, cap_unit
from gate.engine.build import build_spec, build_splits
from tests.benchmark_fixtures import volumes
from tests.helpers import compose_run, resolved


def _column(split: datasets.Dataset, name: str) -> list:
    return split.select_columns([name]).with_format("numpy")[:][name].tolist()


def grouped(sizes: list[int]) -> datasets.Dataset:
    """Rows of groups of the given sizes (ids 100, 101, ...), groups interleaved as a source may store them."""
    ids = np.concatenate([np.full(n, 100 + g) for g, n in enumerate(sizes)])
    order = np.random.default_rng(0).permutation(ids.size)
    return datasets.Dataset.from_dict({"volume": ids[order].tolist(), "row": order.tolist()})


def test_caps_take_whole_groups_within_half_a_group_of_the_cap():
    rng = np.random.default_rng(1)
    sizes = rng.integers(3, 19, 40).tolist()  # ACDC-like: volumes of 6 to 18 slices vary in depth
    data = grouped(sizes)
    whole = Counter(_column(data, "volume"))
    for cap in (1, 7, 50, 123, 301, len(data) - 1):
        for seed in (0, 1, 2):
            capped = cap_splits({"train": data}, {"train": cap}, run_seed=seed, split_seed=0,
                                group_column="volume")["train"]
            kept = Counter(_column(capped, "volume"))
            assert all(kept[g] == whole[g] for g in kept), "a kept volume lost slices"
            assert len(kept) >= 1
            if len(kept) > 1:  # one group is kept even when it alone exceeds the cap
                assert abs(len(capped) - cap) <= max(whole.values()) / 2, (cap, seed, len(capped))
            else:
                assert len(capped) <= cap or cap < max(whole.values())
    again = cap_splits({"val": data}, {"val": 123}, run_seed=5, split_seed=3, group_column="volume")["val"]
    other_run = cap_splits({"val": data}, {"val": 123}, run_seed=6, split_seed=3, group_column="volume")["val"]
    assert _column(again, "row") == _column(other_run, "row")  # val/test caps follow the split seed only


def test_rows_without_groups_keep_the_seeded_shuffle_and_take():
    data = datasets.Dataset.from_dict({"label": list(range(50))})
    assert cap_unit("classification", {"label": "class"}, None, "label") is None
    capped = cap_splits({"train": data}, {"train": 10}, run_seed=4, split_seed=0)["train"]
    assert _column(capped, "label") == _column(data.shuffle(seed=4).select(range(10)), "label")
    assert len(capped) == 10


def test_capped_fmnist_volume_keeps_every_kept_volume_whole(tmp_path):
    cfg = compose_run(tmp_path, ["dataset=fmnist_volume", "dataset.builder.train_volumes=12",
                                 "dataset.builder.val_volumes=4", "dataset.builder.test_volumes=9"])
    spec = build_spec(resolved(cfg.dataset))
    assert cap_unit(spec.task, spec.targets, None, spec.label_column) == "volume"
    full = build_splits(resolved(cfg.dataset), seed=0)
    capped = build_splits(resolved(cfg.dataset), seed=0, max_samples={"train": 45, "test": 30})
    depth = int(cfg.dataset.builder.depth)
    for name, cap in (("train", 45), ("test", 30)):
        kept = Counter(_column(capped[name], "volume"))
        assert set(kept.values()) == {depth}, f"{name}: volumes cut to {sorted(kept.values())} of {depth} slices"
        assert abs(len(capped[name]) - cap) <= depth / 2
        slices = {}
        for v, s in zip(_column(capped[name], "volume"), _column(capped[name], "slice")):
            slices.setdefault(v, set()).add(s)
        assert all(s == set(range(depth)) for s in slices.values())
        assert set(kept) <= set(_column(full[name], "volume"))
    assert len(capped["val"]) == len(full["val"])  # 4 volumes = 32 slices, under the default cap of none


def test_capped_acdc_keeps_whole_patients_both_frames(tmp_path):
    """ACDC declares splits.group_column: patient; a cap keeps whole patients (both frames, every slice)."""
    copy = tmp_path / "copy"
    overrides = volumes.acdc(copy)
    cfg = compose_run(tmp_path, ["dataset=acdc", f"dataset.data_dir={copy}",
                                 *(f"{k}={v}" for k, v in overrides.items())])
    spec = build_spec(resolved(cfg.dataset))
    assert cap_unit(spec.task, spec.targets, cfg.dataset.splits.group_column, spec.label_column) == "patient"
    full = build_splits(resolved(cfg.dataset), seed=0)
    per_patient = Counter(_column(full["train"], "patient"))
    capped = build_splits(resolved(cfg.dataset), seed=0, max_samples={"train": 20})["train"]
    kept = Counter(_column(capped, "patient"))
    assert all(kept[p] == per_patient[p] for p in kept), "a capped patient lost slices or a frame"
    assert abs(len(capped) - 20) <= max(per_patient.values()) / 2
    frames = {}
    for p, v in zip(_column(capped, "patient"), _column(capped, "volume")):
        frames.setdefault(p, set()).add(v)
    assert all(len(f) == 2 for f in frames.values())  # end-diastole and end-systole together


def test_capped_few_shot_split_keeps_whole_classes(tmp_path):
    cfg = compose_run(tmp_path, ["dataset=fmnist_fewshot", "dataset.builder.train_per_class=20",
                                 "dataset.builder.val_per_class=10", "dataset.builder.test_per_class=12"])
    spec = build_spec(resolved(cfg.dataset))
    assert cap_unit(spec.task, spec.targets, None, spec.label_column) == "label"
    capped = build_splits(resolved(cfg.dataset), seed=0, max_samples={"train": 50, "test": 40})
    assert set(Counter(_column(capped["train"], "label")).values()) == {20}
    assert len(capped["train"]) in (40, 60)  # 2.5 classes asked: 2 or 3 whole ones
    assert set(Counter(_column(capped["test"], "label")).values()) == {12}
    assert len(capped["test"]) == 36  # 3 classes of 12 (|36 - 40| < |48 - 40|)


def test_a_cap_by_a_missing_group_column_is_refused():
    data = datasets.Dataset.from_dict({"label": list(range(10))})
    with pytest.raises(ValueError, match="no column 'patient'"):
        cap_splits({"test": data}, {"test": 5}, run_seed=0, split_seed=0, group_column="patient")

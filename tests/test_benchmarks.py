"""Every benchmark with a fixture: its tiny local copy (the real source's schema, written by the test) loads
through the real loader with ``dataset.data_dir``, yields the declared task spec and target kinds, gets a
disjoint, deterministic, reused split manifest, and fine-tunes for one step (one training batch, one validation,
the test) with its default adapter and timm's tiny test ResNet (in process, 32 px, the smoke preset: the benchmark is
the point here, not the encoder)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from benchmark_fixtures import all_fixtures

from gate.data.manifest import SPLITS
from gate.engine.build import build_spec, build_splits, manifest_dir_of

from helpers import SMOKE, TINY_ENCODER, compose_run, resolved

FIXTURES = all_fixtures()
# The smoke preset, one training batch of 4, whole (tiny) splits unless capped below, no checkpoint kept.
TRAIN = [*SMOKE, *TINY_ENCODER, "trainer.max_steps=1", "trainer.val_check_interval=1", "keep_checkpoints=none", "data.batch_size=4",
         "data.eval_batch_size=8", "data.max_train_samples=null", "data.max_val_samples=null",
         "data.max_test_samples=null"]


def overrides(key, copy, extra):
    return [f"dataset={key}", f"dataset.data_dir={copy}", *TRAIN, *(f"{k}={v}" for k, v in extra.items())]


def check_targets(spec, splits):
    for name, split in splits.items():
        assert spec.input_column in split.column_names
        for column, kind in spec.targets.items():
            values = split[column]
            if kind == "class":
                labels = np.asarray(values)
                assert np.issubdtype(labels.dtype, np.integer) and labels.min() >= 0 and labels.max() < spec.num_classes
            elif kind == "multi_hot":
                hot = np.asarray(values)
                assert hot.shape == (len(split), spec.num_classes) and set(np.unique(hot)) <= {0.0, 1.0}
            elif kind == "caption":
                assert all(isinstance(v, str) and v for v in values)
        assert len(split) > 0, name


def test_every_gate_paper_benchmark_has_a_fixture():
    import csv
    from pathlib import Path

    pool = Path(__file__).resolve().parents[1] / "experiments" / "gate_paper" / "gate_pool.csv"
    with open(pool, newline="") as fh:
        keys = {row["key"] for row in csv.DictReader(fh)}
    assert len(keys) == 31
    assert keys <= set(FIXTURES), sorted(keys - set(FIXTURES))


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(FIXTURES))
def test_benchmark_loads_from_a_local_copy_with_a_reused_manifest_and_trains_one_step(key, tmp_path):
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run

    copy = tmp_path / "copy"
    extra = FIXTURES[key](copy)
    cfg = compose_run(tmp_path / "out", overrides(key, copy, extra))
    spec = build_spec(resolved(cfg.dataset))
    assert spec.name == key and spec.task == cfg.dataset.task and dict(spec.targets) == dict(cfg.dataset.targets)

    where = manifest_dir_of(cfg)
    splits = build_splits(resolved(cfg.dataset), seed=0, manifest_dir=where)
    check_targets(spec, splits)
    files = sorted(where.glob(f"{key}-*.json"))
    assert len(files) == 1
    manifest = json.loads(files[0].read_text())
    for i, a in enumerate(SPLITS):  # disjoint within each source split
        for b in SPLITS[i + 1:]:
            if manifest["from"][a] == manifest["from"][b]:
                assert not set(manifest[a]) & set(manifest[b])
    written = files[0].stat().st_mtime_ns
    again = build_splits(resolved(cfg.dataset), seed=1, manifest_dir=where)  # another run seed: the same split, same file
    assert files[0].stat().st_mtime_ns == written
    assert {n: len(s) for n, s in again.items()} == {n: len(s) for n, s in splits.items()}
    fresh = build_splits(resolved(cfg.dataset), seed=0, manifest_dir=tmp_path / "elsewhere")  # recomputed: identical
    assert json.loads(next((tmp_path / "elsewhere").glob("*.json")).read_text()) == manifest
    assert {n: len(s) for n, s in fresh.items()} == {n: len(s) for n, s in splits.items()}

    # one step with the dataset's default adapter, on the split just written (the run reads the same manifest)
    if cfg.dataset.task != "few_shot":  # evaluate on a few examples (few-shot episodes need whole classes)
        cfg.data.max_val_samples = cfg.data.max_test_samples = 8
    result = run_finetune(parse_run(cfg))
    assert not result.skipped and files[0].stat().st_mtime_ns == written
    assert sorted(where.glob(f"{key}-*.json")) == files
    assert spec.tier_metric in result.metrics or any(k.startswith(spec.tier_metric) for k in result.metrics)
    assert all(np.isfinite(v) for v in result.metrics.values())

"""The 13 dense / relational / medical / video benchmarks (issue 9, part 2): every loader reads a tiny local copy
with its source's real schema (tests/benchmark_fixtures) through the real builder with ``dataset.data_dir``, yields
the declared columns and target kinds, splits deterministically, and trains two steps with its default adapter and
EfficientNet-Lite0. Bad local copies fail with one line naming the dataset, the file and what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from benchmark_fixtures import relational, segmentation, video, volumes

import gate.conf
from gate.engine.build import build_spec, build_splits
from gate.errors import DatasetUnavailable, GateError

from helpers import compose_run, resolved

FIXTURES = {**segmentation.FIXTURES, **relational.FIXTURES, **volumes.FIXTURES, **video.FIXTURES}
SEGMENTATION = sorted(segmentation.FIXTURES)
IMAGE_KEYS = [*SEGMENTATION, *sorted(relational.FIXTURES), "acdc"]


def _config(key: str, tmp_path: Path, extra=()):
    copy = tmp_path / "copy"
    overrides = FIXTURES[key](copy)
    return compose_run(tmp_path, [f"dataset={key}", f"dataset.data_dir={copy}",
                                  *(f"{k}={v}" for k, v in overrides.items()), *extra])


def source_of(key: str) -> dict:
    """The packaged config's ``source`` block, which the builder passes to the loader."""
    return yaml.safe_load((Path(gate.conf.__file__).parent / "dataset" / f"{key}.yaml").read_text())["source"]


def _column(split, name):
    return split.select_columns([name]).with_format("numpy")[:][name]


@pytest.mark.parametrize("key", IMAGE_KEYS)
def test_loader_reads_the_local_copy_with_declared_targets(key, tmp_path):
    cfg = _config(key, tmp_path)
    spec = build_spec(resolved(cfg.dataset))
    splits = build_splits(resolved(cfg.dataset), seed=0)
    assert set(splits) == {"train", "val", "test"} and all(len(s) > 0 for s in splits.values())
    for name, split in splits.items():
        assert spec.input_column in split.column_names
        assert set(spec.targets) <= set(split.column_names), (name, split.column_names)
        if spec.task == "segmentation":
            masks = np.stack(list(_column(split, "mask")))
            size = cfg.dataset.paper_protocol.mask_size
            assert masks.shape[1:] == (size, size)
            valid = (masks < spec.num_classes) | (masks == (spec.ignore_index if spec.ignore_index is not None else -1))
            assert valid.all(), f"{key}/{name}: labels outside the class range"
            assert (masks < spec.num_classes).any()
        if spec.task == "relational":
            counts = [len(v) for v in spec.options["answer_types"].values()]
            kinds, answers = _column(split, "answer_type"), _column(split, "answer")
            assert all(0 <= a < counts[k] for a, k in zip(answers, kinds))
    if key == "acdc":  # slices of one volume never straddle two splits
        volumes_of = {n: set(_column(s, "volume").tolist()) for n, s in splits.items()}
        assert not volumes_of["train"] & volumes_of["val"] and not volumes_of["train"] & volumes_of["test"]
    again = build_splits(resolved(cfg.dataset), seed=0)  # deterministic: the same rows in the same splits
    for name in splits:
        first, second = splits[name], again[name]
        column = spec.column("mask") if spec.task == "segmentation" else "question"
        assert [np.asarray(v).tobytes() if not isinstance(v, str) else v for v in _column(first, column)] == \
               [np.asarray(v).tobytes() if not isinstance(v, str) else v for v in _column(second, column)]


def test_ade20k_reads_the_semantic_annotation_not_a_colour_channel(tmp_path):
    """Raw annotation ids 1..150 become classes 0..149 and 0 ("other") becomes the ignore index."""
    from gate.data.loaders.segmentation import ade20k

    copy = tmp_path / "copy"
    segmentation.ade20k(copy, {"train": 2, "validation": 1})
    import pyarrow.parquet as pq

    raw = pq.read_table(copy / "scene_parsing/train/0000.parquet").column("annotation").to_pylist()[0]["bytes"]
    from gate.data.loaders._dense import read_image

    ds = ade20k(str(copy), source_of("ade20k"), cache_dir=None, mask_size=None)
    mask = np.asarray(ds["train"].with_format("numpy")[0]["mask"])
    raw = read_image(raw)
    assert np.array_equal(mask[raw == 0], np.full((raw == 0).sum(), 255))
    assert np.array_equal(mask[raw > 0], raw[raw > 0] - 1)


def test_cityscapes_maps_label_ids_to_train_ids():
    from gate.data.loaders._dense import lookup_table, remap_mask
    from gate.data.loaders.segmentation import CITYSCAPES_IDS

    lut = lookup_table(CITYSCAPES_IDS, 255)
    raw = np.array([[7, 8, 26], [33, 0, 6]], np.uint8)  # road, sidewalk, car, bicycle, unlabeled, ground
    assert remap_mask(raw, lut, None).tolist() == [[0, 1, 13], [18, 255, 255]]


# ------------------------------------------------------------------------------------------ bad inputs
def test_missing_copy_says_what_to_download_and_where(tmp_path):
    from gate.data.loaders.segmentation import cityscapes

    with pytest.raises(DatasetUnavailable) as err:
        cityscapes(str(tmp_path / "nowhere"), source_of("cityscapes"))
    message = str(err.value)
    assert "cityscapes" in message and "cityscapes-dataset.com" in message and str(tmp_path / "nowhere") in message
    assert "\n" not in message


def test_missing_split_names_the_folder(tmp_path):
    from gate.data.loaders.segmentation import cityscapes

    segmentation.cityscapes(tmp_path)
    shutil.rmtree(tmp_path / "gtFine" / "val")
    with pytest.raises(DatasetUnavailable, match=r"gtFine/val"):
        cityscapes(str(tmp_path), source_of("cityscapes"))


@pytest.mark.parametrize("key", ["cityscapes", "coco_164k"])
def test_an_image_without_its_mask_names_both(key, tmp_path):
    from gate.data.loaders import segmentation as loaders

    getattr(segmentation, key)(tmp_path)
    masks = sorted(tmp_path.rglob("*_gtFine_labelIds.png" if key == "cityscapes" else "stuffthingmaps_trainval2017/*/*.png"))
    masks[0].unlink()
    with pytest.raises(GateError) as err:
        getattr(loaders, key)(str(tmp_path), source_of(key))
    message = str(err.value)
    assert f"dataset {key!r}: {masks[0]}: missing (" in message and "\n" not in message
    assert ("extract gtFine_trainvaltest.zip" if key == "cityscapes" else "re-download or re-extract it") in message


def test_missing_column_names_the_file(tmp_path):
    import pyarrow.parquet as pq

    from gate.data.loaders.segmentation import ade20k

    segmentation.ade20k(tmp_path, {"train": 2, "validation": 1})
    path = tmp_path / "scene_parsing/train/0000.parquet"
    pq.write_table(pq.read_table(path).drop_columns(["annotation"]), path)
    with pytest.raises(GateError, match=r"0000\.parquet: no column\(s\) \['annotation'\]"):
        ade20k(str(tmp_path), source_of("ade20k"))


def test_acdc_labels_outside_the_classes_are_refused(tmp_path):
    import nibabel

    from gate.data.loaders.volumes import acdc

    volumes.acdc(tmp_path, patients=(("training", [1]), ("testing", [101])))
    gt = tmp_path / "database/training/patient001/patient001_frame01_gt.nii.gz"
    label = np.asarray(nibabel.load(str(gt)).dataobj).copy()
    label[0, 0, 0] = 7
    nibabel.save(nibabel.Nifti1Image(label, np.eye(4)), str(gt))
    with pytest.raises(GateError, match=r"patient001_frame01_gt\.nii\.gz: labels in \[0, 7\], expected 0\.\.3"):
        acdc(str(tmp_path), source_of("acdc"), size=16)


# Video loaders (frames, groups, streaming, iWildCam's keys): tests/test_benchmarks_video.py.
# Two training steps per benchmark: tests/test_benchmarks.py (every fixture module, this family's included).

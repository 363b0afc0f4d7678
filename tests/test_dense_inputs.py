"""What the dense loaders read: every input file keys the derived-data cache, label images must hold class ids
(a colour-encoded one is refused), and the class-name files Pascal-Context needs are part of its download."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from benchmark_fixtures import segmentation, volumes
from PIL import Image

import gate.conf
from gate.errors import GateError


def source_of(key: str) -> dict:
    return yaml.safe_load((Path(gate.conf.__file__).parent / "dataset" / f"{key}.yaml").read_text())["source"]


def _first_mask(ds, split="train") -> np.ndarray:
    return np.asarray(ds[split].with_format("numpy")[0]["mask"])


def _rewrite(path: Path, write) -> None:
    """Replace a file's content and move its mtime forward (a re-exported label map)."""
    before = path.stat().st_mtime
    write(path)
    os.utime(path, (before + 10, before + 10))


# ---------------------------------------------------------------------------------------------- cache keys
def test_a_changed_cityscapes_label_map_rebuilds_the_cache(tmp_path):
    from gate.data.loaders.segmentation import cityscapes

    segmentation.cityscapes(tmp_path / "copy")
    cache = str(tmp_path / "cache")
    first = cityscapes(str(tmp_path / "copy"), source_of("cityscapes"), cache_dir=cache, mask_size=None)
    label = sorted((tmp_path / "copy" / "gtFine" / "train").glob("*/*_gtFine_labelIds.png"))[0]
    assert (_first_mask(first) != 0).any()
    _rewrite(label, lambda p: Image.fromarray(np.full((segmentation.H, segmentation.W), 7, np.uint8)).save(p))  # road
    again = cityscapes(str(tmp_path / "copy"), source_of("cityscapes"), cache_dir=cache, mask_size=None)
    assert (_first_mask(again) == 0).all()  # train id of road: the new label map, not the cached one


def test_a_changed_coco_164k_stuffthingmap_rebuilds_the_cache(tmp_path):
    from gate.data.loaders.segmentation import COCO_STUFF_IDS, coco_164k

    segmentation.coco_164k(tmp_path / "copy")
    cache = str(tmp_path / "cache")
    coco_164k(str(tmp_path / "copy"), source_of("coco_164k"), cache_dir=cache, mask_size=None)
    label = sorted((tmp_path / "copy" / "stuffthingmaps_trainval2017" / "train2017").glob("*.png"))[0]
    raw = COCO_STUFF_IDS[5]
    _rewrite(label, lambda p: Image.fromarray(np.full((segmentation.H, segmentation.W), raw, np.uint8)).save(p))
    again = coco_164k(str(tmp_path / "copy"), source_of("coco_164k"), cache_dir=cache, mask_size=None)
    assert (_first_mask(again) == 5).all()


def test_a_changed_coco_10k_annotation_rebuilds_the_cache(tmp_path):
    from scipy.io import savemat

    from gate.data.loaders.segmentation import COCO_STUFF_IDS, coco_10k

    segmentation.coco_10k(tmp_path / "copy")
    cache = str(tmp_path / "cache")
    coco_10k(str(tmp_path / "copy"), source_of("coco_10k"), cache_dir=cache, mask_size=None)
    stem = (tmp_path / "copy" / "imageLists" / "train.txt").read_text().split()[0]
    label = tmp_path / "copy" / "annotations" / f"{stem}.mat"
    raw = COCO_STUFF_IDS[3] + 1  # S holds the stuffthingmaps id + 1
    _rewrite(label, lambda p: savemat(p, {"S": np.full((segmentation.H, segmentation.W), raw, np.uint16)}))
    again = coco_10k(str(tmp_path / "copy"), source_of("coco_10k"), cache_dir=cache, mask_size=None)
    assert (_first_mask(again) == 3).all()


def test_a_changed_acdc_image_volume_rebuilds_the_cache(tmp_path):
    import nibabel

    from gate.data.loaders.volumes import acdc

    volumes.acdc(tmp_path / "copy", patients=(("training", [1]), ("testing", [101])))
    cache = str(tmp_path / "cache")
    first = acdc(str(tmp_path / "copy"), source_of("acdc"), cache_dir=cache, size=None)
    frame = tmp_path / "copy" / "database" / "training" / "patient001" / "patient001_frame01.nii.gz"
    flat = np.full((20, 16, 3), 300, np.int16)
    flat[:10] = 900  # a different image, same shape: the label volume is unchanged
    _rewrite(frame, lambda p: nibabel.save(nibabel.Nifti1Image(flat, np.eye(4)), str(p)))
    again = acdc(str(tmp_path / "copy"), source_of("acdc"), cache_dir=cache, size=None)
    before = np.asarray(first["train"].with_format("numpy")[0]["image"])
    after = np.asarray(again["train"].with_format("numpy")[0]["image"])
    assert not np.array_equal(before, after)
    assert set(np.unique(after).tolist()) == {0, 255}  # the two intensities, scaled to the ends of 0..255


@pytest.mark.parametrize("key", ["ade20k", "cityscapes", "coco_10k", "coco_164k", "nyu", "pascal_context"])
def test_every_file_of_the_copy_is_in_the_cache_key(key, tmp_path, monkeypatch):
    """The stamp a loader passes to ``cached`` names every file of its (fixture) copy: images, label maps,
    lists and class-name files alike."""
    import gate.data.loaders.segmentation as seg

    seen = {}
    real = seg.cached

    def spy(name, params, cache_dir, build):
        seen[name] = {Path(entry[0]) for entry in params["files"]}
        return real(name, params, cache_dir, build)

    monkeypatch.setattr(seg, "cached", spy)
    getattr(segmentation, key)(tmp_path)
    getattr(seg, key)(str(tmp_path), source_of(key), cache_dir=None, mask_size=8)
    files = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert files <= seen[key], sorted(str(p.relative_to(tmp_path)) for p in files - seen[key])[:5]


# ------------------------------------------------------------------------------------------- label images
def test_a_colour_encoded_label_image_is_refused_in_one_line():
    from gate.data.loaders._dense import lookup_table, remap_mask

    lut = lookup_table(range(1, 151), 255)
    grey = np.array([[1, 2], [3, 0]], np.uint8)
    replicated = np.stack([grey] * 3, axis=-1)  # a grey id map saved as RGB: accepted, the same ids
    assert np.array_equal(remap_mask(replicated, lut, None), remap_mask(grey, lut, None))
    colour = np.stack([grey, grey * 2, grey * 3], axis=-1)  # a palette: channel 0 is not the class id
    with pytest.raises(GateError) as err:
        remap_mask(colour, lut, None, where="gtFine/x_labelIds.png", dataset="cityscapes")
    message = str(err.value)
    assert "\n" not in message and "gtFine/x_labelIds.png" in message and "colour-encoded" in message
    assert message.startswith("dataset 'cityscapes': ")


def test_a_colour_label_map_in_a_local_copy_names_the_file(tmp_path):
    from gate.data.loaders.segmentation import cityscapes

    segmentation.cityscapes(tmp_path)
    label = sorted((tmp_path / "gtFine" / "train").glob("*/*_gtFine_labelIds.png"))[0]
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (segmentation.H, segmentation.W, 3), dtype=np.uint8)).save(label)
    with pytest.raises(GateError) as err:
        cityscapes(str(tmp_path), source_of("cityscapes"), cache_dir=None)
    assert str(label) in str(err.value) and "colour-encoded" in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------------------------ Pascal-Context files
def test_pascal_context_label_files_are_in_its_source_block():
    from gate.data.loaders.segmentation import PASCAL_CONTEXT_LABEL_FILES

    source = source_of("pascal_context")
    downloads = {entry["url"].rsplit("/", 1)[-1]: entry for entry in source["urls"]}
    assert set(PASCAL_CONTEXT_LABEL_FILES) == {"labels.txt", "59_labels.txt"}
    for name, download in PASCAL_CONTEXT_LABEL_FILES.items():
        assert download in downloads, f"{name} comes from {download}, which the source block does not fetch"
        assert name in source["layout"]
    assert downloads["59_labels.txt"]["url"] == "https://cs.stanford.edu/~roozbeh/pascal-context/59_labels.txt"
    assert downloads["59_labels.txt"].get("to") in (None, ".")  # copied into data_dir, where the loader reads it


def test_pascal_context_without_its_label_files_says_where_to_get_them(tmp_path):
    from gate.data.loaders.segmentation import pascal_context
    from gate.errors import DatasetUnavailable

    segmentation.pascal_context(tmp_path)
    (tmp_path / "59_labels.txt").unlink()
    with pytest.raises(DatasetUnavailable) as err:
        pascal_context(str(tmp_path), source_of("pascal_context"), cache_dir=None)
    assert "59_labels.txt" in str(err.value) and "\n" not in str(err.value)


def test_pascal_context_maps_the_official_59_names_to_their_labels_txt_ids(tmp_path):
    """59_labels.txt spells three classes otherwise than labels.txt (diningtable/table, bedcloth/bedclothes,
    clothes/cloth; the fixture carries both real lists): each maps to its labels.txt id, and ids outside the 59 whose
    names resemble them (clothes tree, pool table, tableware, plant) are ignored."""
    from scipy.io import loadmat

    from gate.data.loaders.segmentation import pascal_context

    segmentation.pascal_context(tmp_path)
    ds = pascal_context(str(tmp_path), source_of("pascal_context"), cache_dir=None, mask_size=None)
    # labels.txt id -> class (its line in 59_labels.txt, from 0): read off the two real lists by hand.
    expected = {397: 10, 19: 51, 80: 27, 2: 0, 458: 58}
    masks, seen = ds["train"].with_format("numpy"), set()
    for i, mat in enumerate(sorted((tmp_path / "trainval").glob("*.mat"))):
        raw = loadmat(mat)["LabelMap"]
        seen |= set(np.unique(raw).tolist())
        want = np.vectorize(lambda v: expected.get(int(v), 255))(raw)
        assert np.array_equal(np.asarray(masks[i]["mask"]), want), mat.name
    assert seen >= {*expected, 81, 304, 398, 293}  # the label maps hold every case above


def test_pascal_context_lists_that_disagree_are_one_line_naming_the_file(tmp_path):
    from gate.data.loaders.segmentation import pascal_context

    segmentation.pascal_context(tmp_path)
    names = tmp_path / "59_labels.txt"
    names.write_text(names.read_text().replace("59: wood", "59: woodwork"))
    with pytest.raises(GateError) as err:
        pascal_context(str(tmp_path), source_of("pascal_context"), cache_dir=None)
    message = str(err.value)
    assert "\n" not in message and str(names) in message and "woodwork" in message
    assert "labels.txt" in message and "re-download" not in message


# ------------------------------------------------------------------------------------------ schema evidence
def _pool_keys() -> list[str]:
    import csv

    pool = Path(__file__).resolve().parents[1] / "experiments" / "gate_paper" / "gate_pool.csv"
    with open(pool, newline="") as fh:
        return sorted(row["key"] for row in csv.DictReader(fh))


SCHEMA_KEYS = _pool_keys()  # every one of the paper's 31 benchmarks says whether its schema rests on evidence


@pytest.mark.parametrize("key", SCHEMA_KEYS)
def test_source_says_whether_its_schema_rests_on_evidence(key):
    """``schema_verified`` is a boolean and ``verified`` names what was checked (the evidence, or what was not)."""
    source = source_of(key)
    assert isinstance(source.get("schema_verified"), bool)
    assert isinstance(source.get("verified"), str) and len(source["verified"]) > 40
    if not source["schema_verified"]:
        assert "NOT verified" in source["verified"]

"""Tiny local copies of the segmentation benchmarks with their sources' real schema (paths, columns, encodings)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from gate.data.loaders.segmentation import CITYSCAPES_IDS, COCO_STUFF_IDS

H, W = 24, 32  # small, not square: loaders must not assume a shape
OVERRIDES = {"dataset.paper_protocol.mask_size": 32}


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, name)))


def rgb(rng) -> np.ndarray:
    return rng.integers(0, 256, (H, W, 3), dtype=np.uint8)


def save(array: np.ndarray, path: Path, fmt: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, format=fmt)
    return path


def encoded(array: np.ndarray, fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format=fmt)
    return buf.getvalue()


def labels(rng, values) -> np.ndarray:
    return np.asarray(values)[rng.integers(0, len(values), (H, W))].astype(np.uint8)


def ade20k(root: Path, counts=None) -> dict:
    """scene_parse_150's parquet conversion: scene_parsing/<split>/0000.parquet, columns image, annotation,
    scene_category (images as {bytes, path} structs; annotation PNG: 0 other, 1..150 classes).

    Schema: the hub repo's loading script (zhoubolei/scene_parse_150, scene_parse_150.py) yields image, annotation
    and scene_category for the scene_parsing config; the conversion branch lists scene_parsing/<split>/NNNN.parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = _rng("ade20k")
    for split, n in (counts or {"train": 10, "validation": 4}).items():
        rows = {"image": [], "annotation": [], "scene_category": []}
        for i in range(n):
            rows["image"].append({"bytes": encoded(rgb(rng), "JPEG"), "path": f"ADE_{split}_{i:08d}.jpg"})
            rows["annotation"].append({"bytes": encoded(labels(rng, range(0, 151))), "path": f"ADE_{split}_{i:08d}.png"})
            rows["scene_category"].append(int(rng.integers(0, 1055)))
        image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        table = pa.table({"image": pa.array(rows["image"], image_type), "annotation": pa.array(rows["annotation"], image_type),
                          "scene_category": pa.array(rows["scene_category"], pa.int64())})
        (root / "scene_parsing" / split).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, root / "scene_parsing" / split / "0000.parquet")
    return dict(OVERRIDES)


#: Real Cityscapes cities: the official train and val splits are city-disjoint.
CITYSCAPES_CITIES = {"train": ("aachen", "bochum", "bremen", "cologne", "darmstadt"), "val": ("frankfurt", "lindau")}


def cityscapes(root: Path) -> dict:
    """leftImg8bit/<split>/<city>/<stem>_leftImg8bit.png + gtFine/<split>/<city>/<stem>_gtFine_labelIds.png.

    Schema: mcordts/cityscapesScripts README (``{root}/{type}/{split}/{city}/{city}_{seq:0>6}_{frame:0>6}_{type}
    {ext}``; gtFine ``*_labelIds.png`` pixels are label ids of helpers/labels.py). Several sequences per city,
    several cities per split: the grouped split must keep a city on one side."""
    rng = _rng("cityscapes")
    for split, n in (("train", 3), ("val", 2)):
        for city in CITYSCAPES_CITIES[split]:
            for i in range(n):
                stem = f"{city}_{i:06d}_000019"
                save(rgb(rng), root / "leftImg8bit" / split / city / f"{stem}_leftImg8bit.png")
                save(labels(rng, [0, 1, 4, *CITYSCAPES_IDS]), root / "gtFine" / split / city / f"{stem}_gtFine_labelIds.png")
    return dict(OVERRIDES)


def coco_164k(root: Path) -> dict:
    """train2017/*.jpg, val2017/*.jpg, stuffthingmaps_trainval2017/<split>/*.png (0-indexed ids, 255 unlabeled).

    Schema: nightrome/cocostuff README (stuffthingmaps_trainval2017.zip: train2017/ and val2017/ PNGs of 0-indexed
    class ids, 255 unlabeled) and mmsegmentation's coco_stuff164k converter; images are COCO 2017's zips."""
    rng = _rng("coco_164k")
    for split, n in (("train2017", 10), ("val2017", 4)):
        for i in range(n):
            stem = f"{1000 * (split == 'val2017') + i + 9:012d}"
            save(rgb(rng), root / split / f"{stem}.jpg")
            save(labels(rng, [*COCO_STUFF_IDS[:20], *COCO_STUFF_IDS[-5:], 255]),
                 root / "stuffthingmaps_trainval2017" / split / f"{stem}.png")
    return dict(OVERRIDES)


def coco_10k(root: Path) -> dict:
    """cocostuff-10k-v1.1: images/<id>.jpg, annotations/<id>.mat (S: 0 unlabeled, 1..182), imageLists/*.txt.

    Schema: nightrome/cocostuff10k README (.mat fields S, names, captions, ...; MATLAB indices start from 1) and
    mmsegmentation's tools/dataset_converters/coco_stuff10k.py (images/, annotations/, imageLists/{train,test}.txt)."""
    from scipy.io import savemat

    rng = _rng("coco_10k")
    for split, n in (("train", 10), ("test", 4)):
        ids = [f"COCO_train2014_{(100 * (split == 'test')) + i:012d}" for i in range(n)]
        (root / "imageLists").mkdir(parents=True, exist_ok=True)
        (root / "imageLists" / f"{split}.txt").write_text("\n".join(ids) + "\n")
        for stem in ids:
            save(rgb(rng), root / "images" / f"{stem}.jpg")
            (root / "annotations").mkdir(parents=True, exist_ok=True)
            S = labels(rng, [0, *(i + 1 for i in COCO_STUFF_IDS[:30])]).astype(np.uint16)
            savemat(root / "annotations" / f"{stem}.mat", {"S": S, "names": np.array(["x"], dtype=object)})
    return dict(OVERRIDES)


#: Scene names as the labelled set has them (<scene type>_<4 digits>); the official train and test are scene-disjoint.
NYU_SCENES = ["bedroom_0004"] * 4 + ["kitchen_0031"] * 3 + ["office_0009"] * 3 + ["living_room_0038"] * 4


def _matlab_cell_strings(f, key: str, values: list[str]) -> None:
    """A MATLAB v7.3 cell array of strings: a (1, N) dataset of object references, each to a (n_chars, 1) uint16
    array under the #refs# group (how MATLAB saves cells of char arrays to HDF5)."""
    import h5py

    refs = f.require_group("#refs#")
    ref_list = []
    for i, value in enumerate(values):
        ds = refs.create_dataset(f"{key}_{i}", data=np.array([[ord(c)] for c in value], dtype=np.uint16))
        ref_list.append(ds.ref)
    f.create_dataset(key, data=np.array([ref_list], dtype=h5py.ref_dtype))


def nyu(root: Path) -> dict:
    """nyu_depth_v2_labeled.mat (HDF5: images (N,3,W,H), labels (N,W,H), scenes), splits.mat, classMapping40.mat.

    Schema: the NYU Depth v2 page's field list of the labelled .mat (images, labels, names, scenes, sceneTypes, ...;
    "scenes - Cx1 cell array of the name of the scene from which each image was taken"), h5py loaders that read its
    images as (N, 3, W, H) and its strings as HDF5 references to uint16 arrays, splits.mat trainNdxs / testNdxs
    (1-based) and ankurhanda/nyuv2-meta-data's classMapping40.mat (mapClass: 894 raw classes -> 1..40)."""
    import h5py
    from scipy.io import savemat

    rng = _rng("nyu")
    n = len(NYU_SCENES)
    root.mkdir(parents=True, exist_ok=True)
    with h5py.File(root / "nyu_depth_v2_labeled.mat", "w") as f:
        f["images"] = np.stack([np.transpose(rgb(rng), (2, 1, 0)) for _ in range(n)])
        f["labels"] = np.stack([np.transpose(labels(rng, range(0, 30)).astype(np.uint16), (1, 0)) for _ in range(n)])
        _matlab_cell_strings(f, "scenes", NYU_SCENES)
        _matlab_cell_strings(f, "sceneTypes", [s.rsplit("_", 1)[0] for s in NYU_SCENES])
    savemat(root / "splits.mat", {"trainNdxs": np.arange(1, 11)[:, None], "testNdxs": np.arange(11, n + 1)[:, None]})
    savemat(root / "classMapping40.mat", {"mapClass": (np.arange(894) % 40 + 1)[None, :].astype(np.float64)})
    return dict(OVERRIDES)


def pascal_context(root: Path) -> dict:
    """VOCdevkit/VOC2010/JPEGImages/<id>.jpg + trainval/<id>.mat (LabelMap, 459-class ids), labels.txt, 59_labels.txt.

    Schema: trainval.tar.gz extracts to trainval/<id>.mat (LabelMap, uint16) and labels.txt ("<id>: <name>"
    lines, parsed so by Detectron2-style prepare_pascal_context_459.py scripts); 59_labels.txt is a separate
    download on the Pascal-Context page (https://cs.stanford.edu/~roozbeh/pascal-context/59_labels.txt); images
    are VOC2010's VOCtrainval_03-May-2010.tar (VOCdevkit/VOC2010/JPEGImages)."""
    from scipy.io import savemat

    rng = _rng("pascal_context")
    names = [f"class{k}" for k in range(1, 460)]
    root.mkdir(parents=True, exist_ok=True)
    (root / "labels.txt").write_text("".join(f"{k}: {name}\n" for k, name in enumerate(names, 1)))
    chosen = sorted(rng.choice(459, 59, replace=False) + 1)
    (root / "59_labels.txt").write_text("".join(f"{k}: {names[raw - 1]}\n" for k, raw in enumerate(chosen, 1)))
    for i in range(12):
        stem = f"2008_{i:06d}"
        save(rgb(rng), root / "VOCdevkit" / "VOC2010" / "JPEGImages" / f"{stem}.jpg")
        (root / "trainval").mkdir(exist_ok=True)
        savemat(root / "trainval" / f"{stem}.mat", {"LabelMap": labels(rng, [0, *chosen[:8], 3, 4]).astype(np.uint16)})
    return dict(OVERRIDES)


FIXTURES = {"ade20k": ade20k, "cityscapes": cityscapes, "coco_10k": coco_10k, "coco_164k": coco_164k, "nyu": nyu,
            "pascal_context": pascal_context}

"""Tiny local copies of the segmentation benchmarks with their sources' real schema (paths, columns, encodings)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from gate.data.benchmarks.segmentation import CITYSCAPES_IDS, COCO_STUFF_IDS

H, W = 24, 32  # small, not square: loaders must not assume a shape
OVERRIDES = {"dataset.protocol.mask_size": 32}


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
    scene_category (images as {bytes, path} structs; annotation PNG: 0 other, 1..150 classes)."""
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


def cityscapes(root: Path) -> dict:
    """leftImg8bit/<split>/<city>/<stem>_leftImg8bit.png + gtFine/<split>/<city>/<stem>_gtFine_labelIds.png."""
    rng = _rng("cityscapes")
    for split, city, n in (("train", "aachen", 10), ("val", "frankfurt", 4)):
        for i in range(n):
            stem = f"{city}_{i:06d}_000019"
            save(rgb(rng), root / "leftImg8bit" / split / city / f"{stem}_leftImg8bit.png")
            save(labels(rng, [0, 1, 4, *CITYSCAPES_IDS]), root / "gtFine" / split / city / f"{stem}_gtFine_labelIds.png")
    return dict(OVERRIDES)


def coco_164k(root: Path) -> dict:
    """train2017/*.jpg, val2017/*.jpg, stuffthingmaps_trainval2017/<split>/*.png (0-indexed ids, 255 unlabeled)."""
    rng = _rng("coco_164k")
    for split, n in (("train2017", 10), ("val2017", 4)):
        for i in range(n):
            stem = f"{1000 * (split == 'val2017') + i + 9:012d}"
            save(rgb(rng), root / split / f"{stem}.jpg")
            save(labels(rng, [*COCO_STUFF_IDS[:20], *COCO_STUFF_IDS[-5:], 255]),
                 root / "stuffthingmaps_trainval2017" / split / f"{stem}.png")
    return dict(OVERRIDES)


def coco_10k(root: Path) -> dict:
    """cocostuff-10k-v1.1: images/<id>.jpg, annotations/<id>.mat (S: 0 unlabeled, 1..182), imageLists/*.txt."""
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


def nyu(root: Path) -> dict:
    """nyu_depth_v2_labeled.mat (HDF5: images (N,3,W,H), labels (N,W,H)), splits.mat, classMapping40.mat."""
    import h5py
    from scipy.io import savemat

    rng = _rng("nyu")
    n = 14
    root.mkdir(parents=True, exist_ok=True)
    with h5py.File(root / "nyu_depth_v2_labeled.mat", "w") as f:
        f["images"] = np.stack([np.transpose(rgb(rng), (2, 1, 0)) for _ in range(n)])
        f["labels"] = np.stack([np.transpose(labels(rng, range(0, 30)).astype(np.uint16), (1, 0)) for _ in range(n)])
    savemat(root / "splits.mat", {"trainNdxs": np.arange(1, 11)[:, None], "testNdxs": np.arange(11, n + 1)[:, None]})
    savemat(root / "classMapping40.mat", {"mapClass": (np.arange(894) % 40 + 1)[None, :].astype(np.float64)})
    return dict(OVERRIDES)


def pascal_context(root: Path) -> dict:
    """VOCdevkit/VOC2010/JPEGImages/<id>.jpg + trainval/<id>.mat (LabelMap, 459-class ids), labels.txt, 59_labels.txt."""
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

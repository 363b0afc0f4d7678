"""Semantic segmentation benchmarks: ADE20K, Cityscapes, COCO-Stuff 10K and 164K, NYU Depth v2 and
Pascal-Context, each read from a local copy laid out exactly as its source (``dataset.data_dir``).

Every loader returns a ``datasets.DatasetDict`` of the source's own labelled splits (renamed by ``split_map``,
e.g. ``{"val": "test"}`` where the paper tests on the official validation split; splits the source lacks are
computed by the generic split step from ``dataset.splits``) with two columns:

* ``image``: the RGB image (an ``Image`` feature: bytes for parquet sources, the file path for folder sources);
* ``mask``: the class-id map (uint8 PNG), the source's raw labels mapped to ``0..num_classes-1`` by the
  dataset's documented class list, every other raw value (void, unlabeled, classes outside the standard set) to
  ``ignore_index`` (255), resized (nearest) to ``mask_size`` x ``mask_size`` (the paper's 256: masks of one
  batch must share a shape, and the image is resized to ``image_size`` by the encoder).

Masks are mapped once and cached under ``<cache_dir>/benchmarks/`` (see :mod:`._dense`). No loader touches
the network: ``gate-data prepare`` fetches, these read; ``source`` is the dataset config's ``source`` block, which
says what to download when the copy is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gate.stacks import require as require_stack

from ._dense import bad_copy, cached, file_stamp, lookup_table, png_bytes, read_image, remap_mask, require

IGNORE = 255

#: Cityscapes label ids of the 19 evaluated classes, in train-id order (cityscapesScripts labels.py).
CITYSCAPES_IDS = (7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31, 32, 33)
#: COCO-Stuff (0-indexed stuffthingmaps ids): 80 things in 0..89 and 91 stuff in 91..181; 11 ids unused.
COCO_UNUSED = (11, 25, 28, 29, 44, 65, 67, 68, 70, 82, 90)
COCO_STUFF_IDS = tuple(i for i in range(182) if i not in COCO_UNUSED)

MaskReader = Callable[[], np.ndarray]


def _segmentation_splits(dataset: str, rows: Mapping[str, list[tuple]], lut: np.ndarray, mask_size: int | None,
                         group_column: str | None = None):
    """{split: [(image bytes or path, mask reader, where[, group])]} -> DatasetDict of (image, mask[, group]) with
    masks mapped. ``group`` (a city, a scene) goes to ``group_column``: the split step keeps a group on one side."""
    import datasets

    columns = {"image": datasets.Image(), "mask": datasets.Image()}
    if group_column:
        columns[group_column] = datasets.Value("string")
    features = datasets.Features(columns)
    out = {}
    for split, items in rows.items():
        if not items:
            raise bad_copy(dataset, split, "the split holds no examples")
        images, masks, groups = [], [], []
        for image, read_mask, where, *group in items:
            try:
                raw = read_mask()
            except (OSError, ValueError, KeyError) as err:
                raise bad_copy(dataset, where, f"cannot read the mask ({type(err).__name__}: {err})") from err
            images.append({"bytes": image, "path": None} if isinstance(image, bytes) else {"bytes": None,
                                                                                          "path": str(image)})
            masks.append({"bytes": png_bytes(remap_mask(raw, lut, mask_size, where, dataset)), "path": None})
            groups.extend(str(g) for g in group)
        data = {"image": images, "mask": masks}
        if group_column:
            data[group_column] = groups
        out[split] = datasets.Dataset.from_dict(data, features=features)
    return datasets.DatasetDict(out)


# --------------------------------------------------------------------------------------------- ADE20K
def ade20k(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, mask_size: int | None = 256,
           config: str = "scene_parsing", split_map: Mapping[str, str] | None = None):
    """ADE20K / MIT SceneParsing (150 classes) from the parquet conversion of ``zhoubolei/scene_parse_150``:
    ``<data_dir>/<config>/<split>/*.parquet`` with columns ``image``, ``annotation`` (the class-id PNG: 0 =
    "other objects", ignored; 1..150 the classes) and ``scene_category``. The official test split has no
    annotations and is not read. (The GATE code read the red channel of the instance config as the class.)"""
    import pyarrow.parquet as pq

    split_map = dict(split_map or {"train": "train", "validation": "test"})
    root = require(data_dir, "ade20k", [f"{config}/{s}" for s in split_map], source)
    files = {s: sorted((root / config / s).glob("*.parquet")) for s in split_map}
    for s, found in files.items():
        if not found:
            raise bad_copy("ade20k", root / config / s, "no *.parquet files")
    lut = lookup_table(range(1, 151), IGNORE)

    def build():
        rows = {}
        for source, ours in split_map.items():
            items = []
            for path in files[source]:
                table = pq.read_table(path)
                missing = {"image", "annotation"} - set(table.column_names)
                if missing:
                    raise bad_copy("ade20k", path, f"no column(s) {sorted(missing)} (columns: {table.column_names})",
                                   "use the scene_parsing config of zhoubolei/scene_parse_150")
                for i, (img, ann) in enumerate(zip(table.column("image").to_pylist(),
                                                   table.column("annotation").to_pylist())):
                    if ann is None or ann.get("bytes") is None:
                        raise bad_copy("ade20k", f"{path} row {i}", "no annotation (the test split is unlabelled)",
                                       "map only labelled splits in dataset.builder.split_map")
                    items.append((img["bytes"], lambda b=ann["bytes"]: read_image(b), f"{path} row {i}"))
            rows[ours] = items
        return _segmentation_splits("ade20k", rows, lut, mask_size)

    stamp = file_stamp(p for found in files.values() for p in found)
    return cached("ade20k", {"files": stamp, "mask_size": mask_size, "split_map": split_map}, cache_dir, build)


def _image_mask_pairs(dataset: str, images: Iterable[Path], mask_of: Callable[[Path], Path], mask_name: str,
                      fix: str | None = None) -> list[tuple[Path, Path]]:
    """(image, its mask file) for each image; a missing mask is one line naming it and the image it labels."""
    pairs = []
    for image in images:
        mask = mask_of(image)
        if not mask.is_file():
            problem = f"missing ({mask_name} of {image.name})"
            raise bad_copy(dataset, mask, problem) if fix is None else bad_copy(dataset, mask, problem, fix)
        pairs.append((image, mask))
    return pairs


# ----------------------------------------------------------------------------------------- Cityscapes
def cityscapes(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, mask_size: int | None = 256,
               split_map: Mapping[str, str] | None = None):
    """Cityscapes fine annotations, official layout (cityscapesScripts README: ``{root}/{type}/{split}/{city}/
    {city}_{seq}_{frame}_{type}{ext}``): ``leftImg8bit/<split>/<city>/<stem>_leftImg8bit.png`` and
    ``gtFine/<split>/<city>/<stem>_gtFine_labelIds.png``; the 34 label ids map to the 19 train ids, the rest to
    255. The official test labels are withheld, so the paper tests on ``val`` (``split_map``). A ``city`` column
    (the folder under the split) lets the split step carve val from train by city, as the official splits are."""
    split_map = dict(split_map or {"train": "train", "val": "test"})
    root = require(data_dir, "cityscapes", [f"{d}/{s}" for d in ("leftImg8bit", "gtFine") for s in split_map],
                   source)
    lut = lookup_table(CITYSCAPES_IDS, IGNORE)
    pairs = {split: _image_mask_pairs(
        "cityscapes", sorted((root / "leftImg8bit" / split).glob("*/*_leftImg8bit.png")),
        lambda image, s=split: root / "gtFine" / s / image.parent.name / image.name.replace(
            "_leftImg8bit.png", "_gtFine_labelIds.png"),
        "the label map", "extract gtFine_trainvaltest.zip next to leftImg8bit/") for split in split_map}

    def build():
        rows = {ours: [(image, lambda m=mask: read_image(m), str(mask), image.parent.name)
                       for image, mask in pairs[source]] for source, ours in split_map.items()}
        return _segmentation_splits("cityscapes", rows, lut, mask_size, group_column="city")

    stamp = file_stamp(p for found in pairs.values() for pair in found for p in pair)
    return cached("cityscapes", {"files": stamp, "mask_size": mask_size, "split_map": split_map}, cache_dir, build)


# ----------------------------------------------------------------------------------------- COCO-Stuff
def coco_164k(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, mask_size: int | None = 256,
              split_map: Mapping[str, str] | None = None):
    """COCO-Stuff 164K, official layout: ``train2017/*.jpg``, ``val2017/*.jpg`` (COCO 2017 images) and
    ``stuffthingmaps_trainval2017/{train2017,val2017}/*.png`` (0-indexed ids 0..181, 255 unlabeled); the 171
    used ids map to classes 0..170. The paper tests on ``val2017``."""
    split_map = dict(split_map or {"train2017": "train", "val2017": "test"})
    root = require(data_dir, "coco_164k", [*split_map, *(f"stuffthingmaps_trainval2017/{s}" for s in split_map)],
                   source)
    lut = lookup_table(COCO_STUFF_IDS, IGNORE)
    pairs = {split: _image_mask_pairs(
        "coco_164k", sorted((root / split).glob("*.jpg")),
        lambda image, s=split: root / "stuffthingmaps_trainval2017" / s / f"{image.stem}.png",
        "the stuffthingmap") for split in split_map}

    def build():
        rows = {ours: [(image, lambda m=mask: read_image(m), str(mask)) for image, mask in pairs[source]]
                for source, ours in split_map.items()}
        return _segmentation_splits("coco_164k", rows, lut, mask_size)

    stamp = file_stamp(p for found in pairs.values() for pair in found for p in pair)
    return cached("coco_164k", {"files": stamp, "mask_size": mask_size, "split_map": split_map}, cache_dir, build)


def coco_10k(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, mask_size: int | None = 256,
             split_map: Mapping[str, str] | None = None):
    """COCO-Stuff 10K v1.1, official layout (cocostuff-10k-v1.1.zip): ``images/<id>.jpg``,
    ``annotations/<id>.mat`` (MATLAB, key ``S``: 0 unlabeled, 1..182 = stuffthingmaps id + 1) and
    ``imageLists/{train,test}.txt`` (9000 / 1000 ids); the 171 used ids map to classes 0..170."""
    from scipy.io import loadmat

    split_map = dict(split_map or {"train": "train", "test": "test"})
    root = require(data_dir, "coco_10k", ["images", "annotations", *(f"imageLists/{s}.txt" for s in split_map)],
                   source)
    lut = lookup_table([i + 1 for i in COCO_STUFF_IDS], IGNORE)
    lists = {s: root / "imageLists" / f"{s}.txt" for s in split_map}
    pairs = {}
    for split, listing in lists.items():
        pairs[split] = []
        for stem in (line.strip() for line in listing.read_text().splitlines()):
            if not stem:
                continue
            image, mask = root / "images" / f"{stem}.jpg", root / "annotations" / f"{stem}.mat"
            for path in (image, mask):
                if not path.is_file():
                    raise bad_copy("coco_10k", path, f"missing (listed in imageLists/{split}.txt)")
            pairs[split].append((image, mask))

    def read(path: Path) -> np.ndarray:
        mat = loadmat(path)
        if "S" not in mat:
            raise KeyError(f"no 'S' label map in {path.name} (keys: {sorted(k for k in mat if not k.startswith('_'))})")
        return mat["S"]

    def build():
        rows = {ours: [(image, lambda m=mask: read(m), str(mask)) for image, mask in pairs[source]]
                for source, ours in split_map.items()}
        return _segmentation_splits("coco_10k", rows, lut, mask_size)

    stamp = file_stamp([*lists.values(), *(p for found in pairs.values() for pair in found for p in pair)])
    return cached("coco_10k", {"files": stamp, "mask_size": mask_size, "split_map": split_map}, cache_dir, build)


# ------------------------------------------------------------------------------------------ NYU v2
def _matlab_strings(f, key: str) -> list[str]:
    """A MATLAB v7.3 cell array of strings (``f[key]``: HDF5 object references, each to a (n_chars, 1) uint16
    array of UTF-16 code units, stored under ``#refs#``) as Python strings, one per cell."""
    return ["".join(chr(int(c)) for c in np.asarray(f[ref]).ravel()) for ref in np.asarray(f[key]).ravel()]


def nyu(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, mask_size: int | None = 256,
        split_map: Mapping[str, str] | None = None):
    """NYU Depth v2 labelled set, 40 classes (Gupta et al. 2013): ``nyu_depth_v2_labeled.mat`` (MATLAB v7.3 /
    HDF5: ``images`` (N, 3, W, H), ``labels`` (N, W, H) with 894 raw classes, 0 unlabeled, and ``scenes``, the
    name of the scene each image was taken in, e.g. ``kitchen_0004``), ``splits.mat`` (``trainNdxs``,
    ``testNdxs``: the official 795 / 654, 1-based) and ``classMapping40.mat`` (``mapClass``: raw class ->
    1..40). Unlabeled pixels are 255 (the GATE code used -1). A ``scene`` column lets the split step carve val
    from train by scene: the frames of one scene are near-duplicates."""
    require_stack("volumes")
    import h5py
    from scipy.io import loadmat

    split_map = dict(split_map or {"train": "train", "test": "test"})
    names = ("nyu_depth_v2_labeled.mat", "splits.mat", "classMapping40.mat")
    root = require(data_dir, "nyu", names, source)
    try:
        index = {s: np.asarray(loadmat(root / "splits.mat")[f"{s}Ndxs"]).ravel().astype(int) - 1 for s in split_map}
        mapping = np.asarray(loadmat(root / "classMapping40.mat")["mapClass"]).ravel().astype(int)
    except KeyError as err:
        raise bad_copy("nyu", root, f"splits.mat / classMapping40.mat lack the key {err}") from err
    lut = np.full(65536, IGNORE, dtype=np.int64)
    lut[1:1 + mapping.size] = np.where(mapping >= 1, mapping - 1, IGNORE)  # raw class k (1-based) -> 40-class id

    def build():
        with h5py.File(root / names[0], "r") as f:
            for key in ("images", "labels", "scenes"):
                if key not in f:
                    raise bad_copy("nyu", root / names[0], f"no {key!r} array (keys: {sorted(f)})")
            images, labels = f["images"], f["labels"]
            scenes = _matlab_strings(f, "scenes")
            if len(scenes) != images.shape[0]:
                raise bad_copy("nyu", root / names[0], f"{len(scenes)} scene names for {images.shape[0]} images")
            rows = {}
            for source, ours in split_map.items():
                if index[source].size and (index[source].min() < 0 or index[source].max() >= images.shape[0]):
                    raise bad_copy("nyu", root / "splits.mat", f"{source}Ndxs points past the {images.shape[0]} images")
                items = []
                for i in index[source]:
                    rgb = np.ascontiguousarray(np.transpose(images[int(i)], (2, 1, 0)))  # (3, W, H) -> (H, W, 3)
                    raw = np.ascontiguousarray(np.transpose(labels[int(i)], (1, 0)))
                    items.append((png_bytes(rgb), lambda r=raw: r, f"{names[0]} image {i + 1}", scenes[int(i)]))
                rows[ours] = items
        return _segmentation_splits("nyu", rows, lut, mask_size, group_column="scene")

    stamp = file_stamp([root / n for n in names])
    return cached("nyu", {"files": stamp, "mask_size": mask_size, "split_map": split_map}, cache_dir, build)


# ------------------------------------------------------------------------------------- Pascal-Context
def _label_names(path: Path) -> dict[int, str]:
    """``labels.txt`` / ``59_labels.txt`` lines ``<id>: <name>``."""
    out = {}
    for line in path.read_text().splitlines():
        match = re.match(r"\s*(\d+)\s*:\s*(.+?)\s*$", line)
        if match:
            out[int(match.group(1))] = match.group(2)
    if not out:
        raise bad_copy("pascal_context", path, "no '<id>: <name>' lines")
    return out


#: The class-name files the Pascal-Context loader reads, and the download (a ``source.urls`` entry's file name)
#: each comes from: labels.txt ships inside the annotation tarball, 59_labels.txt is its own file on the page.
PASCAL_CONTEXT_LABEL_FILES = {"labels.txt": "trainval.tar.gz", "59_labels.txt": "59_labels.txt"}
#: 59_labels.txt names spelt otherwise in labels.txt, and the labels.txt name of each: the FCN reference data layer
#: (shelhamer/fcn.berkeleyvision.org, pascalcontext_layers.py) maps them so, after dropping the spaces of both lists.
PASCAL_CONTEXT_RENAMES = {"diningtable": "table", "bedcloth": "bedclothes", "clothes": "cloth"}
#: The labels.txt ids of the 59 classes, as the Detail-API converters map them (the ``_mapping`` of
#: mmsegmentation's tools/dataset_converters/pascal_context.py, less 0): the name mapping must land on these.
PASCAL_CONTEXT_59_IDS = frozenset((2, 9, 18, 19, 22, 23, 25, 31, 33, 34, 44, 45, 46, 59, 65, 68, 72, 80, 85, 98, 104,
                                   105, 113, 115, 144, 158, 159, 162, 187, 189, 207, 220, 232, 258, 259, 260, 284, 295,
                                   296, 308, 324, 326, 347, 349, 354, 355, 360, 366, 368, 397, 415, 416, 420, 424, 427,
                                   440, 445, 454, 458))


def _pascal_context_ids(full: Mapping[int, str], short: Mapping[int, str], where: Path) -> list[int]:
    """The labels.txt id of each 59_labels.txt class, in 59_labels.txt order: names compared without spaces, the
    three the lists spell differently through :data:`PASCAL_CONTEXT_RENAMES` (as the FCN reference does). Lists
    that do not give the standard 59 ids are one line naming the file: the numbers would not be Pascal-Context 59."""
    def key(name: str) -> str:
        return name.replace(" ", "")

    by_name = {key(name): raw for raw, name in full.items()}
    names = [key(short[k]) for k in sorted(short)]
    unknown = [n for n in names if PASCAL_CONTEXT_RENAMES.get(n, n) not in by_name]
    fix = ("use the 59_labels.txt of the Pascal-Context page and the labels.txt of its trainval.tar.gz (459 names), "
           "unedited")
    if unknown:
        raise bad_copy("pascal_context", where, f"names {unknown[:3]} are not in labels.txt (nor renamed there: "
                       f"{PASCAL_CONTEXT_RENAMES})", fix)
    ids = [by_name[PASCAL_CONTEXT_RENAMES.get(n, n)] for n in names]
    if set(ids) != PASCAL_CONTEXT_59_IDS or len(ids) != len(PASCAL_CONTEXT_59_IDS):
        odd = sorted(set(ids) ^ PASCAL_CONTEXT_59_IDS)
        raise bad_copy("pascal_context", where, f"its {len(ids)} names map to labels.txt ids that are not the standard "
                       f"59 (differing: {odd[:5]})", fix)
    return ids


def pascal_context(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None,
                   mask_size: int | None = 256):
    """Pascal-Context, 59 classes (the standard set; background and the other 400 classes ignored), official
    layout: VOC2010 images ``VOCdevkit/VOC2010/JPEGImages/<id>.jpg`` and the annotation tarball (trainval.tar.gz)
    ``trainval/<id>.mat`` (key ``LabelMap``: 459-class ids) with ``labels.txt`` (459 names), and
    ``59_labels.txt`` (downloaded on its own, :data:`PASCAL_CONTEXT_LABEL_FILES`), whose order is the class order
    (:func:`_pascal_context_ids`). The tarball has one labelled pool, returned as ``train``; val and test come from
    ``dataset.splits``."""
    from scipy.io import loadmat

    root = require(data_dir, "pascal_context", ["VOCdevkit/VOC2010/JPEGImages", "trainval",
                                                *PASCAL_CONTEXT_LABEL_FILES], source)
    ids = _pascal_context_ids(_label_names(root / "labels.txt"), _label_names(root / "59_labels.txt"),
                             root / "59_labels.txt")
    lut = lookup_table(ids, IGNORE)
    pairs = []
    for mask in sorted((root / "trainval").glob("*.mat")):
        image = root / "VOCdevkit" / "VOC2010" / "JPEGImages" / f"{mask.stem}.jpg"
        if not image.is_file():
            raise bad_copy("pascal_context", image, f"missing (the image of {mask.name})")
        pairs.append((image, mask))

    def build():
        items = [(image, lambda m=mask: loadmat(m)["LabelMap"], str(mask)) for image, mask in pairs]
        return _segmentation_splits("pascal_context", {"train": items}, lut, mask_size)

    stamp = file_stamp([*(root / n for n in PASCAL_CONTEXT_LABEL_FILES), *(p for pair in pairs for p in pair)])
    return cached("pascal_context", {"files": stamp, "mask_size": mask_size}, cache_dir, build)

"""Medical multi-label classification benchmarks: CheXpert (Stanford registration), Diabetic Retinopathy and
HAM10000 (Kaggle). Each reads the source's own CSV and image files from a local copy; targets are multi-hot
vectors (``labels``) and a ``patient``/``lesion`` column groups the images of one person or lesion, so that the
split manifest never puts two images of the same patient on both sides of a split."""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import DatasetUnavailable, GateError
from ..hub import how_to_get, require_columns

if TYPE_CHECKING:
    import datasets

CHEXPERT_FINDINGS = ("Cardiomegaly", "Edema", "Consolidation", "Atelectasis", "Pleural Effusion")
HAM10K_CLASSES = ("akiec", "bcc", "bkl", "df", "mel", "nv", "vasc")


def _read_csv(key: str, path: Path, need: Sequence[str], source: Mapping[str, Any]) -> list[dict[str, str]]:
    if not path.is_file():
        raise DatasetUnavailable(f"dataset {key!r}: {path} is not on disk; {how_to_get(key, source, path.parent)}")
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        require_columns(key, path.stem, path, reader.fieldnames or [], need, source)
    if not rows:
        raise GateError(f"dataset {key!r}: {path} has no rows")
    return rows


def _table(images: list[str], labels: np.ndarray, groups: list[str], group_name: str) -> datasets.Dataset:
    import datasets  # imported where used: reading a dataset config need not load it
    features = datasets.Features({"image": datasets.Image(), "labels": datasets.List(datasets.Value("float32")),
                                  group_name: datasets.Value("string")})
    return datasets.Dataset.from_dict({"image": images, "labels": labels.tolist(), group_name: groups},
                                      features=features)


def _check_images(key: str, images: list[str], source: Mapping[str, Any], root: Path) -> None:
    missing = next((p for p in images if not Path(p).is_file()), None)
    if missing:
        raise DatasetUnavailable(f"dataset {key!r}: image {missing} (listed in the source CSV) is not on disk; "
                                 f"the local copy is incomplete: {how_to_get(key, source, root)}")


def chexpert(data_dir: str | os.PathLike | None, source: Mapping[str, Any], name: str = "chexpert",
             findings: Sequence[str] = CHEXPERT_FINDINGS, uncertain_as_positive: Sequence[str] = ("Atelectasis", "Edema"),
             cache_dir: str | None = None) -> datasets.DatasetDict:
    """CheXpert-v1.0-small as Stanford distributes it: ``<data_dir>/CheXpert-v1.0-small/{train,valid}.csv`` whose
    ``Path`` column (``CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg``) is relative to
    ``data_dir``. Targets: the five competition findings; uncertain labels (-1) are positive for
    ``uncertain_as_positive`` (U-Ones) and negative otherwise (U-Zeros), blanks negative (Irvin et al. 2019).
    Splits ``train`` and ``validation`` (valid.csv, the radiologist-labelled set)."""
    import datasets  # imported where used: reading a dataset config need not load it
    root = Path(data_dir or "")
    base = root / "CheXpert-v1.0-small"
    if not data_dir or not base.is_dir():
        raise DatasetUnavailable(f"dataset {name!r} is not on disk (no CheXpert-v1.0-small/ in {root}); "
                                 f"{how_to_get(name, source, root)}")
    out = {}
    for split, file in (("train", "train.csv"), ("validation", "valid.csv")):
        rows = _read_csv(name, base / file, ["Path", *findings], source)
        images = [str(root / r["Path"]) for r in rows]
        _check_images(name, images[:1], source, root)
        labels = np.zeros((len(rows), len(findings)), dtype=np.float32)
        for j, finding in enumerate(findings):
            for i, r in enumerate(rows):
                value = r[finding].strip()
                v = float(value) if value else 0.0
                labels[i, j] = 1.0 if v == 1.0 or (v == -1.0 and finding in uncertain_as_positive) else 0.0
        patients = [Path(r["Path"]).parts[2] if len(Path(r["Path"]).parts) > 2 else r["Path"] for r in rows]
        out[split] = _table(images, labels, patients, "patient")
    return datasets.DatasetDict(out)


def diabetic_retinopathy(data_dir: str | os.PathLike | None, source: Mapping[str, Any],
                         name: str = "diabetic_retinopathy", labels_csv: str = "trainLabels.csv",
                         image_dir: str = "resized_train/resized_train", extension: str = ".jpeg",
                         num_grades: int = 5, cache_dir: str | None = None) -> datasets.DatasetDict:
    """Kaggle ``tanlikesmath/diabetic-retinopathy-resized``: ``trainLabels.csv`` (``image``, ``level`` 0-4) and the
    images under ``resized_train/resized_train/<image>.jpeg``. Target: the grade one-hot (GATE scores it as
    multi-label, AUC per grade). One source split (``train``); ``patient`` (the id before ``_left``/``_right``)
    groups a person's two eyes."""
    import datasets  # imported where used: reading a dataset config need not load it
    root = Path(data_dir or "")
    if not data_dir or not root.is_dir():
        raise DatasetUnavailable(f"dataset {name!r} is not on disk (no local copy at {root}); "
                                 f"{how_to_get(name, source, root)}")
    rows = _read_csv(name, root / labels_csv, ["image", "level"], source)
    images = [str(root / image_dir / f"{r['image']}{extension}") for r in rows]
    _check_images(name, images[:1], source, root)
    levels = np.asarray([int(r["level"]) for r in rows])
    if levels.min() < 0 or levels.max() >= num_grades:
        raise GateError(f"dataset {name!r}: {labels_csv} has grades {levels.min()}..{levels.max()}, expected 0..{num_grades - 1}")
    patients = [r["image"].rsplit("_", 1)[0] for r in rows]
    return datasets.DatasetDict({"train": _table(images, np.eye(num_grades, dtype=np.float32)[levels], patients, "patient")})


def ham10k(data_dir: str | os.PathLike | None, source: Mapping[str, Any], name: str = "ham10k",
           metadata_csv: str = "HAM10000_metadata.csv",
           image_dirs: Sequence[str] = ("HAM10000_images_part_1", "HAM10000_images_part_2"),
           classes: Sequence[str] = HAM10K_CLASSES, cache_dir: str | None = None) -> datasets.DatasetDict:
    """Kaggle ``kmader/skin-cancer-mnist-ham10000``: ``HAM10000_metadata.csv`` (``lesion_id``, ``image_id``,
    ``dx``, ...) and ``<image_id>.jpg`` in ``HAM10000_images_part_1/`` or ``_part_2/``. Target: the diagnosis one-hot
    over the 7 classes; ``lesion`` groups the images of one lesion. One source split (``train``)."""
    import datasets  # imported where used: reading a dataset config need not load it
    root = Path(data_dir or "")
    if not data_dir or not root.is_dir():
        raise DatasetUnavailable(f"dataset {name!r} is not on disk (no local copy at {root}); "
                                 f"{how_to_get(name, source, root)}")
    rows = _read_csv(name, root / metadata_csv, ["lesion_id", "image_id", "dx"], source)
    where = {}
    for folder in image_dirs:
        if (root / folder).is_dir():
            where.update({p.stem: str(p) for p in (root / folder).glob("*.jpg")})
    missing = next((r["image_id"] for r in rows if r["image_id"] not in where), None)
    if missing:
        raise DatasetUnavailable(f"dataset {name!r}: image {missing}.jpg (listed in {metadata_csv}) is in none of "
                                 f"{list(image_dirs)} under {root}; {how_to_get(name, source, root)}")
    lookup = {c: i for i, c in enumerate(classes)}
    bad = sorted({r["dx"] for r in rows} - set(lookup))
    if bad:
        raise GateError(f"dataset {name!r}: {metadata_csv} has diagnoses {bad} outside the classes {list(classes)}")
    index = np.asarray([lookup[r["dx"]] for r in rows])
    return datasets.DatasetDict({"train": _table([where[r["image_id"]] for r in rows],
                                                 np.eye(len(classes), dtype=np.float32)[index],
                                                 [r["lesion_id"] for r in rows], "lesion")})

"""Medical multi-label fixtures: CheXpert-v1.0-small (CSV + JPEGs), Diabetic Retinopathy and HAM10000 (Kaggle)."""

from __future__ import annotations

import csv
from pathlib import Path

from . import jpeg_file

CHEXPERT_COLUMNS = ["Path", "Sex", "Age", "Frontal/Lateral", "AP/PA", "No Finding", "Enlarged Cardiomediastinum",
                    "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema", "Consolidation", "Pneumonia", "Atelectasis",
                    "Pneumothorax", "Pleural Effusion", "Pleural Other", "Fracture", "Support Devices"]


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def chexpert(root: Path) -> dict:
    """CheXpert-v1.0-small/{train,valid}.csv + the JPEGs their Path column names.

    Schema: the columns of CheXpert-v1.0-small's CSVs (Path, Sex, Age, Frontal/Lateral, AP/PA, 14 observations:
    1.0 positive, 0.0 negative, -1.0 uncertain, blank unmentioned) and Path values relative to the archive's parent,
    as public loaders read them (kamenbliznashki/chexpert dataset.py, ChexpertSmall)."""
    values = ["1.0", "0.0", "-1.0", ""]
    for split, file, n, off in (("train", "train.csv", 20, 0), ("valid", "valid.csv", 6, 500)):
        rows = []
        for i in range(n):
            rel = f"CheXpert-v1.0-small/{split}/patient{off + i // 2:05d}/study1/view{i % 2 + 1}_frontal.jpg"
            jpeg_file(root / rel, off + i)
            findings = {c: values[(i + k) % 4] for k, c in enumerate(CHEXPERT_COLUMNS[5:])}
            rows.append([rel, "Female", "60", "Frontal", "AP", *findings.values()])
        _write_csv(root / "CheXpert-v1.0-small" / file, CHEXPERT_COLUMNS, rows)
    return {}


def diabetic_retinopathy(root: Path) -> dict:
    """trainLabels.csv (image, level) + resized_train/resized_train/<image>.jpeg.

    Schema: the Kaggle 2015 competition's trainLabels.csv columns (image, e.g. 10_left; level 0-4) and the resized
    copy's folder, as the GATE code's loader read it (gate/data/medical/classification/diabetic_retinopathy.py in
    AntreasAntoniou/GATE). Two eyes per patient: the split must group by patient."""
    rows = []
    for i in range(40):
        name = f"{i // 2 + 10}_{'left' if i % 2 == 0 else 'right'}"
        jpeg_file(root / "resized_train" / "resized_train" / f"{name}.jpeg", i)
        rows.append([name, i % 5])
    _write_csv(root / "trainLabels.csv", ["image", "level"], rows)
    return {}


def ham10k(root: Path) -> dict:
    """HAM10000_metadata.csv + HAM10000_images_part_{1,2}/<image_id>.jpg.

    Schema: the Kaggle copy's metadata columns (lesion_id, image_id, dx, dx_type, age, sex, localization) and image
    folders, as the GATE code's loader (gate/data/medical/classification/ham10k.py) and public loaders read them.
    Several images per lesion: the split must group by lesion. 50 lesions, so that GATE's 80/5/15 split leaves a
    validation split of at least two lesions of different diagnoses (AUC needs a positive and a negative)."""
    dx = ["akiec", "bcc", "bkl", "df", "mel", "nv", "vasc"]
    rows = []
    for i in range(100):
        image_id = f"ISIC_{24306 + i:07d}"
        jpeg_file(root / f"HAM10000_images_part_{1 + i % 2}" / f"{image_id}.jpg", i)
        rows.append([f"HAM_{i // 2:07d}", image_id, dx[(i // 2) % 7], "histo", "50.0", "male", "back"])
    _write_csv(root / "HAM10000_metadata.csv", ["lesion_id", "image_id", "dx", "dx_type", "age", "sex", "localization"], rows)
    return {}


FIXTURES = {"chexpert": chexpert, "diabetic_retinopathy": diabetic_retinopathy, "ham10k": ham10k}

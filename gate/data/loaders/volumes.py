"""ACDC (Automated Cardiac Diagnosis Challenge, Bernard et al. 2018): cine-MRI volumes sliced for training and
scored per volume (:class:`gate.adapters.segmentation.MedicalSegmentationAdapter`).

Official layout (the challenge's ``database`` folder, NIfTI): ``database/<training|testing>/patientNNN/
patientNNN_frameFF.nii.gz`` with its label volume ``patientNNN_frameFF_gt.nii.gz`` (0 background, 1 right
ventricle, 2 myocardium, 3 left ventricle) for the end-diastolic and end-systolic frames. Every labelled frame is
one volume; each of its slices is a row: ``image`` (the slice, intensities scaled per volume to 0..255 between
its 0.5th and 99.5th percentiles), ``mask`` (the slice's labels), ``volume`` (id = patient * 100 + frame),
``patient`` (the patient number: the split step keeps a patient's two frames, near-identical hearts, on one
side) and ``slice`` (index along z). Slices are resized to ``size`` x ``size`` (nearest for labels) so a
volume's slices and a batch share one shape. Built once under ``<cache_dir>/benchmarks/``, keyed by every
volume read (images and labels). The layout is the one nnU-Net's ACDC conversion reads
(``nnunetv2/dataset_conversion/Dataset027_ACDC.py``: ``training``/``testing``, ``patientNNN/`` folders, ``_gt``
label volumes, a ``_4d`` cine volume that is not read here).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from gate.stacks import require as require_stack

from ._dense import bad_copy, cached, file_stamp, png_bytes, require

FRAME = re.compile(r"patient(\d+)_frame(\d+)_gt\.nii(\.gz)?$")
NUM_CLASSES = 4


def _scaled(volume: np.ndarray) -> np.ndarray:
    low, high = np.percentile(volume, [0.5, 99.5])
    return np.clip((volume - low) / max(high - low, 1e-6) * 255.0, 0, 255).astype(np.uint8)


def acdc(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, size: int | None = 256,
         split_map=None):
    """ACDC from its official ``database`` folder (module docstring); ``split_map`` renames the source's
    ``training`` / ``testing`` folders (default: train / test; val comes from ``dataset.splits``, by patient)."""
    require_stack("volumes")
    import datasets
    import nibabel
    from PIL import Image

    split_map = dict(split_map or {"training": "train", "testing": "test"})
    root = require(data_dir, "acdc", [f"database/{s}" for s in split_map], source)
    labels = {s: sorted((root / "database" / s).glob("patient*/patient*_frame*_gt.nii*")) for s in split_map}
    volumes = {}
    for folder, found in labels.items():
        if not found:
            raise bad_copy("acdc", root / "database" / folder, "holds no patient*/patient*_frame*_gt.nii.gz")
        for gt in found:
            image_path = gt.with_name(gt.name.replace("_gt.nii", ".nii"))
            if FRAME.search(gt.name) is None or not image_path.is_file():
                raise bad_copy("acdc", image_path, f"missing (the image volume of {gt.name})")
            volumes[gt] = image_path

    def resized(array: np.ndarray, resample) -> np.ndarray:
        return np.asarray(Image.fromarray(array).resize((size, size), resample)) if size else array

    def build():
        out = {}
        for source, ours in split_map.items():
            images, masks, volume_ids, patients, slices = [], [], [], [], []
            for gt in labels[source]:
                match = FRAME.search(gt.name)
                image = np.asarray(nibabel.load(str(volumes[gt])).dataobj, dtype=np.float32)
                label = np.rint(np.asarray(nibabel.load(str(gt)).dataobj)).astype(np.int64)
                if image.shape != label.shape or image.ndim != 3:
                    raise bad_copy("acdc", gt, f"label shape {label.shape} does not match image shape {image.shape}")
                if label.min() < 0 or label.max() >= NUM_CLASSES:
                    raise bad_copy("acdc", gt, f"labels in [{label.min()}, {label.max()}], expected 0..{NUM_CLASSES - 1}")
                scaled = _scaled(image)
                patient = int(match.group(1))
                volume_id = patient * 100 + int(match.group(2))
                for z in range(image.shape[2]):
                    images.append({"bytes": png_bytes(resized(scaled[:, :, z].T.copy(), Image.BILINEAR)), "path": None})
                    masks.append({"bytes": png_bytes(resized(label[:, :, z].T.astype(np.uint8).copy(), Image.NEAREST)),
                                  "path": None})
                    volume_ids.append(volume_id)
                    patients.append(patient)
                    slices.append(z)
            features = datasets.Features({"image": datasets.Image(), "mask": datasets.Image(),
                                          "volume": datasets.Value("int64"), "patient": datasets.Value("int64"),
                                          "slice": datasets.Value("int64")})
            out[ours] = datasets.Dataset.from_dict({"image": images, "mask": masks, "volume": volume_ids,
                                                    "patient": patients, "slice": slices}, features=features)
        return datasets.DatasetDict(out)

    stamp = file_stamp([*volumes, *volumes.values()])
    return cached("acdc", {"files": stamp, "size": size, "split_map": split_map}, cache_dir, build)




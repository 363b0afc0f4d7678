"""A tiny local copy of ACDC's official database layout (NIfTI volumes with *_gt labels)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def acdc(root: Path, patients=(("training", range(1, 9)), ("testing", range(101, 103)))) -> dict:
    """database/<training|testing>/patientNNN/patientNNN_frameFF.nii.gz + _gt.nii.gz (0..3) + _4d.nii.gz + Info.cfg.

    Schema: nnU-Net's ACDC conversion (MIC-DKFZ/nnUNet nnunetv2/dataset_conversion/Dataset027_ACDC.py) reads
    ``training``/``testing`` folders of ``patientNNN/`` with ``*_gt`` label volumes (0 background, 1 RV,
    2 myocardium, 3 LV) next to their frames and skips the ``*_4d`` cine volume; the ED/ES frame numbers come
    from Info.cfg (challenge page: https://www.creatis.insa-lyon.fr/Challenge/acdc/databases.html). Two
    labelled frames per patient: the grouped split must keep both on one side."""
    import nibabel

    rng = np.random.default_rng(7)
    for folder, numbers in patients:
        for p in numbers:
            d = root / "database" / folder / f"patient{p:03d}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "Info.cfg").write_text("ED: 1\nES: 7\nGroup: NOR\nHeight: 180.0\nNbFrame: 30\nWeight: 80.0\n")
            cine = rng.normal(300, 80, (20, 16, 3, 8)).astype(np.int16)  # the 4-D cine: not read by the loader
            nibabel.save(nibabel.Nifti1Image(cine, np.eye(4)), str(d / f"patient{p:03d}_4d.nii.gz"))
            for frame in (1, 7):
                image = rng.normal(300, 80, (20, 16, 3)).astype(np.int16)
                label = np.zeros((20, 16, 3), np.uint8)
                label[5:12, 4:10, :] = rng.integers(0, 4, (7, 6, 3))
                for array, suffix in ((image, ""), (label, "_gt")):
                    nibabel.save(nibabel.Nifti1Image(array, np.eye(4)), str(d / f"patient{p:03d}_frame{frame:02d}{suffix}.nii.gz"))
    return {"dataset.paper_protocol.mask_size": 32}


FIXTURES = {"acdc": acdc}

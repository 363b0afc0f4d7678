"""A tiny local copy of ACDC's official database layout (NIfTI volumes with *_gt labels)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def acdc(root: Path, patients=(("training", range(1, 9)), ("testing", range(101, 103)))) -> dict:
    """database/<training|testing>/patientNNN/patientNNN_frameFF.nii.gz + _gt.nii.gz (0..3) + Info.cfg."""
    import nibabel

    rng = np.random.default_rng(7)
    for folder, numbers in patients:
        for p in numbers:
            d = root / "database" / folder / f"patient{p:03d}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "Info.cfg").write_text("ED: 1\nES: 7\nGroup: NOR\nHeight: 180.0\nNbFrame: 30\nWeight: 80.0\n")
            for frame in (1, 7):
                image = rng.normal(300, 80, (20, 16, 3)).astype(np.int16)
                label = np.zeros((20, 16, 3), np.uint8)
                label[5:12, 4:10, :] = rng.integers(0, 4, (7, 6, 3))
                for array, suffix in ((image, ""), (label, "_gt")):
                    nibabel.save(nibabel.Nifti1Image(array, np.eye(4)), str(d / f"patient{p:03d}_frame{frame:02d}{suffix}.nii.gz"))
    return {"dataset.protocol.mask_size": 32}


FIXTURES = {"acdc": acdc}

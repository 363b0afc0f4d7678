"""Tiny local copies of CLEVR v1.0 and CLEVR-Math with their sources' real layout and JSON schema."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .segmentation import rgb, save

CLEVR_QA = [("How many red cubes are there?", "2"), ("Is there a metal sphere?", "yes"),
            ("What color is the large cylinder?", "cyan"), ("What shape is the small thing?", "cube"),
            ("What size is the red cube?", "large"), ("What material is the sphere?", "rubber"),
            ("How many objects are there?", "5"), ("Are there any cylinders?", "no")]


def _images(root: Path, split: str, n: int, rng) -> list[str]:
    names = [f"CLEVR_{split}_{i:06d}.png" for i in range(n)]
    for name in names:
        save(rgb(rng), root / "CLEVR_v1.0" / "images" / split / name)
    return names


def clevr(root: Path) -> dict:
    """CLEVR_v1.0/images/<split>/*.png + CLEVR_v1.0/questions/CLEVR_<split>_questions.json.

    Schema: CLEVR_v1.0/README.txt (QUESTION FILE FORMAT: {"info", "questions": [{split, image_index, image_filename,
    question, answer, program, question_family_index}]}) and facebookresearch/clevr-dataset-gen
    question_generation/generate_questions.py. Several questions per image: the split must group by image."""
    rng = np.random.default_rng(5)
    for split, n in (("train", 6), ("val", 3)):
        names = _images(root, split, n, rng)
        questions = [{"image_index": i % n, "image_filename": names[i % n], "split": split, "question": q, "answer": a,
                      "question_family_index": i, "program": []} for i, (q, a) in enumerate(CLEVR_QA * 2)]
        path = root / "CLEVR_v1.0" / "questions" / f"CLEVR_{split}_questions.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"info": {"split": split, "version": "1.0"}, "questions": questions}))
    return {}


def clevr_math(root: Path) -> dict:
    """clevr-math-{train,val,test}.json ({"questions": [...]}) + CLEVR_v1.0 images + test_images/.

    Schema: the hub repo's loading script (dali-does/clevr-math clevr-math.py): json['questions'] rows with split,
    image_filename, question, answer (an int), template_filename; the image at <extracted>/CLEVR_v1.0/images/
    <split>/<image_filename>, CLEVR_v1.0.zip for train/val and data/clevr-math-test-images.zip for test."""
    rng = np.random.default_rng(6)
    for split, n in (("train", 8), ("val", 3), ("test", 3)):
        base = root / "test_images" if split == "test" else root
        image_split = "val" if split == "test" else split
        names = _images(base, image_split, n, rng) if split != "val" else _images(root, "val", n, rng)
        questions = [{"split": image_split, "image_filename": names[i % n], "image_index": i % n,
                      "question": f"Subtract all red cubes. How many objects are left? ({i})", "answer": int(i % 11),
                      "template_filename": "subtraction.json"} for i in range(2 * n)]
        root.mkdir(parents=True, exist_ok=True)
        (root / f"clevr-math-{split}.json").write_text(json.dumps({"info": {}, "questions": questions}))
    return {}


FIXTURES = {"clevr": clevr, "clevr_math": clevr_math}

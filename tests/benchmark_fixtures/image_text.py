"""Image-text fixtures: Flickr30K (parquet conversion), NYCC (matching config), Winoground (gated parquet)."""

from __future__ import annotations

from pathlib import Path

from . import png, write_parquet

WORDS = ["dog", "cat", "bike", "tree", "boat", "child", "ball", "car", "bird", "horse", "kite", "train"]


def flickr30k(root: Path) -> dict:
    n = 30
    split = ["train"] * 20 + ["val"] * 5 + ["test"] * 5
    write_parquet(root / "TEST" / "test" / "0000.parquet", {
        "image": [png(i) for i in range(n)],
        "caption": [[f"a {WORDS[i % 12]} number {i} caption {k}" for k in range(5)] for i in range(n)],
        "sentids": [[str(5 * i + k) for k in range(5)] for i in range(n)],
        "split": split, "img_id": [str(i) for i in range(n)], "filename": [f"{1000 + i}.jpg" for i in range(n)]})
    return {}


def nycc(root: Path) -> dict:
    for split, n, off in (("train", 16, 0), ("validation", 6, 100), ("test", 6, 200)):
        write_parquet(root / "matching" / f"{split}-00000-of-00001.parquet", {
            "image": [png(off + i) for i in range(n)],
            "contest_number": [off + i for i in range(n)],
            "image_location": ["an office"] * n, "image_description": ["a cartoon"] * n,
            "image_uncanny_description": ["something odd"] * n, "entities": [["https://en.wikipedia.org/wiki/Office"]] * n,
            "questions": [["why?"]] * n,
            "caption_choices": [[f"caption {off + i} {c} about a {WORDS[(i + k) % 12]}" for k, c in enumerate("ABCDE")]
                                for i in range(n)],
            "from_description": ["scene: an office"] * n,
            "label": ["ABCDE"[i % 5] for i in range(n)], "n_tokens_label": [5] * n,
            "instance_id": [f"{off + i:032x}" for i in range(n)]})
    return {}


def winoground(root: Path) -> dict:
    n = 20
    write_parquet(root / "default" / "test" / "0000.parquet", {
        "id": list(range(n)), "image_0": [png(2 * i) for i in range(n)], "image_1": [png(2 * i + 1) for i in range(n)],
        "caption_0": [f"a {WORDS[i % 12]} on a {WORDS[(i + 1) % 12]} {i}" for i in range(n)],
        "caption_1": [f"a {WORDS[(i + 1) % 12]} on a {WORDS[i % 12]} {i}" for i in range(n)],
        "tag": ["Object"] * n, "secondary_tag": [""] * n, "num_main_preds": [1] * n, "collapsed_tag": ["Object"] * n},
        image_columns=("image_0", "image_1"))
    return {}


FIXTURES = {"flickr30k": flickr30k, "nycc": nycc, "winoground": winoground}

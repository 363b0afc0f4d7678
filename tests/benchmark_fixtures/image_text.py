"""Image-text fixtures: Flickr30K (parquet conversion), NYCC (matching config), Winoground (gated parquet)."""

from __future__ import annotations

from pathlib import Path

from . import png, write_parquet

WORDS = ["dog", "cat", "bike", "tree", "boat", "child", "ball", "car", "bird", "horse", "kite", "train"]


def flickr30k(root: Path) -> dict:
    """TEST/test/0000.parquet of nlphuji/flickr30k's parquet conversion: image, caption (5), sentids, split, img_id,
    filename.

    Schema: the hub tree listing (refs/convert/parquet: TEST/test/0000..0008.parquet) and a sample of this repo printed
    in the GATE code's gate/data/image_text/zero_shot/flickr30k.py (keys image, caption, sentids, split, img_id,
    filename; split carries Karpathy's train/val/test)."""
    n = 30
    split = ["train"] * 20 + ["val"] * 5 + ["test"] * 5
    write_parquet(root / "TEST" / "test" / "0000.parquet", {
        "image": [png(i) for i in range(n)],
        "caption": [[f"a {WORDS[i % 12]} number {i} caption {k}" for k in range(5)] for i in range(n)],
        "sentids": [[str(5 * i + k) for k in range(5)] for i in range(n)],
        "split": split, "img_id": [str(i) for i in range(n)], "filename": [f"{1000 + i}.jpg" for i in range(n)]})
    return {}


def nycc(root: Path) -> dict:
    """matching/<split>-00000-of-00001.parquet of jmhessel/newyorker_caption_contest.

    Schema: the dataset card's dataset_info for the matching config (image, contest_number, image_location,
    image_description, image_uncanny_description, entities, questions, caption_choices: 5 captions, from_description,
    label: a letter A-E, n_tokens_label, instance_id), files matching/{train,validation,test}-* (commit 0183c71), and
    the authors' jmhessel/caption_contest_corpus (clip/train_clip.py reads caption_choices, label, contest_number).
    A cartoon has one row per finalist caption, all with the same image; its rows stay in one split."""
    for split, contests, off in (("train", 8, 0), ("validation", 3, 100), ("test", 3, 200)):
        rows = [(off + c, k) for c in range(contests) for k in range(2)]  # two finalist captions per cartoon
        n = len(rows)
        write_parquet(root / "matching" / f"{split}-00000-of-00001.parquet", {
            "image": [png(contest) for contest, _ in rows],
            "contest_number": [contest for contest, _ in rows],
            "image_location": ["an office"] * n, "image_description": ["a cartoon"] * n,
            "image_uncanny_description": ["something odd"] * n, "entities": [["https://en.wikipedia.org/wiki/Office"]] * n,
            "questions": [["why?"]] * n,
            "caption_choices": [[f"caption {contest}.{k} {c} about a {WORDS[(contest + j) % 12]}"
                                 for j, c in enumerate("ABCDE")] for contest, k in rows],
            "from_description": ["scene: an office"] * n,
            "label": ["ABCDE"[(contest + k) % 5] for contest, k in rows], "n_tokens_label": [5] * n,
            "instance_id": [f"{contest:016x}{k:016x}" for contest, k in rows]})
    return {}


def winoground(root: Path) -> dict:
    """default/test/0000.parquet of facebook/winoground (gated).

    Schema: columns from a sample printed in the GATE code's gate/data/image_text/zero_shot/winoground.py (id,
    image_0, image_1, caption_0, caption_1, tag, secondary_tag, num_main_preds, collapsed_tag); the parquet path is
    NOT verified (the config says schema_verified: false)."""
    n = 20
    write_parquet(root / "default" / "test" / "0000.parquet", {
        "id": list(range(n)), "image_0": [png(2 * i) for i in range(n)], "image_1": [png(2 * i + 1) for i in range(n)],
        "caption_0": [f"a {WORDS[i % 12]} on a {WORDS[(i + 1) % 12]} {i}" for i in range(n)],
        "caption_1": [f"a {WORDS[(i + 1) % 12]} on a {WORDS[i % 12]} {i}" for i in range(n)],
        "tag": ["Object"] * n, "secondary_tag": [""] * n, "num_main_preds": [1] * n, "collapsed_tag": ["Object"] * n},
        image_columns=("image_0", "image_1"))
    return {}


FIXTURES = {"flickr30k": flickr30k, "nycc": nycc, "winoground": winoground}

"""Rows that belong together stay on one side of every split, and rows that show one image count as one image.

* grouped manifests: an ACDC patient's two frames, a CLEVR scene's questions, a Cityscapes city, an NYU scene, an
  NYCC cartoon, a HAM10000 lesion, a CheXpert / retinopathy patient, a Winoground example are never split up;
* NYCC retrieval: the rows of one cartoon show the same image, so each of their captions is correct for all of them
  (``image_group`` target kind); without groups every row is its own group and the numbers are the old ones.

Each case loads the benchmark's fixture (tests/benchmark_fixtures, written from the real source's schema) through
its real loader and the split manifest.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from benchmark_fixtures import all_fixtures
from torch.nn import functional as F

from gate.adapters.contrastive import clip_loss, match_groups, match_matrix
from gate.adapters.contrastive_metrics import RetrievalAccuracy
from gate.engine.build import build_splits
from gate.errors import GateError

from helpers import compose_run, resolved

FIXTURES = all_fixtures()
#: benchmark -> the column whose values must never straddle two splits (the group the split is carved by).
GROUPS = {"acdc": "patient", "clevr": "image_filename", "cityscapes": "city", "nyu": "scene", "nycc": "contest_number",
          "ham10k": "lesion", "chexpert": "patient", "diabetic_retinopathy": "patient", "winoground": "id"}


def _splits(key, tmp_path, extra=()):
    copy = tmp_path / "copy"
    overrides = FIXTURES[key](copy)
    cfg = compose_run(tmp_path / "out", [f"dataset={key}", f"dataset.data_dir={copy}",
                                         *(f"{k}={v}" for k, v in overrides.items()), *extra])
    return cfg, build_splits(resolved(cfg.dataset), seed=0)


def _column(split, name):
    return split.select_columns([name]).with_format("numpy")[:][name]


@pytest.mark.parametrize("key", sorted(GROUPS))
@pytest.mark.parametrize("split_seed", [0, 1, 2])
def test_grouped_manifest_keeps_every_group_on_one_side(key, split_seed, tmp_path):
    cfg, splits = _splits(key, tmp_path, [f"dataset.splits.seed={split_seed}"])
    column = GROUPS[key]
    assert cfg.dataset.splits.get("group_column") == column
    groups = {name: set(np.asarray(_column(split, column)).tolist()) for name, split in splits.items()}
    assert all(groups.values()), groups
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        assert not groups[a] & groups[b], f"{key}: {column} {sorted(groups[a] & groups[b])[:3]} in both {a} and {b}"
    if key in ("acdc", "clevr", "cityscapes", "nyu"):  # val is carved from train: it must hold whole groups
        assert len(groups["val"]) >= 1 and len(groups["train"]) >= 1


def test_group_values_come_from_the_source_layout(tmp_path):
    """The group of a row is read from the source itself: the city folder, the .mat's scene name, the patient
    number of an ACDC file, the scene file of a CLEVR question."""
    from benchmark_fixtures.segmentation import CITYSCAPES_CITIES, NYU_SCENES

    _, city = _splits("cityscapes", tmp_path / "c")
    assert set(_column(city["train"], "city")) | set(_column(city["val"], "city")) == set(CITYSCAPES_CITIES["train"])
    assert set(_column(city["test"], "city")) == set(CITYSCAPES_CITIES["val"])
    _, nyu = _splits("nyu", tmp_path / "n")
    assert set(_column(nyu["test"], "scene")) == set(NYU_SCENES[10:])
    _, acdc = _splits("acdc", tmp_path / "a")
    assert set(_column(acdc["test"], "patient")) == {101, 102}
    volumes, patients = _column(acdc["train"], "volume"), _column(acdc["train"], "patient")
    assert np.array_equal(volumes // 100, patients)
    _, clevr = _splits("clevr", tmp_path / "q")
    assert all(str(f).startswith("CLEVR_train_") for f in _column(clevr["val"], "image_filename"))


# ------------------------------------------------------------------------------------------------ NYCC splits
def test_nycc_published_splits_that_share_a_cartoon_are_refused_in_one_line(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from benchmark_fixtures.image_text import nycc as write

    from gate.data.loaders.image_text import nycc

    write(tmp_path)
    path = tmp_path / "matching" / "test-00000-of-00001.parquet"
    table = pq.read_table(path)
    numbers = table.column("contest_number").to_pylist()
    numbers[0] = 0  # a train cartoon's number in the test split
    column = table.column_names.index("contest_number")
    pq.write_table(table.set_column(column, "contest_number", pa.array(numbers, table.schema.field(column).type)), path)
    source = compose_run(tmp_path / "out", ["dataset=nycc"]).dataset.source
    with pytest.raises(GateError) as err:
        nycc(str(tmp_path), source, cache_dir=str(tmp_path / "cache"))
    message = str(err.value)
    assert "contest_number=0" in message and "'test'" in message and "'train'" in message and "\n" not in message
    pooled = nycc(str(tmp_path), source, cache_dir=str(tmp_path / "cache"), published_splits=False)
    assert set(pooled) == {"train"} and len(pooled["train"]) == 2 * (8 + 3 + 3)


def test_nycc_pooled_splits_are_carved_by_cartoon(tmp_path):
    cfg, splits = _splits("nycc", tmp_path, ["dataset.builder.published_splits=false"])
    groups = {name: set(_column(split, "contest_number").tolist()) for name, split in splits.items()}
    assert sum(len(s) for s in splits.values()) == 2 * 14  # every row of the three published splits, once
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        assert not groups[a] & groups[b]


# ------------------------------------------------------------------------------------------ NYCC retrieval
def _metrics(logits, target):
    out = {}
    for direction in ("img2txt", "txt2img"):
        metric = RetrievalAccuracy(1, direction)
        metric.update(logits, target)
        out[direction] = float(metric.compute())
    return out


def test_two_rows_of_one_cartoon_in_a_batch_both_score_as_hits():
    """Rows 0 and 1 show cartoon 5 (identical image embeddings, so identical logit rows), row 2 cartoon 9.

    images x texts:   text0 text1 text2
        image0 (c5)    2     1     0
        image1 (c5)    2     1     0
        image2 (c9)    0     0     3
    Hand computed, with cartoon groups: text0's best image is image0 or image1 (2, a tie between two correct images)
    and image2 scores 0: a hit; text1: 1 vs 1 (both correct) vs 0: a hit; text2: a hit -> txt2img@1 = 3/3.
    image1's best text is text0 (2), a caption of its own cartoon: a hit -> img2txt@1 = 3/3.
    Without groups (the old target): text0 ties image0 with image1, a wrong image -> a miss; text1 likewise;
    txt2img@1 = 1/3 and image1 -> text0 is a miss: img2txt@1 = 2/3."""
    logits = torch.tensor([[2.0, 1.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    captions = torch.tensor([11, 12, 13])  # three distinct captions
    cartoons = torch.tensor([5, 5, 9])
    grouped = match_matrix(captions, cartoons)
    assert grouped.tolist() == [[True, True, False], [True, True, False], [False, False, True]]
    assert _metrics(logits, grouped) == pytest.approx({"img2txt": 1.0, "txt2img": 1.0}, abs=1e-6)
    assert _metrics(logits, match_matrix(captions)) == pytest.approx({"img2txt": 2 / 3, "txt2img": 1 / 3}, abs=1e-6)


def test_a_caption_shared_across_cartoons_links_them_one_way():
    """Text j is correct for image i when some row shows i's image with j's caption: row 1 (cartoon 5) and row 2
    (cartoon 9) have the same caption, so text 2 is correct for images 0 and 1 (cartoon 5 shows that caption),
    but text 0 (cartoon 5's other caption) is not correct for image 2."""
    match = match_matrix(torch.tensor([1, 2, 2]), torch.tensor([5, 5, 9]))
    assert match.tolist() == [[True, True, True], [True, True, True], [False, True, True]]


def test_loss_spreads_the_target_over_the_rows_of_one_image():
    """Multi-positive CLIP loss, hand computed on the 3-row batch above: image->text rows 0 and 1 target
    [1/2, 1/2, 0], row 2 targets text 2; text->image columns likewise."""
    logits = torch.tensor([[2.0, 1.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    soft = torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    expected = (F.cross_entropy(logits, soft) + F.cross_entropy(logits.t(), soft)) / 2
    got = clip_loss(logits, match_matrix(torch.tensor([11, 12, 13]), torch.tensor([5, 5, 9])))
    assert float(got) == pytest.approx(float(expected), rel=1e-6)


def _old_hits(logits, group_index, k):
    """The retrieval rule before image groups existed (same caption index = correct), written out row by row."""
    out = []
    for i in range(logits.shape[0]):
        correct = [j for j in range(logits.shape[1]) if group_index[j] == group_index[i]]
        best = max(float(logits[i, j]) for j in correct)
        above = sum(1 for j in range(logits.shape[1]) if j not in correct and float(logits[i, j]) >= best)
        out.append(above < k)
    return out


def test_without_groups_every_row_is_its_own_group_and_the_numbers_are_unchanged():
    torch.manual_seed(3)
    b = 12
    logits = torch.randn(b, b) * 2
    logits[4, 7] = logits[4, 4]  # a tie with a wrong caption
    captions = torch.tensor([1, 2, 3, 2, 5, 6, 7, 8, 9, 1, 11, 12])  # two repeated captions
    old_target = match_groups(captions)  # what the adapter returned before: a (B,) index of the first same caption
    no_groups, own_groups = match_matrix(captions), match_matrix(captions, torch.arange(b) + 100)
    assert torch.equal(no_groups, own_groups)
    for k in (1, 5):
        for direction, scores in (("img2txt", logits), ("txt2img", logits.t())):
            expected = float(np.mean(_old_hits(scores, old_target.tolist(), k)))
            for target in (old_target, no_groups, own_groups):
                metric = RetrievalAccuracy(k, direction)
                metric.update(logits, target)
                assert float(metric.compute()) == pytest.approx(expected, abs=1e-6), (k, direction)  # float32 state
    same = (old_target[:, None] == old_target[None, :]).float()
    reference = (F.cross_entropy(logits, same / same.sum(1, keepdim=True))
                 + F.cross_entropy(logits.t(), same / same.sum(1, keepdim=True))) / 2
    for target in (old_target, no_groups, own_groups):
        assert float(clip_loss(logits, target)) == pytest.approx(float(reference), rel=1e-6)
    unique = torch.arange(b)  # unique captions, no groups: CLIP's loss with arange targets
    plain = (F.cross_entropy(logits, unique) + F.cross_entropy(logits.t(), unique)) / 2
    assert float(clip_loss(logits, match_matrix(unique))) == pytest.approx(float(plain), rel=1e-6)


def test_nycc_config_feeds_cartoon_groups_to_the_adapter(tmp_path):
    """dataset=nycc declares contest_number as an image_group target: a real batch of its fixture's validation
    split (3 cartoons x 2 captions) gets a match matrix that pairs the rows of each cartoon."""
    from gate.engine.build import build_adapter, build_datamodule, build_encoder, build_spec

    copy = tmp_path / "copy"
    FIXTURES["nycc"](copy)
    cfg = compose_run(tmp_path / "out", ["dataset=nycc", f"dataset.data_dir={copy}", "image_size=32",
                                         "data.batch_size=8", "data.eval_batch_size=8", "adapter.retrieval_candidates=6"])
    spec = build_spec(resolved(cfg.dataset))
    assert dict(spec.targets) == {"caption": "caption", "contest_number": "image_group"}
    encoder = build_encoder(resolved(cfg.encoder))
    adapter = build_adapter(resolved(cfg.adapter), encoder, spec)
    datamodule = build_datamodule(cfg, encoder, adapter, spec)
    batch = datamodule.on_after_batch_transfer(next(iter(datamodule.val_dataloader())), 0)
    contests = torch.as_tensor(np.asarray(datamodule.splits["val"]["contest_number"]))
    target = adapter.target(batch)
    assert target["match"].shape == (6, 6)
    assert torch.equal(target["match"], contests[:, None] == contests[None, :])
    # identical images of a cartoon, scored by the real model: the text-to-image hits no longer tie them out
    with torch.no_grad():
        logits = adapter.predict(encoder.eval(), batch)
    metrics = adapter.make_metrics()
    metrics.update(logits, target)
    assert all(0.0 <= float(v) <= 1.0 for v in metrics.compute().values())

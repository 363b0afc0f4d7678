"""Zero-shot image-text retrieval: the CLIP-style adapter and the fmnist_pairs stand-in."""

import math
import re

import datasets
import pytest
import torch

from gate.adapters.contrastive import ZeroShotContrastive, caption_hash, clip_loss, match_groups
from gate.adapters.contrastive_metrics import RetrievalAccuracy
from gate.data.standins.canvas import class_name
from gate.data.standins.pairs import fmnist_pairs
from gate.engine.build import build_adapter, build_datamodule, build_encoder, build_spec
from gate.results import ResultsStore

from helpers import TINY_ENCODER, call_cli, compose_run, resolved

TINY = ["dataset=fmnist_pairs", "image_size=32", "dataset.builder.train_size=24", "dataset.builder.val_size=12",
        "dataset.builder.test_size=12", "data.batch_size=8", "data.eval_batch_size=8", "adapter.retrieval_candidates=8"]
METRICS = {"img2txt_acc@1", "img2txt_acc@5", "txt2img_acc@1", "txt2img_acc@5"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """efficientnet_lite0 (32 px), the adapter with the packaged MiniLM text tower, and the tiny stand-in."""
    cfg = compose_run(tmp_path_factory.mktemp("pairs"), TINY)
    encoder = build_encoder(resolved(cfg.encoder))
    spec = build_spec(resolved(cfg.dataset))
    adapter = build_adapter(resolved(cfg.adapter), encoder, spec)
    return cfg, encoder, spec, adapter, build_datamodule(cfg, encoder, adapter, spec)


def metrics_of(logits, target, k=(1, 5)):
    out = {}
    for direction in ("img2txt", "txt2img"):
        for top in k:
            metric = RetrievalAccuracy(top, direction)
            metric.update(logits, target)
            out[f"{direction}_acc@{top}"] = float(metric.compute())
    return out


def test_retrieval_metrics_on_hand_made_similarities():
    b = 8
    unique = torch.arange(b)
    assert metrics_of(torch.eye(b) * 3, unique) == {name: 1.0 for name in METRICS}  # identity-like: all hits
    # the match is ranked last in both directions: no hit at 1, nor at 5 (7 wrong texts rank above it)
    assert metrics_of(-torch.eye(b), unique) == {name: 0.0 for name in METRICS}
    # a reversed ranking: scores grow with the distance from the diagonal, so each image's own text ranks last
    reversed_scores = torch.tensor([[(j - i) % b for j in range(b)] for i in range(b)], dtype=torch.float)
    assert metrics_of(reversed_scores, unique) == {name: 0.0 for name in METRICS}
    # image 2 prefers text 0; text 0 prefers image 2: one miss in each direction at 1, none at 2
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [3.0, 0.0, 1.0]])
    got = metrics_of(logits, torch.arange(3), k=(1, 2))
    assert got["img2txt_acc@1"] == pytest.approx(2 / 3) and got["txt2img_acc@1"] == pytest.approx(2 / 3)
    assert got["img2txt_acc@2"] == 1.0 and got["txt2img_acc@2"] == 1.0


def test_ties_count_against_and_duplicate_captions_all_match():
    b = 6
    assert metrics_of(torch.zeros(b, b), torch.arange(b), k=(1,))["img2txt_acc@1"] == 0.0  # collapsed model
    # images 0 and 1 share a caption: image 0 preferring text 1 is a hit
    target = match_groups(torch.tensor([7, 7, 3, 4, 5, 6]))
    assert target.tolist() == [0, 0, 2, 3, 4, 5]
    logits = torch.eye(b)
    logits[0] = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    assert metrics_of(logits, target, k=(1,))["img2txt_acc@1"] == 1.0
    assert metrics_of(logits, torch.arange(b), k=(1,))["img2txt_acc@1"] == pytest.approx(5 / 6)


def test_acc_at_k_among_k_or_fewer_candidates_is_undefined_not_a_hit():
    """acc@k means something only with more than k candidates. Before, a 3-row batch counted its 3 queries as hits
    at k=5 (8 misses + 3 free hits = 3/11); now any query ranked among k or fewer candidates makes the value NaN."""
    metric = RetrievalAccuracy(5, "img2txt")
    metric.update(-torch.eye(8), torch.arange(8))  # 8 misses (match ranked 8th of 8)
    assert float(metric.compute()) == 0.0
    metric.update(-torch.eye(3), torch.arange(3))  # 3 candidates: acc@5 is undefined for these queries
    assert math.isnan(float(metric.compute()))
    at_1 = RetrievalAccuracy(1, "img2txt")
    at_1.update(-torch.eye(3), torch.arange(3))  # acc@1 among 3 is defined: 0 hits
    assert float(at_1.compute()) == 0.0


def test_clip_loss_is_symmetric_and_lower_for_matching_pairs():
    torch.manual_seed(0)
    logits = torch.randn(6, 6) * 3
    target = torch.arange(6)
    assert clip_loss(logits, target) == pytest.approx(float(clip_loss(logits.t(), target)))
    matching, reversed_ = clip_loss(torch.eye(6) * 10, target), clip_loss(-torch.eye(6) * 10, target)
    assert float(matching) < float(clip_loss(logits, target)) < float(reversed_)
    # with unique captions it is CLIP's loss: the mean of the two cross-entropies with arange targets
    plain = (torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.t(), target)) / 2
    assert float(clip_loss(logits, target)) == pytest.approx(float(plain), rel=1e-6)


def test_caption_ids_are_stable():
    assert caption_hash("a bag left of a sneaker") == caption_hash("a bag left of a sneaker")
    assert caption_hash("a bag left of a sneaker") != caption_hash("a sneaker left of a bag")
    assert 0 <= caption_hash("x") < 2**63


def test_temperature_and_frozen_text_tower(built):
    _, _, _, adapter, _ = built
    assert isinstance(adapter, ZeroShotContrastive)
    assert float(adapter.scale().detach()) == pytest.approx(1 / 0.07, rel=1e-5)
    with torch.no_grad():
        adapter.logit_scale.fill_(math.log(1000.0))
        assert float(adapter.scale()) == pytest.approx(100.0)  # clamped, as CLIP does
        adapter.logit_scale.fill_(math.log(1 / 0.07))
    assert not any(p.requires_grad for p in adapter.text_tower.parameters())
    adapter.train()
    batch = built[4].on_after_batch_transfer(next(iter(built[4].train_dataloader())), 0)
    text = adapter.embed_text(batch)
    assert text.requires_grad  # through the projection
    assert not adapter.text_tower.training and torch.equal(text, adapter.embed_text(batch))  # no dropout


def test_checkpoints_leave_the_frozen_text_tower_out(built):
    _, _, _, adapter, _ = built
    state = {k: v.clone() for k, v in adapter.state_dict().items()}
    assert state and not any(k.startswith("text_tower.") for k in state)
    assert "logit_scale" in state and "text_projection.weight" in state
    tower = {k: v.clone() for k, v in adapter.text_tower.state_dict().items()}
    with torch.no_grad():
        adapter.text_projection.weight.add_(1.0)
    adapter.load_state_dict(state, strict=True)  # the tower's weights come from the built tower
    assert torch.equal(adapter.text_projection.weight, state["text_projection.weight"])
    assert all(torch.equal(v, tower[k]) for k, v in adapter.text_tower.state_dict().items())


def test_forward_backward_on_a_real_batch(built):
    _, encoder, _, adapter, datamodule = built
    batch = datamodule.on_after_batch_transfer(next(iter(datamodule.train_dataloader())), 0)
    assert batch["image"].shape == (8, 3, 32, 32) and batch["caption_input_ids"].shape[0] == 8
    predictions = adapter.predict(encoder, batch)
    target = adapter.target(batch)
    match = target["match"]
    assert predictions.shape == (8, 8) and match.shape == (8, 8) and match.dtype == torch.bool  # the match matrix
    assert target["queries"].tolist() == list(range(8)) and not target["group"].any()  # training: one group
    loss = adapter.loss(predictions, target)
    loss.backward()
    assert torch.isfinite(loss)
    for module in (adapter.image_projection, adapter.text_projection):
        assert module.weight.grad is not None and module.weight.grad.abs().sum() > 0
    assert adapter.logit_scale.grad is not None
    assert any(p.grad is not None for p in encoder.parameters())
    assert all(p.grad is None for p in adapter.text_tower.parameters())
    metrics = adapter.make_metrics()
    metrics.update(predictions.detach(), target)
    assert set(metrics.compute()) == METRICS


def test_ensemble_of_identical_predictions_equals_the_single_one(built):
    _, _, _, adapter, _ = built
    torch.manual_seed(1)
    logits, target = torch.randn(8, 8), torch.arange(8)
    combined = adapter.combine([logits, logits.clone()])
    assert torch.allclose(combined, logits)
    single, both = adapter.make_metrics(), adapter.make_metrics()
    single.update(logits, target)
    both.update(combined, target)
    assert {k: float(v) for k, v in single.compute().items()} == {k: float(v) for k, v in both.compute().items()}


def test_empty_caption_names_dataset_split_and_example(built):
    _, _, spec, adapter, _ = built
    split = datasets.Dataset.from_dict({"image": [[[0]]] * 3, "caption": ["a bag left of a coat", "a dress above a bag", "  "]})
    with pytest.raises(ValueError, match=r"dataset 'fmnist_pairs': split 'val' example 2 has an empty caption"):
        adapter.check_split(spec, "val", split)
    adapter.check_split(spec, "val", split.select([0, 1]))


def test_stand_in_is_seeded_and_captions_are_specific():
    a = fmnist_pairs(seed=3, train_size=40, val_size=5, test_size=5)
    b = fmnist_pairs(seed=3, train_size=40, val_size=5, test_size=5)
    assert a["train"]["caption"] == b["train"]["caption"] and a["test"]["image"] == b["test"]["image"]
    assert fmnist_pairs(seed=4, train_size=40, val_size=5, test_size=5)["train"]["caption"] != a["train"]["caption"]
    many = fmnist_pairs(seed=0, train_size=600, val_size=1, test_size=1)["train"]["caption"]
    names = "|".join(re.escape(class_name(c)) for c in range(10))
    pattern = re.compile(rf"an? ({names}) (left of|above|above and to the (?:left|right) of) an? ({names})")
    parsed = [pattern.fullmatch(c) for c in many]
    assert all(parsed), [c for c, m in zip(many, parsed) if not m][:3]
    assert {m.group(2) for m in parsed} == {"left of", "above", "above and to the left of", "above and to the right of"}
    assert all(m.group(1) != m.group(3) for m in parsed)  # two distinct classes
    # both orders of the same two classes occur as different captions: retrieval is not classification
    assert "a bag left of a sneaker" in many or "a sneaker left of a bag" in many
    assert len(set(many)) > 200


@pytest.mark.slow
def test_gate_run_end_to_end(tmp_path, capsys):
    # gate-run's main() in this process (gate-run's real process is tests/test_finetune.py's)
    from gate.cli import run as run_cli

    args = ["dataset=fmnist_pairs", *TINY_ENCODER, "image_size=32", "trainer.max_steps=4", "trainer.val_check_interval=2",
            "logger=csv", "trainer.enable_progress_bar=false", "ensembles=[1,2]", f"paths.root={tmp_path}",
            "dataset.builder.train_size=32", "dataset.builder.val_size=16", "dataset.builder.test_size=16",
            "data.batch_size=8", "data.eval_batch_size=8", "adapter.retrieval_candidates=8"]
    done = call_cli(run_cli.main, args, capsys, prog="gate-run")
    assert done.returncode == 0, done.stderr[-3000:]
    records = ResultsStore(tmp_path / "results" / "records.jsonl").complete_records(kind="finetune")
    test = {r["metric"] for r in records if r["split"] == "test"}
    for prefix in ("", "ensemble_1/", "ensemble_2/"):
        assert {prefix + m for m in METRICS} <= test
    assert all(0.0 <= r["value"] <= 1.0 for r in records if r["metric"].endswith(tuple(METRICS)))
    assert [r["metric"] for r in records if r["split"] == "val"] == ["img2txt_acc@1"]
    assert {r["task"] for r in records} == {"zero_shot"} and {r["adapter"] for r in records} == {"zero_shot_contrastive"}

"""Winoground's standard text, image and group scores (Thrush et al., CVPR 2022), from each example's 2 x 2
similarities, beside in-batch retrieval. The dataset declares the example id as a ``contrast_pair`` target; the
loader (gate/data/loaders/image_text.py) turns an example into two adjacent rows (image_k, caption_k)."""

from __future__ import annotations

import warnings

import datasets
import pytest
import torch
from benchmark_fixtures import all_fixtures
from torch.nn import functional as F

from gate.adapters.contrastive import INIT_TEMPERATURE, ZeroShotContrastive, retrieval_target
from gate.adapters.contrastive_metrics import WinogroundScore
from gate.encoders.base import EncoderOutput, GATEEncoder
from gate.engine.build import build_adapter, build_datamodule, build_encoder, build_spec
from gate.metrics import lookup

from helpers import compose_run, resolved

# Four examples, rows (2e, 2e+1) = (image a, caption a), (image b, caption b). s(i, c) = logits[i, c].
#   e0: s(a,a)=3 s(a,b)=1 s(b,a)=0 s(b,b)=2 -> text 3>1, 2>0 yes; image 3>0, 2>1 yes; group yes
#   e1: s(a,a)=2 s(a,b)=1 s(b,a)=3 s(b,b)=4 -> text 2>1, 4>3 yes; image 2>3 no;       group no
#   e2: s(a,a)=1 s(a,b)=2 s(b,a)=0 s(b,b)=3 -> text 1>2 no;       image 1>0, 3>2 yes;  group no
#   e3: s(a,a)=1 s(a,b)=1 s(b,a)=0 s(b,b)=2 -> text 1>1 no (a tie fails); image 1>0, 2>1 yes; group no
# text 2/4, image 3/4, group 1/4. Every similarity across examples is 10: the scores must never look at them.
BLOCKS = [((3, 1), (0, 2)), ((2, 1), (3, 4)), ((1, 2), (0, 3)), ((1, 1), (0, 2))]
EXPECTED = {"text": 0.5, "image": 0.75, "group": 0.25}


def hand_batch():
    logits = torch.full((8, 8), 10.0)
    for e, block in enumerate(BLOCKS):
        logits[2 * e:2 * e + 2, 2 * e:2 * e + 2] = torch.tensor(block, dtype=torch.float)
    batch = {"caption_id": torch.arange(8), "pair_id": torch.tensor([40, 40, 41, 41, 42, 42, 43, 43])}
    return logits, batch


def scores(logits, batch):
    out = {}
    for score in ("text", "image", "group"):
        metric = WinogroundScore(score)
        metric.update(logits, retrieval_target(batch))
        out[score] = float(metric.compute())
    return out


def test_winoground_scores_match_a_hand_computation():
    logits, batch = hand_batch()
    assert scores(logits, batch) == pytest.approx(EXPECTED, abs=1e-6)
    perm = torch.tensor([5, 0, 7, 2, 1, 6, 3, 4])  # rows in any order: examples are found by their id
    shuffled = {"caption_id": batch["caption_id"][perm], "pair_id": batch["pair_id"][perm]}
    assert scores(logits[perm][:, perm], shuffled) == pytest.approx(EXPECTED, abs=1e-6)


def test_only_query_rows_count_and_a_lost_partner_is_an_error_not_a_number():
    logits, batch = hand_batch()
    # the last group of a split repeats earlier rows as candidates: they are not examples again
    repeated = {**batch, "query": torch.tensor([True] * 8), "candidate_group": torch.zeros(8, dtype=torch.long)}
    assert scores(logits, repeated) == pytest.approx(EXPECTED, abs=1e-6)
    only_two = {**repeated, "query": torch.tensor([False] * 6 + [True] * 2)}
    assert scores(logits, only_two) == pytest.approx({"text": 0.0, "image": 1.0, "group": 0.0}, abs=1e-6)  # e3
    broken = {**repeated, "query": torch.tensor([True] * 7 + [False])}
    with pytest.raises(ValueError, match="does not have exactly its two rows"):
        scores(logits, broken)


def test_winoground_metrics_are_registered_and_the_tier_metric(tmp_path):
    for name in ("winoground_text", "winoground_image", "winoground_group"):
        info = lookup(name)
        assert info.higher_is_better and (info.low, info.high) == (0.0, 1.0) and "Thrush" in info.citation
    dataset = resolved(compose_run(tmp_path, ["dataset=winoground"]).dataset)
    spec = build_spec(dataset)
    assert dict(spec.targets) == {"caption": "caption", "id": "contrast_pair"}
    assert spec.tier_metric == "winoground_text" and spec.tier_metric in spec.metrics
    assert {"img2txt_acc@1", "txt2img_acc@1"} <= set(spec.metrics)  # retrieval is kept (and picks checkpoints)


@pytest.fixture(scope="module")
def winoground_copy(tmp_path_factory):
    copy = tmp_path_factory.mktemp("winoground") / "copy"
    all_fixtures()["winoground"](copy)
    return copy


def _built(root, copy, extra=()):
    cfg = compose_run(root, ["dataset=winoground", f"dataset.data_dir={copy}", "image_size=32", "data.batch_size=4",
                             "data.eval_batch_size=8", "adapter.retrieval_candidates=4", "adapter.top_k=[1]", *extra])
    encoder = build_encoder(resolved(cfg.encoder), seed=0)
    spec = build_spec(resolved(cfg.dataset))
    adapter = build_adapter(resolved(cfg.adapter), encoder, spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # splits smaller than the candidate count
        return encoder, adapter, build_datamodule(cfg, encoder, adapter, spec)


def test_the_real_loader_gives_scorable_pairs_and_the_scores_equal_a_loop_over_examples(tmp_path, winoground_copy):
    encoder, adapter, datamodule = _built(tmp_path, winoground_copy)
    metrics = adapter.make_metrics()
    assert {"winoground_text", "winoground_image", "winoground_group", "img2txt_acc@1"} <= set(metrics)
    ids = list(datamodule.splits["test"]["id"])
    assert len(ids) == 6 and ids[0::2] == ids[1::2]  # 3 examples, two adjacent rows each
    wins = {"text": 0, "image": 0, "group": 0}
    examples = 0
    with torch.no_grad():
        for raw in datamodule.test_dataloader():
            batch = datamodule.on_after_batch_transfer(raw, 0)
            logits = adapter.predict(encoder.eval(), batch)
            metrics.update(logits, adapter.target(batch))
            rows = [i for i in range(len(logits)) if batch["query"][i]]
            for a in rows:  # a plain loop over the examples of the batch
                b = next((j for j in rows if j != a and batch["pair_id"][j] == batch["pair_id"][a]), None)
                if b is None or b < a:
                    continue
                text = bool(logits[a, a] > logits[a, b]) and bool(logits[b, b] > logits[b, a])
                image = bool(logits[a, a] > logits[b, a]) and bool(logits[b, b] > logits[a, b])
                wins["text"] += text
                wins["image"] += image
                wins["group"] += text and image
                examples += 1
    assert examples == 3
    got = {k: float(v) for k, v in metrics.compute().items()}
    for score in ("text", "image", "group"):
        assert got[f"winoground_{score}"] == pytest.approx(wins[score] / 3, abs=1e-6)


def test_pairs_cut_apart_are_refused_before_training(tmp_path, winoground_copy):
    _, adapter, datamodule = _built(tmp_path / "a", winoground_copy)
    spec = datamodule.spec
    test = datamodule.splits["test"]
    with pytest.raises(ValueError, match=r"split 'test' row 0 .* is not one of two adjacent rows of its example"):
        adapter.check_split(spec, "test", test.select([0, 2, 1, 3, 4, 5]))
    with pytest.raises(ValueError, match=r"retrieval_candidates=5 is invalid for dataset 'winoground'.*must be even"):
        _built(tmp_path / "b", winoground_copy, ["adapter.retrieval_candidates=5"])  # refused as the data is built
    adapter.check_split(spec, "train", datasets.Dataset.from_dict(test.select([0, 2, 1]).to_dict()))  # train: shuffled


# ------------------------------------------------------------------------------------------ bf16-mixed
class TableText(GATEEncoder):
    """A text tower whose caption ``i`` has row i of a fixed table as features (its one token holds i): the test
    controls the similarities exactly. Under autocast it hands out bf16 features, as a real tower's bf16-mixed
    forward does (the image features below too)."""

    modalities = frozenset({"text"})

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.feature_dim = table.shape[1]
        self.register_buffer("table", table)

    def transform(self, modality, train):
        return lambda caption: {"input_ids": torch.tensor([int(caption)]), "attention_mask": torch.tensor([1])}

    def forward(self, batch):
        features = self.table[batch["input_ids"][:, 0]]
        return EncoderOutput(features=features.bfloat16() if torch.is_autocast_enabled("cpu") else features)


def near_ties(examples: int = 32, dim: int = 64, seed: int = 0):
    """Winoground examples whose own caption beats the other one by 0.001-0.004 in cosine, for both images and both
    captions: below what bf16 resolves in a logit near 10 (its spacing there is 0.0625, i.e. 0.0044 in cosine at
    CLIP's initial scale 1/0.07). Image a = v1, image b = v2, caption a = α v1 + β v2 + w / 2, caption b =
    β v1 + α v2 + w / 2 (v1, v2, w orthonormal, α = β + margin), rounded to bf16 values, as a bf16 encoder hands
    them out."""
    g = torch.Generator().manual_seed(seed)
    images, captions = [], []
    for _ in range(examples):
        v1, v2, w = torch.linalg.qr(torch.randn(dim, 3, generator=g))[0].T
        beta = 0.7
        alpha = beta + 0.001 + 0.003 * float(torch.rand(1, generator=g))
        images += [v1, v2]
        captions += [alpha * v1 + beta * v2 + w / 2, beta * v1 + alpha * v2 + w / 2]
    return torch.stack(images).bfloat16().float(), torch.stack(captions).bfloat16().float()


def test_bf16_mixed_gives_the_fp32_scores_on_near_ties():
    """Under bf16-mixed (the GPU default) the head's similarities were bf16: near ties rounded to exact ties, which
    Winoground's strict ">" and retrieval's "a wrong candidate at least as high ranks above" both count as failures
    (issue 24). Here every example is right by construction, with margins below bf16's resolution: before, bf16
    autocast gave winoground_text / image / group 0.344 and img2txt / txt2img acc@1 0.625 (fp32: all 1.0). The head
    now computes them in fp32 under autocast: the same numbers, and those of a float64 computation from the same
    inputs."""
    from torch.utils.data import default_collate

    from gate.data.spec import DatasetSpec

    images, captions = near_ties()
    dim, rows = images.shape[1], len(images)
    spec = DatasetSpec(name="near_ties", modality="image", task="zero_shot", num_classes=1,
                       targets={"caption": "caption", "id": "contrast_pair"})
    adapter = ZeroShotContrastive(feature_dim=dim, text_tower=TableText(captions), spec=spec, embed_dim=dim,
                                  retrieval_candidates=rows)
    with torch.no_grad():  # identity projections: the logits are the scaled cosines of the inputs
        for projection in (adapter.image_projection, adapter.text_projection):
            projection.weight.copy_(torch.eye(dim))
            projection.bias.zero_()
    batch = default_collate([adapter.example_targets({"caption": i, "id": i // 2}) for i in range(rows)])
    target = adapter.target(batch)

    def evaluate(bf16: bool) -> dict[str, float]:
        metrics = adapter.make_metrics()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = adapter(EncoderOutput(features=images.bfloat16() if bf16 else images), batch)
            metrics.update(logits.float(), target)  # as GATEModel's evaluation step does
        return {name: float(value) for name, value in metrics.compute().items()}

    fp32, bf16 = evaluate(bf16=False), evaluate(bf16=True)
    assert bf16 == fp32
    exact = F.normalize(images.double(), dim=1) @ F.normalize(captions.double(), dim=1).t() / INIT_TEMPERATURE
    reference = adapter.make_metrics()
    reference.update(exact, target)
    assert fp32 == pytest.approx({name: float(value) for name, value in reference.compute().items()}, abs=1e-9)
    assert set(fp32.values()) == {1.0}  # every example is right: the margins survive the bf16 inputs

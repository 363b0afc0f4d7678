"""Image-text retrieval ranks each query among a fixed number of candidates (``adapter.retrieval_candidates``), not
among whatever evaluation batch fits the device; acc@k among k or fewer candidates is never a number.

* candidate groups: consecutive rows of the split in its order, exactly C each; the rows left at the end are ranked
  in a last group of the split's last C rows (earlier rows candidates only), so every query has exactly C candidates;
* the metrics and the evaluation loss are the same at every ``data.eval_batch_size`` and under data-parallel ranks;
* the paper protocol ranks among 64 (GATE's evaluation batch) and the setting is part of the experiment id;
* degenerate settings (one candidate, acc@5 among 5) are refused or left out, never recorded.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset
from torchmetrics import MeanMetric
from torchmetrics.utilities.data import dim_zero_sum

from gate.adapters.base import target_length
from gate.adapters.contrastive import (
    DEFAULT_RETRIEVAL_CANDIDATES,
    candidate_groups,
    clip_loss,
    evaluation_loader,
    retrieval_target,
)
from gate.adapters.contrastive_metrics import RetrievalAccuracy, WinogroundScore
from gate.data.distributed import shard_loader
from gate.engine.build import build_spec, instantiate_component
from gate.engine.validate import validate_run_config
from gate.errors import ConfigError

from helpers import compose_run, resolved

NAMES = [f"{d}_acc@{k}" for d in ("img2txt", "txt2img") for k in (1, 5)]


class Similarities(Dataset):
    """A split whose rows carry their index; a batch's logits are the rows x columns of a fixed split-wide
    similarity matrix ``S`` (image i x caption j), so every batching scores the same pairs the same."""

    def __init__(self, n: int, caption_ids=None) -> None:
        self.n = n
        self.caption_ids = torch.arange(n) if caption_ids is None else torch.as_tensor(caption_ids)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"index": torch.tensor(i), "caption_id": self.caption_ids[i]}


def evaluate(S: torch.Tensor, candidates: int, eval_batch: int, loaders=None, ks=(1, 5)) -> dict[str, float]:
    """What GATEModel does on a split: per batch, metrics.update(logits, target) and the loss weighted by
    target_length(target) (the number of query rows)."""
    loaders = loaders or [evaluation_loader(Similarities(len(S)), candidates, eval_batch)]
    metrics = {f"{d}_acc@{k}": RetrievalAccuracy(k, d) for d in ("img2txt", "txt2img") for k in ks}
    loss = MeanMetric()
    for loader in loaders:
        for batch in loader:
            rows = batch["index"]
            logits, target = S[rows][:, rows], retrieval_target(batch)
            for metric in metrics.values():
                metric.update(logits, target)
            loss.update(clip_loss(logits, target), weight=target_length(target))
    return {**{k: float(m.compute()) for k, m in metrics.items()}, "loss": float(loss.compute())}


def whole_batch(S: torch.Tensor, eval_batch: int, ks=(1, 5)) -> dict[str, float]:
    """The rule before the fix: every evaluation batch is the candidate set."""
    metrics = {f"{d}_acc@{k}": RetrievalAccuracy(k, d) for d in ("img2txt", "txt2img") for k in ks}
    for start in range(0, len(S), eval_batch):
        logits = S[start:start + eval_batch, start:start + eval_batch]
        for metric in metrics.values():
            metric.update(logits, torch.arange(len(logits)))
    return {k: float(m.compute()) for k, m in metrics.items()}


def noisy_pairs(n: int, noise: float = 0.33, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    image = F.normalize(torch.randn(n, 32, generator=g), dim=1)
    text = F.normalize(image + noise * torch.randn(n, 32, generator=g), dim=1)
    return 14.3 * image @ text.t()


# ------------------------------------------------------------------------------------------- the groups
def test_candidate_groups_by_hand_and_every_row_is_a_query_once():
    assert candidate_groups(8, 4) == [(0, 4, 0), (4, 8, 4)]
    # 10 rows, C = 4: rows 8, 9 are left over; they are ranked among rows 6..9 (rows 6, 7 candidates only)
    assert candidate_groups(10, 4) == [(0, 4, 0), (4, 8, 4), (6, 10, 8)]
    assert candidate_groups(3, 4) == [(0, 3, 0)]  # a split smaller than C: one group of all its rows
    for n in range(1, 41):
        for size in range(2, 10):
            groups = candidate_groups(n, size)
            queries = [row for start, stop, first in groups for row in range(max(start, first), stop)]
            assert queries == list(range(n)), (n, size)
            assert {stop - start for start, stop, _ in groups} == {min(n, size)}, (n, size)


def test_the_remainder_is_ranked_among_exactly_c_candidates_hand_computed():
    """6 rows, C = 4. S: every image scores its own caption 2, others 0, except image 4 scores caption 2 at 3.

    Groups: rows 0-3 (queries 0-3), then rows 2-5 (queries 4, 5; rows 2, 3 candidates again). Image 4 is ranked
    among captions 2-5 and caption 2 (3) beats its own (2): a miss; every other query is a hit.
    img2txt@1 = 5/6, txt2img@1 = 6/6 (caption 2's column: only image 2 scores it above 0... image 4 scores it 3, but
    caption 2 is a query in group 0, where image 4 is not a candidate).
    Before (the eval batch of 4 was the candidate set): rows 4, 5 formed a batch of 2, image 4 was ranked among
    captions 4, 5 only and hit: img2txt@1 = 6/6; with an eval batch of 8 it was ranked among all 6: 5/6.
    Loss: each query's cross-entropy over its group's 4 candidates, averaged over the 6 queries."""
    S = 2 * torch.eye(6)
    S[4, 2] = 3.0
    for eval_batch in (1, 4, 6, 8, 100):  # batches of 1 group (C rows) ... all groups
        got = evaluate(S, 4, eval_batch, ks=(1,))
        assert got["img2txt_acc@1"] == pytest.approx(5 / 6, abs=1e-6)
        assert got["txt2img_acc@1"] == pytest.approx(1.0, abs=1e-6)
        i2t = torch.cat([F.cross_entropy(S[:4, :4], torch.arange(4), reduction="none"),
                         F.cross_entropy(S[4:, 2:], torch.tensor([2, 3]), reduction="none")])
        t2i = torch.cat([F.cross_entropy(S[:4, :4].t(), torch.arange(4), reduction="none"),
                         F.cross_entropy(S[2:, 4:].t(), torch.tensor([2, 3]), reduction="none")])
        assert got["loss"] == pytest.approx(float((i2t.mean() + t2i.mean()) / 2), rel=1e-6)
    assert whole_batch(S, 4, ks=(1,))["img2txt_acc@1"] == pytest.approx(1.0)  # the old rule: a free hit
    assert whole_batch(S, 8, ks=(1,))["img2txt_acc@1"] == pytest.approx(5 / 6)


def test_the_same_embeddings_give_the_same_metrics_at_every_eval_batch_size():
    """C = 64: identical numbers at eval batch 64, 100 (rounded down to one group per batch) and 256. Before, the
    eval batch was the candidate set: the same embeddings gave acc@1 0.684 / 0.513 / 0.348 at 64 / 256 / 1024."""
    S = noisy_pairs(2000)
    reference = evaluate(S, 64, 64)
    for eval_batch in (100, 256, 1024):
        got = evaluate(S, 64, eval_batch)
        assert {k: got[k] for k in NAMES} == {k: reference[k] for k in NAMES}  # the same hit counts, exactly
        assert got["loss"] == pytest.approx(reference["loss"], rel=1e-6)
    assert 0.6 < reference["img2txt_acc@1"] < 0.8  # a model neither perfect nor random
    old = {b: whole_batch(S, b)["img2txt_acc@1"] for b in (64, 256, 1024)}
    assert old[64] > old[256] + 0.1 > old[1024] + 0.2  # what the old rule made of the same embeddings


def test_training_batches_keep_the_whole_batch_clip_loss():
    """A training batch carries no candidate groups: its loss is CLIP's over the whole batch, as before."""
    torch.manual_seed(0)
    logits = torch.randn(8, 8) * 3
    batch = {"caption_id": torch.arange(8)}
    plain = (F.cross_entropy(logits, torch.arange(8)) + F.cross_entropy(logits.t(), torch.arange(8))) / 2
    assert float(clip_loss(logits, retrieval_target(batch))) == pytest.approx(float(plain), rel=1e-6)


# ---------------------------------------------------------------------------------------- data parallel
def _merged(metrics_per_rank):
    first, *rest = metrics_per_rank
    for other in rest:
        first.merge_state(other)  # the metric's own reductions (dist_reduce_fx), as a DDP sync applies them
    return float(first.compute())


def test_groups_stay_whole_and_metrics_reduce_exactly_across_two_ranks():
    """Evaluation batches go round-robin to ranks (the adapter's loss does not split across devices); each rank's
    batches hold whole candidate groups, every row is a query on exactly one rank, and the per-rank metric states,
    merged by their sum reductions, give the one-device numbers."""
    S = noisy_pairs(300, seed=1)
    loader = evaluation_loader(Similarities(300), 64, 128)
    single = evaluate(S, 64, 128)
    per_rank = [shard_loader(loader, rank, 2, train=False, splittable=False) for rank in (0, 1)]
    seen = []
    for rank_loader in per_rank:
        for batch in rank_loader:
            groups = batch["candidate_group"]
            for group in groups.unique():
                assert int((groups == group).sum()) == 64  # a whole group of C rows
            seen += batch["index"][batch["query"]].tolist()
    assert sorted(seen) == list(range(300))
    for name in NAMES:
        direction, k = name.split("_acc@")
        metrics = []
        for rank_loader in per_rank:
            metric = RetrievalAccuracy(int(k), direction)
            for batch in rank_loader:
                rows = batch["index"]
                metric.update(S[rows][:, rows], retrieval_target(batch))
            metrics.append(metric)
        assert all(fx is dim_zero_sum for fx in metrics[0]._reductions.values())  # dist_reduce_fx="sum"
        assert _merged(metrics) == pytest.approx(single[name], abs=1e-7), name


def test_every_metric_state_is_a_summed_torchmetrics_state():
    """Halves of the batches updated into two metric objects and merged with the metric's reduction equal one
    object that saw every batch (RetrievalAccuracy and the Winoground scores)."""
    S = noisy_pairs(130, seed=2)
    batches = list(evaluation_loader(Similarities(130), 16, 32))
    for make in (lambda: RetrievalAccuracy(5, "txt2img"), lambda: RetrievalAccuracy(1, "img2txt")):
        whole, halves = make(), [make(), make()]
        for index, batch in enumerate(batches):
            rows = batch["index"]
            logits, target = S[rows][:, rows], retrieval_target(batch)
            whole.update(logits, target)
            halves[index % 2].update(logits, target)
        assert set(whole._defaults) == {"hits", "total", "undefined"}
        assert all(fx is dim_zero_sum for fx in whole._reductions.values())
        assert _merged(halves) == pytest.approx(float(whole.compute()), abs=1e-7)
    pair_batches = [{"caption_id": torch.arange(4), "pair_id": torch.tensor([7, 7, 9, 9])},
                    {"caption_id": torch.arange(4), "pair_id": torch.tensor([3, 3, 5, 5])}]
    torch.manual_seed(3)
    logits = [torch.randn(4, 4) for _ in pair_batches]
    for score in ("text", "image", "group"):
        whole, halves = WinogroundScore(score), [WinogroundScore(score), WinogroundScore(score)]
        for index, (batch, lg) in enumerate(zip(pair_batches, logits)):
            whole.update(lg, retrieval_target(batch))
            halves[index].update(lg, retrieval_target(batch))
        assert all(fx is dim_zero_sum for fx in whole._reductions.values())
        assert _merged(halves) == pytest.approx(float(whole.compute()), abs=1e-7)


# ---------------------------------------------------------------------------------------------- adapter
@pytest.fixture(scope="module")
def make_adapter(tmp_path_factory):
    """The configured adapter (packaged MiniLM text tower) for a 16-wide image feature, without an image encoder."""
    def make(overrides=()):
        cfg = compose_run(tmp_path_factory.mktemp("adapter"), ["dataset=fmnist_pairs", *overrides])
        return instantiate_component(resolved(cfg.adapter), _partial_=True)(feature_dim=16, spec=build_spec(resolved(cfg.dataset)))
    return make


def test_metric_collection_does_not_merge_metrics_whose_states_happen_to_match(make_adapter):
    """torchmetrics' compute groups merge metrics whose states are equal after the first update, then update only
    one of them. A first batch where every acc@k is 1.0 made all four report img2txt_acc@1 for the whole split
    (9/16 each).

    Hand computation. Batch 1 (5 I): every query hits, both directions, at 1 and 5: 8/8 each. Batch 2: column 0 is 5
    in every row, image i >= 1 scores its own caption 1, the rest 0. img2txt: image 0 hits; images 1-7 rank their
    own caption 2nd (miss at 1, hit at 5). txt2img: caption 0 ties all 8 images at 5 (7 wrong ones tie: a miss at 1
    and at 5); caption j >= 1 has image j at 1, the others at 0: a hit. Totals over 16 queries: img2txt@1 9/16,
    img2txt@5 16/16, txt2img@1 15/16, txt2img@5 15/16."""
    adapter = make_adapter(["adapter.retrieval_candidates=6"])
    collection = adapter.make_metrics()
    eight = 5 * torch.eye(8)  # batch 1: every query hits, in both directions, at 1 and 5
    second = torch.zeros(8, 8)
    second[:, 0] = 5.0  # batch 2: every image prefers caption 0 (image 0 hits); caption 0's images all tie
    second[1:, 1:] += torch.eye(7)  # images 1-7 rank their own caption 2nd: hits at 5
    for logits in (eight, second):
        collection.update(logits, torch.arange(8))
    got = {k: float(v) for k, v in collection.compute().items()}
    assert got == pytest.approx({"img2txt_acc@1": 9 / 16, "img2txt_acc@5": 1.0, "txt2img_acc@1": 15 / 16,
                                 "txt2img_acc@5": 15 / 16}, abs=1e-6)


def test_a_test_split_of_k_rows_or_fewer_leaves_acc_at_k_out(make_adapter, tmp_path):
    import datasets

    adapter = make_adapter(["adapter.retrieval_candidates=8"])
    spec = build_spec(resolved(compose_run(tmp_path, ["dataset=fmnist_pairs"]).dataset))
    split = datasets.Dataset.from_dict({"image": [[[0]]] * 5, "caption": [f"a bag left of a coat {i}" for i in range(5)]})
    with pytest.warns(UserWarning, match=r"the test split has 5 rows.*so img2txt_acc@\[5\], txt2img_acc@\[5\] .*not "
                                         r"recorded"):
        adapter.check_split(spec, "test", split)
    assert set(adapter.make_metrics()) == {"img2txt_acc@1", "txt2img_acc@1"}
    with pytest.raises(ValueError, match=r"split 'val' has 1 row: retrieval needs at least 2"):
        adapter.check_split(spec, "val", split.select([0]))


def test_a_test_split_whose_groups_hold_k_images_or_fewer_leaves_txt2img_acc_at_k_out(tmp_path):
    """NYCC rows: 6 captions of 3 cartoons are 6 texts but 3 images, so txt2img acc@5 would rank among 3 candidates
    (a hit by construction); img2txt acc@5 ranks among 6 texts and is kept. Before, both were kept (6 rows)."""
    import datasets

    cfg = compose_run(tmp_path, ["dataset=nycc", "adapter.retrieval_candidates=8"])
    adapter = instantiate_component(resolved(cfg.adapter), _partial_=True)(feature_dim=16, spec=build_spec(resolved(cfg.dataset)))
    split = datasets.Dataset.from_dict({"image": [[[0]]] * 6, "caption": [f"caption {i}" for i in range(6)],
                                        "contest_number": [7, 7, 8, 8, 9, 9]})
    with pytest.warns(UserWarning, match=r"as few as 6 distinct captions and 3 distinct images, so txt2img_acc@\[5\] "):
        adapter.check_split(build_spec(resolved(cfg.dataset)), "test", split)
    assert set(adapter.make_metrics()) == {"img2txt_acc@1", "img2txt_acc@5", "txt2img_acc@1"}


# -------------------------------------------------------------------------------------------- config
@pytest.mark.parametrize(("override", "message"), [
    ("adapter.retrieval_candidates=5", r"adapter.retrieval_candidates=5 is invalid: acc@5 needs more than 5 candidates"),
    ("adapter.retrieval_candidates=1", r"adapter.retrieval_candidates=1 is invalid: must be >= 2"),
    ("adapter.top_k=[5]", r"adapter.top_k=\[5\] is invalid: expected a list of ks >= 1 that includes 1"),
    ("data.batch_size=1", r"data.batch_size=1 is invalid: a contrastive batch needs >= 2"),
    ("data.max_test_samples=1", r"data.max_test_samples=1 is invalid: retrieval needs >= 2 rows"),
])
def test_degenerate_retrieval_settings_are_refused_before_training(tmp_path, override, message):
    cfg = compose_run(tmp_path, ["dataset=fmnist_pairs", override])
    with pytest.raises(ConfigError, match=message):
        validate_run_config(cfg)


def test_an_odd_group_size_for_winoground_pairs_is_refused_before_training(tmp_path):
    """A Winoground example is two adjacent rows: with an odd group size a group boundary would cut one apart."""
    cfg = compose_run(tmp_path, ["dataset=winoground", "adapter.retrieval_candidates=7"])
    with pytest.raises(ConfigError, match=r"adapter.retrieval_candidates=7 is invalid: dataset winoground holds pairs"):
        validate_run_config(cfg)
    validate_run_config(compose_run(tmp_path, ["dataset=winoground", "adapter.retrieval_candidates=8"]))


def test_the_adapter_refuses_too_few_candidates_itself(make_adapter):
    with pytest.raises(ValueError, match=r"retrieval_candidates=5 is invalid: acc@5 needs more than 5 candidates"):
        make_adapter(["adapter.retrieval_candidates=5"])


def test_an_eval_batch_smaller_than_a_group_is_accepted_with_a_warning(tmp_path):
    """`dataset=fmnist_pairs data.eval_batch_size=1` recorded acc@1 = acc@5 = 1.000 and loss 0 for a random model
    (each batch one candidate); the eval batch no longer sets the candidates: a batch holds one group of 64."""
    cfg = compose_run(tmp_path, ["dataset=fmnist_pairs", "data.eval_batch_size=1"])
    with pytest.warns(UserWarning, match=r"data.eval_batch_size=1 is smaller than adapter.retrieval_candidates=64"):
        validate_run_config(cfg)


def test_a_random_model_at_eval_batch_1_is_scored_among_64_candidates(tmp_path):
    """The issue's case end to end: fmnist_pairs, data.eval_batch_size=1, an untrained model. Before: acc@1 = acc@5
    = 1.000, loss 0 (one candidate per batch). Now every query is ranked among 64: near chance (1/64, 5/64)."""
    import lightning as L

    from gate.engine.build import build_adapter, build_datamodule, build_encoder
    from gate.engine.model import GATEModel

    cfg = compose_run(tmp_path, ["dataset=fmnist_pairs", "image_size=32", "data.eval_batch_size=1",
                                 "dataset.builder.train_size=16", "dataset.builder.val_size=8",
                                 "dataset.builder.test_size=130"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        validate_run_config(cfg)
        encoder = build_encoder(resolved(cfg.encoder), seed=0)
        spec = build_spec(resolved(cfg.dataset))
        adapter = build_adapter(resolved(cfg.adapter), encoder, spec)
        datamodule = build_datamodule(cfg, encoder, adapter, spec)
        model = GATEModel(encoder, adapter, optimizer=lambda params: torch.optim.SGD(params, lr=0.0))
        trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                            enable_checkpointing=False)
        got = {k: float(v) for k, v in trainer.test(model, datamodule=datamodule, verbose=False)[0].items()}
    assert [len(b["caption_id"]) for b in datamodule.test_dataloader()] == [64, 64, 64]  # 130 rows: 64 + 64 + 2 new
    assert got["test/img2txt_acc@1"] < 0.3 and got["test/img2txt_acc@5"] < 0.5
    assert got["test/loss"] > 2.0  # ~ln 64 = 4.16 for an uninformed model, not 0


# ---------------------------------------------------------------------------------------- paper protocol
def test_paper_tiers_rank_among_gates_64_candidates_and_it_is_in_the_experiment_id(tmp_path):
    """GATE's zero-shot tier config (gate/tiers/configs/zero_shot_learning.py) sets BATCH_SIZE = 64 and
    get_model_selection gives it to every model as train *and* eval batch size: its retrieval ranks among 64."""
    from gate.results import experiment_id, identity
    from gate.tiers.expand import expand_tier, load_tier

    assert DEFAULT_RETRIEVAL_CANDIDATES == 64
    runs = {e.dataset: e for e in expand_tier(load_tier("base"), ["efficientnet_lite0"], tmp_path, seeds=[0],
                                              check_prepared=lambda dataset: None).experiments}
    for key in ("nycc", "winoground"):
        config = runs[key].config
        assert config["adapter"]["retrieval_candidates"] == 64
        assert identity(config, "finetune")["adapter"]["retrieval_candidates"] == 64
        other = {**config, "adapter": {**config["adapter"], "retrieval_candidates": 256}}
        assert experiment_id(other, "finetune") != experiment_id(config, "finetune")


def test_batches_are_plain_dataloaders_of_whole_groups():
    loader = evaluation_loader(Similarities(10), 4, 9)
    assert isinstance(loader, DataLoader)
    assert [b["index"].tolist() for b in loader] == [[0, 1, 2, 3, 4, 5, 6, 7], [6, 7, 8, 9]]
    assert [b["query"].tolist() for b in loader][1] == [False, False, True, True]
    assert len(loader) == 2


# ------------------------------------------------------------------------------------------- the picture
def test_the_validation_picture_uses_the_adapters_target_and_candidate_groups():
    """Rows 0, 1 show cartoon 5 (an image_group), row 2 cartoon 9; rows 3-5 are another candidate group. Image 0
    scores caption 3 highest (9), but caption 3 is not among its candidates; among them caption 1 (5, the same
    cartoon: right), its own caption 0 (1: right), caption 2 (0: wrong). Before, the picture ranked the whole batch
    and marked a caption right only when it was the row's own text: '✗ caption #3' first, in red."""
    from gate.data.spec import DatasetSpec
    from gate.engine.training.visuals import RIGHT, VisualBatch, render

    logits = torch.zeros(6, 6)
    logits[0, 3], logits[0, 1], logits[0, 0] = 9.0, 5.0, 1.0
    batch = {"image": torch.rand(6, 3, 8, 8), "caption_id": torch.arange(6), "image_group": torch.tensor([5, 5, 9, 7, 7, 8]),
             "candidate_group": torch.tensor([0, 0, 0, 1, 1, 1]), "query": torch.ones(6, dtype=torch.bool),
             "row": torch.arange(6)}
    spec = DatasetSpec(name="cartoons", modality="image", task="zero_shot", num_classes=1,
                       targets={"caption": "caption", "contest_number": "image_group"})
    fig = render("zero_shot", VisualBatch(batch, logits, spec, max_examples=1))
    title = fig.axes[0].get_title()
    assert title.splitlines() == ["✓ caption #1", "✓ caption #0", "✗ caption #2"]
    assert fig.axes[0].title.get_color() == RIGHT
    assert "3 candidate captions" in fig._suptitle.get_text()


# ------------------------------------------------------------------------------------------ image groups
def cartoon_batch():
    """NYCC-shaped rows: cartoon A has rows 0-1, cartoon W rows 2-5 (four finalist captions), cartoons B-G one row
    each (6-11); caption j is row j's. Rows of one cartoon show one image, so their logits rows are equal: logits[i, j]
    is S[cartoon of i, j]. Own captions score 4, 3 (A), 3 (W), 2 (B-G); A's caption 0 scores 5 with W and 4.5 with B;
    everything else 0."""
    cartoon = torch.tensor([0, 0, 1, 1, 1, 1, 2, 3, 4, 5, 6, 7])  # A A W W W W B C D E F G
    S = torch.zeros(8, 12)
    for j in range(12):
        S[cartoon[j], j] = 2.0
    S[0, 0], S[0, 1], S[1, 2:6] = 4.0, 3.0, 3.0
    S[1, 0], S[2, 0] = 5.0, 4.5
    batch = {"caption_id": torch.arange(100, 112), "image_group": cartoon * 7 + 3}  # any ids (hashes in the adapter)
    return S[cartoon], batch


def test_a_wrong_cartoon_counts_once_however_many_rows_show_it():
    """txt2img ranks images, and a cartoon is one image: its rows are one candidate (issue 24). Hand computation on
    cartoon_batch():

    * txt2img, caption 0 (A's): A's rows score 4; W's four rows 5 and B's row 4.5 score higher. Distinct images above
      A: W and B, so A ranks 3rd: a miss at 1, a hit at 5. Before, each of W's rows took a slot: 5 rows above, a miss
      at 5 too. Every other caption's own cartoon is alone on top: a hit.
      txt2img acc@1 = 11/12 (before too), acc@5 = 12/12 (before 11/12).
    * img2txt: captions are distinct texts, so each wrong one counts (unchanged): A's rows hit at 1; W's rows rank
      their captions (3) below caption 0 (5), B's row its caption (2) below caption 0 (4.5): misses at 1, hits at 5;
      C-G hit. acc@1 = 7/12, acc@5 = 12/12 (before too)."""
    logits, batch = cartoon_batch()
    target = retrieval_target(batch)
    got = {}
    for direction in ("img2txt", "txt2img"):
        for k in (1, 5):
            metric = RetrievalAccuracy(k, direction)
            metric.update(logits, target)
            got[f"{direction}_acc@{k}"] = float(metric.compute())
    assert got == pytest.approx({"img2txt_acc@1": 7 / 12, "img2txt_acc@5": 1.0, "txt2img_acc@1": 11 / 12,
                                 "txt2img_acc@5": 1.0}, abs=1e-6)
    # the same rule for texts: a caption text in three rows is one candidate. Image 0 scores the text of rows 1-3
    # at 2 and caption 4 at 1.5, above its own (1): 2 distinct texts above it, a hit at 3 (before: 4 rows, a miss)
    repeated = {"caption_id": torch.tensor([0, 1, 1, 1, 2, 3, 4, 5])}
    logits = torch.eye(8)
    logits[0, 1:4], logits[0, 4] = 2.0, 1.5
    metric = RetrievalAccuracy(3, "img2txt")
    metric.update(logits, {**retrieval_target(repeated), "queries": torch.tensor([0])})  # image 0 is the query
    assert float(metric.compute()) == 1.0
    # acc@k needs more than k distinct candidates: 2 cartoons of 4 rows are 2 images, so txt2img acc@5 among them is
    # undefined (any caption's cartoon is in the top 2), while img2txt ranks 8 distinct captions
    two = {"caption_id": torch.arange(8), "image_group": torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])}
    for direction, defined in (("txt2img", False), ("img2txt", True)):
        metric = RetrievalAccuracy(5, direction)
        metric.update(torch.eye(8), retrieval_target(two))
        assert math.isnan(float(metric.compute())) != defined, direction

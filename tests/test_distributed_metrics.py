"""Every family's metrics reduce across ranks to the one-process answer (data parallelism, ``trainer.devices=N``).

One fork of two gloo CPU processes runs every case of :data:`CASES` (tests/distributed_metrics.py); each case is
compared with one process that saw every update. To cover a new metric, add one ``MetricCase`` to ``CASES``: a
module-level ``make`` (prefer the adapter's own ``make_metrics()``, so the case follows the adapter) and a seeded
``updates`` returning the ``update`` argument tuples, with at least one batch per rank and data that a per-rank
computation would get wrong (a class or volume split across ranks, a type only one rank sees).

Tolerance: every value below is a ratio of integer counts or a sum of at most a few hundred float32/float64 terms
gathered in another order than one process adds them: rounding moves it by < 1e-6 (float32's relative precision is
6e-8); a reduction that drops, pads, repeats or mis-assembles rows moves it by far more (one example of ~100, 1e-2).
"""

from __future__ import annotations

import pytest
import torch
from distributed_metrics import SHARES, MetricCase, alone, differences, evaluate, run_distributed
from torch.nn import functional as F

from gate.data.spec import DatasetSpec


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------------------- classification
def classification_metrics():
    from gate.adapters.classification import LinearClassifier

    return LinearClassifier(feature_dim=4, num_classes=10).make_metrics()  # acc@1, acc@5 (torchmetrics)


def classification_updates():
    g = _gen(1)
    return [(torch.randn(7, 10, generator=g), torch.randint(0, 10, (7,), generator=g)) for _ in range(5)]


HEADS = DatasetSpec(name="whales", modality="image", task="classification", num_classes=6,
                    targets={"individual": "class", "species": "class"}, heads={"individual": 6, "species": 3})


def multihead_metrics():
    from gate.adapters.classification import LinearClassifier

    return LinearClassifier(feature_dim=4, num_classes=6, spec=HEADS).make_metrics()  # HeadAccuracy per head and k


def multihead_updates():
    g = _gen(2)
    return [(torch.randn(5, 9, generator=g), {"individual": torch.randint(0, 6, (5,), generator=g),
                                              "species": torch.randint(0, 3, (5,), generator=g)}) for _ in range(5)]


# ------------------------------------------------------------------------------------------------- multi-label
MULTI = DatasetSpec(name="toy", modality="image", task="multilabel", num_classes=4,
                    class_names=("a", "b", "c", "d"), targets={"labels": "multi_hot"})


def multilabel_metrics():
    from gate.adapters.multilabel import MultilabelClassifier

    return MultilabelClassifier(feature_dim=4, num_classes=4, spec=MULTI).make_metrics()


def multilabel_updates():
    """AUROC / AP / Brier macro and per class and auc_classes. Class ``b``'s positives are all in update 0 and its
    negatives elsewhere, so on either share one rank alone has no negative of it (a per-rank 'defined classes'
    would drop it); class ``d`` has no positive at all (undefined: NaN / left out); logits are rounded to
    0.5 so that scores tie across ranks."""
    g = _gen(3)
    updates = []
    for i in range(5):
        target = (torch.rand(6, 4, generator=g) < 0.5).float()
        target[:, 1] = 1.0 if i == 0 else 0.0
        target[:, 3] = 0.0
        logits = (target * 1.5 + torch.randn(6, 4, generator=g)).mul(2).round().div(2)
        updates.append((logits, target))
    return updates


# ------------------------------------------------------------------------------------------------ relational
QA = DatasetSpec(name="qa", modality="image", task="relational", num_classes=8,
                 targets={"answer": "answer", "answer_type": "answer_type"},
                 options={"answer_types": {"count": 4, "exists": 2, "spatial": 2}})


def relational_metrics():
    from gate.adapters.relational import RelationalReasoner

    return RelationalReasoner(token_dim=4, spec=QA, width=4, depth=1, heads=1).make_metrics()


def relational_updates():
    """acc@1 and acc@1/<type>; type 2 (spatial) appears only in update 3 (one rank)."""
    g = _gen(4)
    counts = [4, 2, 2]
    updates = []
    for i in range(5):
        kind = torch.randint(0, 2, (6,), generator=g)
        if i == 3:
            kind[:3] = 2
        answer = torch.stack([torch.randint(0, counts[k], (1,), generator=g)[0] for k in kind.tolist()])
        updates.append((torch.randn(6, 8, generator=g), {"answer": answer, "answer_type": kind}))
    return updates


# ---------------------------------------------------------------------------------------------- segmentation
SEG = DatasetSpec(name="seg", modality="image", task="segmentation", num_classes=4, targets={"mask": "mask"},
                  ignore_index=255)
VOL = DatasetSpec(name="vol", modality="image", task="segmentation", num_classes=4,
                  class_names=("background", "trouser", "bag", "ankle boot"), targets={"mask": "mask", "volume": "volume"})


def _noisy_logits(mask: torch.Tensor, g: torch.Generator, classes: int = 4) -> torch.Tensor:
    """Logits that mostly predict ``mask`` (ignored pixels as class 0), so every score is away from 0 and 1."""
    onehot = F.one_hot(mask.clamp(0, classes - 1), classes).permute(0, 3, 1, 2).float()
    return onehot * 2 + torch.randn(onehot.shape, generator=g) * 1.5


def segmentation_metrics():
    from gate.adapters.segmentation import SegmentationAdapter

    return SegmentationAdapter(level_dims=[8], num_classes=4, spec=SEG, hidden_dim=8, depth=0, num_heads=1).make_metrics()


def segmentation_updates():
    """miou / mean_acc / overall_acc / dice pooled over the split; class 3 only in update 1; ignored pixels."""
    g = _gen(5)
    updates = []
    for i in range(4):
        mask = torch.randint(0, 3, (3, 8, 8), generator=g)
        if i == 1:
            mask[0, :4] = 3
        mask[:, 0, :] = 255
        updates.append((_noisy_logits(mask, g), mask))
    return updates


def volume_metrics():
    from gate.adapters.segmentation import MedicalSegmentationAdapter

    return MedicalSegmentationAdapter(level_dims=[8], num_classes=4, spec=VOL, hidden_dim=8, depth=0,
                                      num_heads=1).make_metrics()


def volume_updates():
    """Per-volume dice / miou / mean_acc / overall_acc and dice/<structure>: 4 volumes of 5 slices in order, served
    in batches of 3 slices, so every volume's slices land on both ranks; structure 3 (ankle boot) only in
    volume 2, and volume 3 holds no foreground at all in its target."""
    g = _gen(6)
    slices = []
    for volume in range(4):
        for _ in range(5):
            mask = torch.randint(0, 3, (8, 8), generator=g)
            if volume == 2:
                mask[:3, :3] = 3
            if volume == 3:
                mask.zero_()
            slices.append((mask, volume))
    updates = []
    for start in range(0, len(slices), 3):
        batch = slices[start:start + 3]
        mask = torch.stack([m for m, _ in batch])
        volume = torch.tensor([v for _, v in batch])
        updates.append((_noisy_logits(mask, g), {"mask": mask, "volume": volume}))
    return updates


# -------------------------------------------------------------------------------------------------- temporal
CLIPS = DatasetSpec(name="clips", modality="video", task="temporal_classification", num_classes=6,
                    targets={"label": "clip_label"}, options={"frames": 2})
SPEEDS = DatasetSpec(name="speeds", modality="video", task="temporal_regression", num_classes=6,
                     targets={"speed": "clip_value"}, options={"frames": 2})


def temporal_classifier_metrics():
    from gate.adapters.temporal import TemporalClassifier

    return TemporalClassifier(feature_dim=4, spec=CLIPS, num_classes=6, width=4, depth=1, heads=1).make_metrics()


def temporal_classifier_updates():
    g = _gen(7)
    return [(torch.randn(4, 6, generator=g), torch.randint(0, 6, (4,), generator=g)) for _ in range(5)]


def temporal_regressor_metrics():
    from gate.adapters.temporal import TemporalRegressor

    return TemporalRegressor(feature_dim=4, spec=SPEEDS, width=4, depth=1, heads=1).make_metrics()  # mae, mse


def temporal_regressor_updates():
    g = _gen(8)
    return [(torch.randn(4, generator=g) * 50 + 300, torch.randn(4, generator=g) * 50 + 300) for _ in range(5)]


# -------------------------------------------------------------------------------------------------- few-shot
def few_shot_metrics():
    from gate.adapters.few_shot import ProtoNet

    return ProtoNet(feature_dim=4, min_ways=2, max_ways=5).make_metrics()


def few_shot_updates():
    """One update per episode: (queries, ways) logits and (queries,) labels, the ways varying by episode."""
    g = _gen(9)
    updates = []
    for ways in (2, 5, 3, 4, 5):
        queries = ways * 2
        updates.append((torch.randn(queries, ways, generator=g), torch.randint(0, ways, (queries,), generator=g)))
    return updates


# ----------------------------------------------------------------------------------------------- contrastive
def contrastive_metrics():
    # The adapter's own make_metrics (building ZeroShotContrastive needs a text tower; make_metrics reads these only).
    from types import SimpleNamespace

    from gate.adapters.contrastive import ZeroShotContrastive

    return ZeroShotContrastive.make_metrics(SimpleNamespace(top_k=(1, 5), fewest_candidates={}, retrieval_candidates=64,
                                                            pair_column=None))


def contrastive_updates():
    """(B, B) image x text logits per batch; targets as caption-group ids (two rows of one batch share one)."""
    g = _gen(10)
    updates = []
    for size in (6, 8, 6, 7, 6):
        groups = torch.arange(size)
        groups[1] = groups[0]
        updates.append((torch.randn(size, size, generator=g) + torch.eye(size), groups))
    return updates


# ------------------------------------------------------------------ the model's and ensemble tester's own states
def loss_mean_metric():
    from torchmetrics import MeanMetric

    return MeanMetric()  # GATEModel.val_loss / test_loss, EnsembleTester.best_loss and ensemble_losses


def loss_updates():
    """(a batch's mean loss, its example count): the weighted mean over examples, whatever the ranks' batches."""
    g = _gen(11)
    return [(torch.rand((), generator=g) * 3, n) for n in (8, 8, 8, 5, 3)]


def ensemble_volume_metrics():
    # EnsembleTester and GATEModel hold the adapter's collection cloned under a prefix.
    return volume_metrics().clone(prefix="test/ensemble_2/")


CASES = [
    MetricCase("classification", classification_metrics, classification_updates),
    MetricCase("classification_heads", multihead_metrics, multihead_updates),
    MetricCase("multilabel", multilabel_metrics, multilabel_updates),
    MetricCase("relational", relational_metrics, relational_updates),
    MetricCase("segmentation", segmentation_metrics, segmentation_updates),
    MetricCase("volume_segmentation", volume_metrics, volume_updates),
    MetricCase("temporal_classifier", temporal_classifier_metrics, temporal_classifier_updates),
    # mae/mse of targets near 300: float32 sums of squared errors ~1e4, so rounding reaches ~1e-3 absolute.
    MetricCase("temporal_regressor", temporal_regressor_metrics, temporal_regressor_updates, tolerance=1e-3),
    MetricCase("few_shot", few_shot_metrics, few_shot_updates),
    MetricCase("contrastive", contrastive_metrics, contrastive_updates),
    MetricCase("loss_mean", loss_mean_metric, loss_updates),
    MetricCase("ensemble_volume_segmentation", ensemble_volume_metrics, volume_updates),
]


@pytest.fixture(scope="module")
def distributed_results():
    return run_distributed(CASES, world=2)


#: Cases that fail for a known defect in code this branch may not change (strict: once fixed, drop the entry).
KNOWN_DEFECTS: dict[str, str] = {}  # case name -> why it fails today (a strict xfail: it must fail until fixed)
PARAMS = [pytest.param(case, id=case.name, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_DEFECTS[case.name])]
                       if case.name in KNOWN_DEFECTS else []) for case in CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_metric_reduced_across_two_ranks_equals_one_process(case, distributed_results):
    updates = case.updates()
    expected = alone(case, updates)  # each metric on its own, one process: the reference
    assert expected, case.name
    # One process, the adapter's collection as Lightning reads it. It failed for the multi-head classifier and the
    # relational adapter, whose metrics share state names: torchmetrics grouped e.g. acc@1/exists with
    # acc@1/count after a first batch where both counted the same, and reported the one's accuracy for both.
    problems = differences(expected, evaluate(case, updates), case.tolerance)
    assert not problems, f"{case.name}, one process: {problems}"
    for share in SHARES:
        for rank, results in enumerate(distributed_results):
            problems = differences(expected, results[(case.name, share)], case.tolerance)
            assert not problems, f"{case.name}, {share} share, rank {rank}: {problems}"

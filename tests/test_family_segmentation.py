"""Segmentation and volumetric segmentation: the GATE decoder, its metrics (known answers, ignored pixels,
per-volume re-assembly), ensembling, bad inputs, a real batch through EfficientNet-Lite0 and gate-run e2e."""

from __future__ import annotations

import os

import datasets
import numpy as np
import pytest
import torch
from torch.nn import functional as F

from gate.adapters.segmentation import MedicalSegmentationAdapter, SegmentationAdapter, segmentation_losses
from gate.adapters.segmentation_metrics import VolumeSegmentationMetric
from gate.cli import run as run_cli
from gate.data.spec import DatasetSpec
from gate.data.standins.segmentation import IGNORE, fmnist_seg, fmnist_volume
from gate.results import ResultsStore

from helpers import SMOKE, TINY_ENCODER, call_cli

SEG = DatasetSpec(name="fmnist_seg", modality="image", task="segmentation", num_classes=11,
                  targets={"mask": "mask"}, ignore_index=IGNORE)
VOL = DatasetSpec(name="fmnist_volume", modality="image", task="segmentation", num_classes=4,
                  targets={"mask": "mask", "volume": "volume"})
LEVEL_DIMS = [40, 112, 320, 1280]  # efficientnet_lite0's levels


def onehot_logits(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    return F.one_hot(labels, num_classes).permute(0, 3, 1, 2).float() * 10


def scores(adapter, logits, target) -> dict[str, float]:
    metrics = adapter.make_metrics()
    metrics.update(logits, target)
    return {k: float(v) for k, v in metrics.compute().items()}


def test_metrics_perfect_wrong_and_ignored_pixels():
    adapter = SegmentationAdapter(LEVEL_DIMS, 11, spec=SEG)
    mask = torch.randint(0, 11, (2, 8, 8))
    perfect = scores(adapter, onehot_logits(mask, 11), mask)
    assert perfect == pytest.approx({"miou": 1.0, "mean_acc": 1.0, "overall_acc": 1.0, "dice": 1.0})
    wrong = scores(adapter, onehot_logits((mask + 1) % 11, 11), mask)
    assert wrong == pytest.approx({"miou": 0.0, "mean_acc": 0.0, "overall_acc": 0.0, "dice": 0.0})
    # Ignored pixels predicted wrongly change nothing, in the metrics or the loss.
    ignored = mask.clone()
    ignored[:, :4] = IGNORE
    prediction = torch.where(ignored == IGNORE, (mask + 1) % 11, mask)
    assert scores(adapter, onehot_logits(prediction, 11), ignored) == pytest.approx(perfect)
    kept = segmentation_losses(onehot_logits(prediction, 11), ignored, IGNORE)
    same = segmentation_losses(onehot_logits(mask, 11), ignored, IGNORE)
    assert all(torch.allclose(kept[k], same[k]) for k in kept)
    # A known partial answer: 2 classes, 4 pixels, one wrong -> IoU 1/2 and 2/3, mean 7/12.
    adapter2 = SegmentationAdapter(LEVEL_DIMS, 2)
    target = torch.tensor([[[0, 0], [1, 1]]])
    got = scores(adapter2, onehot_logits(torch.tensor([[[0, 1], [1, 1]]]), 2), target)
    assert got["miou"] == pytest.approx(7 / 12) and got["overall_acc"] == pytest.approx(0.75)
    assert got["mean_acc"] == pytest.approx(0.75) and got["dice"] == pytest.approx((2 / 3 + 4 / 5) / 2)


def test_dice_loss_equals_the_one_hot_formula_in_value_and_gradient():
    """The loss sums each class's probability over its labelled pixels instead of building a (B, C, H, W) one-hot;
    the reference below is the one-hot formula, written out. Tolerance: float32 sums in a different order."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 7, 9, 11, generator=gen, requires_grad=True)
    target = torch.randint(0, 7, (2, 9, 11), generator=gen)
    target[0, :3] = IGNORE
    valid = (target != IGNORE).unsqueeze(1)
    probs = logits.softmax(1) * valid
    onehot = F.one_hot(torch.where(valid[:, 0], target, 0), 7).permute(0, 3, 1, 2) * valid
    inter, dims = (probs * onehot).sum((0, 2, 3)), (0, 2, 3)
    reference = 1.0 - ((2 * inter + 1.0) / (probs.sum(dims) + onehot.sum(dims) + 1.0)).mean()
    (want,) = torch.autograd.grad(reference, logits)
    dice = segmentation_losses(logits, target, IGNORE)["dice"]
    (got,) = torch.autograd.grad(dice, logits)
    assert torch.allclose(dice, reference, atol=1e-6) and torch.allclose(got, want, atol=1e-7)


def test_per_volume_metric_reassembles_volumes_whatever_the_batching():
    """Volume 7: foreground class 1 with dice 2*2/(3+3)=2/3; volume 3: perfect (dice 1). Mean over volumes: 5/6,
    not the pixel-pooled value, and the same however the slices are ordered and batched."""
    a = torch.tensor([[[1, 1, 1, 0]], [[0, 0, 0, 0]]])  # volume 7 target, 2 slices of 1x4
    pa = torch.tensor([[[1, 1, 0, 1]], [[0, 0, 0, 0]]])  # |P|=3, |T|=3, |P∩T|=2; 6 of 8 pixels right
    b = torch.tensor([[[2, 2, 0, 0]], [[2, 0, 0, 0]], [[0, 0, 0, 0]]])  # volume 3, 3 slices, predicted exactly
    masks, preds = torch.cat([a, b]), torch.cat([pa, b])
    volumes = torch.tensor([7, 7, 3, 3, 3])
    expected = (2 / 3 + 1.0) / 2
    for order in ([0, 1, 2, 3, 4], [4, 0, 2, 1, 3]):
        for cuts in ([5], [1, 3, 1], [2, 2, 1]):
            metric = VolumeSegmentationMetric(3, "dice")
            index = torch.tensor(order)
            for part in torch.split(index, cuts):
                metric.update(onehot_logits(preds[part], 3), {"mask": masks[part], "volume": volumes[part]})
            assert metric.per_volume() == pytest.approx({7: 2 / 3, 3: 1.0})
            assert float(metric.compute()) == pytest.approx(expected)
    adapter = MedicalSegmentationAdapter(LEVEL_DIMS, 3, spec=DatasetSpec(
        name="v", modality="image", task="segmentation", num_classes=3, targets={"mask": "mask", "volume": "volume"}))
    target = {"mask": masks, "volume": volumes}
    got = scores(adapter, onehot_logits(preds, 3), target)
    assert got["dice"] == pytest.approx(expected)
    assert got["miou"] == pytest.approx((0.5 + 1.0) / 2)  # volume 7: 2 / (3 + 3 - 2)
    assert got["overall_acc"] == pytest.approx((6 / 8 + 1.0) / 2)
    # Per structure, over the volumes that hold it in target or prediction: class 1 only in volume 7 (2/3),
    # class 2 only in volume 3 (1).
    assert got["dice/1"] == pytest.approx(2 / 3) and got["dice/2"] == pytest.approx(1.0)
    assert scores(adapter, onehot_logits(masks, 3), target) == pytest.approx(
        {"dice": 1.0, "miou": 1.0, "mean_acc": 1.0, "overall_acc": 1.0, "dice/1": 1.0, "dice/2": 1.0})
    wrong = scores(adapter, onehot_logits((masks + 1) % 3, 3), target)
    assert wrong == pytest.approx({"dice": 0.0, "miou": 0.0, "mean_acc": 0.0, "overall_acc": 0.0, "dice/1": 0.0,
                                   "dice/2": 0.0})


def test_combine_of_identical_predictions_is_the_single_one():
    torch.manual_seed(0)
    for adapter, target in ((SegmentationAdapter(LEVEL_DIMS, 11, spec=SEG), torch.randint(0, 11, (3, 6, 6))),
                            (MedicalSegmentationAdapter(LEVEL_DIMS, 4, spec=VOL),
                             {"mask": torch.randint(0, 4, (3, 6, 6)), "volume": torch.tensor([0, 0, 1])})):
        logits = torch.randn(3, adapter.num_classes, 6, 6)
        combined = adapter.combine([logits, logits])
        assert torch.allclose(combined, logits)
        assert scores(adapter, combined, target) == scores(adapter, logits, target)


@pytest.fixture(scope="module")
def encoder():
    from gate.encoders import EfficientNetLite

    return EfficientNetLite("efficientnet-lite0", image_size=32)


@pytest.mark.parametrize("name", ["fmnist_seg", "fmnist_volume"])
def test_forward_backward_on_a_real_standin_batch(tmp_path, encoder, name):
    from gate.data.datamodule import GATEDataModule
    from gate.engine.build import build_adapter

    if name == "fmnist_seg":
        spec, splits = SEG, fmnist_seg(tmp_path, train_size=8, val_size=4, test_size=4)
        cfg = {"_target_": "gate.adapters.segmentation.SegmentationAdapter", "num_classes": 11, "hidden_dim": 32,
               "num_heads": 2, "depth": 1, "grid_size": 8}
    else:
        spec, splits = VOL, fmnist_volume(tmp_path, train_volumes=2, val_volumes=1, test_volumes=1, depth=4)
        cfg = {"_target_": "gate.adapters.segmentation.MedicalSegmentationAdapter", "num_classes": 4,
               "hidden_dim": 32, "num_heads": 2, "depth": 1, "grid_size": 8}
    adapter = build_adapter(cfg, encoder, spec)
    assert adapter.ignore_index == spec.ignore_index and adapter.augment_inputs is False
    data = GATEDataModule(spec, splits, encoder, adapter, batch_size=4)
    batch = data.on_after_batch_transfer(next(iter(data.train_dataloader())), 0)
    logits = adapter.predict(encoder, batch)
    assert logits.shape == (4, spec.num_classes, 64, 64)
    target = adapter.target(batch)
    loss = adapter.loss(logits, target)
    loss.backward()
    assert torch.isfinite(loss) and adapter.decoder.classifier.weight.grad.abs().sum() > 0
    assert next(encoder.parameters()).grad is not None
    encoder.zero_grad()
    metrics = adapter.make_metrics()
    metrics.update(logits.detach(), target)
    values = metrics.compute()
    per_structure = {f"dice/{adapter.class_keys[c]}" for c in adapter.scored_classes()} if name == "fmnist_volume" else set()
    assert per_structure == ({"dice/1", "dice/2", "dice/3"} if name == "fmnist_volume" else set())  # the test split holds all
    assert set(values) == {"miou", "mean_acc", "overall_acc", "dice"} | per_structure
    # (a structure this one training batch lacks in target and prediction is NaN here: 0/0, never a number)
    assert all(0.0 <= float(v) <= 1.0 for v in values.values() if not torch.isnan(v))


def _split(columns: dict) -> datasets.Dataset:
    return datasets.Dataset.from_dict(columns)


def test_bad_inputs_name_dataset_split_and_example():
    seg = SegmentationAdapter(LEVEL_DIMS, 11, spec=SEG)
    good = np.zeros((4, 4), np.int64)
    bad = good.copy()
    bad[1, 2] = 11
    with pytest.raises(ValueError, match=r"'fmnist_seg'.*split 'val' example 2.*\[11\] outside 0\.\.10"):
        seg.check_split(SEG, "val", _split({"mask": [good, good, bad]}))
    seg.check_split(SEG, "val", _split({"mask": [good, np.full((4, 4), IGNORE)]}))  # ignored pixels are fine
    plain = DatasetSpec(name="plain", modality="image", task="segmentation", num_classes=11, targets={"mask": "mask"})
    with pytest.raises(ValueError, match=r"'plain'.*split 'train' example 0.*\[255\].*no ignore_index"):
        seg.check_split(plain, "train", _split({"mask": [np.full((4, 4), IGNORE)]}))
    with pytest.raises(ValueError, match=r"'plain'.*split 'test' example 1.*\[-1\]"):
        seg.check_split(plain, "test", _split({"mask": [good, good - 1]}))

    vol = MedicalSegmentationAdapter(LEVEL_DIMS, 4, spec=VOL)
    with pytest.raises(ValueError, match=r"'fmnist_volume'.*split 'train' example 1: slice has no valid volume id"):
        vol.check_split(VOL, "train", _split({"mask": [good, good], "volume": [0, None]}))
    with pytest.raises(ValueError, match=r"'fmnist_volume'.*split 'val' example 0: slice has no valid volume id"):
        vol.check_split(VOL, "val", _split({"mask": [good], "volume": [-1]}))
    with pytest.raises(ValueError, match=r"'fmnist_volume'.*split 'test' example 2: slice of volume 5 has a \(4, 3\) "
                                         r"mask, but the volume's slice at example 0 is \(4, 4\)"):
        vol.check_split(VOL, "test", _split({"mask": [good, good, good[:, :3]], "volume": [5, 6, 5]}))
    with pytest.raises(ValueError, match=r"'fmnist_volume'.*split 'val' example 1.*\[4\]"):
        vol.check_split(VOL, "val", _split({"mask": [good, good + 4], "volume": [0, 0]}))


def test_standins_are_seeded_and_well_formed():
    a = fmnist_seg(None, seed=1, train_size=6, val_size=2, test_size=2)
    b = fmnist_seg(None, seed=1, train_size=6, val_size=2, test_size=2)
    masks = np.asarray(a["train"].with_format("numpy")[:]["mask"])
    assert masks.shape == (6, 64, 64) and np.array_equal(masks, np.asarray(b["train"].with_format("numpy")[:]["mask"]))
    assert set(np.unique(masks)) <= set(range(11)) | {IGNORE} and (masks > 0).any()
    v = fmnist_volume(None, seed=1, train_volumes=2, val_volumes=1, test_volumes=1, depth=3)
    rows = v["train"].with_format("numpy")[:]
    assert list(rows["volume"]) == [0, 0, 0, 1, 1, 1] and list(rows["slice"]) == [0, 1, 2] * 2
    assert set(np.unique(rows["mask"])) <= {0, 1, 2, 3}
    assert set(v["val"]["volume"]).isdisjoint(set(v["test"]["volume"]) | {0, 1})  # ids unique across splits


def _run(tmp_path, dataset: str, sizes: list[str], capsys) -> list[dict]:
    # gate-run's command line, in process (tests/helpers.py call_cli); the smoke preset, the default logging callbacks,
    # run from the test's temporary directory
    args = [f"dataset={dataset}", *SMOKE, "callbacks=default", "ensembles=[1,2]", f"paths.root={tmp_path}",
            "adapter.hidden_dim=32", "adapter.num_heads=2", "adapter.depth=1", *sizes]
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        proc = call_cli(run_cli.main, args, capsys, prog="gate-run")
    finally:
        os.chdir(here)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ResultsStore(tmp_path / "results" / "records.jsonl").records()


@pytest.mark.slow
def test_gate_run_fmnist_seg(tmp_path, capsys):
    rows = _run(tmp_path, "fmnist_seg", ["dataset.builder.train_size=32", "dataset.builder.val_size=8",
                                         "dataset.builder.test_size=8"], capsys)
    names = {r["metric"] for r in rows if r["split"] == "test"}
    for metric in ("miou", "mean_acc", "overall_acc", "dice"):
        assert {metric, f"ensemble_1/{metric}", f"ensemble_2/{metric}"} <= names
    assert all(0.0 <= r["value"] <= 1.0 for r in rows if r["metric"].endswith(("miou", "dice")))


@pytest.mark.slow
def test_gate_run_fmnist_volume(tmp_path, capsys):
    rows = _run(tmp_path, "fmnist_volume", [*TINY_ENCODER, "dataset.builder.train_volumes=4", "dataset.builder.val_volumes=2",
                                            "dataset.builder.test_volumes=2", "dataset.builder.depth=4"], capsys)
    names = {r["metric"] for r in rows if r["split"] == "test"}
    for metric in ("dice", "miou", "mean_acc", "overall_acc"):
        assert {metric, f"ensemble_1/{metric}", f"ensemble_2/{metric}"} <= names

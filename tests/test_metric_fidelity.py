"""Metric fidelity (issue 15): each number checked against a hand computation, where the field's rule (GATE's
code, mmseg, the ACDC challenge, scikit-learn) and the old behaviour differ.

Each test names the rule it holds and the value the old code gave, so a regression shows which rule broke."""

from __future__ import annotations

import math
import warnings

import datasets
import numpy as np
import pandas as pd
import pytest
import torch
from torch.nn import functional as F

from gate.adapters.multilabel import MultilabelClassifier
from gate.adapters.relational import RelationalReasoner
from gate.adapters.segmentation import MedicalSegmentationAdapter, SegmentationAdapter
from gate.adapters.temporal import TemporalClassifier, TemporalRegressor
from gate.data.spec import DatasetSpec
from gate.metrics import lookup

from helpers import compose_run

LEVEL_DIMS = [8]


def onehot_logits(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    return F.one_hot(labels, num_classes).permute(0, 3, 1, 2).float() * 10


def computed(metrics, predictions, target) -> dict[str, float]:
    metrics.update(predictions, target)
    return {k: float(v) for k, v in metrics.compute().items()}


# ------------------------------------------------------------------------------------------ segmentation


def gate_iou_metric(pred: np.ndarray, label: np.ndarray, num_classes: int, ignore: int | None) -> dict[str, float]:
    """GATE's IoUMetric.compute_metrics (gate/metrics/segmentation.py in the GATE repository), restated with
    numpy on 0-1 scale: areas pooled over the split, IoU over classes with a non-zero union, accuracy over classes
    with a non-zero label area."""
    pred, label = pred.ravel(), label.ravel()
    if ignore is not None:
        pred, label = pred[label != ignore], label[label != ignore]
    inter = np.bincount(pred[pred == label], minlength=num_classes).astype(float)
    area_pred = np.bincount(pred, minlength=num_classes).astype(float)
    area_label = np.bincount(label, minlength=num_classes).astype(float)
    union = area_pred + area_label - inter
    iou = np.where(union > 0, inter / np.maximum(union, 1), np.nan)
    acc = np.where(area_label > 0, inter / np.maximum(area_label, 1), np.nan)
    return {"miou": float(np.nanmean(iou)), "mean_acc": float(np.nanmean(acc)),
            "overall_acc": float(inter.sum() / area_label.sum())}


def test_segmentation_mean_acc_leaves_out_a_class_absent_from_the_target_as_gate_and_mmseg_do():
    """Eight pixels, four classes. Class 2 is predicted twice but never in the target; class 3 is in neither.

    mean_acc: class 0 recall 3/4, class 1 2/4; class 2 has no target pixel (0/0) -> (3/4 + 2/4) / 2 = 0.625
    (the old torchmetrics macro counted class 2 as 0: (3/4 + 2/4 + 0) / 3 = 0.4167).
    miou: IoU 3/5, 2/4 and 0 for class 2 (a real false positive); class 3 (union 0) left out -> 1.1 / 3.
    dice: F1 6/8, 4/6 and 0 -> (0.75 + 0.6667 + 0) / 3. overall_acc 5/8."""
    target = torch.tensor([[[0, 0, 0, 1, 1, 1, 0, 1]]])
    pred = torch.tensor([[[0, 0, 2, 1, 1, 0, 0, 2]]])
    got = computed(SegmentationAdapter(LEVEL_DIMS, 4).make_metrics(), onehot_logits(pred, 4), target)
    assert got["mean_acc"] == pytest.approx(0.625, abs=1e-6)
    assert got["miou"] == pytest.approx((3 / 5 + 2 / 4 + 0) / 3, abs=1e-6)
    assert got["dice"] == pytest.approx((6 / 8 + 4 / 6 + 0) / 3, abs=1e-6)
    assert got["overall_acc"] == pytest.approx(5 / 8, abs=1e-6)
    assert got == pytest.approx({k: v for k, v in gate_iou_metric(pred.numpy(), target.numpy(), 4, None).items()}
                                | {"dice": got["dice"]}, abs=1e-6)


def test_segmentation_metrics_equal_gates_iou_metric_on_random_masks_with_ignored_pixels():
    gen = torch.Generator().manual_seed(3)
    target = torch.randint(0, 6, (4, 16, 16), generator=gen)
    target[target == 5] = 3  # class 5 never in the target ...
    pred = torch.randint(0, 7, (4, 16, 16), generator=gen).clamp(max=5)  # ... but predicted; class 6 (ignore) not
    target[:, :3] = 255
    adapter = SegmentationAdapter(LEVEL_DIMS, 6, ignore_index=255)
    metrics = adapter.make_metrics()
    for b in range(4):  # batch by batch: the areas are pooled over the split
        metrics.update(onehot_logits(pred[b:b + 1], 6), target[b:b + 1])
    got = {k: float(v) for k, v in metrics.compute().items()}
    expected = gate_iou_metric(pred.numpy(), target.numpy(), 6, 255)
    for key in ("miou", "mean_acc", "overall_acc"):
        assert got[key] == pytest.approx(expected[key], abs=1e-6), key


# -------------------------------------------------------------------------------------- medical (ACDC)

ACDC_LIKE = DatasetSpec(name="acdc_like", modality="image", task="segmentation", num_classes=4,
                        class_names=("background", "right ventricle", "myocardium", "left ventricle"),
                        targets={"mask": "mask", "volume": "volume"})


def test_medical_dice_per_structure_is_averaged_over_the_volumes_that_hold_it():
    """Volume 0: target [1,1,2,3], prediction [1,2,2,3] -> RV 2*1/(1+2) = 2/3, MYO 2*1/(2+1) = 2/3, LV 1.
    Volume 1: target [1,3,3,0], prediction [1,3,0,0] -> RV 1, LV 2*1/(2+1) = 2/3, MYO in neither (0/0: left out).
    dice/right_ventricle (2/3 + 1)/2 = 5/6; dice/myocardium 2/3 (volume 0 only); dice/left_ventricle 5/6.
    dice: volume 0 (2/3 + 2/3 + 1)/3 = 7/9, volume 1 (1 + 2/3)/2 = 5/6 -> 29/36."""
    adapter = MedicalSegmentationAdapter(LEVEL_DIMS, 4, spec=ACDC_LIKE)
    target = {"mask": torch.tensor([[[1, 1, 2, 3]], [[1, 3, 3, 0]]]), "volume": torch.tensor([0, 1])}
    pred = torch.tensor([[[1, 2, 2, 3]], [[1, 3, 0, 0]]])
    got = computed(adapter.make_metrics(), onehot_logits(pred, 4), target)
    assert {k for k in got if k.startswith("dice/")} == {"dice/right_ventricle", "dice/myocardium", "dice/left_ventricle"}
    assert got["dice/right_ventricle"] == pytest.approx(5 / 6, abs=1e-6)
    assert got["dice/myocardium"] == pytest.approx(2 / 3, abs=1e-6)
    assert got["dice/left_ventricle"] == pytest.approx(5 / 6, abs=1e-6)
    assert got["dice"] == pytest.approx(29 / 36, abs=1e-6)
    assert all(lookup(k) is not None and lookup(k).higher_is_better for k in got)


def test_a_structure_the_test_split_lacks_gets_no_dice_key_and_one_warning():
    adapter = MedicalSegmentationAdapter(LEVEL_DIMS, 4, spec=ACDC_LIKE)
    no_myo = [np.array([[1, 3], [0, 0]], dtype=np.int64), np.array([[3, 0], [0, 1]], dtype=np.int64)]
    split = datasets.Dataset.from_dict({"mask": [m.tolist() for m in no_myo], "volume": [0, 0]})
    adapter.check_split(ACDC_LIKE, "val", split)  # a val split without it: no warning, keys follow the test split
    with pytest.warns(UserWarning, match=r"split 'test' holds no pixel of \['myocardium'\]") as seen:
        adapter.check_split(ACDC_LIKE, "test", split)
    assert len([w for w in seen if "holds no pixel" in str(w.message)]) == 1
    assert {k for k in adapter.make_metrics().keys() if k.startswith("dice/")} == {
        "dice/right_ventricle", "dice/left_ventricle"}


# ---------------------------------------------------------------------------------------------- multi-label

ML = DatasetSpec(name="ml", modality="image", task="multilabel", num_classes=4, class_names=("a", "b", "c", "d"),
                 targets={"labels": "multi_hot"})
# Class a: positives at 0 and 2; b: at 1 and 3; c: no positive; d: no negative.
ML_TARGET = torch.tensor([[1, 0, 0, 1], [0, 1, 0, 1], [1, 0, 0, 1], [0, 1, 0, 1]], dtype=torch.float32)
ML_LOGITS = torch.tensor([[2.0, 0.0, 0.3, 0.1], [-1.0, 1.0, -0.2, 0.2], [0.5, -1.0, 0.1, -0.3], [1.0, 2.0, 0.0, 0.4]])


def _multi_hot_split(rows) -> datasets.Dataset:
    rows = [list(map(int, r)) for r in rows]
    return datasets.Dataset.from_dict({"image": [[[0]] for _ in rows], "labels": rows})


def test_multilabel_macro_leaves_out_classes_without_positives_or_negatives():
    """Class a: positive scores 2, 0.5 vs negative -1, 1: 3 of 4 pairs ordered -> AUC 0.75; ranked
    2(+) 1(-) 0.5(+) -1(-): AP (1/1 + 2/3)/2 = 5/6. Class b: positives 1, 2 above negatives 0, -1: AUC 1, AP 1.
    c (no positive) and d (no negative) are undefined: auc_macro (0.75 + 1)/2 = 0.875, aps_macro (5/6 + 1)/2,
    auc_classes 2. The old macro averaged c and d in as AUC 0: (0.75 + 1 + 0 + 0)/4 = 0.4375."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    adapter = MultilabelClassifier(feature_dim=4, num_classes=4, spec=ML)
    with pytest.warns(UserWarning, match=r"2 of 4 classes have no positive or no negative.*\['c', 'd'\]") as seen:
        metrics = adapter.make_metrics()
        metrics.update(ML_LOGITS[:2], ML_TARGET[:2])  # two batches: one warning for the evaluation, none per batch
        metrics.update(ML_LOGITS[2:], ML_TARGET[2:])
        got = {k: float(v) for k, v in metrics.compute().items()}
    assert len([w for w in seen if "multi-label:" in str(w.message)]) == 1
    assert got["auc/a"] == pytest.approx(0.75) and got["auc/b"] == pytest.approx(1.0)
    assert got["auc_macro"] == pytest.approx(0.875, abs=1e-6)
    assert got["aps_macro"] == pytest.approx((5 / 6 + 1) / 2, abs=1e-6)
    assert got["auc_classes"] == 2
    probs = torch.sigmoid(ML_LOGITS).numpy()
    assert got["auc_macro"] == pytest.approx(np.mean([roc_auc_score(ML_TARGET[:, i], probs[:, i]) for i in (0, 1)]))
    assert got["aps_macro"] == pytest.approx(np.mean([average_precision_score(ML_TARGET[:, i], probs[:, i])
                                                      for i in (0, 1)]))
    # Undefined per-class scores are NaN, never 0 or 1 (and are not made once the test split is known).
    assert math.isnan(got["auc/c"]) and math.isnan(got["aps/d"])
    assert lookup("auc_classes") is not None and lookup("test/ensemble_3/auc_classes").higher_is_better


def test_multilabel_per_class_keys_follow_the_classes_the_test_split_defines():
    adapter = MultilabelClassifier(feature_dim=4, num_classes=4, spec=ML)
    adapter.check_split(ML, "test", _multi_hot_split(ML_TARGET.int().tolist()))
    keys = set(adapter.make_metrics().keys())
    assert {"auc/a", "auc/b", "aps/a", "aps/b"} <= keys
    assert not {"auc/c", "auc/d", "aps/c", "aps/d"} & keys
    assert {f"brier/{c}" for c in "abcd"} <= keys and {"auc_macro", "aps_macro", "auc_classes"} <= keys  # Brier is defined
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = computed(adapter.make_metrics(), ML_LOGITS, ML_TARGET)
    assert all(math.isfinite(v) for v in values.values())  # every key made can be recorded


def test_a_test_split_that_defines_no_class_is_refused_before_training():
    """data.max_test_samples=1: one example is all-positive or all-negative for every class (old: auc_macro 0.0)."""
    adapter = MultilabelClassifier(feature_dim=4, num_classes=4, spec=ML)
    with pytest.raises(ValueError, match=r"dataset 'ml': split 'test' \(1 examples\) has no class with both a positive "
                                         r"and a negative example.*data.max_test_samples"):
        adapter.check_split(ML, "test", _multi_hot_split([[1, 0, 0, 1]]))
    adapter.check_split(ML, "train", _multi_hot_split([[1, 0, 0, 1]]))  # training on it is another matter


def test_gate_run_refuses_a_multilabel_eval_cap_of_one_before_building_anything(tmp_path):
    from gate.engine.validate import validate_run_config
    from gate.errors import ConfigError

    with pytest.raises(ConfigError, match=r"data.max_test_samples=1 is invalid: a multilabel split needs >= 2"):
        validate_run_config(compose_run(tmp_path, ["dataset=fmnist_multilabel", "data.max_test_samples=1"]))
    validate_run_config(compose_run(tmp_path, ["dataset=fmnist_multilabel", "data.max_test_samples=2"]))
    validate_run_config(compose_run(tmp_path, ["dataset=digits", "data.max_test_samples=1"]))  # classification: fine


# ------------------------------------------------------------------------------------------------ relational

QA = DatasetSpec(name="qa", modality="image", task="relational", num_classes=4,
                 targets={"answer": "answer", "answer_type": "answer_type"},
                 options={"answer_types": {"count": 2, "exists": 2}})


def test_an_answer_type_without_questions_is_left_out_not_recorded_as_zero():
    """Test split of two 'count' questions (one answered right) and no 'exists' question: acc@1 = 1/2 and
    acc@1/count = 1/2; acc@1/exists is 0/0, which the old code recorded as 0."""
    adapter = RelationalReasoner(token_dim=8, spec=QA, width=8, depth=1, heads=2)
    split = datasets.Dataset.from_dict({"image": [[[0]], [[0]]], "question": ["how many cubes", "how many balls"],
                                        "answer": [1, 0], "answer_type": [0, 0]})
    with pytest.warns(UserWarning, match=r"split 'test' has no question of answer type\(s\) \['exists'\]"):
        adapter.check_split(QA, "test", split)
    predictions = torch.tensor([[0.0, 5.0, 0.0, 0.0], [0.0, 5.0, 0.0, 0.0]])  # both say answer 1
    got = computed(adapter.make_metrics(), predictions, {"answer": torch.tensor([1, 0]),
                                                         "answer_type": torch.tensor([0, 0])})
    assert got == {"acc@1": pytest.approx(0.5), "acc@1/count": pytest.approx(0.5)}


# -------------------------------------------------------------------------------------------------- temporal


def clips(num_classes: int = 3) -> DatasetSpec:
    return DatasetSpec(name="clips", modality="video", task="temporal_classification", num_classes=num_classes,
                       targets={"label": "clip_label"}, options={"frames": 2})


def test_top_k_at_or_above_the_class_count_is_left_out_with_one_line():
    """acc@5 with 3 classes: every label is among the top 5 -> 1 whatever the model (GATE records top-min(5, C))."""
    with pytest.warns(UserWarning, match=r"acc@k for k=\[5\] is not recorded: with 3 classes") as seen:
        small = TemporalClassifier(feature_dim=4, spec=clips(3), num_classes=3, width=8, heads=2, depth=1)
    assert len(seen) == 1 and set(small.make_metrics().keys()) == {"acc@1"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # six classes: acc@5 measures something, no warning
        big = TemporalClassifier(feature_dim=4, spec=clips(6), num_classes=6, width=8, heads=2, depth=1)
    assert set(big.make_metrics().keys()) == {"acc@1", "acc@5"}


def test_regression_predictions_are_de_standardised_in_float32_under_bf16_autocast():
    """Train mean 500.3, std 1.7: prediction = z * 1.7 + 500.3 with z the head's output. In bf16 (8-bit mantissa)
    values in [256, 512) are multiples of 2, so the old bf16 affine was off by up to 1."""
    spec = DatasetSpec(name="speed", modality="video", task="temporal_regression", num_classes=1,
                       targets={"speed": "clip_value"}, options={"frames": 2})
    torch.manual_seed(0)
    adapter = TemporalRegressor(feature_dim=4, spec=spec, width=8, heads=2, depth=1).eval()
    adapter.target_mean.fill_(500.3)
    adapter.target_std.fill_(1.7)
    frames = torch.randn(16, 2, 4)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        z = super(TemporalRegressor, adapter).temporal(frames).squeeze(-1)
        predictions = adapter.temporal(frames)
    assert z.dtype == torch.bfloat16  # autocast is on: the head itself runs in bf16
    assert predictions.dtype == torch.float32
    expected = z.double() * 1.7 + 500.3
    assert torch.allclose(predictions.double(), expected, atol=1e-3)


# ---------------------------------------------------------------------------------- report: notes vs GATE


def test_the_acdc_note_is_read_from_its_dataset_config_and_printed_beside_its_numbers(tmp_path):
    from gate.analysis.meta import load_benchmark_meta
    from gate.analysis.pipeline import run_analysis

    note = load_benchmark_meta()["acdc"].notes_vs_gate
    assert "pooled" in note and "no hard Dice" in note
    rows = [{"encoder": e, "dataset": d, "metric": m, "value": v}
            for e, base in (("enc_a", 0.7), ("enc_b", 0.6))
            for d, m, v in (("acdc", "dice", base), ("digits", "acc@1", base + 0.2))]
    results = tmp_path / "results.csv"
    pd.DataFrame(rows).to_csv(results, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_analysis(results, tmp_path / "report", figures=False)
    page = out.files["report.html"].read_text()
    assert "acdc †" in page and "no hard Dice" in page
    assert page.count("no hard Dice") >= 2  # beside the results table's row and in the benchmark table
    assert "digits †" not in page


def test_a_departing_benchmark_is_marked_in_every_table_and_csv(tmp_path):
    """nycc's note (another dataset than GATE's) appears in table.md, table.tex, tiers_benchmarks.csv and the
    family comparison gate-tier prints; a benchmark without a note is never marked."""
    from gate.analysis.pipeline import run_analysis
    from gate.tiers.summary import compare_encoders, format_comparison

    rows = [{"encoder": e, "dataset": d, "metric": m, "value": v}
            for e, base in (("enc_a", 0.7), ("enc_b", 0.6))
            for d, m, v in (("nycc", "img2txt_acc@1", base), ("digits", "acc@1", base + 0.2))]
    results = tmp_path / "results.csv"
    pd.DataFrame(rows).to_csv(results, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_analysis(results, tmp_path / "report", figures=False, tiers={"t": {"benchmarks": ["nycc", "digits"]}})
    md = out.files["table.md"].read_text()
    assert "nycc †" in md and "digits †" not in md and "loads Flickr30K under the name nycc" in md
    tex = out.files["table.tex"].read_text()
    assert r"nycc $^\dagger$" in tex and "Flickr30K" in tex
    info = pd.read_csv(out.files["tiers_benchmarks.csv"], keep_default_na=False).set_index("benchmark")
    assert "Flickr30K" in info.loc["nycc", "vs_gate"] and info.loc["digits", "vs_gate"] == ""
    comp = compare_encoders(out.tiers, ["enc_a", "enc_b"], "t", info.reset_index())
    lines = format_comparison(comp)
    assert any(line.strip().startswith("t (tier mean) †") for line in lines)
    assert any("depart from the GATE paper's protocol" in line and "nycc" in line for line in lines)
    marked_families = [line.split("  ")[1] for line in lines[1:] if "†" in line.split("  ")[1]]
    assert all("Img Class" not in f for f in marked_families)  # digits' family carries no mark


@pytest.mark.parametrize("key", ["chexpert", "nycc", "nyu", "flickr30k", "ham10k", "pascal_context", "iwildcam",
                                 "diabetic_retinopathy", "winoground", "ade20k", "clevr", "acdc", "kinetics400"])
def test_benchmarks_documented_as_not_comparable_carry_a_note(key):
    """docs/datasets.md says these numbers are not (or only loosely) comparable with the paper's; the report can
    only say so beside the number if the dataset config carries the note."""
    from gate.analysis.meta import load_benchmark_meta

    assert load_benchmark_meta()[key].notes_vs_gate

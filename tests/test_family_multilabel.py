"""The multi-label family: the multilabel_classifier adapter and the fmnist_multilabel stand-in."""

import datasets
import numpy as np
import pytest
import torch

from gate.adapters.multilabel import MultilabelClassifier
from gate.cli import run as run_cli
from gate.data.datamodule import GATEDataModule
from gate.data.spec import DatasetSpec
from gate.data.standins.multilabel import CLASS_NAMES, fmnist_multilabel
from gate.metrics import lookup

from helpers import SMOKE, TINY_ENCODER, call_cli

NAMES = ("a", "b", "c")
SPEC = DatasetSpec(name="toy", modality="image", task="multilabel", num_classes=3, class_names=NAMES,
                   targets={"labels": "multi_hot"})


def adapter(spec=SPEC, feature_dim=4):
    return MultilabelClassifier(feature_dim=feature_dim, num_classes=spec.num_classes, spec=spec)


TARGET = torch.tensor([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 1]], dtype=torch.float32)


def computed(predictions, target=TARGET):
    metrics = adapter().make_metrics()
    metrics.update(predictions[:3], target[:3])  # two batches: the epoch's scores are kept across updates
    metrics.update(predictions[3:], target[3:])
    return {k: float(v) for k, v in metrics.compute().items()}


def test_perfect_ranking_has_auc_and_aps_one_and_reversed_has_auc_zero():
    logits = (TARGET * 2 - 1) * 2.0
    good = computed(logits)
    assert good["auc_macro"] == pytest.approx(1.0) and good["aps_macro"] == pytest.approx(1.0)
    bad = computed(-logits)
    assert bad["auc_macro"] == pytest.approx(0.0)
    for name in NAMES:
        assert good[f"auc/{name}"] == pytest.approx(1.0) and bad[f"auc/{name}"] == pytest.approx(0.0)


def test_brier_is_the_mean_squared_error_of_the_probabilities():
    exact = computed((TARGET * 2 - 1) * 40)  # sigmoid gives the 0/1 targets to float precision
    assert exact["brier_macro"] == pytest.approx(0.0, abs=1e-12)
    half = computed(torch.zeros_like(TARGET))  # p = 0.5 everywhere: (0.5 - y)^2 = 0.25
    assert half["brier_macro"] == pytest.approx(0.25) and half["brier/b"] == pytest.approx(0.25)
    logits = torch.tensor([[2.0, -1.0, 0.5]]).repeat(6, 1)
    p = torch.sigmoid(logits)
    expected = ((p - TARGET) ** 2).mean(dim=0)
    got = computed(logits)
    for i, name in enumerate(NAMES):
        assert got[f"brier/{name}"] == pytest.approx(float(expected[i]), rel=1e-6)
    assert got["brier_macro"] == pytest.approx(float(expected.mean()), rel=1e-6)


def test_every_key_is_a_registered_scalar_and_per_class_keys_use_the_class_names():
    got = computed(torch.randn(6, 3, generator=torch.Generator().manual_seed(0)))
    expected = {"auc_macro", "aps_macro", "auc_classes", "brier_macro"} | {f"{m}/{n}" for m in ("auc", "aps", "brier")
                                                                          for n in NAMES}
    assert set(got) == expected
    assert all(lookup(k) is not None for k in got)
    no_names = DatasetSpec(name="toy", modality="image", task="multilabel", num_classes=3,
                           targets={"labels": "multi_hot"})
    assert {k for k in adapter(no_names).make_metrics().keys() if k.startswith("auc/")} == {"auc/0", "auc/1", "auc/2"}
    assert adapter().monitor == "auc_macro" and adapter().monitor_mode == "max"


def test_ensemble_of_identical_predictions_equals_the_single_one():
    logits = torch.randn(6, 3, generator=torch.Generator().manual_seed(1))
    combined = adapter().combine([logits, logits.clone(), logits.clone()])
    assert torch.allclose(combined, logits)
    assert computed(combined) == pytest.approx(computed(logits))


def _toy_split(labels, features=None):
    labels = [list(map(int, row)) for row in labels]
    images = [[[0] * 4] * 4 for _ in labels]
    return datasets.Dataset.from_dict({"image": images, "labels": labels}, features=features)


@pytest.mark.parametrize(("labels", "message"), [
    ([[1, 0, 1], [0, 1, 0, 1]], "example 1"),               # a row of the wrong width
    ([[1, 0], [0, 1]], "example 0"),                          # every row too narrow
    ([[1, 0, 1], [0, 1, 0], [0, 2, 0]], r"example 2 has labels\[1\]=2"),  # not 0/1
])
def test_bad_multi_hot_targets_name_dataset_split_and_example(labels, message):
    with pytest.raises(ValueError, match=rf"dataset 'toy': split 'val'.*{message}"):
        adapter().check_split(SPEC, "val", _toy_split(labels))


def test_good_multi_hot_targets_pass():
    adapter().check_split(SPEC, "train", _toy_split(TARGET.int().tolist()))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return fmnist_multilabel(str(tmp_path_factory.mktemp("cache")), seed=0, train_size=12, val_size=6, test_size=6)


def test_standin_is_seeded_and_its_targets_match_the_items(tiny, tmp_path):
    again = fmnist_multilabel(None, seed=0, train_size=12, val_size=6, test_size=6)
    other = fmnist_multilabel(None, seed=1, train_size=12, val_size=6, test_size=6)
    rows = tiny["train"].with_format("numpy")[:]
    assert np.array_equal(rows["labels"], again["train"].with_format("numpy")[:]["labels"])
    assert not np.array_equal(rows["image"], other["train"].with_format("numpy")[:]["image"])
    assert rows["image"].shape == (12, 56, 56) and rows["labels"].shape == (12, 10)
    counts = rows["labels"].sum(axis=1)
    assert counts.min() >= 1 and counts.max() <= 4
    # each 28-px cell holds an item or is blank: the number of inked cells is the number of classes present
    cells = rows["image"].reshape(12, 2, 28, 2, 28).max(axis=(2, 4))
    assert np.array_equal((cells > 40).sum(axis=(1, 2)), counts)
    assert len(CLASS_NAMES) == 10


def test_forward_backward_on_a_standin_batch_through_efficientnet_lite0(tiny):
    from gate.encoders import EfficientNetLite

    spec = DatasetSpec(name="fmnist_multilabel", modality="image", task="multilabel", num_classes=10,
                       class_names=CLASS_NAMES, targets={"labels": "multi_hot"})
    encoder = EfficientNetLite(image_size=32)
    head = MultilabelClassifier(feature_dim=encoder.feature_dim, num_classes=10, spec=spec)
    head.check_compatible(spec, encoder)
    data = GATEDataModule(spec, tiny, encoder, head, batch_size=6)
    batch = data.on_after_batch_transfer(next(iter(data.train_dataloader())), 0)
    assert batch["labels"].shape == (6, 10) and batch["labels"].dtype == torch.float32
    logits = head.predict(encoder, batch)
    assert logits.shape == (6, 10)
    loss = head.loss(logits, head.target(batch))
    loss.backward()
    assert torch.isfinite(loss) and head.head[1].weight.grad is not None
    assert any(p.grad is not None for p in encoder.parameters())
    metrics = head.make_metrics()
    metrics.update(logits.detach(), head.target(batch))
    assert "auc/ankle_boot" in metrics.compute()


@pytest.mark.slow
def test_gate_run_end_to_end(tmp_path, capsys):
    from gate.results import ResultsStore

    # gate-run's command line, in process (tests/helpers.py call_cli); the smoke preset, the default logging callbacks
    args = ["dataset=fmnist_multilabel", *SMOKE, *TINY_ENCODER, "callbacks=default", "ensembles=[1,2]", f"paths.root={tmp_path}",
            "dataset.builder.train_size=24", "dataset.builder.val_size=12", "dataset.builder.test_size=12",
            "data.batch_size=8"]
    done = call_cli(run_cli.main, args, capsys, prog="gate-run")
    assert done.returncode == 0, done.stderr[-3000:]
    records = ResultsStore(tmp_path / "results" / "records.jsonl").complete_records(kind="finetune")
    metrics = {r["metric"] for r in records if r["split"] == "test"}
    for name in ("auc_macro", "aps_macro", "brier_macro", "auc/sneaker", "brier/ankle_boot", "ensemble_2/auc_macro",
                 "ensemble_2/aps/bag"):
        assert name in metrics, (name, sorted(metrics))
    assert {r["metric"] for r in records if r["split"] == "val"} == {"auc_macro"}
    assert all(0.0 <= r["value"] <= 1.0 for r in records if r["metric"].split("/")[-2:][0] in ("auc_macro", "auc"))


def test_a_read_only_target_row_becomes_its_own_tensor_without_a_warning():
    """Arrow hands the data module read-only arrays; sharing a float32 one with torch printed torch's "not writable"
    warning in every multi-label run (seen in gate-rank's output)."""
    import warnings

    row = np.array([1, 0, 1], dtype=np.float32)
    row.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        target = adapter().example_targets({"labels": row})["labels"]
    target[0] = 0  # its own memory: the row is untouched
    assert row.tolist() == [1, 0, 1] and target.dtype == torch.float32

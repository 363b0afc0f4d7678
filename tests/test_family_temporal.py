"""The video family: the temporal_classifier / temporal_regressor adapters and the fmnist_video stand-ins."""

import json

import datasets
import numpy as np
import pytest
import torch

from gate.adapters.temporal import TemporalClassifier, TemporalRegressor
from gate.cli import run as run_cli
from gate.data.spec import DatasetSpec
from gate.data.standins import video as video_module
from gate.data.standins.video import ITEM, fading_clip, fading_levels, fmnist_video, fmnist_video_speed, trajectory
from gate.encoders.base import EncoderOutput, GATEEncoder
from gate.engine.build import build_adapter, build_datamodule, build_encoder, build_spec
from gate.results import ResultsStore

from helpers import SMOKE, TINY_ENCODER, call_cli, compose_run, resolved

TINY = ["image_size=32", "dataset.builder.train_size=16", "dataset.builder.val_size=8", "dataset.builder.test_size=8",
        "adapter.clips_per_batch=4", "adapter.eval_clips_per_batch=4", "adapter.width=16", "adapter.heads=2",
        "adapter.depth=1"]
CLASSES = DatasetSpec(name="clips", modality="video", task="temporal_classification", num_classes=10,
                      targets={"label": "clip_label"}, options={"frames": 4})
SPEEDS = DatasetSpec(name="speeds", modality="video", task="temporal_regression", num_classes=10,
                     targets={"speed": "clip_value"}, options={"frames": 4})


def classifier(spec=CLASSES, **kw):
    return TemporalClassifier(feature_dim=6, spec=spec, num_classes=spec.num_classes, width=8, heads=2, depth=1, **kw)


def regressor(spec=SPEEDS, **kw):
    return TemporalRegressor(feature_dim=6, spec=spec, width=8, heads=2, depth=1, **kw)


def computed(adapter, predictions, target):
    metrics = adapter.make_metrics()
    metrics.update(predictions[:3], target[:3])  # two batches: the epoch's scores are kept across updates
    metrics.update(predictions[3:], target[3:])
    return {k: float(v) for k, v in metrics.compute().items()}


@pytest.fixture(scope="module", params=["fmnist_video", "fmnist_video_speed"])
def built(request, tmp_path_factory):
    """efficientnet_lite0 (32 px), the dataset's default temporal adapter and the tiny stand-in."""
    cfg = compose_run(tmp_path_factory.mktemp("temporal"), [f"dataset={request.param}", *TINY])
    encoder = build_encoder(resolved(cfg.encoder))
    spec = build_spec(resolved(cfg.dataset))
    adapter = build_adapter(resolved(cfg.adapter), encoder, spec)
    return cfg, encoder, spec, adapter, build_datamodule(cfg, encoder, adapter, spec)


def test_forward_backward_on_a_real_batch(built):
    cfg, encoder, spec, adapter, datamodule = built
    assert isinstance(adapter, TemporalRegressor if spec.task == "temporal_regression" else TemporalClassifier)
    batch = datamodule.on_after_batch_transfer(next(iter(datamodule.train_dataloader())), 0)
    assert batch["video"].shape == (4, cfg.dataset.options.frames, 3, 32, 32)  # adapter.clips_per_batch clips of options.frames frames
    predictions = adapter.predict(encoder, batch)
    target = adapter.target(batch)
    assert predictions.shape == ((4, 10) if spec.task == "temporal_classification" else (4,))
    loss = adapter.loss(predictions, target)
    loss.backward()
    assert torch.isfinite(loss)
    assert adapter.position.grad.abs().sum() > 0 and adapter.head.weight.grad.abs().sum() > 0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in encoder.parameters())
    assert set(computed(adapter, predictions.detach(), target)) == set(cfg.dataset.metrics)
    assert len(datamodule.val_dataloader()) == 2  # eval batches of adapter.eval_clips_per_batch clips


def test_frames_are_encoded_one_by_one_in_clip_order(built):
    _, encoder, _, adapter, datamodule = built
    batch = datamodule.on_after_batch_transfer(next(iter(datamodule.val_dataloader())), 0)
    encoder.eval()
    with torch.no_grad():
        together = adapter.frame_features(encoder, batch)  # (B, T, D)
        video = batch["video"]
        picked = [(0, 0), (0, video.shape[1] - 1), (3, 2)]  # first, last and a middle frame
        alone = encoder({"image": torch.stack([video[b, t] for b, t in picked])}).features
        for i, (b, t) in enumerate(picked):
            assert torch.allclose(together[b, t], alone[i], atol=1e-4)
        # forward() on an EncoderOutput of the flattened frames is the temporal head on (B, T, D)
        flat = EncoderOutput(features=together.flatten(0, 1))
        assert torch.allclose(adapter(flat, batch), adapter.temporal(together), atol=1e-6)


def test_classifier_metrics_on_hand_made_logits():
    target = torch.tensor([0, 3, 9, 4, 4, 7])
    perfect = torch.nn.functional.one_hot(target, 10).float() * 5
    got = computed(classifier(), perfect, target)
    assert got == {"acc@1": 1.0, "acc@5": 1.0}
    second = perfect.clone()
    second[torch.arange(6), (target + 1) % 10] = 9.0  # the right class ranked second everywhere
    assert computed(classifier(), second, target) == {"acc@1": 0.0, "acc@5": 1.0}
    half = perfect.clone()
    half[:3] = second[:3]
    assert computed(classifier(), half, target)["acc@1"] == pytest.approx(0.5)
    few = DatasetSpec(name="clips", modality="video", task="temporal_classification", num_classes=4,
                      targets={"label": "clip_label"}, options={"frames": 4})
    assert set(classifier(few).make_metrics()) == {"acc@1"}  # no acc@5 with 4 classes
    assert classifier().monitor == "acc@1" and classifier().monitor_mode == "max"


def test_regressor_metrics_on_a_constant_offset():
    target = torch.tensor([0.5, 1.0, 2.5, 3.0, 1.5, 2.0])
    got = computed(regressor(), target + 0.5, target)
    # r2 = 1 - SSE / SST, SST = sum((y - mean y)^2) = 4.375 (mean 1.75): by hand, 1 - 1.5 / 4.375
    assert got == {"mae": pytest.approx(0.5), "mse": pytest.approx(0.25), "r2": pytest.approx(1 - 1.5 / 4.375)}
    mixed = target + torch.tensor([1.0, -1.0, 2.0, -2.0, 0.0, 0.0])
    assert computed(regressor(), mixed, target) == {"mae": pytest.approx(1.0), "mse": pytest.approx(10 / 6),
                                                    "r2": pytest.approx(1 - 10 / 4.375)}
    assert regressor().monitor == "mae" and regressor().monitor_mode == "min"


def test_regressor_standardises_by_the_train_split():
    adapter = regressor()
    speeds = [0.5, 1.5, 2.5, 3.5]
    adapter.check_split(SPEEDS, "train", clips(speed=speeds))
    assert float(adapter.target_mean) == pytest.approx(2.0) and float(adapter.target_std) == pytest.approx(np.std(speeds))
    adapter.check_split(SPEEDS, "val", clips(speed=[9.0, 9.0, 9.0, 9.0]))  # only the train split sets them
    assert float(adapter.target_mean) == pytest.approx(2.0)
    target = torch.tensor(speeds)
    # the loss is the MSE in standardised units; predictions come out in the target's units
    assert float(adapter.loss(target + 0.5, target)) == pytest.approx(0.25 / np.var(speeds), rel=1e-5)
    assert {"target_mean", "target_std"} <= set(adapter.state_dict())  # checkpoints carry them
    with torch.no_grad():
        adapter.head.weight.zero_()
        adapter.head.bias.zero_()
        assert torch.allclose(adapter.temporal(torch.randn(3, 4, 6)), torch.full((3,), 2.0))
    plain = regressor(standardize=False)
    plain.check_split(SPEEDS, "train", clips(speed=speeds))
    assert float(plain.target_std) == 1.0 and float(plain.loss(target + 0.5, target)) == pytest.approx(0.25)


def test_ensemble_of_identical_predictions_equals_the_single_one():
    target = torch.tensor([0, 3, 9, 4, 4, 7])
    logits = torch.randn(6, 10, generator=torch.Generator().manual_seed(0))
    adapter = classifier()
    combined = adapter.combine([logits, logits.clone(), logits.clone()])
    assert torch.allclose(combined, logits)
    assert computed(adapter, combined, target) == computed(adapter, logits, target)
    values = torch.tensor([0.5, 1.0, 2.5, 3.0, 1.5, 2.0])
    predictions = values + torch.randn(6, generator=torch.Generator().manual_seed(1))
    reg = regressor()
    assert torch.allclose(reg.combine([predictions, predictions.clone()]), predictions)
    assert torch.allclose(reg.combine([predictions - 1, predictions + 1]), predictions)  # averages predictions


def clips(frames=(4, 4, 4, 4), **columns):
    """A split of 2x2-pixel clips with the given frame counts and target columns."""
    rows = {"video": [np.zeros((t, 2, 2), np.uint8).tolist() for t in frames]}
    rows.update({k: list(v) for k, v in columns.items()})
    return datasets.Dataset.from_dict(rows)


def test_bad_inputs_name_dataset_split_and_example():
    classifier().check_split(CLASSES, "train", clips(label=[0, 1, 2, 9]))
    with pytest.raises(ValueError, match=r"dataset 'clips': split 'val': example 2 is a clip of 3 frames, but the "
                                         r"dataset declares options.frames=4"):
        classifier().check_split(CLASSES, "val", clips(frames=(4, 4, 3, 5), label=[0, 1, 2, 3]))
    with pytest.raises(ValueError, match=r"example 0 is a clip of 8 frames.*options.frames=4.*4 clip"):
        classifier().check_split(CLASSES, "test", clips(frames=(8,) * 4, label=[0, 1, 2, 3]))
    ragged = datasets.Dataset.from_dict(  # a variable-shape Array3D column, as a real video loader may store clips
        {"video": [np.zeros((t, 2, 2), np.uint8) for t in (4, 5)], "label": [0, 1]},
        features=datasets.Features({"video": datasets.Array3D(shape=(None, 2, 2), dtype="uint8"),
                                    "label": datasets.Value("int64")}))
    with pytest.raises(ValueError, match=r"split 'train': example 1 is a clip of 5 frames"):
        classifier().check_split(CLASSES, "train", ragged)
    with pytest.raises(ValueError, match=r"dataset 'clips': split 'test' has labels in \[0, 10\].*valid labels 0..9; "
                                         r"first bad: example 3, label=10"):
        classifier().check_split(CLASSES, "test", clips(label=[0, 1, 2, 10]))
    with pytest.raises(ValueError, match=r"split 'train' has labels in \[-1, 2\].*example 1"):
        classifier().check_split(CLASSES, "train", clips(label=[0, -1, 2, 1]))
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match=r"dataset 'speeds': split 'val': example 2 has speed=(nan|inf|-inf); "
                                             r"a regression target must be a finite number"):
            regressor().check_split(SPEEDS, "val", clips(speed=[1.0, 2.0, bad, 3.0]))
    # a batch whose clips do not have the declared frame count (e.g. built around the data module)
    adapter = classifier()
    with pytest.raises(ValueError, match=r"dataset 'clips': a batch holds clips of 6 frames.*options.frames=4"):
        adapter.frame_features(None, {"video": torch.zeros(2, 6, 3, 8, 8)})


def test_the_dataset_and_the_encoder_must_fit():
    no_frames = DatasetSpec(name="clips", modality="video", task="temporal_classification", num_classes=10,
                            targets={"label": "clip_label"})
    with pytest.raises(ValueError, match=r"dataset 'clips': options.frames=None is invalid"):
        classifier(no_frames)

    class TextOnly(GATEEncoder):
        modalities = frozenset({"text"})
        feature_dim = 6

        def transform(self, modality, train):
            raise NotImplementedError

        def forward(self, batch):
            raise NotImplementedError

    with pytest.raises(ValueError, match=r"runs the encoder frame by frame, but encoder TextOnly takes \['text'\]"):
        classifier().check_compatible(CLASSES, TextOnly())
    with pytest.raises(ValueError, match=r"serves tasks \['temporal_regression'\].*'temporal_classification'"):
        regressor().check_compatible(CLASSES, TextOnly())
    with pytest.raises(ValueError, match=r"pool='max' is invalid: choose one of \['mean', 'cls'\]"):
        classifier(pool="max")
    cls = classifier(pool="cls")
    assert cls.temporal(torch.randn(2, 4, 6)).shape == (2, 10)


def test_stand_ins_are_seeded_and_speed_shows_only_across_frames(tmp_path):
    small = [fmnist_video_speed(seed=3, train_size=4, val_size=2, test_size=2, cache_dir=str(tmp_path / f"c{i}"))
             ["val"].with_format("numpy")[:] for i in range(2)]
    assert np.array_equal(small[0]["video"], small[1]["video"]) and np.array_equal(small[0]["speed"], small[1]["speed"])
    data = fmnist_video_speed(seed=3, train_size=400, val_size=2, test_size=200, cache_dir=str(tmp_path / "big"))
    train, test = (data[split].with_format("numpy")[:] for split in ("train", "test"))
    assert train["video"].shape == (400, 4, 48, 48) and train["video"].max() > 200
    speed = train["speed"]
    assert 2.0 <= speed.min() and speed.max() <= 20.0 and speed.std() > 4.0

    def intensity(clips):  # each frame's mean intensity, (clips, frames): what a pooled feature sees most plainly
        return clips["video"].astype(np.float64).mean(axis=(2, 3))

    # No single frame predicts the speed: every frame's level is uniform whatever the speed, so its mean
    # intensity, and how far that is from typical, are uncorrelated with it. With 400 clips a correlation of 0
    # has a standard error of 0.05; 0.15 is three of them (the old motion stand-in had no such gap to close).
    frames = intensity(train)
    for t in range(frames.shape[1]):
        assert abs(np.corrcoef(frames[:, t], speed)[0, 1]) < 0.15
        assert abs(np.corrcoef(np.abs(frames[:, t] - np.median(frames[:, t])), speed)[0, 1]) < 0.15
    # Across frames it is plain: a linear fit on the frame-to-frame changes of mean intensity (relative to the
    # clip's average, which divides out the item's size), fitted on train, beats the train mean on test.
    def changes(clips):
        means = intensity(clips)
        return np.c_[np.abs(np.diff(means, axis=1)) / means.mean(axis=1, keepdims=True), np.ones(len(means))]

    weights = np.linalg.lstsq(changes(train), speed, rcond=None)[0]
    fitted = np.abs(changes(test) @ weights - test["speed"]).mean()
    trivial = np.abs(speed.mean() - test["speed"]).mean()
    assert trivial > 4.0 and fitted < 0.7 * trivial
    labels = fmnist_video(seed=3, train_size=30, val_size=4, test_size=4, cache_dir=str(tmp_path))["train"]["label"]
    assert np.bincount(labels).tolist() == [3] * 10


def test_brightness_walk_reflects_and_rejects_bad_bounds(tmp_path):
    levels = fading_levels(95.0, 10.0, 4, 20.0, 100.0)
    assert np.allclose(levels, [95.0, 95.0, 85.0, 75.0])  # up 5 to the bound, back 5: one reflection
    assert np.allclose(fading_levels(50.0, -7.5, 4, 20.0, 100.0), [50.0, 42.5, 35.0, 27.5])
    clip = fading_clip(np.full((ITEM, ITEM), 200, np.uint8), np.array([100.0, 50.0]), (3, 5), 48)
    assert clip.shape == (2, 48, 48) and clip[0, 3, 5] == 200 and clip[1, 30, 32] == 100 and clip[1, 2, 5] == 0
    with pytest.raises(ValueError, match=r"rates \[2.0, 30.0\] are invalid: .*\(frames - 1\) \* max_rate < "
                                         r"max_level - min_level = 80"):
        fmnist_video_speed(cache_dir=str(tmp_path), max_rate=30.0)
    with pytest.raises(ValueError, match=r"levels \[20.0, 120.0\] are invalid: need 0 <= min_level < max_level <= 100"):
        fmnist_video_speed(cache_dir=str(tmp_path), max_level=120.0)


def test_a_changed_generator_is_never_served_from_an_old_cache(tmp_path):
    # the stand-in's cache key holds VERSION and the source hash of the module that generates it
    from gate.data.disk_cache import code_version

    built = fmnist_video_speed(seed=1, train_size=2, val_size=1, test_size=1, cache_dir=str(tmp_path))
    assert built["train"].num_rows == 2
    records = [json.loads(path.read_text()) for path in tmp_path.rglob("gate_cache.json")]
    assert len(records) == 1, "the stand-in was not cached once"
    key = records[0]["key"]
    assert key["params"]["version"] == video_module.VERSION == 3 and key["params"]["max_rate"] == pytest.approx(20.0)
    assert key["code"]["gate.data.standins.video"] == code_version(video_module.fading_clips)["gate.data.standins.video"]


def test_bouncing_trajectory_stays_inside_and_keeps_its_speed():
    room = 48.0 - ITEM
    path = trajectory(np.array([1.0, 19.0]), np.array([-2.0, 1.5]), 8, room)
    assert (path >= 0).all() and (path <= room).all()
    assert path[1].tolist() == [1.0, 19.5] and path[2].tolist() == [3.0, 18.0]  # reflected off both walls
    assert np.allclose(np.abs(np.diff(path[2:], axis=0)), [2.0, 1.5])  # no wall after frame 2


@pytest.mark.slow
@pytest.mark.parametrize("dataset,metrics", [("fmnist_video", {"acc@1", "acc@5"}), ("fmnist_video_speed", {"mae", "mse", "r2"})])
def test_gate_run_end_to_end(tmp_path, dataset, metrics, capsys):
    # gate-run's command line, in process (tests/helpers.py call_cli); the smoke preset, the default logging callbacks
    args = [f"dataset={dataset}", *SMOKE, *TINY_ENCODER, "callbacks=default", "ensembles=[1,2]", f"paths.root={tmp_path}",
            "dataset.builder.train_size=16", "dataset.builder.val_size=8", "dataset.builder.test_size=8",
            "adapter.clips_per_batch=4", "adapter.eval_clips_per_batch=8"]
    done = call_cli(run_cli.main, args, capsys, prog="gate-run")
    assert done.returncode == 0, done.stderr[-3000:]
    records = ResultsStore(tmp_path / "results" / "records.jsonl").complete_records(kind="finetune")
    test = {r["metric"]: r["value"] for r in records if r["split"] == "test"}
    for prefix in ("", "ensemble_1/", "ensemble_2/"):
        assert {prefix + m for m in metrics | {"loss"}} <= set(test)
    assert all(np.isfinite(v) and (v >= 0 or m.endswith("r2")) for m, v in test.items())  # r2 < 0: worse than the mean
    monitor = "acc@1" if dataset == "fmnist_video" else "mae"
    val = [r for r in records if r["split"] == "val"]
    assert [r["metric"] for r in val] == [monitor] and val[0]["higher_is_better"] == (monitor == "acc@1")
    # the regression checkpoints on mae and enters tier means by r2: its r2 curve is recorded beside (gate-rank's
    # proxy ranks by it); a benchmark whose monitor is its tier metric records one curve
    facts = val[0]["facts"]
    if dataset == "fmnist_video_speed":
        tier = facts["tier_val_curve"]
        assert tier["metric"] == "r2" and [s for s, _ in tier["points"]] == [s for s, _ in facts["val_curve"]]
        assert all(np.isfinite(v) and v <= 1.0 for _, v in tier["points"])
    else:
        assert "tier_val_curve" not in facts and facts["val_curve"]
    assert {r["dataset"] for r in records} == {dataset}
    assert {r["adapter"] for r in records} == {"temporal_classifier" if monitor == "acc@1" else "temporal_regressor"}

"""Few-shot family: the prototypical-network adapter, its episode sampler and the fmnist_fewshot stand-in."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gate.adapters.few_shot import EpisodeSampler, ProtoNet, eval_seeds
from gate.data.datamodule import GATEDataModule
from gate.data.spec import DatasetSpec
from gate.data.standins.few_shot import fmnist_fewshot
from gate.encoders.base import EncoderOutput

from helpers import TINY_ENCODER, call_cli

TINY = dict(train_per_class=25, val_per_class=12, test_per_class=12)
NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


def spec() -> DatasetSpec:
    return DatasetSpec(name="fmnist_fewshot", modality="image", task="few_shot", num_classes=10,
                       class_names=NAMES, targets={"label": "class"})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return fmnist_fewshot(cache_dir=str(tmp_path_factory.mktemp("cache")), **TINY)


def episode_batch(features: torch.Tensor, support_label, query_label) -> tuple[EncoderOutput, dict]:
    batch = {"support_label": torch.tensor(support_label), "query_label": torch.tensor(query_label),
             "num_ways": torch.tensor(int(max(support_label)) + 1)}
    return EncoderOutput(features=features), batch


def test_prototypes_and_logits_on_hand_made_features():
    adapter = ProtoNet(feature_dim=2)
    # Two supports per class; prototypes (0, 0), (4, 0), (0, 4).
    support = torch.tensor([[-1., 0.], [1., 0.], [3., 0.], [5., 0.], [0., 3.], [0., 5.]])
    query = torch.tensor([[0., 0.], [4., 0.], [0., 4.]])
    encoded, batch = episode_batch(torch.cat([support, query]), [0, 0, 1, 1, 2, 2], [0, 1, 2])
    logits = adapter(encoded, batch)
    assert torch.allclose(logits, -torch.tensor([[0., 16., 16.], [16., 0., 32.], [16., 32., 0.]]))
    metrics = adapter.make_metrics()
    metrics.update(logits, adapter.target(batch))
    assert float(metrics.compute()["acc@1"]) == 1.0
    swapped = adapter.make_metrics()
    swapped.update(logits, torch.tensor([1, 2, 0]))
    assert float(swapped.compute()["acc@1"]) == 0.0
    # Accuracy is the mean over episodes of each episode's accuracy: (3/3 + 1/2) / 2, not the pooled 4/5.
    swapped.reset()
    swapped.update(logits, torch.tensor([0, 1, 2]))
    swapped.update(torch.tensor([[0., -1.], [0., -1.]]), torch.tensor([0, 1]))
    assert float(swapped.compute()["acc@1"]) == pytest.approx(0.75, abs=1e-6)
    assert adapter.batch_size(batch) == 3
    loss = adapter.loss(logits, adapter.target(batch))
    assert float(loss) == pytest.approx(float(torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2]))))


def episode_logits(ways: int, queries_per_class: int, correct: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and targets of one episode of ``ways`` classes whose first ``correct`` queries are answered right
    (the others are given the next class)."""
    target = torch.arange(ways).repeat_interleave(queries_per_class)
    predicted = torch.where(torch.arange(target.numel()) < correct, target, (target + 1) % ways)
    return torch.nn.functional.one_hot(predicted, ways).float() * 2.0, target


# A 5-way episode of 25 queries (20 right, accuracy 0.8) and a 50-way one of 250 queries (100 right, 0.4).
MIXED = [episode_logits(5, 5, 20), episode_logits(50, 5, 100)]
# By hand: the mean over episodes is (0.8 + 0.4) / 2 = 0.6; pooled over queries it would be 120 / 275 = 0.436.
# Population std (ddof 0) of {0.8, 0.4} is 0.2, so the 95% half-width is 1.96 * 0.2 / sqrt(2) = 0.27719
# (with ddof 1 it would be 0.39200).
MIXED_MEAN, MIXED_POOLED, MIXED_CI95 = 0.6, 120 / 275, 1.96 * 0.2 / 2 ** 0.5


def test_accuracy_is_the_mean_over_episodes_with_its_95_percent_interval():
    metrics = ProtoNet(feature_dim=2).make_metrics()
    for logits, target in MIXED:
        metrics.update(logits, target)
    values = {k: float(v) for k, v in metrics.compute().items()}
    assert values["acc@1"] == pytest.approx(MIXED_MEAN, abs=1e-6)
    assert abs(values["acc@1"] - MIXED_POOLED) > 0.1  # the pooled value is what the old metric reported
    assert values["acc@1_ci95"] == pytest.approx(MIXED_CI95, abs=1e-6)
    # Three episodes 1.0, 0.5, 0.0: mean 0.5, population std sqrt(1/6), half-width 1.96 * sqrt(1/6) / sqrt(3).
    metrics.reset()
    for logits, target in (episode_logits(2, 1, 2), episode_logits(2, 1, 1), episode_logits(4, 1, 0)):
        metrics.update(logits, target)
    values = {k: float(v) for k, v in metrics.compute().items()}
    assert values["acc@1"] == pytest.approx(0.5, abs=1e-6)
    assert values["acc@1_ci95"] == pytest.approx(1.96 * (1 / 6) ** 0.5 / 3 ** 0.5, abs=1e-6)


def test_episode_accuracy_states_are_sums_so_ranks_reduce_exactly():
    from gate.adapters.few_shot_metrics import EpisodeAccuracy

    whole, rank0, rank1 = EpisodeAccuracy("ci95"), EpisodeAccuracy("ci95"), EpisodeAccuracy("ci95")
    assert set(whole._reductions) == {"accuracy_sum", "accuracy_sq_sum", "episodes"}
    assert {fx.__name__ for fx in whole._reductions.values()} == {"dim_zero_sum"}  # dist_reduce_fx="sum"
    for logits, target in MIXED:
        whole.update(logits, target)
    rank0.update(*MIXED[0])
    rank1.update(*MIXED[1])
    rank0.merge_state(rank1)  # what the all-reduce does: sum each state over ranks
    assert float(rank0.compute()) == pytest.approx(float(whole.compute()), abs=1e-9)
    assert float(rank0.compute()) == pytest.approx(MIXED_CI95, abs=1e-6)
    one = EpisodeAccuracy("ci95")
    one.update(*MIXED[0])
    assert torch.isnan(one.compute())  # one episode has no spread to measure
    with pytest.raises(ValueError, match="test_episodes=1"):
        ProtoNet(feature_dim=2, test_episodes=1)


def test_ensembles_score_the_mean_over_episodes():
    import lightning as L
    from torch.utils.data import DataLoader

    from gate.engine.training.ensemble import EnsembleTester

    class Fixed(torch.nn.Module):
        """A member that returns fixed logits per episode (looked up by the batch's episode index)."""

        def __init__(self, episodes):
            super().__init__()
            self.episodes = [logits for logits, _ in episodes]
            self.adapter = ProtoNet(feature_dim=2)

        def forward(self, batch):
            return self.episodes[int(batch["episode"])]

    batches = [{"episode": torch.tensor(i), "query_label": target} for i, (_, target) in enumerate(MIXED)]
    tester = EnsembleTester([Fixed(MIXED), Fixed(MIXED)], sizes=(1, 2))
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    out = trainer.test(tester, DataLoader(batches, batch_size=None), verbose=False)[0]
    for name in ("test/acc@1", "test/ensemble_1/acc@1", "test/ensemble_2/acc@1"):
        assert out[name] == pytest.approx(MIXED_MEAN, abs=1e-6), name
    assert out["test/ensemble_2/acc@1_ci95"] == pytest.approx(MIXED_CI95, abs=1e-6)


def test_projection_switch_adds_a_learned_layer():
    assert not list(ProtoNet(feature_dim=8).parameters())
    projected = ProtoNet(feature_dim=8, projection_dim=4)
    encoded, batch = episode_batch(torch.randn(6, 8), [0, 0, 1, 1], [0, 1])
    assert projected(encoded, batch).shape == (2, 2)
    assert sum(p.numel() for p in projected.parameters()) == 8 * 4 + 4


def test_combine_of_identical_predictions_equals_the_single_one():
    adapter = ProtoNet(feature_dim=2)
    logits = -torch.rand(10, 5) * 30
    target = torch.randint(0, 5, (10,))
    combined = adapter.combine([logits, logits.clone(), logits.clone()])
    assert torch.allclose(combined.exp(), logits.softmax(-1), atol=1e-6)
    single, ensemble = adapter.make_metrics(), adapter.make_metrics()
    single.update(logits, target)
    ensemble.update(combined, target)
    assert float(single.compute()["acc@1"]) == float(ensemble.compute()["acc@1"])
    assert float(adapter.loss(combined, target)) == pytest.approx(float(adapter.loss(logits, target)), abs=1e-5)


def test_episode_sampler_bounds_disjointness_and_fixed_eval_episodes():
    labels = np.repeat(np.arange(8), [30, 25, 20, 12, 40, 9, 15, 22])
    sampler = EpisodeSampler(labels, min_ways=3, max_ways=6, min_shots=2, max_shots=15, queries=4)
    ways_seen = set()
    for seed in eval_seeds(40, eval_seed=0, split="val"):
        ep = sampler.sample(seed)
        again = sampler.sample(seed)
        assert all(np.array_equal(ep[k], again[k]) for k in ep)
        ways = len(ep["classes"])
        ways_seen.add(ways)
        assert 3 <= ways <= 6 and len(set(ep["classes"].tolist())) == ways
        assert not set(ep["support"].tolist()) & set(ep["query"].tolist())
        for new, c in enumerate(ep["classes"]):
            shots = int((ep["support_label"] == new).sum())
            assert 2 <= shots <= min(15, int((labels == c).sum()) - 4)
            assert int((ep["query_label"] == new).sum()) == 4
            assert (labels[ep["support"][ep["support_label"] == new]] == c).all()
            assert (labels[ep["query"][ep["query_label"] == new]] == c).all()
    assert len(ways_seen) > 1  # variable ways
    assert eval_seeds(5, 0, "val") == eval_seeds(5, 0, "val") != eval_seeds(5, 0, "test")
    assert eval_seeds(5, 0, "val") != eval_seeds(5, 1, "val")


def test_loaders_serve_fixed_eval_episodes_and_fresh_seeded_training_episodes(tiny):
    adapter = ProtoNet(feature_dim=4, spec=spec(), val_episodes=3, train_episodes=4)

    class Items(torch.utils.data.Dataset):  # labels only: the loader's slow path, item by item
        def __init__(self, labels):
            self.labels = labels

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return {"image": torch.full((1,), float(i)), "label": torch.tensor(int(self.labels[i]))}

    data = Items(np.asarray(tiny["val"]["label"]))
    first = list(adapter.dataloader(data, shuffle=False, batch_size=1, seed=0, num_workers=0, split="val"))
    second = list(adapter.dataloader(data, shuffle=False, batch_size=1, seed=7, num_workers=0, split="val"))
    assert len(first) == 3
    for a, b in zip(first, second):  # the run seed does not change evaluation episodes
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["query_label"], b["query_label"])
        n_support = len(a["support_label"])
        assert a["image"].shape[0] == n_support + len(a["query_label"])
        assert not set(a["image"][:n_support, 0].tolist()) & set(a["image"][n_support:, 0].tolist())
    train = adapter.dataloader(data, shuffle=True, batch_size=1, seed=0, num_workers=0, split="train")
    epochs = [[b["image"] for b in train] for _ in range(2)]
    assert len(epochs[0]) == 4 and not torch.equal(epochs[0][0], epochs[1][0])  # fresh every epoch
    replay = [b["image"] for b in adapter.dataloader(data, shuffle=True, batch_size=1, seed=0, num_workers=0)]
    assert all(torch.equal(a, b) for a, b in zip(epochs[0], replay))  # ... and reproducible from the seed


def test_standin_holds_disjoint_class_halves(tiny):
    train, val, test = (set(np.asarray(tiny[s]["label"]).tolist()) for s in ("train", "val", "test"))
    assert train == {0, 2, 4, 6, 8} and val == test == {1, 3, 5, 7, 9}
    assert len(tiny["train"]) == 125 and len(tiny["val"]) == len(tiny["test"]) == 60
    again = fmnist_fewshot(cache_dir=None, **TINY)
    assert np.array_equal(np.asarray(again["val"]["image"][:3]), np.asarray(tiny["val"]["image"][:3]))


def test_forward_backward_on_a_real_episode_through_efficientnet_lite0(tiny):
    from gate.encoders import EfficientNetLite

    torch.manual_seed(0)
    encoder = EfficientNetLite("efficientnet-lite0", image_size=32)
    adapter = ProtoNet(feature_dim=encoder.feature_dim, spec=spec(), min_ways=5, max_ways=5, max_shots=3,
                       projection_dim=16)
    dm = GATEDataModule(spec(), tiny, encoder, adapter, batch_size=8)
    batch = dm.on_after_batch_transfer(next(iter(dm.train_dataloader())), 0)
    assert batch["image"].shape[1:] == (3, 32, 32)
    assert sorted(batch["classes"].tolist()) == [0, 2, 4, 6, 8]
    logits = adapter.predict(encoder, batch)
    assert logits.shape == (25, 5)
    loss = adapter.loss(logits, adapter.target(batch))
    loss.backward()
    assert torch.isfinite(loss)
    assert adapter.projection.weight.grad is not None and adapter.projection.weight.grad.abs().sum() > 0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in encoder.parameters())
    test = next(iter(dm.test_dataloader()))
    assert set(test["classes"].tolist()) == {1, 3, 5, 7, 9}


def test_bad_inputs_name_dataset_split_and_class(tiny):
    adapter = ProtoNet(feature_dim=4, spec=spec())
    labels = np.asarray(tiny["val"]["label"])
    # Dress (3) keeps 4 images: fewer than min_shots (2) + queries (5).
    keep = [i for i in range(len(labels)) if labels[i] != 3 or (labels[:i] == 3).sum() < 4]
    short = tiny["val"].select(keep)
    with pytest.raises(ValueError, match=r"dataset 'fmnist_fewshot': split 'val': class 3 \(Dress\) has only 4 "
                                         r"examples \(example\(s\) \d+, \d+, \d+, \d+\).*2 shots \+ 5 queries"):
        adapter.check_split(spec(), "val", short)
    with pytest.raises(ValueError, match="split 'test': class 3"):
        EpisodeSampler(np.asarray(short["label"]), min_ways=5, max_ways=5, min_shots=2, max_shots=5, queries=5,
                       dataset="fmnist_fewshot", split="test").sample(0)
    four = tiny["test"].filter(lambda row: row["label"] != 9)
    with pytest.raises(ValueError, match=r"dataset 'fmnist_fewshot': split 'test' holds 4 classes, fewer than the 5 "
                                         r"ways"):
        adapter.check_split(spec(), "test", four)
    with pytest.raises(ValueError, match="split 'test' holds 4 classes"):
        adapter.dataloader(four, shuffle=False, batch_size=1, seed=0, num_workers=0, split="test")
    with pytest.raises(ValueError, match="min_ways <= max_ways"):
        ProtoNet(feature_dim=4, min_ways=6, max_ways=5)


@pytest.mark.slow
def test_gate_run_fmnist_fewshot_end_to_end(tmp_path, capsys):
    # gate-run's main() in this process (gate-run's real process is tests/test_finetune.py's)
    from gate.cli import run as run_cli
    from gate.results import ResultsStore

    args = ["dataset=fmnist_fewshot", *TINY_ENCODER, "image_size=32", "trainer.max_steps=4", "trainer.val_check_interval=2",
            "logger=csv", "trainer.enable_progress_bar=false", "ensembles=[1,2]", f"paths.root={tmp_path}",
            "dataset.builder.train_per_class=20", "dataset.builder.val_per_class=10",
            "dataset.builder.test_per_class=10", "adapter.val_episodes=2", "adapter.test_episodes=3",
            "adapter.max_shots=3"]
    done = call_cli(run_cli.main, args, capsys, prog="gate-run")
    assert done.returncode == 0, done.stderr[-3000:]
    records = ResultsStore(tmp_path / "results" / "records.jsonl").records()
    names = {(r["split"], r["metric"]) for r in records}
    expected = {("test", "acc@1"), ("test", "loss"), ("test", "ensemble_1/acc@1"), ("test", "ensemble_2/acc@1"),
                ("val", "acc@1")}
    assert expected <= names, names
    assert all((r["dataset"], r["task"], r["adapter"]) == ("fmnist_fewshot", "few_shot", "protonet") for r in records)
    values = {(r["split"], r["metric"]): r["value"] for r in records}
    assert 0.0 <= values[("test", "acc@1")] <= 1.0
    assert values[("test", "ensemble_1/acc@1")] == pytest.approx(values[("test", "acc@1")])

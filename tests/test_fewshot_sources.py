"""The classification and few-shot loaders against their real sources (issue 14): Happywhale's two heads,
Omniglot's one ``full`` split carved by class as GATE does, learn2learn's per-split class numbering, GATE's
episode protocol per dataset, and label encoding that touches the label column alone."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from benchmark_fixtures import classification as cls_fixtures
from benchmark_fixtures import few_shot as fs_fixtures
from benchmark_fixtures import png, write_parquet

from gate.adapters.classification import LinearClassifier
from gate.adapters.few_shot import EpisodeSampler, ProtoNet
from gate.data.loaders import encode_labels
from gate.data.loaders.classification import hf_image_classification
from gate.data.loaders.few_shot import hf_few_shot
from gate.data.manifest import ManifestError, carve_classes, check_manifest, compute_manifest, manifest_path, recipe_of
from gate.data.spec import DatasetSpec
from gate.engine.build import build_adapter, build_spec, build_splits, manifest_dir_of
from gate.engine.validate import resolved_config
from gate.errors import GateError

from helpers import compose_run, resolved

TRAIN = ["image_size=32", "logger=csv", "trainer.max_steps=2", "trainer.val_check_interval=2",
         "trainer.enable_progress_bar=false", "ensembles=[1]", "keep_checkpoints=none", "data.batch_size=4",
         "data.eval_batch_size=8", "callbacks=none"]
FEW_SHOT_SETS = ("aircraft", "cubirds", "dtextures", "fungi", "mini_imagenet", "vgg_flowers")


def fixture_cfg(tmp_path: Path, key: str, write, extra: list[str] = ()):
    copy = tmp_path / "copy"
    overrides = write(copy)
    return compose_run(tmp_path / "out", [f"dataset={key}", f"dataset.data_dir={copy}", *TRAIN,
                                          *(f"{k}={v}" for k, v in overrides.items()), *extra])


# --------------------------------------------------------------------------------------------- happywhale
@pytest.mark.slow
def test_happywhale_loads_its_five_columns_and_records_both_heads_under_qualified_names(tmp_path):
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run

    cfg = fixture_cfg(tmp_path, "happywhale", cls_fixtures.happywhale)
    spec = build_spec(resolved(cfg.dataset))
    assert dict(spec.heads) == {"individual": 6, "species": 30} and spec.label_column == "individual"
    splits = build_splits(resolved(cfg.dataset), seed=0)
    assert {"individual", "species"} <= set(splits["train"].column_names)
    # GATE's ids are kept as they are (the fixture's individual ids are 0..5, species ids 0..2)
    assert sorted(set(splits["train"]["individual"])) == list(range(6))
    assert sorted(set(splits["train"]["species"])) == [0, 1, 2]

    result = run_finetune(parse_run(cfg))
    assert {"acc@1/individual", "acc@5/individual", "acc@1/species", "acc@5/species"} <= set(result.metrics)
    assert "acc@1" not in result.metrics and all(np.isfinite(v) for v in result.metrics.values())
    records = [json.loads(line) for line in Path(result.results_path).read_text().splitlines()]
    val = [r for r in records if r["split"] == "val"]
    assert [r["metric"] for r in val] == ["acc@1/individual"] and val[0]["higher_is_better"] is True
    assert {r["metric"] for r in records if r["split"] == "test"} >= {"acc@1/individual", "acc@1/species"}


def test_happywhale_heads_loss_is_the_mean_of_the_heads_cross_entropies_and_metrics_slice_each_head():
    spec = DatasetSpec(name="hw", modality="image", task="classification", num_classes=6,
                       targets={"individual": "class", "species": "class"}, heads={"individual": 6, "species": 3})
    adapter = LinearClassifier(feature_dim=4, num_classes=6, spec=spec)
    assert adapter.monitor == "acc@1/individual"
    logits = torch.randn(5, 9, generator=torch.Generator().manual_seed(0))
    target = {"individual": torch.tensor([0, 1, 5, 2, 3]), "species": torch.tensor([0, 2, 1, 1, 0])}
    expected = (torch.nn.functional.cross_entropy(logits[:, :6], target["individual"])
                + torch.nn.functional.cross_entropy(logits[:, 6:], target["species"])) / 2
    assert abs(float(adapter.loss(logits, target)) - float(expected)) < 1e-6
    with pytest.warns(UserWarning, match=r"head species: acc@k for k=\[5\] is not recorded: with 3 classes"):
        metrics = adapter.make_metrics()
    assert set(metrics) == {"acc@1/individual", "acc@5/individual", "acc@1/species"}  # top-5 of 3 says nothing
    metrics.update(logits, target)
    got = {k: float(v) for k, v in metrics.compute().items()}
    own = {"individual": logits[:, :6].argmax(1), "species": logits[:, 6:].argmax(1)}
    for head in own:
        want = float((own[head] == target[head]).float().mean())
        assert abs(got[f"acc@1/{head}"] - want) < 1e-6
    # a single-label dataset keeps its plain names and monitor
    single = LinearClassifier(feature_dim=4, num_classes=6, spec=DatasetSpec(name="c", modality="image",
                                                                             task="classification", num_classes=6))
    assert set(single.make_metrics()) == {"acc@1", "acc@5"} and single.monitor == "acc@1"
    with pytest.warns(UserWarning, match=r"LinearClassifier on dataset 'c': acc@k for k=\[5\] is not recorded"):
        narrow = LinearClassifier(feature_dim=4, num_classes=4, spec=DatasetSpec(name="c", modality="image",
                                                                                 task="classification", num_classes=4))
    assert set(narrow.make_metrics()) == {"acc@1"}


def test_a_wrong_column_name_is_one_line_naming_both_column_lists_without_advising_a_download(tmp_path):
    cls_fixtures.happywhale(tmp_path)
    cfg = compose_run(tmp_path / "out", ["dataset=happywhale"])
    source = resolved_config(cfg)["dataset"]["source"]
    with pytest.raises(GateError) as err:
        hf_image_classification(tmp_path, source, "happywhale", label_columns={"individual_id": 6, "species": 30})
    message = str(err.value)
    assert "\n" not in message
    for column in ("individual_id", "individual_name", "species_name", "'image'"):
        assert column in message
    assert "download" not in message and "force=true" not in message and "disagree" in message


# ----------------------------------------------------------------------------------------------- omniglot
def test_omniglot_class_carve_reproduces_gates_1200_200_223_of_1623_sorted_classes():
    # GATE: int(n * float(1200 / 1623)) etc. on the sorted classes (gate/data/few_shot/core.py)
    n = 1623
    starts = [int(n * float(1200 / 1623)), int(n * float(200 / 1623)), int(n * float(223 / 1623))]
    assert starts == [1200, 200, 223]
    rng = np.random.default_rng(0)
    labels = rng.permutation(np.repeat(np.arange(n), 20))  # 20 drawers a character, in any row order
    counts = {"train": 1200, "val": 200, "test": 223}
    carve = carve_classes(labels, counts)
    assert [carve[s].tolist() for s in ("train", "val", "test")] == [list(range(0, 1200)), list(range(1200, 1400)),
                                                                    list(range(1400, 1623))]
    again = carve_classes(rng.permutation(labels), counts)
    assert all(np.array_equal(carve[s], again[s]) for s in carve)
    with pytest.raises(ManifestError, match=r"asks for 1622 classes but the source holds 1623"):
        carve_classes(labels, {"train": 1200, "val": 200, "test": 222})


def test_omniglot_class_carve_is_recorded_in_the_manifest_and_checked(tmp_path):
    labels = np.repeat(np.arange(1623), 3)
    raw = datasets.DatasetDict({"full": datasets.Dataset.from_dict({"label": labels})})
    recipe = recipe_of({"seed": 0, "by_class": {"train": 1200, "val": 200, "test": 223}}, "label")
    assert recipe["by_class"] == {"train": 1200, "val": 200, "test": 223} and recipe["class_order"] == "sorted"
    manifest = compute_manifest(raw, "omniglot", recipe, {"hash": "x"})
    assert manifest["from"] == {"train": "full", "val": "full", "test": "full"}
    assert [len(manifest["classes"][s]) for s in ("train", "val", "test")] == [1200, 200, 223]
    assert [len(manifest[s]) for s in ("train", "val", "test")] == [3600, 600, 669]
    assert set(labels[manifest["val"]]) == set(manifest["classes"]["val"]) == set(range(1200, 1400))
    # another carve is another manifest file; the recipes of other datasets are unchanged
    other = recipe_of({"seed": 0, "by_class": {"train": 1100, "val": 300, "test": 223}}, "label")
    assert manifest_path(tmp_path, "omniglot", recipe) != manifest_path(tmp_path, "omniglot", other)
    assert "by_class" not in recipe_of({"seed": 0}, "label")
    check_manifest(manifest, raw, "omniglot")
    # a class on two sides is refused
    leaky = json.loads(json.dumps(manifest))
    moved = leaky["train"].pop()  # one example of class 1199 goes to val
    leaky["val"] = sorted(leaky["val"] + [moved])
    with pytest.raises(ManifestError, match=r"puts class 1199 in both 'train' and 'val'"):
        check_manifest(leaky, raw, "omniglot")
    # so is a class left partly out of its side, or a side that is not what the manifest records
    short = json.loads(json.dumps(manifest))
    short["test"].pop()
    with pytest.raises(ManifestError, match=r"leaves 1 example\(s\) of 'test'"):
        check_manifest(short, raw, "omniglot")
    short = json.loads(json.dumps(manifest))
    short["classes"]["val"] = short["classes"]["val"][:-1]
    with pytest.raises(ManifestError, match=r"gives 'val' 200 class\(es\), but records 199"):
        check_manifest(short, raw, "omniglot")


def test_omniglot_full_split_loads_and_is_carved_by_class_through_the_config(tmp_path):
    cfg = fixture_cfg(tmp_path, "omniglot", fs_fixtures.omniglot)
    splits = build_splits(resolved(cfg.dataset), seed=0, manifest_dir=manifest_dir_of(cfg))
    classes = {s: set(splits[s]["label"]) for s in ("train", "val", "test")}
    assert classes == {"train": {0, 1, 2, 3}, "val": {4, 5, 6}, "test": {7, 8, 9}}
    (path,) = manifest_dir_of(cfg).glob("omniglot-*.json")
    manifest = json.loads(path.read_text())
    assert manifest["classes"] == {"train": [0, 1, 2, 3], "val": [4, 5, 6], "test": [7, 8, 9]}
    assert manifest["recipe"]["by_class"] == {"train": 4, "val": 3, "test": 3}


# ------------------------------------------------------------------------------------ learn2learn numbering
def test_a_learn2learn_numbered_copy_loads_with_class_ids_unique_across_splits(tmp_path):
    cfg = fixture_cfg(tmp_path, "mini_imagenet", fs_fixtures.learn2learn_splits)
    splits = build_splits(resolved(cfg.dataset), seed=0)
    classes = {s: set(splits[s]["label"]) for s in ("train", "val", "test")}
    assert classes == {"train": {0, 1, 2, 3}, "val": {4, 5, 6}, "test": {7, 8, 9}}
    names = splits["train"].features["label"].names
    assert names[:5] == ["train-0", "train-1", "train-2", "train-3", "validation-0"] and names[-1] == "test-2"


def test_per_split_numbering_is_refused_when_a_split_does_not_start_at_zero(tmp_path):
    # a copy that numbers classes globally (validation 4..6) is not learn2learn's per-split numbering
    for split, labels in (("train", [0, 0, 1, 1]), ("validation", [4, 4, 5, 5]), ("test", [6, 6, 7, 7])):
        write_parquet(tmp_path / "default" / split / "0000.parquet",
                      {"image": [png(i) for i in range(4)], "label": labels})
    source = resolved_config(compose_run(tmp_path / "out", ["dataset=aircraft"]))["dataset"]["source"]
    with pytest.raises(GateError, match=r"split 'validation' numbers its classes 4\.\.5, not from 0"):
        hf_few_shot(tmp_path, source, "aircraft", label_scope="split")
    loaded = hf_few_shot(tmp_path, source, "aircraft", label_scope="global")  # read as global ids: disjoint
    assert {s: len(set(ds["label"])) for s, ds in loaded.items()} == {"train": 2, "validation": 2, "test": 2}


def test_a_per_split_numbered_copy_read_as_global_ids_is_refused_as_sharing_classes(tmp_path):
    fs_fixtures.learn2learn_splits(tmp_path)
    source = resolved_config(compose_run(tmp_path / "out", ["dataset=aircraft"]))["dataset"]["source"]
    with pytest.raises(GateError, match=r"share 3 class"):
        hf_few_shot(tmp_path, source, "aircraft", label_scope="global")


# ----------------------------------------------------------------------------------------- episode protocol
GATE_EPISODES = {key: {"min_ways": 5, "max_ways": 49, "val_episodes": 600, "test_episodes": 600}
                 for key in FEW_SHOT_SETS}
GATE_EPISODES["aircraft"]["max_ways"] = 9
GATE_EPISODES["omniglot"] = {"min_ways": 2, "max_ways": 49, "val_episodes": 600, "test_episodes": 600}


@pytest.mark.parametrize("extra", [[], ["preset=paper_finetune"]], ids=["plain", "paper"])
def test_each_datasets_ways_and_episodes_survive_composition(tmp_path, extra):
    for key, want in GATE_EPISODES.items():
        adapter = resolved_config(compose_run(tmp_path, [f"dataset={key}", *extra]))["adapter"]
        assert {k: adapter[k] for k in want} == want, key
        assert (adapter["min_shots"], adapter["max_shots"], adapter["queries_per_class"]) == (2, 44, 5), key
    demo = resolved_config(compose_run(tmp_path, ["dataset=fmnist_fewshot", *extra]))["adapter"]
    assert (demo["max_ways"], demo["val_episodes"], demo["test_episodes"]) == (50, 10, 30)  # its short plain run
    mine = resolved_config(compose_run(tmp_path, ["dataset=aircraft", "adapter.max_ways=7", *extra]))["adapter"]
    assert mine["max_ways"] == 7  # the command line still wins


def test_paper_tier_expansion_keeps_600_evaluation_episodes(tmp_path):
    from gate.tiers.expand import expand_tier
    from gate.tiers.spec import parse_tier

    doc = {"name": "fs", "use_paper_protocol": True, "overrides": {"preset": "paper_finetune"},
           "benchmarks": ["aircraft", "omniglot", "mini_imagenet"]}
    plan = expand_tier(parse_tier(doc, "fs"), ["efficientnet_lite0"], tmp_path, seeds=[0], check_prepared=lambda d: None)
    for e in plan.experiments:
        adapter = e.config["adapter"]
        assert (adapter["val_episodes"], adapter["test_episodes"]) == (600, 600), e.dataset
        assert adapter["max_ways"] == GATE_EPISODES[e.dataset]["max_ways"]


def test_gates_support_budget_and_adaptive_queries_reach_the_episodes(tmp_path):
    cfg = compose_run(tmp_path, ["dataset=cubirds"])
    spec = build_spec(resolved(cfg.dataset))

    class Encoder:
        feature_dim = 8
        provides = {"features"}

    adapter = build_adapter(resolved(cfg.adapter), Encoder(), spec)
    assert isinstance(adapter, ProtoNet) and adapter.max_support == 250 and adapter.adaptive_queries
    labels = np.concatenate([np.full(60, c) for c in range(45)] + [np.full(3, 45), np.full(6, 46)])
    sampler = adapter._sampler(labels, "test")
    sampler.check()  # a class of 3 images serves (GATE's queries: half the smallest chosen class)
    sizes = []
    for seed in range(40):
        episode = sampler.sample(seed)
        ways = len(episode["classes"])
        assert 5 <= ways <= 47 and len(episode["support"]) <= 250
        counts = np.bincount(episode["support_label"], minlength=ways)
        assert counts.min() >= 2 and counts.max() <= 44
        smallest = min(int((labels == c).sum()) for c in episode["classes"])
        assert len(episode["query"]) == ways * max(1, min(5, smallest // 2, smallest - 2))
        sizes.append(len(episode["support"]))
    assert max(sizes) > 200  # the budget binds at many ways
    plain = EpisodeSampler(labels[:120], min_ways=2, max_ways=2, min_shots=2, max_shots=15, queries=5)
    assert len(plain.sample(0)["query"]) == 10  # off by default: fixed queries, no budget


# ------------------------------------------------------------------------------------------ encode_labels
def test_encode_labels_rewrites_the_label_column_without_decoding_or_copying_images(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    for split, n in (("train", 12), ("test", 6)):
        write_parquet(tmp_path / f"{split}.parquet", {"image": [png(i, size=64) for i in range(n)],
                                                      "species": [f"s{int(v)}" for v in rng.integers(0, 4, n)]})
    cache = tmp_path / "cache"
    raw = datasets.load_dataset("parquet", data_files={s: str(tmp_path / f"{s}.parquet") for s in ("train", "test")},
                                cache_dir=str(cache))
    raw = datasets.DatasetDict({s: ds.cast_column("image", datasets.Image()) for s, ds in raw.items()})
    before = sorted(p for p in cache.rglob("*") if p.is_file())
    decoded = []
    real = datasets.Image.decode_example
    monkeypatch.setattr(datasets.Image, "decode_example", lambda self, *a, **k: decoded.append(1) or real(self, *a, **k))
    out = encode_labels(raw, "species", "probe")
    assert not decoded
    assert sorted(p for p in cache.rglob("*") if p.is_file()) == before  # no cache file written (no image copy)
    names = out["train"].features["species"].names
    assert names == sorted({v for ds in raw.values() for v in ds["species"]})
    for split in raw:
        assert [names[i] for i in out[split]["species"]] == raw[split]["species"]
        assert out[split].column_names == raw[split].column_names
    assert len(decoded) == 0 and np.asarray(out["train"][0]["image"]).shape == (64, 64, 3)


def test_encode_labels_keeps_integer_class_ids_and_refuses_ones_out_of_range():
    raw = {"train": datasets.Dataset.from_dict({"individual": [3, 0, 14]}),
           "val": datasets.Dataset.from_dict({"individual": [2]})}
    out = encode_labels(raw, "individual", "hw", num_classes=15)
    assert out["train"]["individual"] == [3, 0, 14] and out["train"].features["individual"].num_classes == 15
    with pytest.raises(GateError, match=r"holds ids 0\.\.14, outside the 10 classes"):
        encode_labels(raw, "individual", "hw", num_classes=10)


def test_heads_are_checked_against_the_class_targets_and_num_classes():
    targets = {"individual": "class", "species": "class"}
    with pytest.raises(ValueError, match=r"declares 2 class targets .* declare heads"):
        DatasetSpec(name="hw", modality="image", task="classification", num_classes=6, targets=targets)
    with pytest.raises(ValueError, match=r"primary head 'individual' has 5 classes but num_classes=6"):
        DatasetSpec(name="hw", modality="image", task="classification", num_classes=6, targets=targets,
                    heads={"individual": 5, "species": 3})
    with pytest.raises(ValueError, match=r"heads \['individual'\] must name exactly its targets of kind 'class'"):
        DatasetSpec(name="hw", modality="image", task="classification", num_classes=6, targets=targets,
                    heads={"individual": 6})
    spec = DatasetSpec(name="hw", modality="image", task="classification", num_classes=6, targets=targets,
                       heads={"individual": 6, "species": 3})
    from gate.data.spec import check_split

    with pytest.raises(ValueError, match=r"labels in \[0, 3\] but the dataset declares heads.species=3"):
        check_split(spec, "train", np.array([0, 1, 3]), "species")


def test_the_classification_visual_draws_the_primary_head_of_a_two_head_batch():
    from matplotlib.figure import Figure

    from gate.engine.training.visuals import VisualBatch, render

    spec = DatasetSpec(name="hw", modality="image", task="classification", num_classes=3,
                       targets={"individual": "class", "species": "class"}, heads={"individual": 3, "species": 2})
    g = torch.Generator().manual_seed(0)
    batch = {"image": torch.randn(4, 3, 16, 16, generator=g), "individual": torch.tensor([0, 1, 2, 1]),
             "species": torch.tensor([0, 1, 0, 1])}
    logits = torch.zeros(4, 5)
    logits[:, 4] = 9.0  # a species logit is the largest overall; the primary head's own argmax is class 0
    fig = render("classification", VisualBatch(batch, logits, spec))
    assert isinstance(fig, Figure) and [ax.get_title().split("\n")[0] for ax in fig.axes[:4]] == ["pred: 0"] * 4

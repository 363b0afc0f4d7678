"""Results that differ by configuration, on records shaped like gate-run/gate-score's (composed configs):
protocol variants of a dataset are labelled readably and only the main one enters tier/group means;
one encoder name run as several entrants on the same protocol is split, never averaged as seeds."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from gate.analysis.load import load_results, summarize, variant_labels
from gate.analysis.meta import load_benchmark_meta
from gate.analysis.tiers import tier_summary
from gate.results import Record, ResultsStore, experiment_id

from helpers import compose_run

RECIPE = {"efficientnet_lite0": "conv", "resnet18_scratch": "conv", "vit_tiny_scratch": "vit", "timm": "conv"}


@functools.cache
def _config(config_name: str, *overrides: str) -> dict:
    cfg = compose_run(Path("/tmp/gate_outputs_unused"), list(overrides), config_name=config_name)
    return OmegaConf.to_container(cfg, resolve=True)


def finetune(encoder: str, dataset: str, acc: float, seed: int = 0, extra: tuple[str, ...] = ()) -> list[Record]:
    """The records gate-run writes for one experiment (test metrics and the best validation value)."""
    config = dict(_config("run", f"encoder={encoder}", f"dataset={dataset}", f"recipe={RECIPE[encoder]}",
                          f"seed={seed}", *extra))
    common = dict(experiment=experiment_id(config, "finetune"), kind="finetune", encoder=config["encoder"]["name"],
                  dataset=dataset, task="classification", adapter="linear_classifier",
                  recipe=config["recipe"]["name"], seed=seed, config=config)
    return [Record(split="test", metric="acc@1", value=acc, higher_is_better=True, **common),
            Record(split="test", metric="loss", value=2 * (1 - acc), higher_is_better=False, **common),
            Record(split="val", metric="acc@1", value=acc + 0.01, higher_is_better=True, **common)]


def score(encoder: str, dataset: str, value: float, extra: tuple[str, ...] = ()) -> list[Record]:
    config = dict(_config("score", f"encoder={encoder}", f"dataset={dataset}", *extra))
    return [Record(experiment=experiment_id(config, "score"), kind="score", encoder=config["encoder"]["name"],
                   dataset=dataset, task="classification", adapter="", recipe="", seed=0, split="train",
                   metric="logme", value=value, higher_is_better=True, config=config)]


ENCODERS = {"efficientnet_lite0": 0.8, "resnet18_scratch": 0.5, "vit_tiny_scratch": 0.6}


def test_protocol_variants_are_labelled_and_only_the_main_one_enters_the_means(tmp_path):
    store = ResultsStore(tmp_path / "records.jsonl")
    for enc, acc in ENCODERS.items():
        for seed in (0, 1):
            store.append(finetune(enc, "digits", acc + 0.01 * seed, seed))
        store.append(finetune(enc, "fashion_mnist", acc - 0.1))
    # One differently configured run each: they must not split "digits" or blank the group means.
    store.append(finetune("efficientnet_lite0", "digits", 0.9, extra=("image_size=64",)))
    store.append(finetune("resnet18_scratch", "digits", 0.4,
                          extra=("data.max_val_samples=null", "trainer.max_steps=500")))
    with pytest.warns(UserWarning) as caught:
        summary = summarize(load_results(store.path).long)
    odd = ["digits[data.max_val_samples=null,trainer.max_steps=500]", "digits[image_size=64]"]
    ft = summary[summary["kind"] == "finetune"]
    assert sorted(set(ft["benchmark"])) == sorted(["digits", "fashion_mnist", *odd])
    main = ft[ft["benchmark"] == "digits"]
    assert set(main["encoder"]) == set(ENCODERS) and (main["n"] == 2).all()  # seeds averaged, variants not
    assert ft.set_index(["benchmark", "encoder", "metric"]).loc[("digits[image_size=64]", "efficientnet_lite0",
                                                                 "acc@1"), "mean"] == pytest.approx(0.9)
    assert not ft.loc[ft["benchmark"].isin(odd), "main_variant"].any()
    assert ft.loc[~ft["benchmark"].isin(odd), "main_variant"].all()
    message = " ".join(str(w.message) for w in caught)
    assert "left out of tier and group means" in message and all(name in message for name in odd)

    tiers, info = tier_summary(summary, {"small": ["digits", "fashion_mnist"]}, load_benchmark_meta())
    t = tiers.set_index("encoder")
    assert t["group:Img Class"].notna().all() and t["tier:small"].notna().all()  # no encoder blanked
    expected = {enc: (acc + 0.005 + acc - 0.1) / 2 for enc, acc in ENCODERS.items()}
    assert t["group:Img Class"].to_dict() == pytest.approx(expected)
    i = info.set_index("benchmark")
    assert not i.loc[odd, "in_means"].any() and i.loc[["digits", "fashion_mnist"], "in_means"].all()


def test_the_main_variant_covers_the_most_encoders_then_the_most_records(tmp_path):
    store = ResultsStore(tmp_path / "records.jsonl")
    # image_size=64 is first in the file, but the default covers more encoders.
    store.append(finetune("efficientnet_lite0", "digits", 0.9, extra=("image_size=64",)))
    for enc, acc in ENCODERS.items():
        store.append(finetune(enc, "digits", acc))
    with pytest.warns(UserWarning, match="2 different protocols"):
        s = summarize(load_results(store.path).long)
    assert set(s["benchmark"]) == {"digits", "digits[image_size=64]"}
    # Same encoders: the one with more records (seeds) wins, whichever came first.
    store2 = ResultsStore(tmp_path / "records2.jsonl")
    store2.append(finetune("efficientnet_lite0", "digits", 0.9))
    for seed in (0, 1):
        store2.append(finetune("efficientnet_lite0", "digits", 0.7, seed, extra=("image_size=64",)))
    with pytest.warns(UserWarning, match="2 different protocols"):
        s = summarize(load_results(store2.path).long)
    assert dict(zip(s.loc[s["metric"] == "acc@1", "benchmark"], s.loc[s["metric"] == "acc@1", "mean"])) == \
        pytest.approx({"digits[image_size=48]": 0.9, "digits": 0.7})


def test_labels_name_only_differing_leaf_keys_and_stay_short():
    main = {"image_size": 48, "trainer": {"max_steps": 150, "deterministic": False}, "data": {"max_val_samples": 500}}
    few = {**main, "trainer": {"max_steps": 500, "deterministic": False}, "data": {"max_val_samples": None}}
    many = {"image_size": 32, "trainer": {"max_steps": 1, "deterministic": True}, "data": {"max_val_samples": 5},
            "extra": [1, 2]}
    labels = variant_labels({"m": main, "f": few, "x": many}, "m")
    assert labels["f"] == "data.max_val_samples=null,trainer.max_steps=500"
    assert labels["x"] == "data.max_val_samples=5,extra=[1,2],image_size=32,+2 more"
    # Truncation never makes two variants share a label (they would be averaged together).
    twin = {**many, "trainer": {"max_steps": 2, "deterministic": True}}
    labels = variant_labels({"m": main, "x": many, "y": twin}, "m")
    assert labels["x"] != labels["y"] and labels["x"].startswith("data.max_val_samples=5,extra=[1,2],image_size=32")


def test_one_encoder_name_with_two_entrants_is_split_not_averaged_as_seeds(tmp_path):
    store = ResultsStore(tmp_path / "records.jsonl")
    store.append(finetune("efficientnet_lite0", "digits", 0.8))
    for seed in (0, 1):  # timm_resnet50, pretrained: two seeds
        store.append(finetune("timm", "digits", 0.9, seed, extra=("encoder.pretrained=true",)))
    store.append(finetune("timm", "fashion_mnist", 0.7, extra=("encoder.pretrained=true",)))
    store.append(finetune("timm", "digits", 0.3))  # timm_resnet50 from scratch: same name, protocol and seed 0
    store.append(score("timm", "digits", 1.0))
    store.append(score("timm", "digits", 5.0, extra=("encoder.pretrained=true",)))
    with pytest.warns(UserWarning, match="different entrant configurations") as caught:
        s = summarize(load_results(store.path).long)
    assert any("timm_resnet50[encoder.pretrained=false]" in str(w.message) for w in caught)
    acc = s[(s["metric"] == "acc@1") & (s["kind"] == "finetune")].set_index(["benchmark", "encoder"])
    # The entrant covering the most benchmarks keeps the bare name; seeds are averaged within an entrant only.
    assert acc.loc[("digits", "timm_resnet50"), "mean"] == pytest.approx(0.9)
    assert acc.loc[("digits", "timm_resnet50"), "n"] == 2
    assert acc.loc[("fashion_mnist", "timm_resnet50"), "mean"] == pytest.approx(0.7)
    assert acc.loc[("digits", "timm_resnet50[encoder.pretrained=false]"), "mean"] == pytest.approx(0.3)
    assert acc.loc[("digits", "timm_resnet50[encoder.pretrained=false]"), "n"] == 1
    assert set(s["benchmark"]) == {"digits", "fashion_mnist"}  # one protocol per dataset: no dataset variant
    sc = s[s["kind"] == "score"].set_index("encoder")["mean"].to_dict()
    assert sc == {"timm_resnet50": 5.0, "timm_resnet50[encoder.pretrained=false]": 1.0}  # same labels as fine-tuning


def test_two_recipes_of_one_encoder_are_two_entrants(tmp_path):
    store = ResultsStore(tmp_path / "records.jsonl")
    store.append(finetune("efficientnet_lite0", "digits", 0.8))
    records = finetune("efficientnet_lite0", "digits", 0.6, extra=("recipe=vit",))
    store.append([Record(**{**r.to_dict(), "recipe": "vit"}) for r in records])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = summarize(load_results(store.path).long)
    acc = s[s["metric"] == "acc@1"].set_index("encoder")["mean"].to_dict()
    assert acc == pytest.approx({"efficientnet_lite0": 0.8,
                                 "efficientnet_lite0[recipe.name=vit,recipe.optimizer.lr=1e-05]": 0.6})


def test_a_written_table_reads_back_with_its_variant_labels(tmp_path):
    from gate.analysis.table import wide_table

    store = ResultsStore(tmp_path / "records.jsonl")
    for enc, acc in ENCODERS.items():
        store.append(finetune(enc, "digits", acc))
    store.append(finetune("efficientnet_lite0", "digits", 0.9, extra=("image_size=64",)))
    with pytest.warns(UserWarning):
        s = summarize(load_results(store.path).long)
    table = tmp_path / "table.csv"
    wide_table(s).to_csv(table, index=False)
    with pytest.warns(UserWarning, match="2 different protocols"):
        s2 = summarize(load_results(table).long)
    assert set(s2["benchmark"]) == {"digits", "digits[image_size=64]"}
    assert dict(zip(s2["benchmark"], s2["main_variant"])) == {"digits": True, "digits[image_size=64]": False}
    cols = ["encoder", "benchmark", "metric", "mean"]
    pd.testing.assert_frame_equal(s.sort_values(cols[:3]).reset_index(drop=True)[cols],
                                  s2.sort_values(cols[:3]).reset_index(drop=True)[cols])

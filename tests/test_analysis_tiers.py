"""Tier and paper-group summaries on a toy table computed by hand, and on the paper's table."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gate.analysis.load import from_frame, load_results, summarize
from gate.analysis.meta import BenchmarkMeta, default_paper_table, load_benchmark_meta, packaged_dataset_dir, turn_rule
from gate.analysis.tiers import compare_with_published, tier_benchmarks, tier_summary

WIDE = """paper_group,dataset,metric,higher_is_better,A,B,C,D
F1,b1,acc@1,true,80,60,70,75
F1,b2,acc@1,true,50,90,70,
F2,b3,mae,false,2,1,3,
F2,b3,mse,false,4,1,9,
F2,b4,bs,false,20,30,10,
"""
TIERS = {"t1": {"benchmarks": ["b1", "b2", "b3"]}, "t2": ["b1", {"dataset": "b4", "adapter": "x"}],
         "t3": {"benchmarks": ["b1", "nowhere"]}}


def _toy(tmp_path):
    p = tmp_path / "toy.csv"
    p.write_text(WIDE)
    return summarize(load_results(p).long)


def _meta():
    return load_benchmark_meta(overrides={"b3": "mae", "b4": "bs"})


def test_toy_tiers_by_hand(tmp_path):
    with pytest.warns(UserWarning, match=r"tier 't3' skipped: 1 of its 2 benchmarks are not in the results \(\['nowhere'\]\)"):
        tiers, info = tier_summary(_toy(tmp_path), TIERS, _meta())
    t = tiers.set_index("encoder")
    # t1 = b1, b2, b3 (MAE negated): A (80+50-2)/3, B (60+90-1)/3, C (70+70-3)/3; D lacks b2 and b3.
    assert t.loc["A", "tier:t1"] == pytest.approx(128 / 3)
    assert t.loc["B", "tier:t1"] == pytest.approx(149 / 3)
    assert t.loc["C", "tier:t1"] == pytest.approx(137 / 3)
    assert math.isnan(t.loc["D", "tier:t1"]) and math.isnan(t.loc["D", "tier:t1:rank"])
    assert [t.loc[e, "tier:t1:rank"] for e in "ABC"] == [3, 1, 2]
    # t2 = b1, b4 (Brier in %, turned to 100 - x): A 80, B 65, C 80 (a tie shares the best rank).
    assert [t.loc[e, "tier:t2"] for e in "ABC"] == pytest.approx([80, 65, 80])
    assert [t.loc[e, "tier:t2:rank"] for e in "ABC"] == [1, 3, 1]
    assert "tier:t3" not in t.columns
    # Families: F1 = b1, b2; F2 = b3 (-MAE), b4 (100 - BS).
    assert [t.loc[e, "group:F1"] for e in "ABC"] == pytest.approx([65, 75, 70])
    assert [t.loc[e, "group:F2"] for e in "ABC"] == pytest.approx([39, 34.5, 43.5])
    assert [t.loc[e, "group:F2:rank"] for e in "ABC"] == [2, 3, 1]
    i = info.set_index("benchmark")
    assert i.loc["b3", "metric"] == "mae" and i.loc["b3", "turn"] == "-x"
    assert i.loc["b4", "turn"] == "100 - x"
    assert i.loc["b1", "turn"] == "x" and i.loc["b1", "tiers"] == "t1,t2"


def test_partial_tiers_average_over_what_is_present(tmp_path):
    with pytest.warns(UserWarning, match="partial mean over 1 of 2"):
        tiers, _ = tier_summary(_toy(tmp_path), {"t3": TIERS["t3"]}, _meta(), partial=True)
    t = tiers.set_index("encoder")
    assert [t.loc[e, "tier:t3"] for e in "ABCD"] == [80, 60, 70, 75]
    assert list(t["tier:t3:n"]) == [1, 1, 1, 1]


def test_tier_with_no_benchmark_present_is_skipped_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="tier 'ghost' skipped: none of its 2 benchmarks"):
        tiers, _ = tier_summary(_toy(tmp_path), {"ghost": ["x", "y"]}, _meta())
    assert not any(c.startswith("tier:") for c in tiers.columns)
    assert "group:F1" in tiers.columns


def test_turn_rules():
    assert turn_rule("acc@1", True, [1.0]) == ("identity", None)
    assert turn_rule("CIFAR-100 Loss", False, [0.6, 4.0]) == ("negate", None)
    assert turn_rule("Chexpert BS Macro", False, [7.0, 18.0]) == ("complement", 100.0)
    assert turn_rule("brier", False, [0.1, 0.3]) == ("complement", 1.0)
    assert turn_rule("x", False, [1.0], BenchmarkMeta("k", turn="complement", bound=10.0)) == ("complement", 10.0)


def test_tier_configs_ship_with_the_paper_benchmarks():
    import yaml

    from gate.analysis.meta import packaged_dataset_dir

    conf = packaged_dataset_dir().parent / "tier"
    tiers = {f.stem: yaml.safe_load(f.read_text()) for f in conf.glob("*.yaml")}
    keys = tier_benchmarks(tiers)
    assert {k: len(v) for k, v in keys.items()} == {"small": 8, "base": 15, "big": 21, "full": 31, "demo": 11}
    paper = set(load_results(default_paper_table()).long["dataset"])
    assert set(keys["full"]) == paper
    assert set(keys["small"]) == {"cifar100", "cubirds", "mini_imagenet", "imagenet1k", "acdc", "clevr_math",
                                  "ade20k", "iwildcam"}


def test_paper_table_tiers_agree_with_the_published_ranks():
    import yaml

    from gate.analysis.meta import packaged_dataset_dir

    conf = packaged_dataset_dir().parent / "tier"
    tiers_cfg = {f.stem: yaml.safe_load(f.read_text()) for f in conf.glob("*.yaml")}
    loaded = load_results(default_paper_table())
    tiers, info = tier_summary(summarize(loaded.long), tiers_cfg, load_benchmark_meta())
    assert len(info) == 31 and info["chosen_by"].str.contains("benchmark_meta gate_paper").all()
    assert info.set_index("benchmark").loc["iwildcam", "turn"] == "-x"
    assert info.set_index("benchmark").loc["acdc", "scale"] == 100
    check = compare_with_published(tiers, loaded.aggregates).set_index("tier")
    assert set(check.index) == {"small", "base", "big", "full"}
    assert (check["spearman"] > 0.97).all()
    assert tiers.iloc[0]["encoder"] == "cvnxtv2"  # the paper's rank 1 on every tier


def test_dataset_config_tier_metric_comes_first(tmp_path):
    d = tmp_path / "dataset"
    d.mkdir()
    (d / "b1.yaml").write_text("name: b1\nmodality: image\ntask: classification\nnum_classes: 10\npaper_group: Mine\n"
                               "tier_metric: top5\n")
    meta = load_benchmark_meta(dataset_dirs=[d])
    assert meta["b1"].tier_metrics[0][0] == "top5" and meta["b1"].paper_group == "Mine"
    assert meta["digits"].tier_metrics[0][0] == "acc@1"  # the engine's packaged dataset config
    frame = pd.DataFrame({"encoder": ["a", "b", "a", "b"], "dataset": ["b1"] * 4, "metric": ["acc@1"] * 2 + ["top5"] * 2,
                          "value": [1.0, 2.0, 4.0, 3.0], "higher_is_better": True})
    tiers, info = tier_summary(summarize(from_frame(frame).long), {"t": ["b1"]}, meta)
    assert info["metric"].tolist() == ["top5"]
    assert tiers.set_index("encoder")["tier:t"].to_dict() == {"a": 4.0, "b": 3.0}
    assert "group:Mine" in tiers.columns


def test_benchmark_meta_from_the_composed_config_and_an_extra_file(tmp_path):
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module(config_module="gate.conf", version_base=None):
        cfg = compose(config_name="analysis", overrides=['benchmark_meta.nyu.tier_metric=NYU Dice Score'])
    composed = OmegaConf.to_container(cfg.benchmark_meta)
    assert len(composed) == 31 and composed["acdc"] == {"tier_metric": "ACDC Dice Score", "scale": 100}
    extra = tmp_path / "mine.yaml"
    extra.write_text("my_bench: {paper_group: Mine, tier_metric: top1, turn: negate}\n")
    meta = load_benchmark_meta(benchmarks_file=extra, benchmarks=composed)
    # nyu has a dataset config now: its tier_metric comes first, the composed benchmark_meta value next
    assert meta["nyu"].tier_metrics[0][0] == "miou" and ("NYU Dice Score", "benchmark_meta") in meta["nyu"].tier_metrics
    assert meta["my_bench"].paper_group == "Mine" and meta["my_bench"].turn == "negate"
    with pytest.raises(ValueError, match="must be a mapping"):
        load_benchmark_meta(benchmarks={"x": "acc"})


def test_each_paper_benchmark_states_its_group_once_in_its_dataset_config():
    """The GATE paper's group of each of its 31 benchmarks comes from the benchmark's dataset config (the engine's
    DatasetSpec); conf/benchmark_meta/gate_paper.yaml restates none (it keeps only what the config does not say)."""
    from gate.analysis.meta import _read_meta_file, default_benchmarks_file
    from gate.data.spec import load_dataset_spec

    paper = _read_meta_file(default_benchmarks_file())
    assert len(paper) == 31 and not [k for k, m in paper.items() if set(m) - {"tier_metric", "turn", "bound", "scale"}]
    meta = load_benchmark_meta()
    for key in paper:
        spec = load_dataset_spec(packaged_dataset_dir() / f"{key}.yaml")
        assert spec.paper_group and meta[key].paper_group == spec.paper_group, key
        assert meta[key].sources[0].startswith("dataset config"), (key, meta[key].sources)
    assert meta["acdc"].paper_group == "Medical Seg" and meta["iwildcam"].paper_group == "Video Reg"


def test_analysis_reads_dataset_configs_as_the_engine_does(tmp_path):
    """A dataset config the engine would refuse (an old family: key, an unregistered task) is refused by analysis in
    one line naming the file, instead of being read by rules of its own."""
    d = tmp_path / "dataset"
    d.mkdir()
    (d / "old.yaml").write_text("name: old\nmodality: image\ntask: classification\nnum_classes: 10\nfamily: Mine\n")
    with pytest.raises(ValueError) as err:
        load_benchmark_meta(dataset_dirs=[d])
    assert "\n" not in str(err.value) and "old.yaml" in str(err.value)
    assert "dataset.family was renamed: write dataset.paper_group" in str(err.value)
    (d / "old.yaml").write_text("name: old\nmodality: image\ntask: no_such_task\nnum_classes: 10\n")
    with pytest.raises(ValueError, match=r"old\.yaml.*no_such_task"):
        load_benchmark_meta(dataset_dirs=[d])


def test_an_old_family_key_in_a_benchmarks_file_is_refused(tmp_path):
    extra = tmp_path / "mine.yaml"
    extra.write_text("my_bench: {family: Mine, tier_metric: top1}\n")
    with pytest.raises(ValueError, match=r"'my_bench': family was renamed: write paper_group"):
        load_benchmark_meta(benchmarks_file=extra)

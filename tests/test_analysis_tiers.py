"""Tier and paper-group summaries on a toy table computed by hand, and on the paper's table."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gate.analysis.load import from_frame, load_results, summarize
from gate.analysis.meta import POOL, OutsideRange, TierScale, default_paper_table, load_benchmark_meta, packaged_dataset_dir
from gate.analysis.tiers import compare_with_published, tier_benchmarks, tier_summary

from helpers import composing

WIDE = """paper_group,dataset,metric,higher_is_better,A,B,C,D
F1,b1,acc@1,true,0.80,0.60,0.70,0.75
F1,b2,acc@1,true,0.50,0.90,0.70,
F2,b3,mae,false,2,1,4,
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
    # b3's MAE and b4's Brier score (in %) have no range in the registry: a benchmarks file declares them
    return load_benchmark_meta(benchmarks={"b3": {"tier_metric": "mae", "range": [0, 10]},
                                           "b4": {"tier_metric": "bs", "range": [0, 100]}})


def test_toy_tiers_by_hand(tmp_path):
    with pytest.warns(UserWarning, match=r"tier 't3' skipped: 1 of its 2 benchmarks are not in the results \(\['nowhere'\]\)"):
        tiers, info = tier_summary(_toy(tmp_path), TIERS, _meta())
    t = tiers.set_index("encoder")
    # On 0-1, higher better: b1, b2 as they are (acc@1: [0, 1] in gate/metrics.py); b3 (10 - MAE) / 10: A .8, B .9,
    # C .6; b4 (100 - BS) / 100: A .8, B .7, C .9.
    # t1 = b1, b2, b3: A (.8+.5+.8)/3, B (.6+.9+.9)/3, C (.7+.7+.6)/3; D lacks b2 and b3.
    assert t.loc["A", "tier:t1"] == pytest.approx(2.1 / 3)
    assert t.loc["B", "tier:t1"] == pytest.approx(2.4 / 3)
    assert t.loc["C", "tier:t1"] == pytest.approx(2.0 / 3)
    assert math.isnan(t.loc["D", "tier:t1"]) and math.isnan(t.loc["D", "tier:t1:rank"])
    assert [t.loc[e, "tier:t1:rank"] for e in "ABC"] == [2, 1, 3]
    # t2 = b1, b4: A .8, B .65, C .8 (a tie shares the best rank).
    assert [t.loc[e, "tier:t2"] for e in "ABC"] == pytest.approx([0.8, 0.65, 0.8])
    assert [t.loc[e, "tier:t2:rank"] for e in "ABC"] == [1, 3, 1]
    assert "tier:t3" not in t.columns
    # Groups: F1 = b1, b2; F2 = b3, b4.
    assert [t.loc[e, "group:F1"] for e in "ABC"] == pytest.approx([0.65, 0.75, 0.70])
    assert [t.loc[e, "group:F2"] for e in "ABC"] == pytest.approx([0.8, 0.8, 0.75])
    assert [t.loc[e, "group:F2:rank"] for e in "ABC"] == [1, 1, 3]
    i = info.set_index("benchmark")
    assert i.loc["b3", "metric"] == "mae" and i.loc["b3", "entered_as"] == "(10 - x) / 10"
    assert i.loc["b4", "entered_as"] == "(100 - x) / 100" and i.loc["b4", "range"] == "[0, 100]"
    assert i.loc["b1", "entered_as"] == "x" and i.loc["b1", "range_from"] == "gate/metrics.py"
    assert i.loc["b1", "tiers"] == "t1,t2"


def test_a_range_belongs_to_its_metric_not_to_the_benchmark(tmp_path):
    """One declared scale per metric: ACDC's paper row (Dice printed 0-1, beside percentages) and gate's own
    dice records are two metrics with two ranges. A synthetic store of gate's own records of every task family,
    where encoder 'b' wins ACDC alone and 'a' wins every other benchmark: 'a' must win the tier mean (with the paper
    row's x100 applied to gate's 0-1 dice, ACDC alone decided it)."""
    from gate.results import Record, ResultsStore

    # benchmark -> (its tier metric in gate's records, a's value, b's value); every family of the pool
    bench = {"cifar100": ("acc@1", 0.80, 0.70), "mini_imagenet": ("acc@1", 0.60, 0.50),
             "ade20k": ("miou", 0.30, 0.20), "acdc": ("dice", 0.70, 0.80), "chexpert": ("auc_macro", 0.80, 0.75),
             "clevr_math": ("acc@1", 0.50, 0.45), "flickr30k": ("img2txt_acc@1", 0.40, 0.30),
             "winoground": ("winoground_text", 0.30, 0.25), "hmdb51": ("acc@1", 0.50, 0.40),
             "iwildcam": ("r2", 0.20, -0.50)}
    store = ResultsStore(tmp_path / "records.jsonl")
    for ds, (metric, *values) in bench.items():
        for enc, value in zip("ab", values):
            common = dict(experiment=f"{enc}-{ds}", kind="finetune", encoder=enc, dataset=ds, task="t", adapter="x",
                          recipe="conv", seed=0, config={"dataset": {"name": ds}, "encoder": {"name": enc}})
            rows = [Record(split="test", metric=metric, value=value, **common)]
            if ds == "iwildcam":  # an error in counts, which must not enter the mean
                rows.append(Record(split="test", metric="mae", value=4.7 if enc == "a" else 5.9, **common))
            store.append_set(rows)
    tiers, info = tier_summary(summarize(load_results(store.path).long), {"all": list(bench)}, load_benchmark_meta())
    t = tiers.set_index("encoder")
    assert t.loc["a", "tier:all:rank"] == 1 and t.loc["b", "tier:all:rank"] == 2
    i = info.set_index("benchmark")
    assert i.loc["acdc", "metric"] == "dice" and i.loc["acdc", "entered_as"] == "x"
    assert i.loc["acdc", "range_from"] == "gate/metrics.py"
    # iwildcam enters by r2 clipped to [0, 1] (its dataset config's tier_range): b's -0.5 counts 0
    assert i.loc["iwildcam", "metric"] == "r2" and i.loc["iwildcam", "range_from"] == "dataset config iwildcam.yaml"
    a_mean = (sum(v[1] for k, v in bench.items() if k != "iwildcam") + 0.20) / len(bench)
    b_mean = (sum(v[2] for k, v in bench.items() if k != "iwildcam") + 0.0) / len(bench)
    assert t.loc["a", "tier:all"] == pytest.approx(a_mean) and t.loc["b", "tier:all"] == pytest.approx(b_mean)
    assert ((tiers.filter(like="tier:").drop(columns=["tier:all:rank"]) <= 1) & (tiers.filter(like="tier:")
            .drop(columns=["tier:all:rank"]) >= 0)).all().all()


def test_a_value_outside_its_metrics_range_enters_no_mean_and_the_warning_names_the_fix(tmp_path):
    """acc@1 given in percent (the registry says [0, 1]) is never averaged: one warning names benchmark, metric,
    encoder, range and the command-line fix, and every tier and group mean that needs it is skipped; declared on
    the command line (ranges), the same table enters as x / 100."""
    frame = pd.DataFrame({"encoder": ["a", "b", "a", "b"], "dataset": ["mine"] * 2 + ["ok"] * 2,
                          "metric": ["acc@1"] * 2 + ["miou"] * 2, "value": [84.2, 70.0, 0.5, 0.25],
                          "higher_is_better": True, "paper_group": ["G1", "G1", "G2", "G2"]})
    summary = summarize(from_frame(frame).long)
    with pytest.warns(UserWarning) as seen:
        tiers, info = tier_summary(summary, {"t": ["mine", "ok"], "u": ["ok"]}, load_benchmark_meta())
    lines = [str(w.message) for w in seen if "outside their metric's range" in str(w.message)]
    assert lines == [
        "tier and group means skipped where they need a benchmark whose values are outside their metric's range: "
        "benchmark 'mine', metric 'acc@1': a has 84.2, outside the metric's range [0, 1] (gate/metrics.py). A table "
        "in percent? Declare its range on the command line: ranges={acc@1:[0,100]} (tables, correlations and figures "
        "need no scale and are computed)"]
    assert "tier:t" not in tiers.columns and "group:G1" not in tiers.columns  # they need 'mine'
    assert tiers.set_index("encoder")["tier:u"].to_dict() == {"a": 0.5, "b": 0.25}  # what does not is computed
    assert tiers.set_index("encoder")["group:G2"].to_dict() == {"a": 0.5, "b": 0.25}
    assert info.set_index("benchmark").loc["mine", "entered_as"] == "not entered: a value outside the metric's range"

    tiers, info = tier_summary(summary, {"t": ["mine", "ok"]}, load_benchmark_meta(), ranges={"acc@1": (0.0, 100.0)})
    assert tiers.set_index("encoder")["tier:t"].to_dict() == pytest.approx({"a": (0.842 + 0.5) / 2, "b": (0.7 + 0.25) / 2})
    row = info.set_index("benchmark").loc["mine"]
    assert row["entered_as"] == "x / 100" and row["range_from"] == "ranges (command line)" and row["range"] == "[0, 100]"


def test_an_undeclared_range_enters_as_given_and_says_so(tmp_path):
    frame = pd.DataFrame({"encoder": ["a", "b"], "dataset": ["mine"] * 2, "metric": ["mae"] * 2,
                          "value": [2.0, 3.0], "higher_is_better": False})
    with pytest.warns(UserWarning, match=r"no declared range for \['mine \(mae\)'\]: entered on their own scale"):
        tiers, info = tier_summary(summarize(from_frame(frame).long), {"t": ["mine"]}, load_benchmark_meta())
    assert info.iloc[0]["entered_as"] == "-x (range undeclared)" and info.iloc[0]["range"] == "undeclared"
    assert tiers.set_index("encoder")["tier:t"].to_dict() == {"a": -2.0, "b": -3.0}


def test_partial_tiers_average_over_what_is_present(tmp_path):
    with pytest.warns(UserWarning, match="partial mean over 1 of 2"):
        tiers, _ = tier_summary(_toy(tmp_path), {"t3": TIERS["t3"]}, _meta(), partial=True)
    t = tiers.set_index("encoder")
    assert [t.loc[e, "tier:t3"] for e in "ABCD"] == pytest.approx([0.80, 0.60, 0.70, 0.75])
    assert list(t["tier:t3:n"]) == [1, 1, 1, 1]


def test_tier_with_no_benchmark_present_is_skipped_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="tier 'ghost' skipped: none of its 2 benchmarks"):
        tiers, _ = tier_summary(_toy(tmp_path), {"ghost": ["x", "y"]}, _meta())
    assert not any(c.startswith("tier:") for c in tiers.columns)
    assert "group:F1" in tiers.columns


def test_tier_scales():
    v = pd.Series({"a": 20.0, "b": 80.0})
    assert TierScale((0.0, 1.0), "r", True).apply(v / 100, "w")[1] == "x"
    out, how = TierScale((0.0, 100.0), "r", True).apply(v, "w")
    assert how == "x / 100" and out.tolist() == pytest.approx([0.2, 0.8])
    out, how = TierScale((0.0, 1.0), "r", False).apply(v / 100, "w")
    assert how == "1 - x" and out.tolist() == pytest.approx([0.8, 0.2])
    out, how = TierScale((-1.0, 1.0), "r", True).apply(pd.Series({"a": 0.0}), "w")
    assert how == "(x - -1) / 2" and out.tolist() == [0.5]
    out, how = TierScale((0.0, 1.0), "r", True, clip=True).apply(pd.Series({"a": -0.5, "b": 0.4}), "w")
    assert how == "clip(x, 0, 1) then x" and out.tolist() == pytest.approx([0.0, 0.4])
    out, how = TierScale(POOL, "r", False).apply(pd.Series({"a": 1.3, "b": 2.6, "c": 1.95}), "w")
    assert how == "pool: (2.6 - x) / 1.3" and out.tolist() == pytest.approx([1.0, 0.0, 0.5])
    with pytest.raises(OutsideRange, match="outside the metric's range"):
        TierScale((0.0, 1.0), "r", True).apply(v, "w")


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
    i = info.set_index("benchmark")
    assert i.loc["iwildcam", "range"] == "pool" and i.loc["iwildcam", "entered_as"].startswith("pool: (2.6 - x)")
    assert i.loc["acdc", "range"] == "[0, 1]" and i.loc["acdc", "entered_as"] == "x"  # the paper prints Dice 0-1
    assert i.loc["cifar100", "entered_as"] == "x / 100"
    assert ((tiers.filter(regex=r"^tier:[a-z]+$") >= 0) & (tiers.filter(regex=r"^tier:[a-z]+$") <= 1)).all().all()
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
    assert meta["b1"].tier_metrics[0].name == "top5" and meta["b1"].paper_group == "Mine"
    assert meta["digits"].tier_metrics[0].name == "acc@1"  # the engine's packaged dataset config
    frame = pd.DataFrame({"encoder": ["a", "b", "a", "b"], "dataset": ["b1"] * 4, "metric": ["acc@1"] * 2 + ["top5"] * 2,
                          "value": [1.0, 2.0, 4.0, 3.0], "higher_is_better": True})
    tiers, info = tier_summary(summarize(from_frame(frame).long), {"t": ["b1"]}, meta)
    assert info["metric"].tolist() == ["top5"]
    assert tiers.set_index("encoder")["tier:t"].to_dict() == {"a": 4.0, "b": 3.0}
    assert "group:Mine" in tiers.columns


def test_benchmark_meta_from_the_composed_config_and_an_extra_file(tmp_path):
    from hydra import compose
    from omegaconf import OmegaConf

    with composing():
        cfg = compose(config_name="analysis", overrides=['benchmark_meta.nyu.tier_metric=NYU Dice Score'])
    composed = OmegaConf.to_container(cfg.benchmark_meta)
    assert len(composed) == 31 and composed["acdc"] == {"tier_metric": "ACDC Dice Score", "range": [0, 1]}
    extra = tmp_path / "mine.yaml"
    extra.write_text("my_bench: {paper_group: Mine, tier_metric: top1, range: [0, 10]}\n")
    meta = load_benchmark_meta(benchmarks_file=extra, benchmarks=composed)
    # nyu has a dataset config now: its tier_metric comes first, the composed benchmark_meta value next
    assert meta["nyu"].tier_metrics[0].name == "miou"
    assert ("NYU Dice Score", "benchmark_meta") in [(c.name, c.source) for c in meta["nyu"].tier_metrics]
    assert meta["my_bench"].paper_group == "Mine" and meta["my_bench"].tier_metrics[0].range == (0.0, 10.0)
    extra.write_text("my_bench: {tier_metric: top1, turn: negate}\n")
    with pytest.raises(ValueError, match=r"'my_bench': turn was replaced by range: \[low, high\]"):
        load_benchmark_meta(benchmarks_file=extra)
    extra.write_text("my_bench: {tier_metric: top1, range: [5, 1]}\n")
    with pytest.raises(ValueError, match=r"needs finite low < high"):
        load_benchmark_meta(benchmarks_file=extra)
    with pytest.raises(ValueError, match="must be a mapping"):
        load_benchmark_meta(benchmarks={"x": "acc"})


def test_each_paper_benchmark_states_its_group_once_in_its_dataset_config():
    """The GATE paper's group of each of its 31 benchmarks comes from the benchmark's dataset config (the engine's
    DatasetSpec); conf/benchmark_meta/gate_paper.yaml restates none (it keeps only what the config does not say)."""
    from gate.analysis.meta import _read_meta_file, default_benchmarks_file
    from gate.data.spec import load_dataset_spec

    paper = _read_meta_file(default_benchmarks_file())
    assert len(paper) == 31 and not [k for k, m in paper.items() if set(m) - {"tier_metric", "range"}]
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


def test_a_capped_evaluation_is_marked_where_its_number_is_shown(tmp_path):
    """A number measured on a capped evaluation split is marked ‡ in table.md, table.tex, report.html,
    tiers_benchmarks.csv and gate-tier's comparison, with how it was capped; a cap that did not bite (the split was
    smaller) is not marked, and an old record (no split_rows fact) says the cap alone."""
    from gate.analysis.pipeline import run_analysis
    from gate.results import Record, ResultsStore
    from gate.tiers.summary import compare_encoders, format_comparison

    store = ResultsStore(tmp_path / "results" / "records.jsonl")
    cases = {"digits": ({"used": 1000, "of": 10000}, 1000), "fashion_mnist": ({"used": 300, "of": 300}, 1000),
             "cifar100": (None, 500)}
    for ds, (rows, cap) in cases.items():
        for enc, value in (("a", 0.8), ("b", 0.6)):
            common = dict(experiment=f"{enc}-{ds}", kind="finetune", encoder=enc, dataset=ds, task="classification",
                          adapter="x", recipe="conv", seed=0,
                          config={"dataset": {"name": ds}, "encoder": {"name": enc},
                                  "data": {"max_test_samples": cap, "max_val_samples": cap}})
            store.append_set([Record(split="test", metric="acc@1", value=value, **common)],
                             facts=None if rows is None else {"split_rows": {"test": rows, "val": rows}})
    result = run_analysis(store.path, tmp_path / "report", tiers={"t": list(cases)}, figures=False)
    md = (tmp_path / "report" / "table.md").read_text()
    assert "| digits ‡ |" in md and "| fashion_mnist |" in md and "| cifar100 ‡ |" in md
    assert "- **digits**: test: 1,000 of 10,000 rows" in md
    assert "- **cifar100**: test: at most 500 rows (data.max_test_samples; the split's size was not recorded)" in md
    assert r"digits $^\ddagger$" in (tmp_path / "report" / "table.tex").read_text()
    html_text = (tmp_path / "report" / "report.html").read_text()
    assert "digits ‡" in html_text and "test: 1,000 of 10,000 rows" in html_text
    info = pd.read_csv(result.files["tiers_benchmarks.csv"], keep_default_na=False).set_index("benchmark")
    assert info.loc["digits", "capped"] == "test: 1,000 of 10,000 rows" and info.loc["fashion_mnist", "capped"] == ""
    lines = format_comparison(compare_encoders(result.tiers, ["a", "b"], "t", info.reset_index()))
    assert lines[1].split()[:3] == ["t", "(tier", "mean)"] and lines[1].split()[3] == "‡"
    assert any(line.strip().startswith("‡ averages benchmarks measured on a capped subset") and "cifar100, digits"
               in line for line in lines)


def test_the_rank_statistics_without_scipy_equal_pandas_spearman_and_scipys_kendall_tau_b():
    """gate-analysis ranks with numpy (scipy.stats costs it 0.7 s to import): on 200 random vectors with ties and
    missing values, Spearman over the known pairs equals pandas' and Kendall τ-b equals scipy's."""
    import numpy as np
    import pandas as pd
    from scipy import stats

    from gate.analysis.ranks import kendall, spearman

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(3, 25))
        x, y = rng.integers(0, 6, n).astype(float), rng.normal(size=n)
        x[rng.random(n) < 0.2] = np.nan
        expected = pd.Series(x).corr(pd.Series(y), method="spearman")
        assert spearman(x, y) == pytest.approx(expected, abs=1e-12, nan_ok=True)
        known = np.isfinite(x)
        if known.sum() >= 2:
            tau = stats.kendalltau(x[known], y[known])[0]
            assert kendall(x[known], y[known]) == pytest.approx(tau, abs=1e-12, nan_ok=True)

"""gate-rank's baselines say beside the number where a score is degenerate on the rows it scored (issue 24;
the rule: gate.transferability.Metric.degenerate, tests/test_transferability_degeneracy.py)."""

from __future__ import annotations

import math

import pandas as pd

from gate.ranking.budget import Ledger
from gate.ranking.pipeline import FullResults, RankResult, Request, summary_lines, summary_table, validate_against_full
from gate.ranking.proxy import BenchmarkRanking
from gate.ranking.stats import rank_intervals

from helpers import compose_run


def _validated(degenerate):
    encs = ["a", "b", "c", "d"]
    full = pd.DataFrame({"x": [0.9, 0.8, 0.7, 0.1], "y": [0.5, 0.9, 0.4, 0.3]}, index=encs)
    fr = FullResults(full, {b: {0: full[b], 1: full[b]} for b in full}, {b: ("acc@1", True) for b in full}, {}, {})
    rankings = {b: BenchmarkRanking(b, "acc@1", True, 10, (2,), [], list(encs)) for b in full}
    scores = {"sfda": {b: {"a": 1.0, "b": 1.0, "c": 0.7, "d": 0.2} for b in full},
              "logme": {"x": {"a": 0.4, "b": 0.3, "c": 0.2, "d": 0.1}}}
    result = RankResult(rankings, Ledger(), pd.DataFrame(), [], fr, scores=scores, degenerate=degenerate)

    class Plan:
        encoders = tuple(encs)

        class tier:
            name = "t"

    request = Request(None, tuple(encs), 0.1, eta=2, overhead_steps=0, n_boot=20, use_full_runs=True,
                      baseline_scores=("sfda", "logme"))
    result.validation = validate_against_full(result, Plan, request, ["x", "y"])
    result.ceiling = {"x": 1.0, "y": 1.0, "tier": 1.0}
    result.tier_ranking = rank_intervals(result.predicted(), n_boot=20)
    return result, Plan, request


def test_gate_rank_baselines_say_beside_the_number_where_a_score_is_degenerate(tmp_path):
    from gate.ranking.report import write_report

    wide = {"a": "feature rank 149 ≥ 150 rows − 10 classes", "b": "feature rank 199 ≥ 200 rows − 10 classes"}
    result, plan, request = _validated({"sfda": {"x": wide, "y": {"a": wide["a"]}}})
    table = result.validation
    rows = table.set_index(["method", "scope"])["degenerate"]
    assert rows["score:sfda", "x"] == ("on 2 of 4 encoders: feature rank 149 ≥ 150 rows − 10 classes; "
                                       "feature rank 199 ≥ 200 rows − 10 classes")
    assert rows["score:sfda", "y"] == "on 1 of 4 encoders: feature rank 149 ≥ 150 rows − 10 classes"
    assert rows["score:sfda", "tier"].startswith("on 3 of 8 encoder × benchmark scores: feature rank 149")
    assert rows["score:logme", "tier"] == "" and rows["proxy", "tier"] == ""
    summary = summary_table(table, {"x": 1.0, "y": 1.0, "tier": 1.0})
    lines = {line.split()[0]: line for line in summary_lines(summary)}
    assert lines["score:sfda"].endswith("(degenerate on 3 of 8 encoder × benchmark scores: feature rank 149 ≥ 150 "
                                        "rows − 10 classes; feature rank 199 ≥ 200 rows − 10 classes)")
    assert "τ +" in lines["score:sfda"] and "degenerate" not in lines["score:logme"] + lines["proxy"]
    # a validation.csv read back (empty notes become NaN) summarises the same
    back = summary_table(table.astype({"degenerate": object}).replace("", math.nan), {"tier": 1.0})
    assert summary_lines(back) == summary_lines(summary)
    page = write_report(result, plan, request, tmp_path).read_text()  # the page's summary and per-benchmark tables
    assert page.count("on 3 of 8 encoder × benchmark scores: feature rank 149") == 2 and "on 1 of 4 encoders" in page


def test_gate_rank_reads_the_mark_from_the_score_records(tmp_path):
    """score_values judges each score record by its rows, classes and feature rank (facts) through the registry's
    rule; a record written before gate-score stored the class count and the rank is judged by the dataset's declared
    classes and the width, and says so. Ranks as measured at 32 px (measurements/score_degeneracy.py --features):
    ViT-Tiny on 150 Fashion-MNIST rows 149; ResNet-18 (random init) on 500 digits 52 of 512."""
    from gate.engine.build import resolved_config
    from gate.ranking.pipeline import score_values
    from gate.results import experiment_id
    from gate.tiers.expand import expand_tier
    from gate.tiers.spec import parse_tier

    doc = {"name": "t", "seeds": [0], "overrides": {"trainer.max_steps": 8, "trainer.val_check_interval": 4},
           "benchmarks": ["digits"]}
    facts = {"vit_tiny_scratch": {"num_samples": 150, "feature_dim": 192, "num_classes": 10, "feature_rank": 149},
             "resnet18_scratch": {"num_samples": 500, "feature_dim": 512, "num_classes": 10, "feature_rank": 52},
             "efficientnet_lite0": {"num_samples": 500, "feature_dim": 1280}}  # the old record
    plan = expand_tier(parse_tier(doc, "t"), list(facts), tmp_path)
    records, lines = [], []

    def run_score(cfg):
        sid, enc = experiment_id(resolved_config(cfg), "score"), cfg["encoder"]["name"]
        records.extend({"experiment": sid, "kind": "score", "metric": m, "value": 0.5,
                        "facts": {"seconds": 0.1, "extract_seconds": 1.0, **facts[enc]}} for m in ("sfda", "logme"))

    values, _, degenerate = score_values(plan, ["digits"], ["sfda", "logme"], run_score=run_score,
                                         compose_score=lambda ovs: compose_run(tmp_path, ovs, config_name="score"),
                                         records=lambda: records, echo=lambda *a, **k: lines.append(a[0]))
    assert set(values["sfda"]["digits"]) == set(facts)
    assert degenerate == {"sfda": {"digits": {
        "vit_tiny_scratch": "feature rank 149 ≥ 150 rows − 10 classes",
        "efficientnet_lite0": "width 1280 ≥ 500 rows − 10 classes, feature rank not recorded (it decides; gate-score "
                              "force=true records it)"}}}
    assert any("vit_tiny_scratch" in line and "degenerate: sfda (feature rank 149" in line for line in lines)
    assert not any("resnet18_scratch" in line and "degenerate" in line for line in lines)

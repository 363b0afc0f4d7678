"""gate-rank's baselines say beside the number where a score is degenerate on the rows it scored (issue 24;
the rule: gate.transferability.Metric.degenerate, tests/test_transferability_degeneracy.py)."""

from __future__ import annotations

import pandas as pd

from helpers import compose_run


def test_gate_rank_baselines_say_beside_the_number_where_a_score_is_degenerate(tmp_path, capsys):
    """A baseline score degenerate on some of the rows it scored is marked beside its τ: validation.csv's
    ``degenerate`` column, the printed line and the report."""
    from types import SimpleNamespace

    from test_rank_outputs import _Plan, _result

    from gate.ranking.grading import validate
    from gate.ranking.history import History
    from gate.ranking.report import write_report
    from gate.ranking.request import Request
    from gate.ranking.stage import print_result

    encs = ["a", "b", "c"]
    result = _result(validation=False)
    result.scores = {"sfda": {"x": {"a": 1.0, "b": 1.0, "c": 0.2}}, "logme": {"x": {"a": 0.4, "b": 0.3, "c": 0.2}}}
    result.degenerate = {"sfda": {"x": {"a": "feature rank 149 ≥ 150 rows − 10 classes",
                                        "b": "feature rank 199 ≥ 200 rows − 10 classes"}}}
    truth = History(pd.DataFrame({"x": [0.9, 0.5, 0.1]}, index=encs),
                    seeds={"x": pd.DataFrame({0: [0.9, 0.5, 0.1], 1: [0.8, 0.6, 0.1]}, index=encs)})
    plan = SimpleNamespace(experiments=[SimpleNamespace(encoder=e, dataset="x", config={"encoder": {"name": e}})
                                        for e in encs], encoders=tuple(encs), tier=_Plan.tier)
    request = Request(None, tuple(encs), 0.1, baseline_scores=("sfda", "logme"), n_boot=20)
    result.validation, result.ceiling, result.paired = validate(result, truth, ["x"], encs, request, plan, None,
                                                                None, None)
    notes = result.validation.set_index("method")["degenerate"]
    assert notes["score:sfda"] == ("on 2 of 3 encoder × benchmark scores: feature rank 149 ≥ 150 rows − 10 classes; "
                                   "feature rank 199 ≥ 200 rows − 10 classes")
    assert notes["score:logme"] == "" and notes["v2"] == ""
    result.truth = truth
    print_result(SimpleNamespace(result=result, out=tmp_path, files={}), SimpleNamespace(plan=plan, request=request))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("score:sfda")]
    assert lines and lines[0].endswith("(degenerate on 2 of 3 encoder × benchmark scores: feature rank 149 ≥ 150 rows "
                                       "− 10 classes; feature rank 199 ≥ 200 rows − 10 classes)")
    page = write_report(result, plan, request, tmp_path).read_text()
    assert "on 2 of 3 encoder × benchmark scores" in page


def test_gate_rank_reads_the_mark_from_the_score_records(tmp_path):
    """score_values judges each score record by its rows, classes and feature rank (facts) through the registry's
    rule; a record written before gate-score stored the class count and the rank is judged by the dataset's declared
    classes and the width, and says so. Ranks as measured at 32 px (measurements/score_degeneracy.py --features):
    ViT-Tiny on 150 Fashion-MNIST rows 149; ResNet-18 (random init) on 500 digits 52 of 512."""
    from gate.engine.validate import resolved_config
    from gate.ranking.scores import score_values
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

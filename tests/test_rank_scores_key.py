"""`gate-rank prior=[leep]` with an encoder that has no source classification head names gate-rank's own key
(prior), not gate-score's (issue 27: its error said "metric(s) ['leep'] ... num_source_classes", neither of which
a gate-rank user can set)."""

import pytest

from gate.engine.compose import hydra_compose_context
from gate.engine.validate import parse_score
from gate.errors import ConfigError
from gate.ranking.scores import check_score_heads, score_values
from gate.results import ResultsStore
from gate.scoring.stage import run_score
from gate.tiers.expand import expand_tier
from gate.tiers.spec import parse_tier


def compose_score(overrides):
    from hydra import compose

    with hydra_compose_context():
        return compose("score", overrides=list(overrides))


@pytest.mark.parametrize("key", ["prior", "baseline_scores"])
def test_a_source_score_for_an_encoder_without_a_head_names_gate_ranks_key(tmp_path, key):
    tier = parse_tier({"name": "t", "seeds": [0], "overrides": {"image_size": 32}, "score_overrides": {"max_samples": 40},
                       "benchmarks": ["digits"]}, "t")
    plan = expand_tier(tier, ["resnet18_scratch"], tmp_path, check_prepared=lambda d: None)
    store = ResultsStore(tmp_path / "results" / "records.jsonl")
    with pytest.raises(ConfigError) as err:
        score_values(plan, ["digits"], ["leep", "knn_acc"], compose_score=compose_score,
                     run_score=lambda cfg: run_score(parse_score(cfg)), records=store.records, echo=lambda *a, **k: None, key=key)
    text = str(err.value)
    assert text.startswith(f"{key}=['leep', 'knn_acc'] is invalid: leep needs the source-class probabilities")
    assert "encoder resnet18_scratch lacks; drop it from " + key in text and "knn_acc" in text
    assert "metric(s)" not in text and "num_source_classes" not in text


def test_gate_rank_refuses_it_before_any_run(tmp_path):
    """The encoder class declares no source head: refused from the plan alone, before any run or feature pass."""
    tier = parse_tier({"name": "t", "seeds": [0], "benchmarks": ["digits"]}, "t")
    plan = expand_tier(tier, ["efficientnet_lite0", "resnet18_scratch"], tmp_path, check_prepared=lambda d: None)
    check_score_heads(plan, ["knn_acc"], "prior")  # feature scores: every encoder takes them
    with pytest.raises(ConfigError, match=r"^prior=\['nce'\] is invalid: nce needs .* encoder resnet18_scratch lacks"):
        check_score_heads(plan, ["nce"], "prior")

"""Scores fitted on the rows they score (SFDA, H-score) are marked degenerate where the features' rank reaches the
largest rank of what they fit (issue 24): gate-score stores the mark beside the number (gate-rank's baselines:
tests/test_rank_degenerate.py). measurements/score_degeneracy.py measures where each score stops discriminating."""

from __future__ import annotations

import numpy as np
import pytest

from gate.transferability import SCORES, feature_rank

from helpers import compose_run


def _draw(n, d, classes, strength, seed):
    """Gaussian noise; with strength > 0, class means in the first 8 coordinates (as measurements/score_degeneracy.py)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % classes
    rng.shuffle(labels)
    x = rng.standard_normal((n, d))
    x[:, :8] += rng.standard_normal((classes, 8))[labels] * strength
    return x, labels


@pytest.mark.parametrize("name, ceiling, first, rows", [("sfda", 1.0, 55, "60 rows − 5 classes"),
                                                       ("h_score", 4.0, 59, "60 rows − 1")])
def test_a_score_fitted_on_its_rows_gives_its_ceiling_for_any_labels_from_the_marked_rank(name, ceiling, first, rows):
    """60 rows in 5 classes: SFDA's within-class scatter has rank at most 60 − 5, H-score's covariance 60 − 1; once
    the features' rank reaches it, noise with random labels and well-separated classes score the same (the
    ceiling). Gaussian features have the rank of their width, up to n − 1."""
    n, classes = 60, 5
    score = SCORES[name]
    for d in (first, 80):
        x = _draw(n, d, classes, 0.0, 0)[0]
        noise = score(features=x, labels=_draw(n, d, classes, 0.0, 1)[1])
        informative = score(features=_draw(n, d, classes, 3.0, 2)[0], labels=_draw(n, d, classes, 3.0, 2)[1])
        assert noise == pytest.approx(ceiling, rel=1e-6) and informative == pytest.approx(ceiling, rel=1e-6)
        assert feature_rank(x) == min(d, n - 1)
        assert score.degenerate(n, classes, feature_rank=feature_rank(x)) == f"feature rank {min(d, n - 1)} ≥ {rows}"
    assert score.degenerate(n, classes, feature_rank=first - 1) is None
    narrow = score(features=_draw(n, 8, classes, 0.0, 0)[0], labels=_draw(n, 8, classes, 0.0, 1)[1])
    assert narrow < 0.5 * ceiling  # on 8 noise dimensions it is near chance, not at its ceiling


def test_wide_features_of_low_rank_are_not_marked_and_still_discriminate():
    """The rank decides, not the width: pooled features are often far from full rank (random-init ResNet-18 at
    32 px, 120 digits: width 512, rank 22; see the gate-score test below). 200-wide features of rank 20 on 60 rows."""
    n, classes, rng = 60, 5, np.random.default_rng(0)
    lift = rng.standard_normal((20, 200))
    noise, labels = _draw(n, 20, classes, 0.0, 1)
    signal, _ = _draw(n, 20, classes, 3.0, 1)  # the same labels, class means in 8 of the 20 dimensions
    assert feature_rank(noise @ lift) == 20 and SCORES["sfda"].degenerate(n, classes, feature_rank=20) is None
    assert SCORES["sfda"](features=noise @ lift, labels=labels) < 0.6 < SCORES["sfda"](features=signal @ lift,
                                                                                          labels=labels)
    # a record without the rank (stored before gate-score recorded it): the width bounds it, and the reason says so
    assert SCORES["sfda"].degenerate(n, classes, feature_dim=200) == (
        "width 200 ≥ 60 rows − 5 classes, feature rank not recorded (it decides; gate-score force=true records it)")
    with pytest.raises(ValueError, match="needs feature_rank"):
        SCORES["sfda"].degenerate(n, classes)


def test_only_the_scores_that_fit_their_rows_exactly_are_marked():
    from gate.transferability import Metric

    marked = {k for k, m in SCORES.items() if m.degenerate(500, 10, feature_rank=499)}
    assert marked == {"sfda", "h_score"}  # measurements/score_degeneracy.py: the others still order noise < signal
    with pytest.raises(ValueError, match="fits='scatter'; known: \\['covariance', 'within-class scatter'\\]"):
        Metric("x", len, fits="scatter")


def test_gate_score_stores_the_mark_and_the_rank_beside_the_number(tmp_path):
    """Random-init ViT-Tiny on 60 digits: 192-wide features of rank 59, SFDA 1.0 for any labels, marked. Random-init
    ResNet-18 on 120: 512 wide but of rank 22, SFDA 0.17 (chance 0.1), not marked."""
    from gate.engine.validate import parse_score
    from gate.results import ResultsStore
    from gate.scoring.stage import run_score

    common = ["dataset=digits", "image_size=32", "progress_bar=false", "metrics=[sfda,logme]"]
    cfg = compose_run(tmp_path, [*common, "max_samples=60", "encoder=vit_tiny_scratch"], config_name="score")
    with pytest.warns(UserWarning, match="sfda is degenerate on vit_tiny_scratch × digits/train"):
        result = run_score(parse_score(cfg))
    assert result.degenerate == {"sfda": "feature rank 59 ≥ 60 rows − 10 classes"}
    assert result.values["sfda"] == pytest.approx(1.0)
    facts = {r["metric"]: r["facts"] for r in ResultsStore(tmp_path / "results" / "records.jsonl").records()}
    assert facts["sfda"]["degenerate"] == "feature rank 59 ≥ 60 rows − 10 classes" and "degenerate" not in facts["logme"]
    assert (facts["logme"]["num_classes"], facts["logme"]["feature_dim"], facts["logme"]["feature_rank"]) == (10, 192, 59)

    wide = run_score(parse_score(compose_run(tmp_path, [*common, "max_samples=120", "encoder=resnet18_scratch"], config_name="score")))
    assert wide.degenerate == {} and wide.values["sfda"] < 0.3
    facts = [r["facts"] for r in ResultsStore(tmp_path / "results" / "records.jsonl").records()
             if r["experiment"] == wide.experiment]
    assert {(f["feature_dim"], f["feature_rank"]) for f in facts} == {(512, 22)}

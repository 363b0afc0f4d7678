"""Scores fitted on the rows they score (SFDA, H-score) are marked degenerate where the feature width reaches the
rank of what they fit (issue 24): gate-score stores the mark beside the number (gate-rank's baselines:
tests/test_rank_degenerate.py). measurements/score_degeneracy.py measures where each score stops discriminating."""

from __future__ import annotations

import numpy as np
import pytest

from gate.scoring.transferability import SCORES

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
def test_a_score_fitted_on_its_rows_gives_its_ceiling_for_any_labels_from_the_marked_width(name, ceiling, first, rows):
    """60 rows in 5 classes: SFDA's within-class scatter has rank at most 60 − 5, H-score's covariance 60 − 1; from
    that width on noise with random labels and well-separated classes score the same (the ceiling)."""
    n, classes = 60, 5
    score = SCORES[name]
    for d in (first, 80):
        noise = score(features=_draw(n, d, classes, 0.0, 0)[0], labels=_draw(n, d, classes, 0.0, 1)[1])
        informative = score(features=_draw(n, d, classes, 3.0, 2)[0], labels=_draw(n, d, classes, 3.0, 2)[1])
        assert noise == pytest.approx(ceiling, rel=1e-6) and informative == pytest.approx(ceiling, rel=1e-6)
        assert score.degenerate(n, d, classes) == f"width {d} ≥ {rows}"
    assert score.degenerate(n, first - 1, classes) is None
    narrow = score(features=_draw(n, 8, classes, 0.0, 0)[0], labels=_draw(n, 8, classes, 0.0, 1)[1])
    assert narrow < 0.5 * ceiling  # on 8 noise dimensions it is near chance, not at its ceiling


def test_only_the_scores_that_fit_their_rows_exactly_are_marked():
    from gate.scoring.transferability import Metric

    marked = {k for k, m in SCORES.items() if m.degenerate(500, 2048, 10)}
    assert marked == {"sfda", "h_score"}  # measurements/score_degeneracy.py: the others still order noise < signal
    with pytest.raises(ValueError, match="fits='scatter'; known: \\['covariance', 'within-class scatter'\\]"):
        Metric("x", len, fits="scatter")


def test_gate_score_stores_the_mark_and_the_class_count_beside_the_number(tmp_path):
    from gate.results import ResultsStore
    from gate.scoring.stage import run_score

    cfg = compose_run(tmp_path, ["dataset=digits", "max_samples=120", "image_size=32", "progress_bar=false",
                                 "encoder=resnet18_scratch", "metrics=[sfda,logme]"], config_name="score")
    with pytest.warns(UserWarning, match="sfda is degenerate on resnet18_scratch × digits/train"):
        result = run_score(cfg)
    assert result.degenerate == {"sfda": "width 512 ≥ 120 rows − 10 classes"}  # resnet18: 512-wide features
    facts = {r["metric"]: r["facts"] for r in ResultsStore(tmp_path / "results" / "records.jsonl").records()}
    assert facts["sfda"]["degenerate"] == "width 512 ≥ 120 rows − 10 classes" and "degenerate" not in facts["logme"]
    assert facts["logme"]["num_classes"] == 10 and facts["logme"]["feature_dim"] == 512

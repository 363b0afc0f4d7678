"""gate.ranking.stats: the numbers gate-rank reports, checked against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from gate.ranking import stats

TOL = 1e-9


def test_kendall_tau_weighted_tau_and_regret_by_hand():
    full = np.array([4.0, 3.0, 2.0, 1.0])
    assert stats.kendall_tau(full, full) == pytest.approx(1.0, abs=TOL)
    assert stats.kendall_tau(-full, full) == pytest.approx(-1.0, abs=TOL)
    one_swap = np.array([3.0, 4.0, 2.0, 1.0])  # 5 concordant, 1 discordant pair of 6
    assert stats.kendall_tau(one_swap, full) == pytest.approx(4 / 6, abs=TOL)
    # weighted τ: scipy's, weights following the full ranking; a swap at the top costs more than at the bottom
    top = stats.weighted_tau(one_swap, full)
    bottom = stats.weighted_tau(np.array([4.0, 3.0, 1.0, 2.0]), full)
    assert top == pytest.approx(st.weightedtau(one_swap, full, rank=np.array([0, 1, 2, 3])).statistic, abs=TOL)
    assert top < bottom < 1.0
    # regret: best full value minus the full value of the predicted first (worst of a tie)
    assert stats.top1_regret(one_swap, np.array([0.9, 0.8, 0.5, 0.1])) == pytest.approx(0.1, abs=TOL)
    assert stats.top1_regret(np.array([1.0, 1.0, 0.0]), np.array([0.9, 0.6, 0.1])) == pytest.approx(0.3, abs=TOL)
    assert math.isnan(stats.kendall_tau(np.ones(3), full[:3]))


def test_oriented_mean_rank_and_bootstrap_intervals():
    mae = stats.oriented({"a": 1.0, "b": 3.0}, higher_is_better=False)  # lower MAE is better
    assert mae["a"] > mae["b"]
    values = pd.DataFrame({"x": [3.0, 2.0, 1.0], "y": [1.0, 3.0, 2.0]}, index=["a", "b", "c"])
    assert stats.mean_rank(values).to_dict() == pytest.approx({"a": 2.0, "b": 1.5, "c": 2.5}, abs=TOL)
    pred = pd.Series({"a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0})
    full = pd.Series({"a": 0.9, "b": 0.7, "c": 0.8, "d": 0.3, "e": 0.2})
    row = stats.compare(pred, full, n_boot=300, seed=1)
    assert row["tau"] == pytest.approx(0.8, abs=TOL)  # 9 of 10 pairs concordant
    assert row["tau_lo"] <= row["tau"] <= row["tau_hi"] and row["boot"] > 100
    assert stats.compare(pred, full, n_boot=300, seed=1) == row  # seeded: reproducible
    tier = stats.compare_tier(pd.DataFrame({"x": pred, "y": pred}), pd.DataFrame({"x": full, "y": full}), n_boot=50)
    assert tier["tau"] == pytest.approx(0.8, abs=TOL) and tier["benchmarks"] == 2
    ranks = stats.rank_intervals(pd.DataFrame({"x": pred, "y": -pred, "z": pred}), n_boot=200)
    assert list(ranks.index[:1]) == ["a"] and (ranks["rank_lo"] <= ranks["rank"]).all()
    assert (ranks["rank"] <= ranks["rank_hi"]).all()
    ceiling = stats.seed_ceiling({0: full, 1: full.rename({"a": "c", "c": "a"}), 2: full})
    assert ceiling == pytest.approx((0.8 + 1.0 + 0.8) / 3, abs=TOL)

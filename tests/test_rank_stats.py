"""gate.ranking.stats: the numbers gate-rank reports (through its registry), checked against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from gate.ranking import complete, stats

TOL = 1e-9


def test_kendall_tau_weighted_tau_and_regret_by_hand():
    tau = stats.STATISTICS["tau"]
    full = np.array([4.0, 3.0, 2.0, 1.0])
    assert tau(full, full) == pytest.approx(1.0, abs=TOL)
    assert tau(-full, full) == pytest.approx(-1.0, abs=TOL)
    one_swap = np.array([3.0, 4.0, 2.0, 1.0])  # 5 concordant, 1 discordant pair of 6
    assert tau(one_swap, full) == pytest.approx(4 / 6, abs=TOL)
    # weighted τ: scipy's, weights following the full ranking; a swap at the top costs more than at the bottom
    top = stats.weighted_tau(one_swap, full)
    bottom = stats.weighted_tau(np.array([4.0, 3.0, 1.0, 2.0]), full)
    assert top == pytest.approx(st.weightedtau(one_swap, full, rank=np.array([0, 1, 2, 3])).statistic, abs=TOL)
    assert top < bottom < 1.0
    # regret: best full value minus the full value of the predicted first (worst of a tie)
    assert stats.top1_regret(one_swap, np.array([0.9, 0.8, 0.5, 0.1])) == pytest.approx(0.1, abs=TOL)
    assert stats.top1_regret(np.array([1.0, 1.0, 0.0]), np.array([0.9, 0.6, 0.1])) == pytest.approx(0.3, abs=TOL)
    assert math.isnan(tau(np.ones(3), full[:3]))
    assert tau(one_swap, full) == pytest.approx(st.kendalltau(one_swap, full).statistic, abs=TOL)  # scipy's τ-b


def test_mean_rank_by_hand():
    values = np.array([[3.0, 1.0], [2.0, 3.0], [1.0, 2.0]])  # encoders a, b, c × benchmarks x, y; higher is better
    assert complete.mean_rank(values).tolist() == pytest.approx([2.0, 1.5, 2.5], abs=TOL)
    tied = np.array([[1.0], [1.0], [0.0]])
    assert complete.mean_rank(tied).tolist() == pytest.approx([1.5, 1.5, 3.0], abs=TOL)  # ties share the mean rank

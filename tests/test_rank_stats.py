"""gate.ranking.stats and gate.ranking.budget: the numbers gate-rank reports, checked against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from gate.errors import ConfigError
from gate.ranking import stats
from gate.ranking.budget import Ledger, RunCost, keep_counts, plan_schedule, rung_steps, schedule_cost

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


def test_halving_schedule_fits_the_budget_and_refuses_one_too_small():
    assert keep_counts(8, 2) == [8, 4, 2] and keep_counts(3, 2) == [3, 2] and keep_counts(9, 3) == [9, 3, 2]
    assert rung_steps(4, 2, 3, 48) == [4, 8, 16] and rung_steps(20, 2, 3, 48) == [20, 40] and rung_steps(16, 2, 3, 48) == [16, 32, 48]
    assert schedule_cost([8, 4, 2], [4, 8, 16]) == pytest.approx(8 * 4 + 4 * 4 + 2 * 8, abs=TOL)
    # 8 encoders × 48 steps × 2 seeds at 0.1 = 76.8 steps; 16 r0 must fit → r0 = 4
    s = plan_schedule(8, 48, 2, 0.1, eta=2)
    assert (s.r0, s.steps, s.keeps) == (4, (4, 8, 16), (8, 4, 2)) and s.cost_steps <= s.budget_steps
    # a fixed cost per run of 3 steps: 14 runs pay it, and so does each of the 16 full runs the budget is taken of:
    # 16 r0 + 14 × 3 <= 0.1 × 16 × (48 + 3) = 81.6 → r0 = 2
    assert plan_schedule(8, 48, 2, 0.1, eta=2, overhead_steps=3).r0 == 2
    # one run each with a fixed cost of 8 steps: 8 (k + 8) <= 0.1 × 16 × 56 = 89.6 → k = 3 (1 if the full runs'
    # own fixed cost were left out of the budget)
    assert plan_schedule(8, 48, 2, 0.1, overhead_steps=8, max_rungs=1).steps == (3,)
    with pytest.raises(ConfigError, match="budget=0.001 buys"):
        plan_schedule(8, 48, 1, 0.001)
    # one rung (max_rungs=1): every encoder the largest run that fits, 76.8 / 8 → 9 steps; two rungs: 8 r0 + 4 r0
    assert keep_counts(8, 2, max_rungs=1) == [8] and keep_counts(8, 2, max_rungs=2) == [8, 4]
    one = plan_schedule(8, 48, 2, 0.1, max_rungs=1)
    assert (one.r0, one.steps, one.keeps) == (9, (9,), (8,))
    assert plan_schedule(8, 48, 2, 0.1, max_rungs=2).steps == (6, 12)
    assert plan_schedule(3, 48, 3, 0.9, max_rungs=1).steps == (48,)  # never past the full run


def test_run_cost_and_ledger():
    cost = RunCost.from_facts({"wall_seconds": 30.0, "train_step_seconds": 20.0, "global_step": 8, "resumed_from_step": 4})
    assert cost.trained_steps == 4 and cost.seconds_per_step == pytest.approx(5.0)
    assert cost.full_estimate(40) == pytest.approx(10.0 + 200.0)
    a, b = Ledger({"run x": 10.0}, {"e × d": 100.0}), Ledger({"run x": 10.0, "run y": 5.0}, {})
    assert a.merged(b).spent_seconds == pytest.approx(15.0) and a.fraction == pytest.approx(0.1)


def test_a_proxy_that_spends_past_its_budget_says_so():
    # the plan is in steps; the seconds decide: 11.6 s of a 100 s tier at budget 0.1 is flagged, 10.0 s is not
    assert Ledger({"run x": 10.0}, {"e × d": 100.0}, {"e × d": 100.0}).overrun(0.1) == ""
    over = Ledger({"run x": 11.6}, {"e × d": 100.0}, {"e × d": 100.0}).overrun(0.1)
    assert over.startswith("OVER THE BUDGET: 0.116") and "budget=0.1" in over
    # the stored full runs' seconds decide where they exist, not the estimate (a lower bound on them)
    assert Ledger({"run x": 10.0}, {"e × d": 100.0}, {"e × d": 80.0}).overrun(0.1) == ""
    assert Ledger().overrun(0.1) == ""  # nothing spent, nothing known: no claim

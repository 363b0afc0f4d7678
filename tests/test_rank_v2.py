"""gate-rank v2's parts, each on a synthetic history or a faked run, each checked against a number worked out by
hand: the selection (a copy and pure noise are never chosen, every coverable paper group is covered, the pool's own
rows change nothing), the completion's guard, curve extrapolation, the cost model and the plan (it shrinks with the
budget and never refuses, and re-plans when runs cost three times the prediction), the leave-one-seed-out ceiling and
the paired bootstrap, Kendall's W."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gate.ranking import complete, prior, select
from gate.ranking import plan as planning
from gate.ranking.cost import CostModel, Observation, RunFeatures
from gate.ranking.curves import extrapolate
from gate.ranking.history import History


def synthetic(n: int = 14, seed: int = 0, noise: float = 0.05) -> History:
    """Encoders with a latent quality q, three seeds per benchmark: a..e follow q (seed noise ``noise``; group G1: a,
    b; G2: c, d; G3: e), 'copy' is a copy of a (G1, seed by seed), 'noise' is pure noise, every seed drawn anew
    (G2: its seeds do not agree)."""
    rng = np.random.default_rng(seed)
    q = np.linspace(0.2, 0.9, n)
    rng.shuffle(q)
    index = [f"e{i}" for i in range(n)]
    seeds = {b: pd.DataFrame({s: np.clip(q + noise * rng.standard_normal(n), 0, 1) for s in range(3)}, index=index)
             for b in "abcde"}
    seeds["copy"] = seeds["a"].copy()
    seeds["noise"] = pd.DataFrame({s: rng.uniform(0, 1, n) for s in range(3)}, index=index)
    values = pd.DataFrame({b: f.mean(axis=1) for b, f in seeds.items()})
    groups = {"a": "G1", "b": "G1", "copy": "G1", "c": "G2", "d": "G2", "noise": "G2", "e": "G3"}
    return History(values, seeds=seeds, groups=groups, sources=("synthetic",))


BENCH = ["a", "b", "c", "d", "e", "copy", "noise"]
UNIT = dict.fromkeys(BENCH, 1.0)


def test_a_copy_of_a_chosen_benchmark_and_pure_noise_are_never_chosen():
    for seed in range(5):
        h = synthetic(seed=seed)
        sel = select.choose(h, BENCH, cost=UNIT, affordable=6, n_splits=0)
        assert not {"a", "copy"} <= set(sel.chosen), sel.chosen
        assert "noise" not in sel.chosen, sel.chosen
        assert sel.method == "history" and sel.fingerprint == h.fingerprint()


def test_every_paper_group_the_budget_covers_is_covered():
    h = synthetic()
    sel = select.choose(h, BENCH, cost=UNIT, affordable=3, n_splits=0)
    assert {h.groups[b] for b in sel.chosen} == {"G1", "G2", "G3"} and len(sel.chosen) == 3
    # two groups affordable, at costs that make G3's only benchmark the dearest: the cheapest two groups are covered
    cost = {**UNIT, "e": 5.0}
    sel = select.choose(h, BENCH, cost=cost, affordable=2, n_splits=0)
    assert {h.groups[b] for b in sel.chosen} == {"G1", "G2"}
    assert select.choose(h, BENCH, cost=UNIT, affordable=3, min_per_family=0, n_splits=0).chosen  # no coverage: free


def test_the_pools_rows_in_the_history_change_nothing():
    """The leakage rule: rows of the pool planted in the history leave the selection and the completion's
    predictions byte-identical."""
    h = synthetic()
    pool = pd.DataFrame({b: [0.95, 0.1, 0.5] for b in BENCH}, index=["p1", "p2", "p3"])
    planted = History(pd.concat([h.values, pool]), seeds={b: pd.concat([f, pd.DataFrame({s: pool[b] for s in f.columns})])
                                                          for b, f in h.seeds.items()}, groups=h.groups, sources=h.sources)
    clean = select.choose(h, BENCH, cost=UNIT, affordable=3, n_splits=10)
    leaked = select.choose(planted.without(pool.index), BENCH, cost=UNIT, affordable=3, n_splits=10)
    assert clean == leaked
    observed = pool[list(clean.chosen)]
    others = [b for b in BENCH if b not in clean.chosen]
    a = complete.fit(h, list(clean.chosen), others).predict(observed)
    b = complete.fit(planted.without(pool.index), list(clean.chosen), others).predict(observed)
    assert a.to_numpy().tobytes() == b.to_numpy().tobytes()


def test_with_no_usable_history_the_stated_rule_takes_one_benchmark_per_group_cheapest_first():
    empty = History(pd.DataFrame(columns=BENCH, dtype=float))
    cost = {"a": 3.0, "b": 1.0, "copy": 2.0, "c": 1.5, "d": 4.0, "noise": 9.0, "e": 2.5}
    groups = synthetic().groups
    sel = select.choose(empty, BENCH, cost=cost, affordable=5.0, groups=groups)
    assert sel.method == "rule" and list(sel.chosen) == ["b", "c", "e"]  # 1 + 1.5 + 2.5 = 5


def test_completion_is_used_only_where_it_wins_and_an_out_of_range_encoder_falls_back():
    rng = np.random.default_rng(1)
    n = 16
    x = rng.uniform(0, 1, n)
    # y is a steep function of x: the plain mean rank of x alone misorders the tier; completion recovers it
    values = pd.DataFrame({"x": x, "y": 1 - x ** 3 + 0.01 * rng.standard_normal(n), "z": 1 - x + 0.01 * rng.standard_normal(n)},
                          index=[f"e{i}" for i in range(n)])
    h = History(values)
    masks = select.splits(n, 20, 0)
    t_c, t_p = complete.loo_taus(h, ["x"], ["x", "y", "z"], masks)
    assert t_c > t_p  # wins: used
    noise = pd.DataFrame({"x": x, "y": rng.uniform(0, 1, n), "z": rng.uniform(0, 1, n)}, index=values.index)
    t_c, t_p = complete.loo_taus(History(noise), ["x"], ["x", "y", "z"], masks)
    assert not t_c > t_p + 0.05  # noise to predict: no gain
    comp = complete.fit(h, ["x"], ["y", "z"])
    pool = pd.DataFrame({"x": [0.2, 0.5, 5.0]}, index=["in1", "in2", "far"])  # 5.0: far outside the history
    pred = complete.predict_tier(pool, ["x", "y", "z"], comp)
    assert pred.flagged == ["far"] and set(pred.sources.loc["far", ["y", "z"]]) == {"fallback"}
    assert pred.mean_rank["far"] == complete.mean_rank(pool[["x"]].to_numpy())[2]  # its observed mean rank: 1.0
    assert (pred.tier_lo <= pred.tier_value).all() and (pred.tier_value <= pred.tier_hi).all()


def test_completion_intervals_carry_the_conformal_correction_and_cover_a_new_encoder():
    """By hand: of residuals 1..20 the 80 % interval is the 2nd and 19th smallest (⌊21·0.1⌋, ⌈21·0.9⌉), of 1..10 the
    smallest and largest. Simulated (12 residuals, a 13th point drawn alike, 4000 draws): the corrected interval
    covers the new point ≥ 80 % of the time (exactly 11/13 ≈ 0.846 in expectation); plain quantiles cover less (the
    62–70 % measured on the GATE table)."""
    assert complete.conformal_bounds(np.arange(1.0, 21.0)) == (2.0, 19.0)
    assert complete.conformal_bounds(np.arange(10.0, 0.0, -1.0)) == (1.0, 10.0)
    rng = np.random.default_rng(0)
    draws = rng.standard_normal((4000, 13))
    ours = np.mean([lo <= d[-1] <= hi for d in draws for lo, hi in [complete.conformal_bounds(d[:-1])]])
    plain = np.mean([np.quantile(d[:-1], 0.1) <= d[-1] <= np.quantile(d[:-1], 0.9) for d in draws])
    assert ours >= 0.82 and plain < 0.76, (ours, plain)


def test_without_completion_the_tier_value_is_the_run_mean_plus_the_historys_median_difference_with_conformal_bounds():
    """By hand: ten history encoders whose tier mean (over x, y) exceeds their x by 0.01..0.10 (y = x + 2·d): the
    tier value of a pool encoder that ran x alone is x + the median difference (0.055), its 80 % interval x + the
    conformal bounds of the differences (the smallest and largest of ten: x + 0.01 .. x + 0.10)."""
    d = np.arange(1, 11) / 100
    x = np.linspace(0.2, 0.8, 10)
    h = History(pd.DataFrame({"x": x, "y": x + 2 * d}, index=[f"h{i}" for i in range(10)]))
    np.testing.assert_allclose(np.sort(complete.plain_residuals(h, ["x"], ["x", "y"])), d)
    pool = pd.DataFrame({"x": [0.5, 0.3]}, index=["a", "b"])
    pred = complete.predict_tier(pool, ["x", "y"], None, history=h)
    assert not pred.completed and list(pred.mean_rank) == [1.0, 2.0]
    np.testing.assert_allclose(pred.tier_value.to_numpy(), [0.555, 0.355])
    np.testing.assert_allclose(pred.tier_lo.to_numpy(), [0.51, 0.31])
    np.testing.assert_allclose(pred.tier_hi.to_numpy(), [0.60, 0.40])
    no_history = complete.predict_tier(pool, ["x", "y"], None)  # no history: the run mean, no interval
    assert no_history.tier_lo.isna().all() and list(no_history.tier_value) == [0.5, 0.3]


def test_a_power_law_curve_is_extrapolated_to_its_end():
    points = [(t, 0.9 - 0.5 * t ** -0.5) for t in (10, 20, 30, 40)]
    e = extrapolate(points, 400, low=0.0, high=1.0)
    assert e.value == pytest.approx(0.9 - 0.5 / 20, abs=0.01) and e.lo <= e.value <= e.hi
    down = [(t, 3 + 2 * t ** -0.7) for t in (10, 20, 30, 40)]  # a loss-like metric that falls
    assert extrapolate(down, 400, higher_is_better=False, low=0.0).value == pytest.approx(3 + 2 * 400 ** -0.7, abs=0.02)
    assert extrapolate([(10, 0.5), (20, 0.6)], 400).value == 0.6  # two points: the last value


def test_the_cost_model_recovers_a_planted_law():
    rng = np.random.default_rng(0)
    obs = []
    for i in range(12):
        params, batch = float(rng.uniform(1e6, 9e7)), int(rng.choice([8, 16, 32]))
        f = RunFeatures(f"enc{i}", "b", "classification", params, 32.0 ** 2, batch)
        obs.append(Observation(f, 0.02 * f.load ** 0.8, 5.0, 1.5))
    model = CostModel(obs)
    new = RunFeatures("new", "b", "classification", 3e7, 32.0 ** 2, 16)
    got = model.predict(new)
    assert got.basis == "fitted" and got.per_step == pytest.approx(0.02 * new.load ** 0.8, rel=0.05)
    assert got.fixed == 5.0 and got.per_validation == 1.5
    same = model.predict(obs[3].features)
    assert same.basis == "measured" and same.per_step == pytest.approx(obs[3].per_step)
    assert CostModel().predict(new).basis == "cold start"


def test_a_family_not_measured_is_priced_at_the_measured_families_mean_not_the_first_by_name():
    """Two families measured, one 4× dearer per step at the same load: a third family (its name sorting first) is
    priced at their geometric mean, 2× the cheap one's — a treatment coding gave it the alphabetically first
    family's price, so renaming a family changed the plan."""
    rng = np.random.default_rng(1)
    obs = []
    for i in range(16):
        family, factor = ("classification", 1.0) if i % 2 else ("segmentation", 4.0)
        f = RunFeatures(f"enc{i}", family, family, float(rng.uniform(1e6, 9e7)), 32.0 ** 2, 16)
        obs.append(Observation(f, factor * 0.01 * f.load, 5.0, 1.5))
    model = CostModel(obs)
    for name in ("aardvark", "zebra"):
        new = RunFeatures("new", name, name, 3e7, 32.0 ** 2, 16)
        assert model.predict(new).per_step == pytest.approx(2.0 * 0.01 * new.load, rel=0.05), name
    seg = RunFeatures("new", "segmentation", "segmentation", 3e7, 32.0 ** 2, 16)
    assert model.predict(seg).per_step == pytest.approx(4.0 * 0.01 * seg.load, rel=0.05)



def _sibling_runs(totals: list[tuple[float, float]]) -> list[Observation]:
    """Two runs per encoder × benchmark, 10 steps of 0.5 s and no validation each; their totals differ only in the
    fixed seconds (``totals`` - 5)."""
    out = []
    for i, pair in enumerate(totals):
        f = RunFeatures(f"enc{i}", "b", "classification", 1e6 * (i + 1), 32.0 ** 2, 16)
        out += [Observation(f, 0.5, total - 5.0, math.nan, 10.0, 0.0) for total in pair]
    return out


def test_the_plans_margin_is_the_stores_own_leave_one_run_out_error_by_hand():
    """A warm prediction is as likely low as high, so a plan fits it with a margin: each run predicted from its
    sibling alone (measured basis) is off by 10/13, 13/10, 10/11, 11/10, 1 and 1; their 80th percentile (numpy's
    linear interpolation, sorted position 0.8 × 5 = 4) is 1.1. Fewer than five runs to learn from: the cold start's
    margin; a store off by 3× is capped at MARGIN_MAX; a cold prediction carries its own margin already."""
    from gate.ranking.cost import COLD_MARGIN, MARGIN_MAX

    model = CostModel(_sibling_runs([(10.0, 13.0), (10.0, 11.0), (10.0, 10.0)]))
    ratios = sorted(model.errors()["measured"])
    assert ratios == pytest.approx(sorted([10 / 13, 13 / 10, 10 / 11, 11 / 10, 1.0, 1.0]))
    assert model.margin("measured") == pytest.approx(1.1) and model.margin("fitted") == pytest.approx(1.1)
    assert model.margin("cold start") == 1.0
    assert "measured ×1.10 (6 run(s))" in model.margin_line()
    assert CostModel(_sibling_runs([(10.0, 13.0), (10.0, 11.0)])).margin("measured") == COLD_MARGIN
    assert CostModel(_sibling_runs([(10.0, 30.0)] * 3)).margin("measured") == MARGIN_MAX
    model.add(_sibling_runs([(10.0, 10.0)])[0])  # a new run refits the model and its errors
    assert len(model.errors()["measured"]) == 7


def test_a_family_no_run_measured_gets_the_margin_of_families_left_out_whole():
    """A family no run measured is priced at the measured families' mean, which errs most (median error 46–55 % on
    the demo stores and pool C's GPU truth). By hand: three classification runs of 10 s (10 steps of 0.5 s, 5 s fixed)
    and three segmentation runs of 13 s (steps of 0.8 s); segmentation left out, a model of classification alone
    predicts 10 s for each (ratio 1.3), classification left out 13 s (10/13); the 80th percentile of three of each
    is 1.3. A family never measured gets it; a measured one does not; one family alone cannot say, so the cap."""
    from gate.ranking.cost import MARGIN_MAX

    obs = []
    for i in range(6):
        family, per_step = ("classification", 0.5) if i < 3 else ("segmentation", 0.8)
        f = RunFeatures(f"enc{i}", family, family, 1e6 * (i % 3 + 1), 32.0 ** 2, 16)
        obs.append(Observation(f, per_step, 5.0, math.nan, 10.0, 0.0))
    model = CostModel(obs)
    assert sorted(model.errors()["new family"]) == pytest.approx([10 / 13] * 3 + [1.3] * 3)
    assert model.predict(RunFeatures("new", "det", "detection", 1e6, 32.0 ** 2, 16)).basis == "new family"
    assert model.margin("new family") == pytest.approx(1.3)
    assert model.margin("fitted") < 1.3
    assert "a family not measured ×1.30 (6 run(s), each family left out)" in model.margin_line()
    assert CostModel(obs[:3]).margin("new family") == MARGIN_MAX


def test_a_plan_fits_its_blocks_with_the_margin_and_plans_their_predictions():
    """The README's budget=0.02 call planned one block that nearly filled the budget; it ran 1.2× its prediction and
    spent 0.021. Fitted at prediction × 1.25, that plan shrinks: what fits leaves room for the block to run a fifth
    dearer, and the plan's seconds remain the predictions (so spent/predicted still grades the model)."""
    chooser = select.Chooser(synthetic(n=10), BENCH)

    def block_seconds(bench, seed, steps, every):
        return 3 * (5.0 + 0.5 * steps + steps // every)

    full = 3 * 7 * (5.0 + 0.5 * 100 + 4)

    def plan(budget, bound=None):
        return planning.make_plan(candidates=BENCH, full_steps=dict.fromkeys(BENCH, 100), proxy_seeds=(100, 101, 102),
                                  run_fraction=0.67, val_points=4, budget_seconds=budget * full, full_seconds=full,
                                  block_seconds=block_seconds, choose=chooser, prior_seconds=0.0, with_prior=False,
                                  block_bound=bound)

    for budget in (0.02, 0.05, 0.1, 0.3):
        bare = plan(budget)
        kept = plan(budget, lambda *a: 1.25 * block_seconds(*a))
        assert kept.planned_seconds == pytest.approx(sum(b.seconds for b in kept.blocks))  # the predictions
        assert 1.25 * kept.planned_seconds <= kept.budget_seconds + 1e-9, budget  # ... a fifth dearer still fits
        assert kept.planned_seconds <= bare.planned_seconds + 1e-9
    tight = plan(0.05)
    assert tight.planned_seconds * 1.25 > tight.budget_seconds  # without the margin, a dearer block overruns
    assert plan(0.05, lambda *a: 1.25 * block_seconds(*a)).planned_seconds < tight.planned_seconds


def test_a_resumed_runs_seconds_fit_no_cost():
    """A resumed run's wall seconds span its attempts (each paid the fixed cost) while its step times are its last
    attempt's: it would misprice the fixed seconds, so it is no observation; the same facts uninterrupted are one."""
    from gate.ranking.cost import observation

    f = RunFeatures("e", "b", "classification", 1e6, 32.0 ** 2, 16)
    facts = {"wall_seconds": 30.0, "train_step_seconds": 10.0, "global_step": 20, "validations": 4,
             "validation_seconds": 8.0, "resumed_from_step": None}
    got = observation(f, facts)
    assert (got.per_step, got.fixed, got.per_validation) == (0.5, 12.0, 2.0)
    assert observation(f, {**facts, "resumed_from_step": 8, "earlier_wall_seconds": 11.0}) is None


def test_a_full_runs_test_pass_is_priced_apart_from_its_fixed_seconds():
    """Proxy runs never test, so a model learnt from them and asked for a full run must add the test pass: here a
    full run of 20 steps, 4 validations (2 s each) and a test of its 3-checkpoint ensemble over twice the validation
    rows (3 × 2 = 6 validation passes: 12 s) took 42 s; its fixed part is 42 − 10 − 8 − 12 = 12 s, and predicting
    the same run gives its 42 s back. A proxy run of that pair (no test) is then 12 + 10 + 8 = 30 s."""
    from gate.ranking.cost import CostModel, observation, test_passes

    full = {"evaluate_test": True, "ensembles": [1, 3], "data": {"max_test_samples": 400, "max_val_samples": 200}}
    assert test_passes(full) == 6.0
    assert test_passes({**full, "evaluate_test": False}) == 0.0
    whole = {"ensembles": [1], "data": {"max_test_samples": None, "max_val_samples": None}}
    rows = {"test": {"used": 10000, "of": 10000}, "val": {"used": 6000, "of": 6000}}
    assert test_passes(whole, rows) == 10000 / 6000 and test_passes(whole) == 1.0
    assert test_passes({**whole, "data": {"max_test_samples": 600, "max_val_samples": None}}, rows) == 0.1

    f = RunFeatures("e", "b", "classification", 1e6, 32.0 ** 2, 16)
    facts = {"wall_seconds": 42.0, "train_step_seconds": 10.0, "global_step": 20, "validations": 4,
             "validation_seconds": 8.0, "resumed_from_step": None}
    got = observation(f, facts, test_passes(full))
    assert (got.per_step, got.fixed, got.per_validation) == (0.5, 12.0, 2.0)
    costs = CostModel([got]).predict(f)
    assert costs.basis == "measured" and costs.seconds(20, 4, test_passes(full)) == 42.0
    assert costs.seconds(20, 4) == 30.0


_CHOOSER = {}


def _plan(budget: float, prior_seconds: float = 10.0, with_prior: bool = True):
    choose = _CHOOSER.setdefault("c", select.Chooser(synthetic(n=10), BENCH))  # one history, every budget

    def block_seconds(bench, seed, steps, every):  # 3 encoders: 5 s fixed, 0.5 s a step, 1 s a validation each
        return 3 * (5.0 + 0.5 * steps + steps // every)

    full = 3 * 7 * (5.0 + 0.5 * 100 + 4)  # 3 encoders × 7 benchmarks × one seed, 100-step runs
    return planning.make_plan(candidates=BENCH, full_steps=dict.fromkeys(BENCH, 100), proxy_seeds=(100, 101, 102),
                              run_fraction=0.67, val_points=4, budget_seconds=budget * full, full_seconds=full,
                              block_seconds=block_seconds, choose=choose, prior_seconds=prior_seconds,
                              with_prior=with_prior)


def test_a_plan_says_the_prior_was_dropped_only_where_one_was_asked_for_and_keeps_a_free_one():
    """prior=[] (or a tier whose families take no scores) printed "no prior (its feature passes do not fit beside the
    runs)" in every plan; and a prior whose passes the store holds at 0 s was left out of the plan (gate-rank then
    skipped it: its test was the plan's prior seconds > 0)."""
    asked = _plan(0.2, prior_seconds=10.0)
    assert asked.kind == "proxy" and asked.with_prior and "no prior" not in asked.why
    not_asked = _plan(0.2, prior_seconds=0.0, with_prior=False)
    assert not_asked.kind == "proxy" and not not_asked.with_prior and "no prior" not in not_asked.why, not_asked.why
    free = _plan(0.2, prior_seconds=0.0)
    assert free.with_prior and free.prior_seconds == 0.0 and "no prior" not in free.why
    dropped = _plan(0.2, prior_seconds=0.199 * 3 * 7 * 59.0)  # the prior alone nearly fills the budget: dropped
    assert dropped.kind == "proxy" and not dropped.with_prior and "no prior (its feature passes do not fit" in dropped.why


def test_the_priors_stored_passes_are_planned_at_what_the_ledger_spends_for_them():
    """Pool A's v2 call planned its prior at 86 s and spent 179 s: the plan read only the feature passes' seconds
    from the store, the ledger the passes plus the scores. By hand: a pass of 2 s and three scores of 1 s each is
    5 s; a pass the store lacks is the cold 10 s; a set missing one of the metrics is not a measurement."""
    from gate.ranking.scores import COLD_PASS_SECONDS, _prior_seconds, pass_seconds

    def record(enc, metric, extract=2.0, seconds=1.0):
        return {"kind": "score", "encoder": enc, "dataset": "b1", "metric": metric,
                "facts": {"extract_seconds": extract, "seconds": seconds}}

    metrics = ["knn_acc", "linear_probe_acc", "logme"]
    records = [record("e1", m) for m in metrics] + [record("e2", "knn_acc")]
    assert pass_seconds({m: record("e1", m) for m in metrics}, metrics) == 5.0
    assert _prior_seconds(records, ["e1", "e2", "e3"], ["b1"], metrics) == 5.0 + 2 * COLD_PASS_SECONDS


def test_plans_shrink_with_the_budget_and_no_budget_in_0_1_is_refused():
    order = {"static": 0, "prior": 1, "proxy": 2}
    last = None
    for budget in (1e-6, 0.005, 0.02, 0.05, 0.2, 0.99):
        p = _plan(budget)
        assert p.planned_seconds <= p.budget_seconds + 1e-9, (budget, p.why)
        key = (order[p.kind], len(p.seeds), p.fraction, len(p.benchmarks), p.planned_seconds)
        if last is not None:
            assert p.planned_seconds >= last[-1] - 1e-9 and order[p.kind] >= last[0], (budget, p.why)
        last = key
        if budget == 0.05:
            assert p.kind == "proxy" and len(p.seeds) == 1  # seeds go first, then benchmarks, then steps
        if budget == 0.99:
            assert p.kind == "proxy" and len(p.seeds) >= 2 and len(p.benchmarks) >= 3
    assert _plan(1e-6).kind == "static" and _plan(0.02).kind == "prior"


def test_a_three_fold_cost_surprise_replans_and_stays_within_the_budget():
    """Runs cost 3× what was predicted: after the first block the re-plan (its costs now the measured ones) drops
    what no longer fits; the total stays within the budget."""
    from gate.ranking.pipeline import execute

    h = synthetic()
    factor = {"value": 1.0}

    def block_seconds(bench, seed, steps, every):
        return factor["value"] * 3 * (5.0 + 0.5 * steps + steps // every)

    full = 3 * 7 * (5.0 + 0.5 * 100 + 4)
    budget = 0.3 * full
    spent = {"s": 0.0}
    chooser = select.Chooser(h, BENCH)

    def make(done=frozenset(), fraction=0.67, left=budget):
        return planning.make_plan(candidates=BENCH, full_steps=dict.fromkeys(BENCH, 100), proxy_seeds=(100, 101, 102),
                                  run_fraction=fraction, val_points=4, budget_seconds=left, full_seconds=full,
                                  block_seconds=block_seconds, choose=chooser,
                                  prior_seconds=0.0, with_prior=False, done=done)

    first = make()
    planned_blocks = len(first.blocks)

    def run(block):
        spent["s"] += 3 * block.seconds  # what it really cost
        factor["value"] = 3.0            # the model learns it

    done = execute(first, lambda d, f: make(d, f, budget - spent["s"]), run)
    assert planned_blocks > 1 and len(done) < planned_blocks
    assert spent["s"] <= budget * 1.0 + 1e-9 or len(done) == 1  # only a first block, once started, may pass it
    assert spent["s"] <= 3 * first.blocks[0].seconds + budget - 3 * first.blocks[0].seconds + 1e-9


def test_the_leave_one_seed_out_ceiling_by_hand():
    from gate.ranking.grading import leave_one_seed_out

    pool = ["A", "B", "C"]
    # one benchmark, three seeds: seed 0 orders A > B > C, seeds 1 and 2 A > C > B
    seeds = {"b": pd.DataFrame({0: [3.0, 2.0, 1.0], 1: [3.0, 1.0, 2.0], 2: [3.0, 1.0, 2.0]}, index=pool)}
    ranking = pd.Series({"A": 1.0, "C": 2.0, "B": 3.0})  # predicts A > C > B
    got = leave_one_seed_out(seeds, ["b"], pool, ranking)
    # seed 0 vs mean(1, 2) = A > C > B: τ = 1/3; seed 1 vs mean(0, 2) = (3, 1.5, 1.5): A first, B and C tied:
    # τ-b = 2/sqrt(3·2); seed 2 likewise. The prediction against those truths: 1, 2/sqrt(6), 2/sqrt(6)
    tie = 2 / math.sqrt(6)
    assert got["n_seeds"] == 3
    assert got["one_seed_vs_rest"] == pytest.approx((1 / 3 + tie + tie) / 3)
    assert got["v2_vs_rest"] == pytest.approx((1 + 1 + 1) / 3 if False else (1 + tie + tie) / 3)
    assert got["ratio"] == pytest.approx(got["v2_vs_rest"] / got["one_seed_vs_rest"])


def test_the_paired_bootstrap_by_hand():
    from gate.ranking.grading import paired_bootstrap

    pool = [f"e{i}" for i in range(8)]
    values = pd.DataFrame({"b1": np.arange(8.0), "b2": np.arange(8.0)}, index=pool)  # e7 best
    perfect = pd.Series(8 - np.arange(8.0), index=pool)   # mean rank: e7 first
    reversed_ = pd.Series(np.arange(8.0) + 1, index=pool)
    out = paired_bootstrap({"v2": perfect, "bad": reversed_, "same": perfect}, values, n_boot=200).set_index("baseline")
    assert out.loc["bad", "tau_difference"] == pytest.approx(2.0)  # τ 1 against τ −1
    assert out.loc["bad", "lo"] == pytest.approx(2.0) and out.loc["bad", "p_v2_not_better"] == 0.0
    assert out.loc["same", "tau_difference"] == 0.0 and out.loc["same", "p_v2_not_better"] == 1.0


def test_kendalls_w_and_seed_agreement():
    a = pd.Series([1.0, 2.0, 3.0, 4.0], index=list("wxyz"))
    assert prior.kendalls_w([a, a, a]) == pytest.approx(1.0)
    assert prior.kendalls_w([a, 5 - a]) == pytest.approx(0.0)
    assert prior.agreement([a, a]) == pytest.approx(1.0) and math.isnan(prior.agreement([a]))
    d = prior.decide(proxy_ran=True, seed_agreement=0.1, history_tau=0.8, prior_available=True,
                     prior_history_tau=math.nan, static_available=True)
    assert d.source == "prior" and "disagree" in d.why
    d = prior.decide(proxy_ran=False, seed_agreement=math.nan, history_tau=math.nan, prior_available=False,
                     prior_history_tau=math.nan, static_available=True)
    assert d.source == "static"


@pytest.mark.slow
def test_a_real_run_records_its_validation_curve_and_a_shorter_run_is_its_prefix(tmp_path):
    """gate-run records the checkpoint monitor at each validation (facts.val_curve); and since validation and test
    loaders draw from generators of their own, a run that validates at other steps trains on the same random
    numbers: a 6-step run validating every 2 steps passes through the 4-step run's value at step 4 (validation was
    drawing its base seed from the global stream, so they parted after the first validation)."""
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run
    from gate.results import ResultsStore

    from helpers import SMOKE, TINY_ENCODER, compose_run

    # dropout draws from the global stream in every training step: what a validation's draw would shift
    base = [*SMOKE, "dataset=digits", *TINY_ENCODER, "data.max_val_samples=32",
            "data.max_test_samples=32", "evaluate_test=false", "adapter.dropout=0.5"]
    long = run_finetune(parse_run(compose_run(tmp_path / "long", [*base, "trainer.max_steps=6", "trainer.val_check_interval=2"])))
    short = run_finetune(parse_run(compose_run(tmp_path / "short", [*base, "trainer.max_steps=4", "trainer.val_check_interval=4"])))
    curve = dict(map(tuple, long.facts["val_curve"]))
    assert sorted(curve) == [2, 4, 6] and long.facts["validations"] == 3
    rows = ResultsStore(tmp_path / "long" / "results" / "records.jsonl").records()
    assert rows[-1]["value"] == pytest.approx(max(curve.values()))  # the val record is the best of the curve
    assert dict(map(tuple, short.facts["val_curve"])) == {4: pytest.approx(curve[4], abs=1e-6)}


def test_a_rerun_plans_the_runs_the_store_holds_before_longer_ones():
    """An earlier call ran 1/6-length runs (its budget was short then); with a warm cost model the ladder's first
    rung (0.67) would fit, but the stored runs cost nothing and are planned first, so the rerun trains nothing."""
    from gate.ranking.pipeline import stored_fractions

    full_steps = dict.fromkeys(BENCH, 100)
    stored_steps = planning.proxy_steps(100, 0.67 / 4, 4)  # (16, 4): the ladder's third rung
    made = {(e, b, 100, *stored_steps) for e in ("a", "b", "c") for b in BENCH[:2]}
    prefer = stored_fractions(made, full_steps, 0.67, 4)
    assert prefer == (0.67 / 4,)

    def block_seconds(bench, seed, steps, every):
        stored = all((e, bench, seed, steps, every) in made for e in ("a", "b", "c"))
        return 0.0 if stored else 3 * (5.0 + 0.5 * steps + steps // every)

    choose = select.Chooser(synthetic(n=10), BENCH)
    kwargs = dict(candidates=BENCH, full_steps=full_steps, proxy_seeds=(100,), run_fraction=0.67, val_points=4,
                  budget_seconds=1e4, full_seconds=1e5, block_seconds=block_seconds, choose=choose, prior_seconds=0.0,
                  with_prior=False)
    assert planning.make_plan(**kwargs).fraction == 0.67  # nothing stored: the longest runs that fit
    again = planning.make_plan(**kwargs, prefer=prefer)
    assert again.fraction == pytest.approx(0.67 / 4)
    assert ("a", 16) in {(b.benchmark, b.steps) for b in again.blocks} and {b.steps for b in again.blocks} == {16}


def test_a_paper_name_the_table_lacks_names_the_encoder_and_the_key(monkeypatch):
    from gate.errors import ConfigError
    from gate.ranking import history as history_module

    monkeypatch.setattr(history_module, "paper_names", lambda: {"effnetv9": "efficientnet_lite0", "clip": "clip_vitb16"})
    with pytest.raises(ConfigError) as err:
        history_module.paper_history()
    assert str(err.value).startswith("conf/encoder/efficientnet_lite0.yaml: paper_name='effnetv9' is not a column")


@pytest.mark.parametrize("rows,message", [
    ("a,cifar100,acc@1,0.5\nb,cifar100,acc@1,\nc,cifar100,acc@1,0.7\n", "have no value and are left out: b × cifar100"),
    ("a,cifar100,wibble,0.5\nb,cifar100,wibble,0.6\nc,cifar100,wibble,0.7\n", "metric(s) ['wibble'] are not in the "
                                                                               "registry"),
    ("a,cifar100,acc@1,0.5\na,cifar100,acc@1,0.6\nc,cifar100,acc@1,0.7\n", "a result is listed twice"),
])
def test_a_history_that_is_not_a_performance_table_is_one_line(tmp_path, rows, message):
    """NaN cells, a metric of unknown direction and duplicate rows: what gate-analysis warns about and reads on,
    a history refuses (it would learn from a guess)."""
    from gate.ranking.history import problems

    path = tmp_path / "h.csv"
    path.write_text("encoder,dataset,metric,value\n" + rows)
    found = problems([str(path)])
    assert len(found) == 1 and found[0].startswith(f"history={str(path)!r}") and message in found[0], found


def test_static_auto_takes_source_top1_only_where_every_encoder_declares_it():
    """conf/rank.yaml said the static facts were params and, where every encoder declares it, source_top1, while its
    value was [params]: at a budget that buys nothing the demo pool was ranked by parameter count alone, the random-init
    ResNet-18 first. ``static: auto`` (the default) takes both, source_top1 only where every encoder declares it. By
    hand, mean ranks: lite1 (params 2, top-1 1) 1.5; resnet18_scratch (1, 3) 2.0; lite0 (3, 2) 2.5."""
    from gate.ranking.prior import combine
    from gate.ranking.request import Request
    from gate.ranking.scores import static_names, static_rankings

    params = {"efficientnet_lite0": 4.65e6, "efficientnet_lite1": 5.42e6, "resnet18_scratch": 11.69e6}
    configs = {"efficientnet_lite0": {"source_top1": 75.1}, "efficientnet_lite1": {"source_top1": 76.7},
               "resnet18_scratch": {"source_top1": 0.1}}  # conf/encoder/*.yaml's values (chance for random init)
    pool = list(params)
    assert Request(None, tuple(pool), 0.1).static == "auto" and static_names("auto") == ("params", "source_top1")
    ranks = static_rankings(static_names("auto"), pool, params, configs)
    assert set(ranks) == {"params", "source_top1"}
    prior = combine({f"static:{k}": v for k, v in ranks.items()})
    assert prior.to_dict() == {"efficientnet_lite0": 2.5, "efficientnet_lite1": 1.5, "resnet18_scratch": 2.0}
    del configs["resnet18_scratch"]["source_top1"]  # one encoder without it: params alone, no error
    assert set(static_rankings(static_names("auto"), pool, params, configs)) == {"params"}
    assert static_names(["params"]) == ("params",)


def test_a_proxy_run_is_read_by_the_tier_metric_where_the_checkpoint_monitors_another():
    """Pool C on a GPU (docs/ranking.md): fmnist_video_speed checkpoints on val mae and enters the tier by r2, and the
    proxy ranked its runs by the mae curve. A run that records the tier metric's curve is read by it: its name, its
    direction, its best point; a run without one (recorded before) is read by the monitor, as it was."""
    from gate.ranking.proxy import read_run

    mae = [[16, 4.9], [32, 4.7], [48, 4.6], [64, 4.55]]
    r2 = [[16, -0.20], [32, -0.05], [48, 0.02], [64, 0.01]]
    row = {"experiment": "x", "split": "val", "metric": "mae", "value": 4.55,
           "facts": {"val_curve": mae, "tier_val_curve": {"metric": "r2", "points": r2}}}
    monitor, hib, best, value, lo, hi, method, _ = read_run([row], full_steps=64)
    assert (monitor, hib, best) == ("r2", True, 0.02)
    assert lo <= value <= hi <= 1.0 and -0.2 <= value  # r2's own bound (at most 1) holds the extrapolation
    old = {**row, "facts": {"val_curve": mae}}
    monitor, hib, best, *_ = read_run([old], full_steps=64)
    assert (monitor, hib, best) == ("mae", False, 4.55)


def _runs(monitor: str, bests: list[float]) -> list:
    from gate.ranking.proxy import ProxyRun

    return [ProxyRun(f"e{i}", "b", 100, 8, f"x{i}", monitor, True, v, v, v, v, "last value", 1.0, 1.0, False, {})
            for i, v in enumerate(bests)]


def test_a_benchmark_no_encoder_learnt_is_named_by_its_metrics_no_skill_value():
    """r2's no skill is 0 and its best 1, so the bar is 0.05 (5 % of the way); AUC's is 0.5 → 0.525; accuracy's no
    skill is the data's chance rate, not a constant of the metric, so it is never judged."""
    from gate.ranking.proxy import no_skill

    assert "best validation r2 0.04" in no_skill(_runs("r2", [-0.2, 0.01, 0.04]))
    assert no_skill(_runs("r2", [-0.2, 0.01, 0.06])) is None
    assert no_skill(_runs("val/auc_macro", [0.49, 0.52])) is not None
    assert no_skill(_runs("val/auc_macro", [0.49, 0.53])) is None
    assert no_skill(_runs("acc@1", [0.1, 0.1, 0.1])) is None


def test_an_earlier_calls_stored_runs_judge_a_benchmark_before_planning_only_when_as_long_as_this_calls_could_be():
    """Stored 24-step proxy runs of every encoder, best validation r2 at most 0.01: a call whose runs would be at most
    24 steps leaves the benchmark out before planning (re-read, they would cost their seconds again and say the
    same); one that could run 32 steps, or a pool with an encoder they lack, judges nothing in advance."""
    from gate.ranking.pipeline import stored_no_skill

    def record(enc: str, best: float, steps: int = 24) -> dict:
        # a validation record as gate-run writes it: the monitor's value and curve, and the tier metric's curve
        # (gate/engine/training/facts.py: tier_val_curve = {metric, points}; pool E's stored records hold the same)
        curve = [[8, best - 0.05], [16, best - 0.02], [24, best]]
        return {"kind": "finetune", "split": "val", "encoder": enc, "dataset": "speed", "seed": 100, "metric": "mae",
                "value": 4.5, "experiment": f"x{enc}{steps}",
                "config": {"trainer": {"max_steps": steps, "val_check_interval": 8}},
                "facts": {"val_curve": [[s, 4.5] for s, _ in curve],
                          "tier_val_curve": {"metric": "r2", "points": curve}}}

    records = [record("a", -0.1), record("b", 0.01), record("c", 0.0)]
    judged = stored_no_skill(records, ["a", "b", "c"], ["speed"], [100], {"speed": 24})
    assert list(judged) == ["speed"] and "best validation r2 0.01 of 3 runs" in judged["speed"]
    assert stored_no_skill(records, ["a", "b", "c"], ["speed"], [100], {"speed": 32}) == {}
    assert stored_no_skill(records, ["a", "b", "c", "d"], ["speed"], [100], {"speed": 24}) == {}
    assert stored_no_skill([*records[:2], record("c", 0.2)], ["a", "b", "c"], ["speed"], [100], {"speed": 24}) == {}


def test_halving_judges_each_pair_by_the_net_share_of_blocks_settling_it_and_lengthens_what_fits():
    """By hand: two blocks (seeds 1, 2) of a, b, c. a's interval lies above b's and c's in both (certainty 1);
    b–c overlap in seed 1 ([0.50, 0.60] and [0.55, 0.70]) and b lies above c in seed 2: net 1 of 2 blocks, 0.5. A
    lower-is-better metric is turned round (an MAE of [0.1, 0.2] lies above one of [0.3, 0.4]). The longer run:
    twice the steps on the same validation interval, under the full run's; the least settled pair's encoders are
    lengthened only when both fit, and a settled pair adds nothing."""
    from gate.ranking import halving
    from gate.ranking.proxy import ProxyRun

    def run(enc, seed, lo, hi, higher=True):
        return ProxyRun(enc, "x", seed, 64, f"{enc}{seed}", "acc@1" if higher else "mae", higher, (lo + hi) / 2,
                        (lo + hi) / 2, lo, hi, "ensemble", 1.0, 1.0, False, {})

    runs = [run("a", 1, 0.8, 0.9), run("b", 1, 0.5, 0.6), run("c", 1, 0.55, 0.7),
            run("a", 2, 0.8, 0.9), run("b", 2, 0.71, 0.75), run("c", 2, 0.3, 0.4)]
    ranked = halving.contests(runs, ["a", "b", "c"])
    assert [(c.a, c.b, c.certainty, c.blocks) for c in ranked] == [("b", "c", 0.5, 2), ("a", "b", 1.0, 2),
                                                                     ("a", "c", 1.0, 2)]
    mae = halving.contests([run("a", 1, 0.1, 0.2, False), run("b", 1, 0.3, 0.4, False),
                            run("c", 1, 0.15, 0.35, False)], ["a", "b", "c"])
    assert {(c.a, c.b): c.certainty for c in mae} == {("a", "b"): 1.0, ("a", "c"): 0.0, ("b", "c"): 0.0}
    assert halving.longer_steps(132, 33, 200) == 198 and halving.longer_steps(64, 16, 100) == 96
    assert halving.longer_steps(96, 16, 100) is None  # the full run's 100 steps hold no longer run on 16
    price = {"a": 5.0, "b": 10.0, "c": 50.0}.get
    assert halving.choose(ranked, price, 40.0) == ([], 0.0)  # b and c together do not fit; a's pairs are settled
    assert halving.choose(ranked, price, 70.0) == (["b", "c"], 60.0)


def test_a_longer_run_continues_a_shorter_ones_checkpoint_and_counts_only_its_own_seconds(tmp_path):
    """halving's continuation: the shorter run's last checkpoint is shared with the longer run's folder (a hard link:
    no copy of the model's state; gate-run resumes from it), never over a checkpoint the longer run has of its own (an
    interrupted start resumes itself), and not from a checkpoint that is gone. Checkpoints are replaced by a rename,
    never rewritten in place, so a new checkpoint of either run leaves the other's as it was. A continued run carries
    the shorter run's seconds up to its checkpoint (12.5 of its 30.0), which the shorter run's own record counts: 17.5
    are its own; an interrupted continuation (resumed at another step) is counted whole."""
    import torch

    from gate.files import atomic_torch_save
    from gate.ranking.proxy import continue_into, continued_seconds

    short = tmp_path / "short" / "checkpoints" / "last.ckpt"
    short.parent.mkdir(parents=True)
    atomic_torch_save(short, {"step": 16}, "a checkpoint")
    longer = tmp_path / "longer"
    continued = longer / "checkpoints" / "last.ckpt"
    assert continue_into(short, longer) and continued.read_bytes() == short.read_bytes()
    assert continued.stat().st_ino == short.stat().st_ino  # shared, not copied
    atomic_torch_save(continued, {"step": 24}, "a checkpoint")  # the longer run's next checkpoint
    assert torch.load(short, weights_only=True) == {"step": 16}  # the shorter run's stays its own
    atomic_torch_save(short, {"step": 17}, "a checkpoint")
    assert not continue_into(short, longer)  # its own checkpoint stays
    assert torch.load(continued, weights_only=True) == {"step": 24}
    assert not continue_into(tmp_path / "gone" / "last.ckpt", tmp_path / "other")
    assert not (tmp_path / "other" / "checkpoints" / "last.ckpt").exists()
    facts = {"wall_seconds": 30.0, "earlier_wall_seconds": 12.5, "resumed_from_step": 16}
    assert continued_seconds(facts, 16) == pytest.approx(17.5)
    assert continued_seconds({**facts, "resumed_from_step": 24}, 16) == pytest.approx(30.0)
    assert continued_seconds({"wall_seconds": 9.0, "resumed_from_step": None}, 16) == pytest.approx(9.0)
    assert continued_seconds({}, 16) is None


def test_steep_curves_of_a_bounded_metric_are_not_extrapolated_past_its_bound_into_a_tie():
    """Two real 64-step digits curves of pool H (resnet18_scratch and efficientnet_lite1, seed 100), extrapolated to
    the full 96 steps: every fit went past accuracy 1 and was clipped there, so both ended at 1.0, tied, though one
    stopped at 0.745 and the other at 0.855. Fits now approach at most 1 and one that leaves [0, 1] is dropped: both
    ends lie below 1, above the curves' best values, in their order."""
    resnet = [[16, 0.095], [32, 0.2], [48, 0.73], [64, 0.745]]
    lite1 = [[16, 0.325], [32, 0.48], [48, 0.82], [64, 0.855]]
    a, b = (extrapolate(c, 96, higher_is_better=True, low=0.0, high=1.0) for c in (resnet, lite1))
    assert a.method == b.method == "ensemble"
    assert 0.745 <= a.value < b.value < 1.0 and 0.855 <= b.value
    assert a.hi <= 1.0 and b.hi <= 1.0

"""The successive-halving proxy (gate.ranking.proxy) and the validation (gate.ranking.pipeline) with a stand-in
for gate-run: what runs, from which checkpoint, what it costs, when the budget stops it, what a rerun repeats."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from omegaconf import OmegaConf

from gate.ranking.budget import Ledger
from gate.ranking.pipeline import FullResults, RankResult, Request, summary_table, validate_against_full
from gate.ranking.proxy import BenchmarkRanking, ProxyContext, run_benchmark, seeded_key, successive_halving
from gate.tiers.expand import Experiment

QUALITY = {"a": 0.9, "b": 0.7, "c": 0.5, "d": 0.3, "e": 0.2, "f": 0.1,
           "efficientnet_lite0": 0.9, "vit_tiny_scratch": 0.5, "resnet18_scratch": 0.2}


class FakeGateRun:
    """gate-run's contract as the proxy sees it: a composed config in, a complete record set (val monitor + facts)
    in the store out, ``last.ckpt`` in the run's checkpoint dir; a run whose dir holds a checkpoint resumes from it."""

    def __init__(self, runs_dir, seconds_per_step=1.0, overhead=2.0):
        self.records, self.runs_dir, self.calls, self.keeps = [], runs_dir, [], []
        self.sps, self.overhead = seconds_per_step, overhead  # seconds_per_step: a number, or {dataset: number}

    def compose(self, overrides):
        kv = dict(o.split("=", 1) for o in overrides)
        return OmegaConf.create({"encoder": {"name": kv["encoder"]}, "dataset": {"name": kv["dataset"]},
                                 "trainer": {"max_steps": int(kv["trainer.max_steps"]),
                                             "val_check_interval": int(kv["trainer.val_check_interval"])},
                                 "seed": 0, "keep_checkpoints": kv["keep_checkpoints"]})

    def run(self, cfg):
        from gate.engine.build import resolved_config
        from gate.results import experiment_id

        exp = experiment_id(resolved_config(cfg), "finetune")
        ckpt = self.runs_dir / exp / "checkpoints" / "last.ckpt"
        start = int(ckpt.read_text()) if ckpt.exists() else 0
        steps = cfg.trainer.max_steps
        self.calls.append((cfg.encoder.name, steps, start))
        self.keeps.append((steps, cfg.keep_checkpoints))
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        ckpt.write_text(str(steps))
        trained = steps - start
        sps = self.sps[cfg.dataset.name] if isinstance(self.sps, dict) else self.sps
        value = QUALITY[cfg.encoder.name] * steps / (steps + 10)  # better encoders stay better as steps grow
        self.records.append({"experiment": exp, "kind": "finetune", "split": "val", "metric": "mae" if
                             cfg.dataset.name == "speed" else "acc@1", "value": -value if cfg.dataset.name == "speed"
                             else value, "facts": {"wall_seconds": self.overhead + trained * sps,
                                                   "train_step_seconds": trained * sps, "global_step": steps,
                                                   "resumed_from_step": start or None, "params": 1000.0}})


def experiments(names, dataset="d", steps=40):
    return [Experiment(f"id-{n}", "t", dataset, n, 0, (f"encoder={n}", f"dataset={dataset}"),
                       {"trainer": {"max_steps": steps}}) for n in names]


def test_halving_orders_by_rung_survivors_continue_and_scores_seed_the_first_rung():
    calls = []

    def evaluate(enc, k, steps, prev):
        calls.append((enc, k, steps, prev))
        return {"a": 3, "b": 2, "c": 1, "d": 0}[enc] + (0 if k else {"a": -10, "b": 0, "c": 0, "d": 0}[enc])

    order, ran = successive_halving(["a", "b", "c", "d"], [2, 4], [4, 2], evaluate)
    assert ran == [2, 4] and order[:2] == ["b", "c"] and order[2:] == ["d", "a"]  # a lost rung 0
    assert [c for c in calls if c[1] == 1] == [("b", 1, 4, 2), ("c", 1, 4, 2)]  # continue from rung 0's steps
    # seeded: rung 0 decides on the mean of its rank and the score's rank → a survives
    order, _ = successive_halving(["a", "b", "c", "d"], [2, 4], [4, 2], evaluate, [{"a": 9, "b": 1, "c": 0, "d": 2}])
    assert set(order[:2]) == {"a", "b"}
    assert seeded_key({"x": 1.0, "y": 0.0}, [{"x": 0.0, "y": 1.0}]) == {"x": -1.5, "y": -1.5}


def test_proxy_runs_rungs_from_checkpoints_counts_every_second_and_a_rerun_repeats_nothing(tmp_path):
    fake = FakeGateRun(tmp_path / "runs", overhead=0.0)
    lines = []
    ctx = ProxyContext(fake.compose, fake.run, lambda: list(fake.records), tmp_path / "runs", echo=lambda *a, **k: lines.append(a))
    names = list("abcdef")
    ledger = Ledger()
    # 6 encoders × 40 steps × 1 seed at 0.3 = 72 steps; keeps 6, 3, 2: 6 r0 + 3 r0 + 2·2 r0 = 13 r0 → r0 = 5
    ranking = run_benchmark("d", experiments(names), ctx, budget=0.3, eta=2, overhead_steps=0, full_seeds=1,
                            ledger=ledger, score_seconds=3.0)
    assert ranking.steps == (5, 10, 20) and ranking.order == names  # the true order (QUALITY)
    # survivors continue from rungs 0 and 1; nothing continues from the last rung: its checkpoints are not kept
    assert sorted(set(fake.keeps)) == [(5, "all"), (10, "all"), (20, "none")]
    assert sorted(fake.calls) == sorted([(n, 5, 0) for n in names] + [("a", 10, 5), ("b", 10, 5), ("c", 10, 5),
                                                                     ("a", 20, 10), ("b", 20, 10)])
    assert ledger.spent_seconds == pytest.approx(6 * 5 + 3 * 5 + 2 * 10 + 3.0)  # every rung's new steps + scores
    assert ledger.full_seconds == pytest.approx(6 * 40 * 1.0)
    assert ledger.fraction <= 0.3
    n = len(fake.calls)
    again = run_benchmark("d", experiments(names), ctx, budget=0.3, eta=2, overhead_steps=0, full_seeds=1,
                          ledger=Ledger())
    assert len(fake.calls) == n and again.order == ranking.order  # every rung read back from the store
    assert all(r.stored for r in again.results)


def test_the_measured_seconds_stop_later_rungs_at_the_budget_and_lower_is_better_monitors_rank_right(tmp_path):
    fake = FakeGateRun(tmp_path / "runs", seconds_per_step=1.0, overhead=30.0)  # overhead dwarfs the steps
    ctx = ProxyContext(fake.compose, fake.run, lambda: list(fake.records), tmp_path / "runs", echo=lambda *a, **k: None)
    # planned r0 = 10 (4·40·0.4 = 64 steps = 6 r0), but rung 0 already cost 4 × 40 s of 0.4 × 4 × 70 s: stop there
    ledger = Ledger()
    ranking = run_benchmark("speed", experiments(list("abcd"), "speed"), ctx, budget=0.4, eta=2, overhead_steps=0,
                            full_seeds=1, ledger=ledger)
    assert ranking.steps == (10,) and ranking.monitor == "mae" and not ranking.higher_is_better
    assert ranking.order == list("abcd")  # lowest MAE first
    assert ledger.fraction == pytest.approx(160 / 280)  # the overrun is reported, not hidden
    # the stored full runs took longer than the estimate (4 × 700 s): their seconds set the budget, rung 1 runs
    ledger = Ledger()
    ranking = run_benchmark("speed", experiments(list("abcd"), "speed"), ctx, budget=0.4, eta=2, overhead_steps=0,
                            full_seeds=1, ledger=ledger, known_full={f"{e} × speed": 700.0 for e in "abcd"})
    assert ranking.steps == (10, 20) and ledger.fraction == pytest.approx((160 + 2 * 40) / 2800)
    assert ledger.estimated_fraction == pytest.approx((160 + 2 * 40) / 280)


def test_validation_tables_proxy_static_ranker_and_scores_against_full():
    encs = ["a", "b", "c", "d"]
    full = pd.DataFrame({"x": [0.9, 0.8, 0.7, 0.1], "y": [0.5, 0.9, 0.4, 0.3]}, index=encs)
    fr = FullResults(full, {"x": {0: full["x"], 1: full["x"]}, "y": {0: full["y"], 1: full["y"][::-1]}},
                     {"x": ("acc@1", True), "y": ("acc@1", True)}, {},
                     {"x": {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, "y": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}})
    rankings = {b: BenchmarkRanking(b, "acc@1", True, 10, (2,), [], sorted(encs, key=lambda e: -full.loc[e, b]))
                for b in full.columns}
    result = RankResult(rankings, Ledger(), pd.DataFrame(), [], fr, scores={"knn_acc": {"x": {"a": 0.1, "b": 0.2,
                                                                                               "c": 0.3, "d": 0.4}}})

    class Plan:
        encoders = tuple(encs)

    request = Request(None, tuple(encs), 0.1, eta=2, overhead_steps=0, n_boot=50, use_full_runs=True,
                      baseline_scores=("knn_acc",))
    table = validate_against_full(result, Plan, request, ["x", "y"])
    proxy = table[table["method"] == "proxy"].set_index("scope")
    assert proxy.loc["x", "tau"] == pytest.approx(1.0) and proxy.loc["tier", "tau"] == pytest.approx(1.0)
    assert proxy.loc["x", "regret"] == pytest.approx(0.0)
    knn = table[table["method"] == "score:knn_acc"].set_index("scope")
    assert knn.loc["x", "tau"] == pytest.approx(-1.0) and knn.loc["x", "regret"] == pytest.approx(0.8)
    # knn covers x only, and is still graded on the whole tier's mean rank (x and y: a 1.5, b 1.5, c 3, d 4):
    # its order d > c > b > a is discordant on all 5 untied pairs, τ-b = -5 / sqrt(6 · 5)
    assert "y" not in knn.index and knn.loc["tier", "tau"] == pytest.approx(-5 / math.sqrt(30), abs=1e-9)
    assert knn.loc["tier", "benchmarks"] == 1 and knn.loc["tier", "tier_benchmarks"] == 2
    static = table[table["method"] == "static:params"].set_index("scope")
    assert static.loc["x", "tau"] == pytest.approx(-1.0)  # more parameters ranked first, the reverse of x
    # y's own runs count differently (a head, a text tower): a > b > c > d against y's b > a > c > d, 5 of 6 pairs
    assert static.loc["y", "tau"] == pytest.approx(4 / 6)
    summary = summary_table(table, {"x": 1.0, "y": math.nan, "tier": 0.5})
    assert summary.attrs["ceiling_tier"] == pytest.approx(0.5) and summary.attrs["ceiling_mean_bench"] == pytest.approx(1.0)
    assert set(summary["method"]) == {"proxy", "score:knn_acc", "static:params"}


def test_full_results_are_read_per_seed_on_each_tier_metric_from_the_tiers_own_experiments(tmp_path):
    from gate.ranking.pipeline import ceilings, proxy_entries, read_full
    from gate.tiers.expand import expand_tier
    from gate.tiers.spec import parse_tier

    # fmnist_video_speed's tier metric is r2; an entry override makes it mae, a lower-is-better one to turn
    doc = {"name": "t", "seeds": [0, 1], "overrides": {"trainer.max_steps": 8, "trainer.val_check_interval": 4},
           "benchmarks": ["digits", {"dataset": "fmnist_video_speed", "overrides": {"dataset.tier_metric": "mae"}}]}
    plan = expand_tier(parse_tier(doc, "t"), ["resnet18_scratch", "vit_tiny_scratch", "efficientnet_lite0"], tmp_path)
    entries, dropped = proxy_entries(plan, 0)
    assert list(entries) == ["digits", "fmnist_video_speed"] and not dropped
    quality = {"resnet18_scratch": 0.2, "vit_tiny_scratch": 0.5, "efficientnet_lite0": 0.9}
    records = []
    for exp in plan.experiments:
        metric = "mae" if exp.dataset == "fmnist_video_speed" else "acc@1"
        value = (1 - quality[exp.encoder]) if metric == "mae" else quality[exp.encoder] + 0.01 * exp.seed
        records += [{"experiment": exp.id, "kind": "finetune", "split": "test", "metric": metric, "value": value,
                     "facts": {"wall_seconds": 10.0, "params": 5.0}},
                    {"experiment": exp.id, "kind": "finetune", "split": "test", "metric": "loss", "value": 9.0}]
    full = read_full(plan, records[:-2], list(entries))  # the last experiment's records are missing
    assert full.metric == {"digits": ("acc@1", True), "fmnist_video_speed": ("mae", False)}
    assert full.values.loc["efficientnet_lite0", "digits"] == pytest.approx(0.905)  # mean over seeds 0 and 1
    assert full.values.loc["efficientnet_lite0", "fmnist_video_speed"] == pytest.approx(-0.1)  # turned: higher is better
    assert full.complete("digits", plan.encoders) and full.wall["vit_tiny_scratch × digits"] == pytest.approx(20.0)
    last = plan.experiments[-1]
    assert len(full.per_seed[last.dataset][last.seed]) == 2  # one encoder short on that seed
    assert ceilings(full, ["digits"]) == {"digits": pytest.approx(1.0), "tier": pytest.approx(1.0)}


def _digits_plan(tmp_path, seeds=(0,)):
    from gate.tiers.expand import expand_tier
    from gate.tiers.spec import parse_tier

    doc = {"name": "t", "seeds": list(seeds), "overrides": {"trainer.max_steps": 8, "trainer.val_check_interval": 4},
           "benchmarks": ["digits"]}
    return expand_tier(parse_tier(doc, "t"), ["resnet18_scratch", "vit_tiny_scratch", "efficientnet_lite0"], tmp_path)


def test_a_validation_only_record_set_is_not_a_full_result(tmp_path):
    """A run with evaluate_test=false stores the val monitor alone: the ground truth reads test records, so such a
    set (here under a full experiment's own id) never completes a benchmark."""
    from gate.ranking.pipeline import read_full

    plan = _digits_plan(tmp_path)
    records = [{"experiment": e.id, "kind": "finetune", "split": "test" if e is not plan.experiments[-1] else "val",
                "metric": "acc@1", "value": 0.5, "facts": {"wall_seconds": 1.0}} for e in plan.experiments]
    full = read_full(plan, records, ["digits"])
    assert not full.complete("digits", plan.encoders)
    assert full.values["digits"].notna().sum() == 2


def test_baseline_scores_cost_nothing_where_no_validation_can_use_them(tmp_path):
    """No full results stored (a fresh store): the baselines' feature passes would compare with nothing, so none
    is made; the proxy still ranks."""
    from gate.ranking.pipeline import rank_tier

    plan = _digits_plan(tmp_path)
    fake = FakeGateRun(tmp_path / "runs", overhead=0.0)
    ctx = ProxyContext(fake.compose, fake.run, lambda: list(fake.records), tmp_path / "runs", echo=lambda *a, **k: None)
    composed = []
    request = Request(plan.tier, tuple(plan.encoders), 0.3, eta=2, overhead_steps=0, n_boot=10,
                      baseline_scores=("knn_acc", "sfda"),
                      use_full_runs=False)
    result = rank_tier(plan, request, seed=0, ctx=ctx, compose_score=composed.append, run_score=lambda cfg: None)
    assert composed == [] and result.validation is None and result.scores == {}
    assert result.rankings["digits"].order == ["efficientnet_lite0", "vit_tiny_scratch", "resnet18_scratch"]


def test_the_proxy_on_a_subset_of_the_tier_spends_the_whole_budget_there_and_costs_the_rest_by_steps(tmp_path):
    from gate.errors import ConfigError
    from gate.ranking.budget import subset_budget
    from gate.ranking.pipeline import choose_benchmarks, run_proxy

    assert choose_benchmarks(["p", "q", "r"], None) == ["p", "q", "r"]
    assert choose_benchmarks(["p", "q", "r"], 2) == ["p", "q"] and choose_benchmarks(["p", "q"], 5) == ["p", "q"]
    assert choose_benchmarks(["p", "q", "r"], ("r", "p")) == ["p", "r"]  # tier order
    with pytest.raises(ConfigError, match="'s' is not among"):
        choose_benchmarks(["p", "q"], ("s",))
    # three benchmarks of 40, 40 and 80 steps; the proxy runs the first: it gets the tier's 0.1 × 160 steps-worth
    assert subset_budget(0.1, {"p": 40, "q": 40, "r": 80}, ["p"]) == pytest.approx(0.4)
    assert subset_budget(0.1, {"p": 40, "q": 40, "r": 80}, ["p", "q", "r"]) == pytest.approx(0.1)

    fake = FakeGateRun(tmp_path / "runs", overhead=0.0)
    ctx = ProxyContext(fake.compose, fake.run, lambda: list(fake.records), tmp_path / "runs", echo=lambda *a, **k: None)
    names = list("abcd")
    entries = {"p": experiments(names, "p"), "q": experiments(names, "q"), "r": experiments(names, "r", steps=80)}

    class Plan:
        encoders = tuple(names)

        class tier:
            seeds = (0,)

    def request(max_rungs):
        return Request(None, tuple(names), 0.1, eta=2, overhead_steps=0, n_boot=0, use_full_runs=True,
                       max_rungs=max_rungs)

    rankings, ledger = run_proxy(Plan, entries, ctx, request(1), {}, {}, None, chosen=["p"])
    assert list(rankings) == ["p"] and rankings["p"].order == names
    # p alone at budget 0.4 of 4 × 40 steps = 64 steps; one rung (the default): 16 steps each
    assert rankings["p"].steps == (16,) and sorted(fake.calls) == [(n, 16, 0) for n in names]
    assert set(fake.keeps) == {(16, "none")}  # one run per encoder: nothing continues, no checkpoint kept
    # every benchmark's full cost is in the ledger: p's from its rung-0 step times, q's and r's scaled by steps
    assert ledger.estimated["a × p"] == pytest.approx(40.0)
    assert ledger.estimated["a × q"] == pytest.approx(40.0) and ledger.estimated["a × r"] == pytest.approx(80.0)
    assert ledger.full_seconds == pytest.approx(4 * 160.0)
    assert ledger.spent_seconds == pytest.approx(4 * 16) and ledger.fraction == pytest.approx(0.1)
    # successive halving instead (max_rungs=None): 4 r0 + 2 r0 <= 64 → r0 = 10, survivors continue to 20
    rankings, _ = run_proxy(Plan, entries, ctx, request(None), {}, {}, None, chosen=["q"])
    assert rankings["q"].steps == (10, 20) and rankings["q"].order == names


def test_auto_picks_the_tiers_first_benchmarks_that_the_budget_runs_at_run_fraction_of_their_steps():
    from gate.ranking.pipeline import choose_benchmarks

    steps = {b: 96 for b in "pqrst"}
    # 0.1 of 5 benchmarks × 3 seeds = 1.5 benchmark-runs of every encoder; at 0.67 each → 2 benchmarks (72 steps)
    assert choose_benchmarks(list("pqrst"), "auto", full_cost=steps, budget=0.1, seeds=3, run_fraction=0.67) == ["p", "q"]
    assert choose_benchmarks(list("pqrst"), "auto", full_cost=steps, budget=0.1, seeds=1, run_fraction=0.67) == ["p"]  # at least one
    assert choose_benchmarks(list("pqrst"), "auto", full_cost=steps, budget=0.5, seeds=3, run_fraction=0.67) == list("pqrst")
    assert choose_benchmarks(list("pqrst"), "auto", full_cost=steps, budget=0.1, seeds=3, run_fraction=0.3) == \
        list("pqrst")[:5]
    uneven = {"p": 200, "q": 40, "r": 40}  # the budget buys 0.1 · 3 · 280 / 0.67 = 125 steps: p alone
    assert choose_benchmarks(list("pqr"), "auto", full_cost=uneven, budget=0.1, seeds=3, run_fraction=0.67) == ["p"]


def test_a_subset_proxy_splits_the_budget_by_the_measured_cost_of_each_benchmark(tmp_path):
    """A tier whose first benchmark costs 3 s a step and whose second 1 s: split by steps, the proxy on the first
    spends 0.15 of the tier's seconds at budget 0.1 (and the ledger flags it); measured by 2-step probes, it spends
    less than 0.1, probes included."""
    from gate.ranking.pipeline import choose_benchmarks, measured_costs, run_proxy

    names = list("abcd")
    entries = {"q": experiments(names, "q"), "p": experiments(names, "p")}  # 40 steps each; q first in the tier

    class Plan:
        encoders = tuple(names)

        class tier:
            seeds = (0,)

    def proxy(probe_steps):
        fake = FakeGateRun(tmp_path / f"runs{probe_steps}", seconds_per_step={"q": 3.0, "p": 1.0}, overhead=0.0)
        lines = []
        ctx = ProxyContext(fake.compose, fake.run, lambda: list(fake.records), tmp_path / f"runs{probe_steps}",
                           echo=lambda *a, **k: lines.append(" ".join(map(str, a))))
        request = Request(None, tuple(names), 0.1, eta=2, overhead_steps=0, n_boot=0, use_full_runs=True,
                          proxy_benchmarks="auto", max_rungs=1, run_fraction=0.67, cost_probe_steps=probe_steps)
        split = measured_costs(Plan, entries, ["q", "p"], ctx, request)
        chosen = choose_benchmarks(["q", "p"], "auto", full_cost=split.full_cost, budget=split.budget, seeds=1,
                                   run_fraction=0.67)
        rankings, ledger = run_proxy(Plan, entries, ctx, request, {}, {}, None, chosen=chosen, split=split)
        return rankings, ledger, fake, lines, split.full_cost, split.budget

    # by steps (no probe): q gets the tier's 0.1 × 80 steps-worth = 8 steps × 4 encoders at 3 s: 96 s of 640
    rankings, ledger, fake, _, cost, budget = proxy(0)
    assert cost == {"q": 40.0, "p": 40.0} and budget == pytest.approx(0.1) and rankings["q"].steps == (8,)
    assert ledger.estimated["a × p"] == pytest.approx(120.0)  # p's cost guessed from q's step times: 3× too high
    assert ledger.spent_seconds == pytest.approx(96.0)  # 0.15 of the true 640 s
    known = Ledger(ledger.spent, {**ledger.full, **{f"{n} × p": 40.0 for n in names}}, ledger.estimated)
    assert known.fraction == pytest.approx(0.15) and known.overrun(0.1).startswith("OVER THE BUDGET: 0.150")
    # measured: q's full run costs 120 s, p's 40 s; the probes took 2 × 3 + 2 × 1 = 8 s = 0.0125 of the 640 s tier
    rankings, ledger, fake, lines, cost, budget = proxy(2)
    assert cost == {"q": pytest.approx(120.0), "p": pytest.approx(40.0)} and budget == pytest.approx(0.0875)
    assert [c for c in fake.calls if c[0] == "a"][:2] == [("a", 2, 0), ("a", 2, 0)]  # the first encoder probes both
    assert any("measured cost per full run" in x and "p 0.33×" in x for x in lines)
    # q gets 0.0875 × 160 / 120 = 0.117 of its own 4 × 120 s: 4 steps each (4.67 rounded down); the ledger holds
    # probes and runs
    assert rankings["q"].steps == (4,) and list(rankings) == ["q"]
    assert ledger.spent_seconds == pytest.approx(8 + 4 * 4 * 3.0)
    assert ledger.estimated["a × p"] == pytest.approx(40.0)  # p's cost scaled by its measured cost, not its steps
    assert ledger.fraction == pytest.approx(56 / 640) and ledger.overrun(0.1) == ""
    # a probe already stored is read back, not rerun
    n = len(fake.calls)
    measured_costs(Plan, entries, ["q", "p"], ProxyContext(fake.compose, fake.run, lambda: list(fake.records),
                                                           tmp_path / "runs2", echo=lambda *a, **k: None),
                   Request(None, tuple(names), 0.1, eta=2, overhead_steps=0, n_boot=0, use_full_runs=True,
                           proxy_benchmarks="auto", cost_probe_steps=2))
    assert len(fake.calls) == n


def test_probes_that_would_eat_the_budget_stop_after_the_first_and_the_split_falls_back_to_steps(tmp_path):
    """Runs of 4 steps whose build costs 2 s: one probe (6 s of a 3 × 6 s full run) says all three would take 1/3
    of the tier, more than a quarter of budget 0.1: probing stops, the split is by steps, the probe is counted."""
    from gate.ranking.pipeline import measured_costs

    names = list("abc")
    entries = {b: experiments(names, b, steps=4) for b in ("q", "p", "r")}

    class Plan:
        encoders = tuple(names)

        class tier:
            seeds = (0,)

    fake = FakeGateRun(tmp_path / "runs", overhead=2.0)
    lines = []
    ctx = ProxyContext(fake.compose, fake.run, lambda: list(fake.records), tmp_path / "runs",
                       echo=lambda *a, **k: lines.append(" ".join(map(str, a))))
    request = Request(None, tuple(names), 0.1, eta=2, overhead_steps=0, n_boot=0, use_full_runs=True,
                      proxy_benchmarks="auto", cost_probe_steps=4)
    split = measured_costs(Plan, entries, ["q", "p", "r"], ctx, request)
    assert split.full_cost == {"q": 4.0, "p": 4.0, "r": 4.0} and len(fake.calls) == 1 and len(split.probe_spent) == 1
    assert split.budget == pytest.approx(0.1 - 6.0 / (3 * 3 * 6.0))  # the one probe's share of the tier comes off
    assert split.overhead_steps == {"q": pytest.approx(2.0)} and not split.measured  # q's plan still charges it
    assert any("measuring every benchmark's cost would take ~0.333" in x and "split by steps" in x for x in lines)


def test_the_measured_fixed_cost_of_a_run_is_charged_in_the_plan(tmp_path):
    """Runs that cost 6 s to build and validate and 1 s a step: the probes measure both; the chosen benchmark's
    plan charges 6 steps per run (and per full run in what the budget is taken of), so the proxy ends within its
    budget (0.294 of 0.3) where the steps alone would have given 20-step runs and 0.326."""
    from gate.ranking.pipeline import choose_benchmarks, measured_costs, run_proxy

    names = list("abcd")
    entries = {"q": experiments(names, "q"), "p": experiments(names, "p")}

    class Plan:
        encoders = tuple(names)

        class tier:
            seeds = (0,)

    fake = FakeGateRun(tmp_path / "runs", seconds_per_step=1.0, overhead=6.0)
    ctx = ProxyContext(fake.compose, fake.run, lambda: list(fake.records), tmp_path / "runs", echo=lambda *a, **k: None)
    request = Request(None, tuple(names), 0.3, eta=2, overhead_steps=0, n_boot=0, use_full_runs=True,
                      proxy_benchmarks="auto", max_rungs=1, run_fraction=0.67, cost_probe_steps=2)
    split = measured_costs(Plan, entries, ["q", "p"], ctx, request)
    assert split.measured and split.overhead_steps == {"q": pytest.approx(6.0), "p": pytest.approx(6.0)}
    assert split.full_cost == {"q": pytest.approx(46.0), "p": pytest.approx(46.0)}
    assert split.budget == pytest.approx(0.3 - 16 / 368)
    chosen = choose_benchmarks(["q", "p"], "auto", full_cost=split.full_cost, budget=split.budget, seeds=1,
                               run_fraction=0.67)
    rankings, ledger = run_proxy(Plan, entries, ctx, request, {}, {}, None, chosen=chosen, split=split)
    # q gets 0.513 of its 4 × (40 + 6): 4 (k + 6) <= 94.4 → k = 17
    assert chosen == ["q"] and rankings["q"].steps == (17,)
    assert ledger.spent_seconds == pytest.approx(16 + 4 * (6 + 17))
    assert ledger.fraction == pytest.approx(108 / 368) and ledger.fraction <= 0.3 and ledger.overrun(0.3) == ""

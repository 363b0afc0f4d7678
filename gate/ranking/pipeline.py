"""gate-rank's library stage (v2): tier × pool × budget → a ranking of the pool on the whole tier, what it cost against
what was planned, and — where the tier's full runs are stored — how right it was, beside baselines.

The steps (docs/ranking.md has the measurements behind each):

1. the **request** (:mod:`gate.ranking.request`): every problem that can be known without training, in one line,
   before anything runs;
2. the **history** (:mod:`gate.ranking.history`): other encoders' full results, never the pool's;
3. the **plan** (:mod:`gate.ranking.plan`): costs predicted by the **cost model** (:mod:`gate.ranking.cost`) from the
   store's records, the benchmarks **chosen from the history** (:mod:`gate.ranking.select`), shrunk until it fits:
   fewer proxy seeds, then fewer benchmarks, then shorter runs, then the prior, then the static ranking;
4. the **prior** (:mod:`gate.ranking.prior`, its scores :mod:`gate.ranking.scores`): zero-training scores and static
   facts, which order the first allocation;
5. the **proxy** (:mod:`gate.ranking.proxy`): one run per encoder per (proxy seed, benchmark), each ranked on its
   validation curve extrapolated to the full run's steps (:mod:`gate.ranking.curves`), re-planned before every block;
6. the **tier ranking**: the mean over proxy seeds, with the benchmarks not run predicted where the history says that
   wins (:mod:`gate.ranking.complete`), or the prior's where the proxy is the less reliable (:func:`prior.decide`);
7. the **validation** (:mod:`gate.ranking.grading`): τ against the full runs' mean, the leave-one-seed-out ceiling, top-3 recall,
   top-1 regret and paired bootstrap comparisons with the baselines.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gate.families import family
from gate.paths import LAST_CHECKPOINT, checkpoints_folder
from gate.ranking import complete, halving, select
from gate.ranking import plan as planning
from gate.ranking import prior as priors
from gate.ranking.budget import OVERRUN_TOLERANCE, Ledger, minutes, shown
from gate.ranking.grading import validate
from gate.ranking.history import History, from_store
from gate.ranking.pricing import Prices, encoder_params
from gate.ranking.proxy import ProxyContext, ProxyRun, no_skill, read_run, run_block
from gate.ranking.request import Request, check_against_plan, proxy_entries
from gate.ranking.scores import (
    Scores,
    _prior_seconds,
    _score_names,
    check_score_heads,
    prior_history_tau,
    score_ranks,
    score_values,
    static_names,
    static_rankings,
)

# ------------------------------------------------------------------------------------------------ result


@dataclasses.dataclass
class RankResult:
    tier_ranking: pd.DataFrame          # per encoder: mean_rank, rank, lo, hi (where intervals exist); best first
    source: str                         # proxy | prior | static
    why: str                            # why that source
    plan: planning.Plan
    selection: Any                      # gate.ranking.select.Selection (None for prior / static plans)
    runs: list[ProxyRun]
    predictions: pd.DataFrame           # encoder, benchmark, value, lo, hi, source (observed | completed | fallback |
                                        # full | prior | no skill | stopped)
    seeds: pd.DataFrame                 # per proxy seed: each encoder's tier rank; agreement in attrs
    prior_ranking: pd.Series | None     # lower is better
    static_rankings: dict[str, pd.Series]
    scores: Scores
    degenerate: Scores
    ledger: Ledger
    dropped: list[str]
    full_ranked: list[str]              # benchmarks ranked by their stored full runs (no proxy)
    truth: History | None = None
    unlearnt: dict[str, str] = dataclasses.field(default_factory=dict)  # benchmark → why its runs rank nothing
    stopped: dict[str, str] = dataclasses.field(default_factory=dict)   # "bench seed s" → why its block stopped short
    contests: list[halving.Contest] = dataclasses.field(default_factory=list)  # halving=contested: the pairs judged
    extended: list[str] = dataclasses.field(default_factory=list)  # ... and the encoders given longer runs
    validation: pd.DataFrame | None = None
    ceiling: dict[str, Any] = dataclasses.field(default_factory=dict)
    paired: pd.DataFrame | None = None

    @property
    def order(self) -> list[str]:
        return list(self.tier_ranking.index)

    @property
    def benchmarks_run(self) -> list[str]:
        """The benchmarks the proxy ran, in the order it ran them: the selection's, less what a re-plan dropped, plus
        what a re-plan added on the measured costs (all of them enter the ranking)."""
        return list(dict.fromkeys(r.benchmark for r in self.runs))


def rank_tier(plan: Any, request: Request, *, ctx: ProxyContext, compose_score: Callable[[list[str]], Any] | None = None,
              run_score: Callable[[Any], Any] | None = None, history: History | None = None,
              history_plan: Any = None) -> RankResult:
    """The whole stage on an expanded tier ``plan`` (every tier seed and every proxy seed of it): see the module
    docstring. ``history``: given (tests, the retrospective), else loaded as the request says (``history_plan``: the
    tier expanded for the store's other encoders, :func:`gate.ranking.stage.store_history_plan`)."""
    from gate.ranking.history import load as load_history

    check_score_heads(plan, request.prior, "prior")
    check_score_heads(plan, request.baseline_scores, "baseline_scores")
    entries, dropped = proxy_entries(plan, request.proxy_seeds)
    for line in dropped:
        ctx.echo(f"[gate] rank  left out: {line}", flush=True)
    records = ctx.records()
    configs = {e: next(x.config["encoder"] for x in plan.experiments if x.encoder == e) for e in plan.encoders}
    check_against_plan(request, plan, entries, records, configs)
    pool = list(plan.encoders)
    tier_seeds = list(plan.tier.seeds)
    truth = from_store(plan, records, list(entries), seeds=tier_seeds)
    truth_pool = dataclasses.replace(truth, values=truth.values.reindex(index=pool))
    complete_truth = [b for b in entries if b in truth_pool.values.columns and truth_pool.values[b].notna().all()]
    full_ranked = [b for b in complete_truth if request.use_full_runs]
    candidates = [b for b in entries if b not in full_ranked]
    if history is None:
        history = load_history(request.history, plan=plan, records=records, benchmarks=list(entries),
                               others=history_plan)
    history = history.without(pool)  # the leakage rule: never a row of the pool
    if history_plan is not None:
        stored = [e for e in history_plan.encoders if e in history.values.index]
        ctx.echo(f"[gate] rank  history: the store's full runs of {len(stored)} encoder(s) outside the pool"
                 + (f" ({', '.join(stored)})" if stored else " under this tier's protocol"), flush=True)
    groups = {**history.groups, **{b: str(next(iter(entries[b][request.proxy_seeds[0]].values())).config["dataset"]
                                       .get("paper_group") or b) for b in entries}}
    params = encoder_params(plan, records)
    ledger = Ledger(budget=request.budget)
    made = stored_proxy_runs(records, pool, list(entries), request.proxy_seeds)
    prices = Prices(plan, records, entries, pool, proxy_seed=request.proxy_seeds[0], tier_seeds=tier_seeds,
                    params=params, made=made, ledger=ledger)
    full_steps, block_seconds, block_bound = prices.full_steps, prices.block_seconds, prices.block_bound
    prefer = stored_fractions(made, full_steps, request.run_fraction, request.val_points)

    full_seconds = prices.predict_full()
    ledger.planned_full = full_seconds
    budget_seconds = request.budget * full_seconds
    # halving=contested: the first allocation in a share of the budget, the rest to the least settled pairs
    share = halving.FIRST_SHARE if request.halving == "contested" else 1.0
    scored_benches = [b for b in entries if family(prices.exp(b, pool[0]).config["dataset"].get("task")).transferability]
    prior_seconds = (_prior_seconds(records, pool, scored_benches, _score_names(request.prior))
                     if request.prior and scored_benches else 0.0)

    chooser = select.Chooser(history, candidates, groups=groups, min_per_family=request.min_per_family)
    # benchmarks whose proxy runs no encoder learnt (proxy.no_skill): never re-chosen; an earlier call's stored runs
    # as long as any this call could make say so before planning (re-read, they would cost their seconds again)
    unlearnt = stored_no_skill(records, pool, candidates, request.proxy_seeds, {
        b: planning.proxy_steps(full_steps[b], request.run_fraction, request.val_points)[0] for b in candidates})
    for bench, why_not in unlearnt.items():
        ctx.echo(f"[gate] rank  {bench} left out before planning: its stored proxy runs show {why_not}", flush=True)

    def choose(cost: Mapping[str, float], affordable: float) -> Any:
        if not unlearnt:
            return _selection(request, chooser, history, candidates, cost, affordable, n_boot=0)
        # priced out, so the rule takes its group's next cheapest; and never chosen, whatever the selection says
        sel = _selection(request, chooser, history, candidates,
                         {b: math.inf if b in unlearnt else c for b, c in cost.items()}, affordable, n_boot=0)
        return dataclasses.replace(sel, chosen=tuple(b for b in sel.chosen if b not in unlearnt))

    def first_plan(seconds: float) -> planning.Plan:
        return planning.make_plan(candidates=candidates, full_steps=full_steps, proxy_seeds=request.proxy_seeds,
                                  run_fraction=request.run_fraction, val_points=request.val_points,
                                  budget_seconds=seconds, full_seconds=full_seconds, block_seconds=block_seconds,
                                  choose=choose, prior_seconds=prior_seconds,
                                  with_prior=bool(request.prior and scored_benches), prefer=prefer,
                                  block_bound=block_bound)

    if candidates:
        the_plan = first_plan(share * budget_seconds)
        if share < 1 and the_plan.kind != "proxy":
            share, the_plan = 1.0, first_plan(budget_seconds)
            ctx.echo(f"[gate] plan: halving=contested: no proxy run fits {halving.FIRST_SHARE:g} of the budget, so "
                     f"the whole budget is planned at once (no second allocation)", flush=True)
        elif share < 1:
            ctx.echo(f"[gate] plan: halving=contested: the first allocation is planned in {halving.FIRST_SHARE:g} of "
                     f"the budget; the rest goes to the encoders of the pairs its blocks leave least settled",
                     flush=True)
    else:
        the_plan = planning.Plan("proxy", (), (), (), 0.0, 0.0, 0.0, budget_seconds, full_seconds,
                                 "every benchmark is ranked by its stored full runs")
    selection = the_plan.selection
    if selection is not None:  # the final choice's stability, measured once
        selection = _selection(request, chooser, history, candidates,
                               {b: the_plan.planned_seconds for b in candidates} if not the_plan.blocks else
                               {b: sum(block_bound(b, seed, *planning.proxy_steps(
                                   full_steps[b], the_plan.fraction, request.val_points)) for seed in the_plan.seeds)
                                for b in candidates},
                               the_plan.budget_seconds - the_plan.prior_seconds, n_boot=20)
    ledger.planned_total = the_plan.planned_seconds
    ctx.echo(f"[gate] plan: {the_plan.why}; {plan_line(the_plan, full_steps)}", flush=True)
    if the_plan.blocks and prices.model.observations:
        ctx.echo(f"[gate] plan: {prices.model.margin_line()}", flush=True)

    # the prior: scores (their feature passes, first) and static facts
    scores: Scores = {}
    degenerate: Scores = {}
    prior_components: dict[str, pd.Series] = {}
    prior_ran = bool(the_plan.with_prior and compose_score and run_score)
    if prior_ran:
        scores, spent, degenerate = score_values(plan, scored_benches, request.prior, compose_score=compose_score,
                                                 run_score=run_score, records=ctx.records, echo=ctx.echo, key="prior")
        ledger.plan("prior", the_plan.prior_seconds)
        ledger.spend("prior", sum(spent.values()))
        for name in request.prior:
            r = score_ranks(scores.get(name, {}), pool)
            if r is not None:
                prior_components[f"score:{name}"] = r
    static = static_rankings(static_names(request.static), pool, params, configs)
    prior_components.update({f"static:{k}": v for k, v in static.items()})
    prior_ranking = priors.combine(prior_components) if prior_components else None
    # the prior's own reliability, where the store holds its scores of the history's encoders (not the pool's)
    prior_tau = math.nan
    if prior_ran and history_plan is not None:
        prior_tau, rated = prior_history_tau(history, history_plan, list(entries), scored_benches, request.prior,
                                             list(static), compose_score=compose_score, records=records,
                                             min_encoders=select.MIN_HISTORY)
        if math.isfinite(prior_tau):
            ctx.echo(f"[gate] rank  the prior ranks the history's {len(rated)} encoders at τ {prior_tau:.2f} (their "
                     f"stored scores against their full runs)", flush=True)
    order = list(prior_ranking.sort_values(kind="stable").index) if prior_ranking is not None else pool

    # the proxy, re-planned before every block (with what is left of the budget and the costs measured so far)
    runs: list[ProxyRun] = []

    stopped: dict[tuple[int, str], str] = {}  # (seed, benchmark) → why its block stopped before its last run

    def run_one(block: planning.Block) -> None:
        experiments = entries[block.benchmark][block.seed]
        planned = {e: prices.run_seconds(block.benchmark, e, block.steps, block.val_every) for e in pool}
        got: list[ProxyRun] = []
        # halving=contested continues some of them: their last checkpoints stay until it has
        for r in run_block(block, experiments, ctx, full_steps=full_steps[block.benchmark], planned=planned,
                           order=order, keep="all" if share < 1 else "none"):
            got.append(r)
            ledger.plan(f"run {r.experiment}", r.planned)
            ledger.spend(f"run {r.experiment}", r.seconds)
            prices.observe(r, experiments[r.encoder], block)
            # a block runs whole only while the budget holds it: its remaining runs, predicted by the model as it
            # stands times the speed measured, must fit in what is left of the budget of the full tier as now
            # predicted (a block the store's quiet runs priced can meet a loaded machine)
            left = [e for e in order if e not in {g.encoder for g in got}]
            if not left:
                continue
            projected = prices.projected(block, left)
            if projected > request.budget * (1 + OVERRUN_TOLERANCE):
                why = (f"stopped after {len(got)} of {len(order)} runs: at the speed measured ({prices.speed:.2f}× "
                       f"what the store's runs of the same encoders predict) the other {len(left)} would pass the "
                       f"budget ({projected:.3f} of the full tier against {request.budget})")
                stopped[(block.seed, block.benchmark)] = why
                ctx.echo(f"[gate] rank  {block.benchmark} seed {block.seed} {why}; its runs are left out of the "
                         f"ranking (their seconds count)", flush=True)
                break
        runs.extend(got)
        # every seed's runs of it so far, of whole blocks: a block stopped short has not run every encoder
        why_not = no_skill([r for r in runs if r.benchmark == block.benchmark and (r.seed, r.benchmark) not in stopped])
        if why_not and block.benchmark not in unlearnt:
            unlearnt[block.benchmark] = why_not
            ctx.echo(f"[gate] rank  {block.benchmark} left out of the ranking: {why_not}; re-planned without it "
                     f"(its seconds count)", flush=True)
        prices.predict_full()

    def replan(done_pairs: frozenset, fraction: float) -> planning.Plan:
        # the run length chosen up front stays (or shrinks): growth adds seeds and benchmarks, never longer runs
        # beside the shorter ones already made
        full_now = ledger.full_seconds or full_seconds
        return planning.make_plan(candidates=candidates, full_steps=full_steps, proxy_seeds=request.proxy_seeds,
                                  run_fraction=fraction, val_points=request.val_points,
                                  budget_seconds=share * request.budget * full_now - (ledger.spent_seconds or 0.0),
                                  full_seconds=full_now, block_seconds=block_seconds, choose=choose,
                                  prior_seconds=0.0, with_prior=False, done=done_pairs, block_bound=block_bound)

    done = execute(the_plan, replan, run_one, replan_first=prior_ran)
    ran = {(d.seed, d.benchmark) for d in done}
    planned_pairs = {(b.seed, b.benchmark) for b in the_plan.blocks}
    if ran != planned_pairs:
        dropped_blocks = sorted(planned_pairs - ran)
        added = sorted(ran - planned_pairs)
        ctx.echo("[gate] plan: re-planned on the costs measured:"
                 + (f" dropped {', '.join(f'{b} seed {s}' for s, b in dropped_blocks)}" if dropped_blocks else "")
                 + (f" added {', '.join(f'{b} seed {s}' for s, b in added)}" if added else ""), flush=True)

    # the ranking: every run but those of a benchmark no encoder learnt and of a block stopped short (their values
    # are listed, not ranked)
    ranked_runs = [r for r in runs if r.benchmark not in unlearnt and (r.seed, r.benchmark) not in stopped]
    contests: list[halving.Contest] = []
    extended: list[str] = []
    superseded: set[int] = set()  # id() of the shorter runs a longer run replaced
    if share < 1 and ranked_runs:
        contests, extended, longer = extend_contested(ranked_runs, pool, done, entries, ctx, prices, ledger,
                                                      request.budget)
        runs.extend(longer)
        final = {(r.encoder, r.seed, r.benchmark): r for r in [*ranked_runs, *longer]}  # the longest of each
        superseded = {id(r) for r in [*ranked_runs, *longer] if final[(r.encoder, r.seed, r.benchmark)] is not r}
        ranked_runs = list(final.values())
        for r in runs:  # the checkpoints kept for continuing go, as any proxy run's do
            if r.run_dir is not None:
                shutil.rmtree(checkpoints_folder(r.run_dir), ignore_errors=True)
    predictions, seeds_table, proxy_rank, flagged = _proxy_ranking(ranked_runs, pool, candidates, full_ranked,
                                                                    truth_pool, history, selection, done)
    if len(ranked_runs) < len(runs):
        predictions = pd.concat([predictions, pd.DataFrame([
            {"encoder": r.encoder, "benchmark": r.benchmark, "seed": r.seed, "value": r.value, "lo": r.lo, "hi": r.hi,
             "source": "superseded" if id(r) in superseded else "no skill" if r.benchmark in unlearnt else "stopped",
             "method": r.method, "steps": r.steps, "best": r.best} for r in runs if r not in ranked_runs])],
            ignore_index=True)
    history_tau = selection.tau if selection is not None else math.nan
    seed_rankings = [seeds_table[c] for c in seeds_table.columns]
    decision = priors.decide(proxy_ran=bool(ranked_runs) or bool(full_ranked),
                             seed_agreement=priors.agreement(seed_rankings) if len(seed_rankings) > 1 else math.nan,
                             history_tau=history_tau, prior_available=prior_ranking is not None and any(
                                 k.startswith("score:") for k in prior_components),
                             prior_history_tau=prior_tau, static_available=bool(static))
    if runs and not ranked_runs and not full_ranked:
        decision = priors.Decision(decision.source, "; ".join(
            [f"no encoder learnt any benchmark the proxy ran ({', '.join(unlearnt)})"] * bool(unlearnt)
            + [f"the budget stopped {', '.join(f'{b} seed {s}' for s, b in stopped)} before its last run"] * bool(stopped)))
    if decision.source == "proxy" and proxy_rank is not None:
        final = proxy_rank
    elif decision.source in ("prior", "static") and prior_ranking is not None:
        final = prior_ranking
        predictions = pd.concat([predictions, pd.DataFrame([{"encoder": e, "benchmark": "(tier)", "value": -v,
                                                              "lo": math.nan, "hi": math.nan, "source": "prior"}
                                                             for e, v in prior_ranking.items()])], ignore_index=True)
    else:
        final = pd.Series(np.arange(1, len(pool) + 1, dtype=float), index=pool)
        decision = priors.Decision("static", decision.why + "; nothing ranks the pool: the pool's own order")
    tier_ranking = pd.DataFrame({"mean_rank": final, "rank": final.rank(method="min")}).sort_values("mean_rank",
                                                                                               kind="stable")
    if flagged:
        ctx.echo(f"[gate] rank  outside the history's range, ranked by their observed benchmarks: {', '.join(flagged)}",
                 flush=True)
    result = RankResult(tier_ranking, decision.source, decision.why, the_plan, selection, runs, predictions,
                        seeds_table, prior_ranking, static, scores, degenerate, ledger, dropped, full_ranked, truth_pool,
                        dict(unlearnt), {f"{b} seed {s}": why for (s, b), why in stopped.items()},
                        contests=contests, extended=extended)
    if request.validate and complete_truth and len(truth_pool.values.dropna().index) == len(pool):
        validated = [b for b in complete_truth if b in candidates] or complete_truth
        result.validation, result.ceiling, result.paired = validate(result, truth_pool, validated, pool, request,
                                                                    plan, compose_score, run_score, ctx)
    return result


def extend_contested(ranked_runs: Sequence[ProxyRun], pool: Sequence[str], done: Sequence[planning.Block],
                     entries: Mapping[str, Any], ctx: ProxyContext, prices: Prices, ledger: Ledger, budget: float
                     ) -> tuple[list[halving.Contest], list[str], list[ProxyRun]]:
    """halving=contested's second allocation (:mod:`gate.ranking.halving`), in rounds while the budget lasts: the
    pairs judged on the runs ranked so far, the encoders of the least settled ones whose longer runs fit what is
    left of the budget (priced as a plan prices a block: with the margin, at the speed measured), and those runs,
    made one at a time while the budget holds them at the speed measured (the seconds of a run once started count
    whole). A longer run continues its shorter run from that run's last checkpoint where it is kept (priced then at
    the steps it adds). Returns the last judgement, the encoders lengthened and their runs (the longest of each)."""
    every = {(d.seed, d.benchmark): d.val_every for d in done}
    current = {(r.encoder, r.seed, r.benchmark): r for r in ranked_runs}
    extended: list[str] = []
    made: list[ProxyRun] = []

    def start(r: ProxyRun) -> Path | None:
        last = checkpoints_folder(r.run_dir) / LAST_CHECKPOINT if r.run_dir is not None else None
        return last if last is not None and last.exists() else None

    def seconds(b: planning.Block, r: ProxyRun, bound: bool = False) -> float:
        added = b.steps - r.steps if start(r) is not None else b.steps
        return prices.run_seconds(b.benchmark, r.encoder, added, b.val_every, bound=bound)

    while True:
        contests = halving.contests(list(current.values()), pool)
        todo: dict[str, list[tuple[planning.Block, ProxyRun]]] = {}
        for r in current.values():
            steps = halving.longer_steps(r.steps, every[(r.seed, r.benchmark)], prices.full_steps[r.benchmark])
            if steps is not None:
                todo.setdefault(r.encoder, []).append(
                    (planning.Block(r.seed, r.benchmark, steps, every[(r.seed, r.benchmark)], 0.0), r))
        left = budget * prices.predict_full() - (ledger.spent_seconds or 0.0)
        price = {enc: sum(seconds(b, r, True) for b, r in runs_of) for enc, runs_of in todo.items()}
        chosen, bound = halving.choose(contests, price.get, left)
        planned = [(b, r, seconds(b, r)) for enc in chosen for b, r in todo[enc]]
        ctx.echo(f"[gate] rank  halving: least settled pairs {halving.contest_line(contests)}; "
                 + (f"longer runs of {', '.join(chosen)} ({len(planned)} run(s), {minutes(bound)} with the margin, "
                    f"of {minutes(left)} left)" if chosen else
                    f"no contested encoder's longer runs fit the {minutes(left)} left" if any(
                        c.certainty < 1 for c in contests) else "every pair is settled: nothing to lengthen"),
                 flush=True)
        if not chosen:
            return contests, extended, made
        ledger.planned_total += sum(p for _, _, p in planned)
        extended += [e for e in chosen if e not in extended]
        for block, shorter, predicted in planned:
            if prices.fraction_after(predicted * prices.speed) > budget * (1 + OVERRUN_TOLERANCE):
                ctx.echo(f"[gate] rank  halving stopped before {shorter.encoder}'s {block.benchmark} seed "
                         f"{block.seed}: at the speed measured it would pass the budget", flush=True)
                return halving.contests(list(current.values()), pool), extended, made
            enc, experiments, from_ = shorter.encoder, entries[block.benchmark][block.seed], start(shorter)
            for r in run_block(block, experiments, ctx, full_steps=prices.full_steps[block.benchmark],
                               planned={enc: predicted}, order=[enc], keep="all",
                               continue_from={enc: (from_, shorter.steps)} if from_ is not None else None):
                ledger.plan(f"run {r.experiment}", r.planned)
                ledger.spend(f"run {r.experiment}", r.seconds)
                prices.observe(r, experiments[enc], block)
                made.append(r)
                current[(r.encoder, r.seed, r.benchmark)] = r


def _stored_proxy_records(records: Sequence[Mapping[str, Any]], pool: Sequence[str], benches: Iterable[str],
                          seeds: Sequence[int]) -> Iterable[tuple[Mapping[str, Any], int, int]]:
    """(validation record, steps, validate every) of each fine-tuning run the store holds for the pool's encoders on
    ``benches`` at the proxy seeds: what an earlier gate-rank call ran."""
    benches = set(benches)
    for r in records:
        if (r.get("kind") != "finetune" or r.get("split") != "val" or r.get("encoder") not in pool
                or r.get("dataset") not in benches or r.get("seed") not in seeds):
            continue
        trainer = (r.get("config") or {}).get("trainer") or {}
        steps, every = trainer.get("max_steps"), trainer.get("val_check_interval")
        if isinstance(steps, int) and isinstance(every, int):
            yield r, steps, every


def stored_proxy_runs(records: Sequence[Mapping[str, Any]], pool: Sequence[str], benches: Sequence[str],
                      seeds: Sequence[int]) -> dict[tuple[str, str, int, int, int], float]:
    """(encoder, benchmark, seed, steps, validate every) → wall seconds (NaN: not recorded) of the fine-tuning runs
    the store holds for the pool's proxy seeds: what an earlier gate-rank call ran, read back instead of trained
    (the run itself is matched by its experiment id when the block runs)."""
    out = {}
    for r, steps, every in _stored_proxy_records(records, pool, benches, seeds):
        wall = (r.get("facts") or {}).get("wall_seconds")
        out[(str(r["encoder"]), str(r["dataset"]), int(r["seed"]), steps, every)] = (
            float(wall) if isinstance(wall, (int, float)) else math.nan)
    return out


def stored_no_skill(records: Sequence[Mapping[str, Any]], pool: Sequence[str], benches: Sequence[str],
                    seeds: Sequence[int], longest: Mapping[str, int]) -> dict[str, str]:
    """Benchmark → why no encoder learnt it (:func:`gate.ranking.proxy.no_skill`), judged on the stored proxy runs
    of every encoder of the pool (the proxy seeds', an earlier call's) at least ``longest[benchmark]`` steps long:
    the longest run this call could make, so no run of it could learn more."""
    rows: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
    for r, steps, _ in _stored_proxy_records(records, pool, longest, seeds):
        if steps >= longest[str(r["dataset"])]:
            rows.setdefault((str(r["dataset"]), str(r["encoder"]), int(r["seed"]), steps), []).append(dict(r))
    out = {}
    for bench in benches:
        runs = []
        for (b, enc, seed, steps), found in rows.items():
            if b == bench:
                monitor, hib, best, value, lo, hi, method, facts = read_run(found, steps)
                runs.append(ProxyRun(enc, b, seed, steps, str(found[0].get("experiment")), monitor, hib, best, value,
                                     lo, hi, method, None, math.nan, True, facts))
        if {r.encoder for r in runs} >= set(pool) and (why_not := no_skill(runs)):
            out[bench] = why_not
    return out


def stored_fractions(made: Mapping[tuple[str, str, int, int, int], float], full_steps: Mapping[str, int], run_fraction: float,
                     val_points: int) -> tuple[float, ...]:
    """The run fractions of the planner's ladder whose runs the store already holds (most runs first): a rerun
    plans them before any other, so it reads back what an earlier call ran instead of training anew."""
    counts: dict[float, int] = {}
    for fraction in planning.fractions(run_fraction):
        n = sum(1 for (_, bench, _, steps, every) in made if bench in full_steps
                and planning.proxy_steps(full_steps[bench], fraction, val_points) == (steps, every))
        if n:
            counts[fraction] = n
    return tuple(sorted(counts, key=lambda f: -counts[f]))


def execute(first: planning.Plan, replan: Callable[[frozenset, float], planning.Plan],
            run: Callable[[planning.Block], None], *, replan_first: bool = False) -> list[planning.Block]:
    """Run ``first``'s blocks one at a time, re-planning before each (``replan(done, fraction)``: a plan for what is
    left, made from the costs measured so far) — before the first too where ``replan_first`` (the prior's passes
    ran, and cost what they cost); returns the blocks run (``run`` may stop one short: see :func:`rank_tier`)."""
    done: list[planning.Block] = []
    blocks = list(first.blocks) if first.kind == "proxy" else []
    fraction = first.fraction or 1.0
    if blocks and replan_first:
        current = replan(frozenset(), fraction)
        blocks = list(current.blocks) if current.kind == "proxy" else []
        fraction = current.fraction or fraction
    while blocks:
        block = blocks[0]
        run(block)
        done.append(block)
        current = replan(frozenset((d.seed, d.benchmark) for d in done), fraction)
        blocks = ([b for b in current.blocks if (b.seed, b.benchmark) not in {(d.seed, d.benchmark) for d in done}]
            if current.kind == "proxy" else [])
        fraction = current.fraction or fraction
    return done


def _selection(request: Request, chooser: select.Chooser, history: History, candidates: Sequence[str],
               cost: Mapping[str, float], affordable: float, n_boot: int) -> Any:
    pb = request.proxy_benchmarks
    if pb == "auto":
        return chooser(cost, affordable, n_splits=20 if n_boot else 0, n_boot=n_boot)
    if pb == "first":  # v1's rule: the tier file's first benchmarks, as many as the budget affords
        chosen, spent = [], 0.0
        for b in candidates:
            if chosen and spent + cost[b] > affordable + 1e-9:
                break
            chosen.append(b)
            spent += cost[b]
        why = "the tier file's order (proxy_benchmarks=first)"
    else:
        chosen = list(candidates) if pb is None else [b for b in candidates if b in pb]
        why = "every benchmark (proxy_benchmarks=null)" if pb is None else "named by proxy_benchmarks"
    return select.Selection(tuple(chosen), "given", dict.fromkeys(chosen, why), math.nan, math.nan, math.nan, {},
                            history.fingerprint(), len(history.values))


def _proxy_ranking(runs: Sequence[ProxyRun], pool: Sequence[str], candidates: Sequence[str], full_ranked: Sequence[str],
                   truth: History, history: History, selection: Any, done: Sequence[planning.Block]
                   ) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series | None, list[str]]:
    """The proxy's predictions (each cell observed, completed, out of range or from full runs), each proxy seed's
    tier ranking, the combined tier ranking (mean over seeds; lower is better) and the encoders out of the
    history's range."""
    rows = []
    per_seed: dict[int, dict[str, dict[str, float]]] = {}
    for r in runs:
        per_seed.setdefault(r.seed, {}).setdefault(r.benchmark, {})[r.encoder] = r.oriented
        rows.append({"encoder": r.encoder, "benchmark": r.benchmark, "seed": r.seed, "value": r.value, "lo": r.lo,
                     "hi": r.hi, "source": "observed", "method": r.method, "steps": r.steps, "best": r.best})
    full_cols = {b: truth.values.loc[list(pool), b] for b in full_ranked}
    for b, col in full_cols.items():
        rows += [{"encoder": e, "benchmark": b, "seed": math.nan, "value": float(col[e]), "lo": math.nan, "hi": math.nan,
                  "source": "full", "method": "stored full runs", "steps": math.nan, "best": math.nan} for e in pool]
    seed_ranks = {}
    for s, benches in per_seed.items():
        cols = {b: v for b, v in benches.items() if all(e in v for e in pool)}
        cols.update(full_cols)
        if cols:
            seed_ranks[s] = pd.Series(complete.mean_rank(pd.DataFrame(cols).reindex(list(pool)).to_numpy(float)),
                                      index=list(pool))
    seeds_table = pd.DataFrame(seed_ranks)
    observed_benches = sorted({b for benches in per_seed.values() for b in benches}, key=list(candidates).index)
    if not observed_benches and not full_cols:
        return pd.DataFrame(rows), seeds_table, None, []
    # one value per encoder × benchmark: the mean over the proxy seeds (oriented), the full runs' where ranked by them
    mean = {b: {e: float(np.mean([per_seed[s][b][e] for s in per_seed if b in per_seed[s] and e in per_seed[s][b]]))
                for e in pool} for b in observed_benches}
    observed = pd.DataFrame({**mean, **full_cols}).reindex(list(pool))
    flagged: list[str] = []
    others = [b for b in candidates if b not in observed.columns]
    use = (selection is not None and getattr(selection, "use_completion", False) and others and
        history.usable([*observed_benches, *others], select.MIN_HISTORY))
    if use:
        comp = complete.fit(history, list(observed.columns), others)
        pred = complete.predict_tier(observed, [*observed.columns, *others], comp)
        ranking = pred.mean_rank
        flagged = pred.flagged
        filled = comp.predict(observed)
        for b in others:
            for e in pool:
                rows.append({"encoder": e, "benchmark": b, "seed": math.nan, "value": float(filled.loc[e, b]),
                             "lo": float(filled.loc[e, b] + comp.interval.loc[b, "lo"]),
                             "hi": float(filled.loc[e, b] + comp.interval.loc[b, "hi"]),
                             "source": "fallback" if e in flagged else "completed", "method": "ridge on the history",
                             "steps": math.nan, "best": math.nan})
    else:
        ranking = pd.Series(complete.mean_rank(observed.to_numpy(float)), index=list(pool))
    return pd.DataFrame(rows), seeds_table, ranking, flagged


# ------------------------------------------------------------------------------------------------ output


def plan_line(p: planning.Plan, full_steps: Mapping[str, int]) -> str:
    """The plan in one line: what runs, at what predicted cost, against the budget."""
    if p.kind != "proxy" or not p.blocks:
        return (f"predicted {minutes(p.planned_seconds)} of a budget of {minutes(p.budget_seconds)} "
                f"({shown(p.planned_fraction)} of the full tier)")
    steps = {b.benchmark: b.steps for b in p.blocks}
    return (f"{len(p.seeds)} proxy seed(s) × {', '.join(f'{b} ({steps[b]} of {full_steps[b]} steps)' for b in p.benchmarks)}"
            f"; predicted {minutes(p.planned_seconds)} of a budget of {minutes(p.budget_seconds)} "
            f"(planned fraction {shown(p.planned_fraction)})")


def compute_line(result: RankResult) -> str:
    led = result.ledger
    basis = sorted(set(led.full_basis.values()))
    missing = f"; not measured: {', '.join(led.unmeasured)}" if led.unmeasured else ""
    return (f"[gate] compute: {minutes(led.spent_seconds)} spent of {minutes(led.planned_total)} planned "
            f"(cost model, item by item: spent/predicted {shown(led.planned_vs_spent, '.2f')}); "
            f"the full tier {minutes(led.full_seconds)} "
            f"({'/'.join(basis) or '—'}{led.new_family_note()}) → {shown(led.fraction)} of it (planned "
            f"{shown(led.planned_fraction)}, budget {led.budget}){missing}")


#: Why a benchmark the selection did not choose was run: the re-plan before a block found budget for it.
ADDED_WHY = "added when re-planned: the costs measured left budget for it"


def selection_rows(sel: Any, ran: Sequence[str], also: Iterable[str] = (),
                   unlearnt: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per benchmark the selection chose or the proxy ran (then ``also``): whether chosen, whether run, why
    (and, for a benchmark no encoder learnt, that it was left out of the ranking)."""
    unlearnt = unlearnt or {}
    return [{"benchmark": b, "chosen": b in sel.chosen, "ran": b in ran,
             "why": (sel.why.get(b, "") or (ADDED_WHY if b in ran else ""))
             + (f"; left out of the ranking: {unlearnt[b]}" if b in unlearnt else "")}
            for b in dict.fromkeys([*sel.chosen, *ran, *also])]


def benchmarks_run_line(result: RankResult) -> str | None:
    """The printout's line on the benchmarks the proxy ran, naming those a re-plan added or dropped (None: no
    selection)."""
    sel, ran = result.selection, result.benchmarks_run
    if sel is None or not (sel.chosen or ran):
        return None
    added = [b for b in ran if b not in sel.chosen]
    dropped = [b for b in sel.chosen if b not in ran]
    changes = "".join([f"; added when re-planned: {', '.join(added)}" if added else "",
                       f"; chosen, not run: {', '.join(dropped)}" if dropped else "",
                       f"; left out of the ranking, no encoder learnt it: {', '.join(result.unlearnt)}"
                       if result.unlearnt else "",
                       f"; stopped short by the budget, left out: {', '.join(result.stopped)}" if result.stopped else ""])
    return (f"[gate] benchmarks run: {', '.join(ran) or 'none'} ({sel.method}: {', '.join(sel.chosen) or 'none'}"
            f"{changes}; held-out τ on the history {shown(sel.tau)}, completion "
            f"{'used' if sel.use_completion else 'not used'})")


def halving_line(result: RankResult) -> str | None:
    """halving=contested's second allocation in one line (None: the call made none)."""
    if not result.contests:
        return None
    longer = [r for r in result.runs if r.encoder in result.extended and any(
        o.encoder == r.encoder and o.seed == r.seed and o.benchmark == r.benchmark and o.steps < r.steps
        for o in result.runs)]
    return (f"[gate] halving: least settled pairs {halving.contest_line(result.contests)}; "
            + (f"{len(longer)} longer run(s) of {', '.join(result.extended)} replaced their shorter ones"
               if result.extended else "no run lengthened"))


def rule_line(result: RankResult) -> str | None:
    """Where the selection fell back to its stated rule (no usable history), what that rule cannot see and how to
    choose instead (None otherwise): on pool C it ran a benchmark no encoder learns at that length (docs/ranking.md);
    the no-skill guard (:func:`gate.ranking.proxy.no_skill`) catches such a benchmark only after its runs, and only
    where its metric has a constant no-skill value."""
    sel = result.selection
    if sel is None or sel.method != "rule" or not sel.chosen:
        return None
    return ("[gate] rule: no usable history (other encoders' full runs of these benchmarks; the pool's own never "
            "count), so one benchmark per paper group, cheapest first: before its runs it cannot tell a benchmark no "
            "encoder learns at this length from a cheap one (after them, one whose metric has a no-skill value, r2 or "
            "AUC, is left out) — proxy_benchmarks=[…] names the benchmarks to run")


def write_outputs(result: RankResult, out: Path) -> dict[str, Path]:
    """The tables: selection.csv, predictions.csv, tier_ranking.csv, seeds.csv, cost.csv, ledger.json, with
    halving=contested contested.csv and, with a validation, validation.csv, ceiling.json and paired.csv."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    sel = result.selection
    if sel is not None:
        rows = [{**row, "stability": sel.stability.get(row["benchmark"], math.nan), "method": sel.method,
                 "held_out_tau": sel.tau, "held_out_tau_completed": sel.tau_completed,
                 "held_out_tau_plain": sel.tau_plain, "completion_used": sel.use_completion,
                 "history_fingerprint": sel.fingerprint, "history_encoders": sel.history_encoders}
                for row in selection_rows(sel, result.benchmarks_run, also=sel.stability, unlearnt=result.unlearnt)]
        files["selection"] = out / "selection.csv"
        pd.DataFrame(rows).to_csv(files["selection"], index=False)
    files["predictions"] = out / "predictions.csv"
    result.predictions.to_csv(files["predictions"], index=False)
    files["tier_ranking"] = out / "tier_ranking.csv"
    result.tier_ranking.assign(source=result.source).to_csv(files["tier_ranking"], index_label="encoder")
    files["seeds"] = out / "seeds.csv"
    seeds = result.seeds.copy()
    seeds.columns = [f"seed {c}" for c in seeds.columns]
    seeds.to_csv(files["seeds"], index_label="encoder")
    files["cost"] = out / "cost.csv"
    pd.DataFrame([{"item": k, "planned_seconds": result.ledger.planned.get(k), "spent_seconds": result.ledger.spent.get(k)}
                  for k in dict.fromkeys([*result.ledger.planned, *result.ledger.spent])]).to_csv(files["cost"], index=False)
    files["ledger"] = out / "ledger.json"
    files["ledger"].write_text(json.dumps(result.ledger.to_json(), indent=1, allow_nan=False))
    if result.contests:
        files["contested"] = out / "contested.csv"
        pd.DataFrame([{"encoder_a": c.a, "encoder_b": c.b, "certainty": c.certainty, "blocks": c.blocks,
                       "lengthened": c.a in result.extended or c.b in result.extended}
                      for c in result.contests]).to_csv(files["contested"], index=False)
    if result.validation is not None:
        files["validation"] = out / "validation.csv"
        result.validation.to_csv(files["validation"], index=False)
        files["ceiling"] = out / "ceiling.json"
        files["ceiling"].write_text(json.dumps(result.ceiling, indent=1, allow_nan=False))
        files["paired"] = out / "paired.csv"
        (result.paired if result.paired is not None else pd.DataFrame()).to_csv(files["paired"], index=False)
    return files


def predicted_footnote(result: RankResult) -> str:
    """What the † on the ranking's mean ranks says: they are a prediction, not GATE's protocol (every benchmark of
    the tier fine-tuned in full, every seed)."""
    how = {"proxy": "short proxy runs (and, where used, their completion to the benchmarks not run)",
           "prior": "zero-training scores", "static": "static facts of the encoders"}.get(result.source, result.source)
    return f"† predicted from {how}, not measured under GATE's protocol (each benchmark fine-tuned in full)"


def seed_agreement_line(result: RankResult) -> str:
    cols = [result.seeds[c] for c in result.seeds.columns]
    if len(cols) < 2:
        return f"[gate] proxy seeds: {len(cols)}"
    return (f"[gate] proxy seeds: {len(cols)}; pairwise τ {shown(priors.agreement(cols), '.2f')}, Kendall's W "
            f"{shown(priors.kendalls_w(cols), '.2f')}")


"""gate-rank's library stage (v2): tier × pool × budget → a ranking of the pool on the whole tier, what it cost against
what was planned, and — where the tier's full runs are stored — how right it was, beside baselines.

The steps (docs/ranking.md has the measurements behind each):

1. :func:`check_request`: every problem that can be known without training, in one line, before anything runs;
2. the **history** (:mod:`gate.ranking.history`): other encoders' full results, never the pool's;
3. the **plan** (:mod:`gate.ranking.plan`): costs predicted by the **cost model** (:mod:`gate.ranking.cost`) from the
   store's records, the benchmarks **chosen from the history** (:mod:`gate.ranking.select`), shrunk until it fits:
   fewer proxy seeds, then fewer benchmarks, then shorter runs, then the prior, then the static ranking;
4. the **prior** (:mod:`gate.ranking.prior`): zero-training scores and static facts, which order the first allocation;
5. the **proxy** (:mod:`gate.ranking.proxy`): one run per encoder per (proxy seed, benchmark), each ranked on its
   validation curve extrapolated to the full run's steps (:mod:`gate.ranking.curves`), re-planned before every block;
6. the **tier ranking**: the mean over proxy seeds, with the benchmarks not run predicted where the history says that
   wins (:mod:`gate.ranking.complete`), or the prior's where the proxy is the less reliable (:func:`prior.decide`);
7. the **validation** (:func:`validate`): τ against the full runs' mean, the leave-one-seed-out ceiling, top-3 recall,
   top-1 regret and paired bootstrap comparisons with the baselines.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gate.analysis.ranks import kendall
from gate.errors import ConfigError
from gate.families import family
from gate.ranking import complete, select
from gate.ranking import plan as planning
from gate.ranking import prior as priors
from gate.ranking.budget import OVERRUN_TOLERANCE, Ledger, finite_or_none, minutes, shown
from gate.ranking.history import History, from_store
from gate.ranking.pricing import Prices, encoder_params
from gate.ranking.proxy import ProxyContext, ProxyRun, no_skill, read_run, run_block
from gate.settings import AUTO, yaml_defaults

MIN_ENCODERS = 3
POOL_SCORES = ("ncti",)  # scores defined over a pool from per-encoder terms (gate.transferability.collapse.ncti)
#: gate-rank v1's keys, refused naming what replaced them.
RETIRED = {
    "seed": "proxy_seeds (a list of seeds outside the tier's; the proxy runs each and ranks by their mean)",
    "cost_probe_steps": "the cost model (gate/ranking/cost.py): costs are predicted from the store's records, never "
                        "timed by a probe",
    "overhead_steps": "the cost model's fixed seconds per run, fitted on the store's records",
    "eta": "nothing: successive halving was removed (one run per encoder ranked better, docs/ranking.md)",
    "max_rungs": "nothing: successive halving was removed (one run per encoder ranked better, docs/ranking.md)",
    "scores": "prior (the zero-training scores that order the first allocation and are the fallback)",
    "proxy_without_scores": "nothing: the prior no longer seeds a run; validation compares it as a baseline",
}
#: The baselines every validation compares (their τ beside v2's, paired).
STATIC_BASELINES = priors.STATIC


def known_scores() -> list[str]:
    from gate.transferability import SCORES

    return [*SCORES, *POOL_SCORES]


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


#: gate-rank's defaults, stated once: conf/rank.yaml.
_RANK_YAML = yaml_defaults("rank.yaml")


@dataclasses.dataclass(frozen=True)
class Request:
    """One gate-rank request: the checked settings of conf/rank.yaml (:data:`gate.settings.RANK`), whose values are
    its defaults (the only place that states them), lists as tuples."""

    tier: Any                       # gate.tiers.spec.Tier
    encoders: tuple[str, ...]
    budget: float
    _: dataclasses.KW_ONLY
    history: tuple[str, ...] = _as_tuple(_RANK_YAML["history"])
    proxy_benchmarks: str | tuple[str, ...] | None = _as_tuple(_RANK_YAML["proxy_benchmarks"])  # auto | first | None | names
    min_per_family: int = _RANK_YAML["min_per_family"]
    val_points: int = _RANK_YAML["val_points"]
    proxy_seeds: tuple[int, ...] = _as_tuple(_RANK_YAML["proxy_seeds"])
    run_fraction: float = _RANK_YAML["run_fraction"]
    prior: tuple[str, ...] = _as_tuple(_RANK_YAML["prior"])
    static: str | tuple[str, ...] = _as_tuple(_RANK_YAML["static"])  # auto | names
    baseline_scores: tuple[str, ...] = _as_tuple(_RANK_YAML["baseline_scores"])
    n_boot: int = _RANK_YAML["n_boot"]
    use_full_runs: bool = _RANK_YAML["use_full_runs"]
    validate: bool = _RANK_YAML["validate"]

    @classmethod
    def from_plain(cls, tier: Any, plain: Mapping[str, Any]) -> Request:
        """The request of a checked gate-rank config (:func:`check_request` passed): each field its setting."""
        fields = {f.name: _as_tuple(plain[f.name]) for f in dataclasses.fields(cls)
                  if f.name not in ("tier", "encoders", "budget", "_")}
        if isinstance(fields["history"], str):
            fields["history"] = (fields["history"],)
        return cls(tier, tuple(plain["encoders"]), float(plain["budget"]), **fields)


def check_request(request: Mapping[str, Any]) -> None:
    """Every problem with the request itself (its settings, declared in :data:`gate.settings.RANK`), the pool, the
    score and static names and the history, as one :class:`ConfigError` line, before the tier is expanded."""
    from gate.ranking.history import problems as history_problems
    from gate.settings import RANK, check

    retired = [k for k in RETIRED if k in request]
    problems = [f"{k} was replaced by {RETIRED[k]}" for k in retired]
    problems += check({k: v for k, v in request.items() if k not in retired}, RANK)
    encoders = request.get("encoders")
    if RANK.settings["encoders"].valid(encoders) and len(dict.fromkeys(encoders)) < MIN_ENCODERS:
        problems.append(f"encoders={list(encoders)!r} is invalid: a ranking needs at least {MIN_ENCODERS} distinct "
                        f"encoders (encoder=a,b,c)")
    known = known_scores()
    for key in ("prior", "baseline_scores"):
        names = request.get(key)
        bad = [s for s in names if s not in known] if RANK.settings[key].valid(names) else []
        if bad:
            problems.append(f"{key}: unknown score {', '.join(map(repr, bad))}; known scores are {known}")
    static = request.get("static")
    bad = ([s for s in static if s not in priors.STATIC]
        if static != AUTO and RANK.settings["static"].valid(static) else [])
    if bad:
        problems.append(f"static: unknown fact {', '.join(map(repr, bad))}; known: {list(priors.STATIC)}")
    if RANK.settings["history"].valid(request.get("history")):
        problems += history_problems(request["history"])
    if problems:
        raise ConfigError("; ".join(problems))


def check_against_plan(request: Request, plan: Any, entries: Mapping[str, Any], records: Sequence[Mapping[str, Any]],
                       configs: Mapping[str, Mapping[str, Any]]) -> None:
    """The problems only the expanded tier shows, before any run: ``proxy_benchmarks`` naming a benchmark the tier
    lacks, ``static=[source_top1]`` for an encoder that does not declare it, proxy seeds shared with stored full
    runs (with ``validate``), and an encoder's ``paper_name`` that the paper's table lacks (with history ``paper``)."""
    problems = []
    pb = request.proxy_benchmarks
    if isinstance(pb, tuple):
        unknown = [b for b in pb if b not in entries]
        if unknown:
            problems.append(f"proxy_benchmarks: {', '.join(map(repr, unknown))} is not among the benchmarks the proxy "
                            f"can run on tier {plan.tier.name} ({list(entries)})")
    if request.static != AUTO and "source_top1" in request.static:
        lacking = [e for e in plan.encoders if not isinstance(configs[e].get("source_top1"), (int, float))]
        if lacking:
            problems.append(f"static=[source_top1]: encoder(s) {', '.join(lacking)} declare no source_top1 (the top-1 "
                            f"accuracy their pretrained weights publish) in conf/encoder/<name>.yaml; drop "
                            f"source_top1 from static or declare it")
    if request.validate:
        stored = {int(exp.seed) for exp in plan.experiments
                  if exp.seed in request.proxy_seeds and any(r.get("experiment") == exp.id for r in records)}
        if stored:
            problems.append(f"proxy_seeds={list(request.proxy_seeds)} shares seed(s) {sorted(stored)} with stored full "
                            f"runs of this tier (a proxy run would share their data order and random stream while "
                            f"validate=true grades it against them); choose seeds outside {sorted(plan.tier.seeds)}")
    if "paper" in request.history:
        from gate.analysis.meta import default_paper_table

        columns = set(pd.read_csv(default_paper_table(), nrows=0).columns)
        missing = [f"{e} ({configs[e]['paper_name']})" for e in plan.encoders
                   if configs[e].get("paper_name") and configs[e]["paper_name"] not in columns]
        if missing:
            problems.append(f"paper_name of {', '.join(missing)} is not a column of the paper's table")
    if problems:
        raise ConfigError("; ".join(problems))


def proxy_entries(plan: Any, seeds: Sequence[int]) -> tuple[dict[str, dict[int, dict[str, Any]]], list[str]]:
    """The tier's benchmarks the proxy can run: those every encoder of the pool takes, with a step budget >= 2.
    Returns ``{benchmark: {seed: {encoder: experiment}}}`` for the proxy ``seeds`` and why others are left out;
    a :class:`ConfigError` when none is left, or when a dataset is the entry of two protocols."""
    listed: dict[str, list[int]] = {}
    for i, entry in enumerate(plan.tier.entries, 1):
        listed.setdefault(entry.dataset, []).append(i)
    twice = [f"{name} (entries {', '.join(map(str, at))})" for name, at in listed.items() if len(at) > 1]
    if twice:
        raise ConfigError(f"tier {plan.tier.name}: gate-rank ranks each benchmark once, and {'; '.join(twice)} "
                          f"{'is' if len(twice) == 1 else 'are'} listed with more than one protocol: keep one entry "
                          f"per dataset")
    by: dict[str, dict[int, dict[str, Any]]] = {}
    for exp in plan.experiments:
        if exp.seed in seeds:
            by.setdefault(exp.dataset, {}).setdefault(int(exp.seed), {})[exp.encoder] = exp
    out, dropped = {}, []
    for entry in plan.tier.entries:
        got = by.get(entry.dataset, {})
        missing = [e for e in plan.encoders if any(e not in got.get(s, {}) for s in seeds)]
        if missing:
            dropped.append(f"{entry.dataset}: not taken by {', '.join(dict.fromkeys(missing))}")
            continue
        steps = got[seeds[0]][plan.encoders[0]].config["trainer"].get("max_steps")
        if not isinstance(steps, int) or steps < 2:
            dropped.append(f"{entry.dataset}: trainer.max_steps={steps!r} (the proxy needs a step budget >= 2)")
            continue
        out[entry.dataset] = got
    if not out:
        raise ConfigError(f"tier {plan.tier.name} has nothing the proxy can run for {list(plan.encoders)}: "
                          f"{'; '.join(dropped) or 'no experiments'}")
    return out, dropped


# ------------------------------------------------------------------------------------------------ scores


Scores = dict[str, dict[str, dict[str, Any]]]  # score → benchmark → encoder → value (or why it is degenerate)


def _score_names(names: Sequence[str]) -> list[str]:
    """The stored metrics ``names`` read (``ncti`` is three stored terms)."""
    return sorted({n for name in names for n in (("ncti_seli", "ncti_ncc", "ncti_collapse") if name == "ncti"
                                                  else (name,))})


def score_values(plan: Any, benchmarks: Sequence[str], names: Sequence[str], *, compose_score: Callable[[list[str]], Any],
                 run_score: Callable[[Any], Any], records: Callable[[], list[dict[str, Any]]],
                 echo: Callable[..., None] = print, key: str = "prior") -> tuple[Scores, dict[str, float], Scores]:
    """Zero-training scores of every encoder on the benchmarks among ``benchmarks`` whose family takes scores:
    ``{score: {benchmark: {encoder: value}}}``, the seconds each (encoder × benchmark) took (feature passes + the
    scores, from the score records' facts, so stored scores count what they cost) and, in the same shape, why a
    value cannot discriminate. ``key``: the setting that named ``names``, named in errors."""
    from gate.engine.validate import resolved_config
    from gate.results import experiment_id
    from gate.scoring.stage import NeedsSourceHead
    from gate.transferability import SCORES

    wanted = _score_names(names)
    values: Scores = {n: {} for n in names}
    seconds: dict[str, float] = {}
    degenerate: Scores = {}
    if not wanted:
        return values, seconds, degenerate
    check_score_heads(plan, names, key)
    seed0 = plan.tier.seeds[0]
    for exp in plan.experiments:
        if exp.dataset not in benchmarks or exp.seed != seed0 or not family(exp.config["dataset"].get("task")).transferability:
            continue
        ovs = [f"paths.root={plan.root}", f"dataset={exp.dataset}", f"encoder={exp.encoder}",
               f"image_size={exp.config['image_size']}", "progress_bar=false", *plan.tier.score_overrides,
               f"metrics=[{','.join(wanted)}]"]
        cfg = compose_score(ovs)
        sid = experiment_id(resolved_config(cfg), "score")
        try:
            run_score(cfg)
        except NeedsSourceHead as err:  # gate-score's words name its own key (metrics): say gate-rank's
            raise ConfigError(_headless(key, names, err.metrics, err.encoder)) from None
        rows = {r["metric"]: r for r in records() if r.get("experiment") == sid and r.get("kind") == "score"}
        spent = seconds[f"{exp.encoder} × {exp.dataset}"] = pass_seconds(rows, wanted)
        marks = []
        for name in names:
            if name == "ncti" or name not in rows:
                continue
            values[name].setdefault(exp.dataset, {})[exp.encoder] = float(rows[name]["value"])
            facts = rows[name].get("facts") or {}
            classes = facts.get("num_classes", exp.config["dataset"]["num_classes"])
            if "num_samples" in facts and {"feature_rank", "feature_dim"} & set(facts) and (why := SCORES[name].degenerate(
                    facts["num_samples"], classes, feature_rank=facts.get("feature_rank"),
                    feature_dim=facts.get("feature_dim"))):
                degenerate.setdefault(name, {}).setdefault(exp.dataset, {})[exp.encoder] = why
                marks.append(f"{name} ({why})")
        if "ncti" in names and all(t in rows for t in ("ncti_seli", "ncti_ncc", "ncti_collapse")):
            values.setdefault("_ncti_terms", {}).setdefault(exp.dataset, {})[exp.encoder] = {  # type: ignore[assignment]
                t: float(rows[t]["value"]) for t in ("ncti_seli", "ncti_ncc", "ncti_collapse")}
        echo(f"[gate] score {exp.encoder} × {exp.dataset}: {spent:.0f}s"
             + (f"; degenerate: {', '.join(marks)}" if marks else ""), flush=True)
    if "ncti" in names:
        from gate.transferability.collapse import ncti

        for bench, pool in values.pop("_ncti_terms", {}).items():  # type: ignore[arg-type]
            values["ncti"][bench] = ncti(pool)
    return values, seconds, degenerate


def _headless(key: str, names: Sequence[str], need: Sequence[str], encoder: str) -> str:
    from gate.transferability import SCORES

    every = sorted(n for n, m in SCORES.items() if m.needs == "features")
    one = len(need) == 1
    return (f"{key}={list(names)} is invalid: {', '.join(need)} {'needs' if one else 'need'} the source-class "
            f"probabilities of a pretrained classification head, which encoder {encoder} lacks; drop "
            f"{'it' if one else 'them'} from {key} (the scores every encoder takes: {every})")


def check_score_heads(plan: Any, names: Sequence[str], key: str) -> None:
    """Before any run: a score of ``names`` that needs a source classification head, asked of an encoder whose
    class declares none (``num_source_classes = None``), is one :class:`ConfigError` naming ``key``."""
    from hydra.utils import get_class

    from gate.transferability import SCORES

    need = [n for n in names if n in SCORES and SCORES[n].needs == "source_probs"]
    if not need:
        return
    for exp in plan.experiments:
        try:
            cls = get_class(exp.config["encoder"]["_target_"])
        except Exception:  # noqa: BLE001 - an unimportable class is gate-run's validation to report
            continue
        if getattr(cls, "num_source_classes", 0) is None:
            raise ConfigError(_headless(key, names, need, exp.encoder))


def score_ranks(values: Mapping[str, Mapping[str, float]], encoders: Sequence[str]) -> pd.Series | None:
    """One score's ranking of the pool: its mean rank over the benchmarks where every encoder has a value."""
    cols = {b: v for b, v in values.items() if all(e in v and math.isfinite(v[e]) for e in encoders)}
    if not cols:
        return None
    frame = pd.DataFrame(cols).reindex(list(encoders))
    return pd.Series(complete.mean_rank(frame.to_numpy(float)), index=list(encoders))


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

    if candidates:
        the_plan = planning.make_plan(candidates=candidates, full_steps=full_steps, proxy_seeds=request.proxy_seeds,
                                      run_fraction=request.run_fraction, val_points=request.val_points,
                                      budget_seconds=budget_seconds, full_seconds=full_seconds,
                                      block_seconds=block_seconds, choose=choose, prior_seconds=prior_seconds,
                                      with_prior=bool(request.prior and scored_benches), prefer=prefer,
                                      block_bound=block_bound)
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
    order = list(prior_ranking.sort_values(kind="stable").index) if prior_ranking is not None else pool

    # the proxy, re-planned before every block (with what is left of the budget and the costs measured so far)
    runs: list[ProxyRun] = []

    stopped: dict[tuple[int, str], str] = {}  # (seed, benchmark) → why its block stopped before its last run

    def run_one(block: planning.Block) -> None:
        experiments = entries[block.benchmark][block.seed]
        planned = {e: prices.run_seconds(block.benchmark, e, block.steps, block.val_every) for e in pool}
        got: list[ProxyRun] = []
        for r in run_block(block, experiments, ctx, full_steps=full_steps[block.benchmark], planned=planned,
                           order=order):
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
                                  budget_seconds=request.budget * full_now - (ledger.spent_seconds or 0.0),
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
    predictions, seeds_table, proxy_rank, flagged = _proxy_ranking(ranked_runs, pool, candidates, full_ranked,
                                                                    truth_pool, history, selection, done)
    if len(ranked_runs) < len(runs):
        predictions = pd.concat([predictions, pd.DataFrame([
            {"encoder": r.encoder, "benchmark": r.benchmark, "seed": r.seed, "value": r.value, "lo": r.lo, "hi": r.hi,
             "source": "no skill" if r.benchmark in unlearnt else "stopped", "method": r.method, "steps": r.steps,
             "best": r.best} for r in runs if r not in ranked_runs])], ignore_index=True)
    history_tau = selection.tau if selection is not None else math.nan
    seed_rankings = [seeds_table[c] for c in seeds_table.columns]
    decision = priors.decide(proxy_ran=bool(ranked_runs) or bool(full_ranked),
                             seed_agreement=priors.agreement(seed_rankings) if len(seed_rankings) > 1 else math.nan,
                             history_tau=history_tau, prior_available=prior_ranking is not None and any(
                                 k.startswith("score:") for k in prior_components),
                             prior_history_tau=math.nan, static_available=bool(static))
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
                        dict(unlearnt), {f"{b} seed {s}": why for (s, b), why in stopped.items()})
    if request.validate and complete_truth and len(truth_pool.values.dropna().index) == len(pool):
        validated = [b for b in complete_truth if b in candidates] or complete_truth
        result.validation, result.ceiling, result.paired = validate(result, truth_pool, validated, pool, request,
                                                                    plan, compose_score, run_score, ctx)
    return result


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


#: A feature pass the store has no record of, predicted (the demo's passes of 500 rows at 32 px took 5–19 s on 2 CPU
#: cores, feature pass and scores together; pool A's sixteen averaged 11 s).
COLD_PASS_SECONDS = 10.0


def pass_seconds(rows: Mapping[str, Mapping[str, Any]], metrics: Iterable[str]) -> float:
    """What one encoder × benchmark's scores cost, from its score records (``{metric: record}``): the feature pass
    (stored once per set) plus each of ``metrics``' own seconds. The plan predicts with it and the ledger spends
    it, so the two count the same seconds."""
    extract = max((float((r.get("facts") or {}).get("extract_seconds") or 0.0) for r in rows.values()), default=0.0)
    return extract + sum(float((rows[m].get("facts") or {}).get("seconds") or 0.0) for m in metrics if m in rows)


def _prior_seconds(records: Sequence[Mapping[str, Any]], pool: Sequence[str], benches: Sequence[str],
                   metrics: Sequence[str]) -> float:
    """The prior's feature passes and scores, predicted: what stored score records of the pool's encoders cost
    (:func:`pass_seconds`), else :data:`COLD_PASS_SECONDS` a pass."""
    rows: dict[str, dict[str, Mapping[str, Any]]] = {}
    for r in records:
        if r.get("kind") == "score" and r.get("encoder") in pool and r.get("dataset") in benches:
            rows.setdefault(f"{r['encoder']} × {r['dataset']}", {})[str(r.get("metric"))] = r
    seen = {key: pass_seconds(found, metrics) for key, found in rows.items() if set(metrics) <= set(found)}
    return sum(seen.get(f"{e} × {b}", COLD_PASS_SECONDS) for e in pool for b in benches)


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


def static_names(static: str | Sequence[str]) -> tuple[str, ...]:
    """The static facts a request's ``static`` names: ``auto`` is every one (:data:`gate.ranking.prior.STATIC`), of
    which :func:`static_rankings` keeps those every encoder of the pool has (source_top1 where all declare it)."""
    return tuple(priors.STATIC) if static == AUTO else tuple(static)


def static_rankings(names: Sequence[str], pool: Sequence[str], params: Mapping[str, float],
                    configs: Mapping[str, Mapping[str, Any]]) -> dict[str, pd.Series]:
    """Each static fact's ranking of the pool (where every encoder has it): more parameters, a higher published
    source top-1 first."""
    out = {}
    for name in names:
        values = dict(params) if name == "params" else {e: configs[e].get("source_top1") for e in pool}
        if all(isinstance(values.get(e), (int, float)) and math.isfinite(values[e]) for e in pool):
            out[name] = priors.ranks({e: float(values[e]) for e in pool}, pool)
    return out


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


# --------------------------------------------------------------------------------------------- validation


def validate(result: RankResult, truth: History, benches: Sequence[str], pool: Sequence[str], request: Request,
             plan: Any, compose_score: Any, run_score: Any, ctx: ProxyContext
             ) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
    """v2 and every baseline against the full runs (their mean over the tier's seeds, mean rank over ``benches``):
    τ, τ_w, top-1 regret (tier-mean units) and top-3 recall; the leave-one-seed-out ceiling (each truth seed alone
    against the mean of the others) and v2 graded against the same leave-one-out truths; paired bootstrap
    differences (encoders and benchmarks resampled together)."""
    from gate.ranking import stats

    values = truth.values.loc[list(pool), list(benches)]
    truth_rank = pd.Series(complete.mean_rank(values.to_numpy(float)), index=list(pool))
    tier_value = values.mean(axis=1)
    methods: dict[str, pd.Series] = {"v2": result.tier_ranking["mean_rank"].reindex(list(pool))}
    base_scores = [s for s in request.baseline_scores if s not in result.scores]
    extra_scores: Scores = {}
    extra_marks: Scores = {}
    if base_scores and compose_score and run_score:
        benches_scored = [b for b in benches if any(e.dataset == b and family(e.config["dataset"].get("task"))
                                                    .transferability for e in plan.experiments)]
        if benches_scored:
            extra_scores, _, extra_marks = score_values(plan, benches_scored, base_scores, compose_score=compose_score,
                                              run_score=run_score, records=ctx.records, echo=ctx.echo,
                                              key="baseline_scores")
    marks: dict[str, str] = {}
    for name in request.baseline_scores:
        r = score_ranks({**result.scores, **extra_scores}.get(name, {}), pool)
        if r is not None:
            methods[f"score:{name}"] = r
            marks[f"score:{name}"] = degenerate_note({**result.degenerate, **extra_marks}.get(name, {}),
                                                     len(pool) * len({**result.scores, **extra_scores}[name]),
                                                     "encoder × benchmark scores")
    configs = {e: next(x.config["encoder"] for x in plan.experiments if x.encoder == e) for e in pool}
    params = {e: float(next((r.facts.get("params") for r in result.runs if r.encoder == e and r.facts.get("params")),
                            math.nan) or math.nan) for e in pool}
    for name, r in {**static_rankings(STATIC_BASELINES, pool, params, configs), **result.static_rankings}.items():
        methods[f"static:{name}"] = r
    if result.prior_ranking is not None:
        methods["prior"] = result.prior_ranking
    rows = []
    for name, pred in methods.items():
        p, t = -pred.to_numpy(float), -truth_rank.to_numpy(float)
        top = set(pred.nsmallest(3).index)
        true_top = set(truth_rank.nsmallest(3).index)
        picked = pred.idxmin()
        rows.append({"method": name, "tau": kendall(p, t), "tau_w": stats.weighted_tau(p, t),
                     "regret": float(tier_value.max() - tier_value[picked]),
                     "top3_recall": len(top & true_top) / min(3, len(pool)), "degenerate": marks.get(name, "")})
    table = pd.DataFrame(rows)
    ceiling = leave_one_seed_out(truth.seeds, benches, pool, methods["v2"])
    paired = paired_bootstrap(methods, values, n_boot=request.n_boot)
    return table, ceiling, paired


def leave_one_seed_out(seeds_of: Mapping[str, pd.DataFrame], benches: Sequence[str], pool: Sequence[str],
                       ranking: pd.Series) -> dict[str, Any]:
    """The ceiling: for each truth seed, τ between the tier ranking of that seed alone and of the mean of the
    others, averaged (``one_seed_vs_rest``); ``ranking`` (lower is better) against the same leave-one-out truths
    (``v2_vs_rest``), and their ratio. None where fewer than two seeds are stored."""
    seeds = sorted(set.intersection(*[set(seeds_of[b].columns) for b in benches])) if benches and all(
        b in seeds_of for b in benches) else []
    if len(seeds) < 2:
        return {"n_seeds": len(seeds), "one_seed_vs_rest": None, "v2_vs_rest": None, "ratio": None}
    one, mine = [], []
    for s in seeds:
        alone = pd.DataFrame({b: seeds_of[b][s] for b in benches}).reindex(list(pool))
        rest = pd.DataFrame({b: seeds_of[b][[x for x in seeds if x != s]].mean(axis=1) for b in benches}
                            ).reindex(list(pool))
        rest_rank = complete.mean_rank(rest.to_numpy(float))
        one.append(kendall(-complete.mean_rank(alone.to_numpy(float)), -rest_rank))
        mine.append(kendall(-ranking.reindex(list(pool)).to_numpy(float), -rest_rank))
    c, v = float(np.nanmean(one)), float(np.nanmean(mine))
    return {"n_seeds": len(seeds), "one_seed_vs_rest": finite_or_none(c), "v2_vs_rest": finite_or_none(v),
            "ratio": finite_or_none(v / c) if math.isfinite(c) and c > 0 else None}


def degenerate_note(marks: Mapping[str, Mapping[str, str]], total: int, of: str) -> str:
    """``"on 5 of 8 encoders: feature rank 490 ≥ 500 rows − 10 classes; ..."`` for the values that cannot discriminate
    (``{benchmark: {encoder: why}}``), each distinct reason once; empty where none is."""
    whys = [why for per_encoder in marks.values() for why in per_encoder.values()]
    return f"on {len(whys)} of {total} {of}: {'; '.join(dict.fromkeys(whys))}" if whys else ""


def paired_bootstrap(methods: Mapping[str, pd.Series], values: pd.DataFrame, *, n_boot: int, seed: int = 0
                     ) -> pd.DataFrame:
    """For each baseline, v2's τ minus the baseline's against the truth (the mean rank over ``values``' benchmarks),
    with a 95 % interval and P(v2 ≤ baseline), resampling encoders and benchmarks together."""
    rng = np.random.default_rng(seed)
    encs = list(values.index)
    n, m = len(encs), values.shape[1]
    base = {k: v for k, v in methods.items() if k != "v2"}
    diffs: dict[str, list[float]] = {k: [] for k in base}
    arr = values.to_numpy(float)
    preds = {k: -v.reindex(encs).to_numpy(float) for k, v in methods.items()}
    for _ in range(n_boot):
        ei = rng.integers(0, n, n)
        if len(set(ei.tolist())) < 3:
            continue
        bi = rng.integers(0, m, m)
        truth = -complete.mean_rank(arr[np.ix_(ei, bi)])
        t_v2 = kendall(preds["v2"][ei], truth)
        for k in base:
            t_b = kendall(preds[k][ei], truth)
            if math.isfinite(t_v2) and math.isfinite(t_b):
                diffs[k].append(t_v2 - t_b)
    truth_all = -complete.mean_rank(arr)
    rows = []
    for k in base:
        d = np.asarray(diffs[k])
        point = kendall(preds["v2"], truth_all) - kendall(preds[k], truth_all)
        rows.append({"baseline": k, "tau_difference": point,
                     "lo": float(np.quantile(d, 0.025)) if d.size else math.nan,
                     "hi": float(np.quantile(d, 0.975)) if d.size else math.nan,
                     "p_v2_not_better": float(np.mean(d <= 0)) if d.size else math.nan, "draws": int(d.size)})
    return pd.DataFrame(rows, columns=["baseline", "tau_difference", "lo", "hi", "p_v2_not_better", "draws"])


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
    """The tables: selection.csv, predictions.csv, tier_ranking.csv, seeds.csv, cost.csv, ledger.json and, with a
    validation, validation.csv, ceiling.json and paired.csv."""
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


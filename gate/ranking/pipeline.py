"""gate-rank's library stage: tier × encoders × budget → predicted rankings, their cost and (where full results
exist) their validation against full fine-tuning beside baselines.

:func:`check_request` validates everything that can be known without training (budget, pool, scores, the tier's
entries the proxy can run); :func:`rank_tier` then runs the proxy benchmark by benchmark (reusing the store),
and :func:`validate_against_full` compares with the full tier's stored results.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gate.errors import ConfigError
from gate.families import family
from gate.ranking import stats
from gate.ranking.budget import Ledger, RunCost, finite_or_none, minutes, shown, subset_budget
from gate.ranking.proxy import BenchmarkRanking, ProxyContext, probe_costs, run_benchmark

MIN_ENCODERS = 3
POOL_SCORES = ("ncti",)  # scores defined over a pool from per-encoder terms (gate.transferability.collapse.ncti)


def known_scores() -> list[str]:
    from gate.transferability import SCORES

    return [*SCORES, *POOL_SCORES]


@dataclasses.dataclass(frozen=True)
class Request:
    """One gate-rank request. gate-rank's values for every field are conf/rank.yaml's (the only place that states
    them); the library takes the knobs without defaults, and the optional parts default to the plain mechanism:
    no scores, every benchmark, halving down to two."""

    tier: Any                       # gate.tiers.spec.Tier
    encoders: tuple[str, ...]
    budget: float
    _: dataclasses.KW_ONLY
    eta: int
    overhead_steps: float
    n_boot: int
    use_full_runs: bool             # a benchmark whose full runs are all stored is ranked by them (no proxy)
    seed_scores: tuple[str, ...] = ()
    baseline_scores: tuple[str, ...] = ()
    proxy_benchmarks: str | int | tuple[str, ...] | None = None  # auto | None (every one) | m (the first m) | names
    max_rungs: int | None = None    # 1: every encoder one run (no halving); None: halve down to two
    run_fraction: float | None = None  # proxy_benchmarks=auto: each run at least this fraction of its full steps
    cost_probe_steps: int = 0       # > 0: measure each benchmark's cost before splitting the budget over a subset


def check_request(request: Mapping[str, Any]) -> None:
    """Every problem with the request itself (conf/rank.yaml's settings, declared in :data:`gate.settings.RANK`),
    then the pool and the score names, as one :class:`ConfigError` line, before the tier is expanded."""
    from gate.settings import RANK, check

    problems = check(request, RANK)
    encoders = request.get("encoders")
    if RANK.settings["encoders"].valid(encoders) and len(dict.fromkeys(encoders)) < MIN_ENCODERS:
        problems.append(f"encoders={list(encoders)!r} is invalid: a ranking needs at least {MIN_ENCODERS} distinct "
                        f"encoders (encoder=a,b,c)")
    known = known_scores()
    for key in ("scores", "baseline_scores"):
        names = request.get(key)
        bad = [s for s in names if s not in known] if RANK.settings[key].valid(names) else []
        if bad:
            problems.append(f"{key}: unknown score {', '.join(map(repr, bad))}; known scores are {known}")
    if problems:
        raise ConfigError("; ".join(problems))


def proxy_entries(plan: Any, seed: int) -> tuple[dict[str, list[Any]], list[str]]:
    """The tier's benchmarks the proxy can rank: those every encoder of the pool takes (a ranking compares all
    of them), with the proxy's seed. Returns ``{benchmark: [experiment per encoder]}`` and why others are left
    out. Raises :class:`ConfigError` when none is left, or when a dataset is the entry of two protocols (a
    benchmark is ranked once: one of them would be dropped)."""
    listed: dict[str, list[int]] = {}
    for i, entry in enumerate(plan.tier.entries, 1):
        listed.setdefault(entry.dataset, []).append(i)
    twice = [f"{name} (entries {', '.join(map(str, at))})" for name, at in listed.items() if len(at) > 1]
    if twice:
        raise ConfigError(f"tier {plan.tier.name}: gate-rank ranks each benchmark once, and {'; '.join(twice)} "
                          f"{'is' if len(twice) == 1 else 'are'} listed with more than one protocol: keep one entry "
                          f"per dataset")
    by_bench: dict[str, dict[str, Any]] = {}
    for exp in plan.experiments:
        if exp.seed == seed:
            by_bench.setdefault(exp.dataset, {})[exp.encoder] = exp
    out, dropped = {}, []
    for entry in plan.tier.entries:
        got = by_bench.get(entry.dataset, {})
        missing = [e for e in plan.encoders if e not in got]
        if missing:
            dropped.append(f"{entry.dataset}: not taken by {', '.join(missing)}")
            continue
        steps = got[plan.encoders[0]].config["trainer"].get("max_steps")
        if not isinstance(steps, int) or steps < 2:
            dropped.append(f"{entry.dataset}: trainer.max_steps={steps!r} (the proxy needs a step budget >= 2)")
            continue
        out[entry.dataset] = [got[e] for e in plan.encoders]
    if not out:
        raise ConfigError(f"tier {plan.tier.name} has no entry the proxy can run for {list(plan.encoders)}: "
                          f"{'; '.join(dropped) or 'no experiments'}")
    return out, dropped


def choose_benchmarks(candidates: Sequence[str], spec: str | int | Sequence[str] | None, *,
                      full_cost: Mapping[str, float] | None = None, budget: float | None = None,
                      seeds: int | None = None, run_fraction: float | None = None) -> list[str]:
    """The benchmarks the proxy runs among ``candidates`` (the tier's entries it must rank, in tier order):
    all (``None``), the first ``m`` (an int; more than there are: all), the named ones (each must be a
    candidate: :class:`ConfigError` naming it otherwise), or ``"auto"``: the tier's first benchmarks, as many as
    the whole budget lets every encoder train ``run_fraction`` of each one's full steps (one run per encoder and
    benchmark; at least one benchmark). ``full_cost``: what each candidate's full run costs, in one unit for
    all (seconds measured by :func:`gate.ranking.proxy.probe_costs`, or steps; auto only)."""
    if spec is None:
        return list(candidates)
    if spec == "auto":
        if full_cost is None or budget is None or seeds is None or run_fraction is None:
            raise ValueError("proxy_benchmarks=auto needs full_cost, budget, seeds and run_fraction")
        cost = full_cost
        affordable = budget * seeds * sum(cost[b] for b in candidates) / run_fraction
        chosen, used = [], 0.0
        for b in candidates:
            if chosen and used + cost[b] > affordable + 1e-9:
                break
            chosen.append(b)
            used += cost[b]
        return chosen
    if isinstance(spec, int):
        return list(candidates)[:spec]
    unknown = [b for b in spec if b not in candidates]
    if unknown:
        raise ConfigError(f"proxy_benchmarks: {', '.join(map(repr, unknown))} is not among the benchmarks the proxy "
                          f"can rank on this tier ({list(candidates)})")
    return [b for b in candidates if b in spec]


def proxy_candidates(entries: Mapping[str, Sequence[Any]], full: FullResults | None, encoders: Sequence[str],
                     use_full_runs: bool) -> list[str]:
    """The entries the proxy has to rank: all, less those ranked by their stored full runs (``use_full_runs``)."""
    return [b for b in entries if not (use_full_runs and full is not None and full.complete(b, encoders))]


def entry_steps(entries: Mapping[str, Sequence[Any]]) -> dict[str, int]:
    return {b: int(exps[0].config["trainer"]["max_steps"]) for b, exps in entries.items()}


# --------------------------------------------------------------------------------------- full results


@dataclasses.dataclass
class FullResults:
    """The full tier's stored test values of each benchmark's tier_metric, higher-is-better."""

    values: pd.DataFrame                              # encoders × benchmarks, mean over seeds
    per_seed: dict[str, dict[int, pd.Series]]         # benchmark -> seed -> encoder values
    metric: dict[str, tuple[str, bool]]               # benchmark -> (tier_metric, higher_is_better)
    wall: dict[str, float]                            # "enc × bench" -> summed wall seconds over seeds
    params: dict[str, dict[str, float]]               # benchmark -> encoder -> parameter count of its runs

    def complete(self, benchmark: str, encoders: Sequence[str]) -> bool:
        return benchmark in self.values.columns and self.values.loc[list(encoders), benchmark].notna().all()


def read_full(plan: Any, records: Sequence[Mapping[str, Any]], benchmarks: Sequence[str]) -> FullResults:
    from gate.data.spec import spec_from_config
    from gate.metrics import lookup

    by_exp: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        if r.get("kind") == "finetune":
            by_exp.setdefault(r["experiment"], []).append(r)
    per_seed: dict[str, dict[int, dict[str, float]]] = {}
    metric: dict[str, tuple[str, bool]] = {}
    wall: dict[str, float] = {}
    params: dict[str, dict[str, float]] = {}
    for exp in plan.experiments:
        if exp.dataset not in benchmarks:
            continue
        name = spec_from_config(exp.config["dataset"]).tier_metric  # the dataset's, else its task family's
        known = lookup(name)
        hib = known.higher_is_better if known is not None else True
        metric[exp.dataset] = (name, hib)
        rows = [r for r in by_exp.get(exp.id, []) if r.get("split") == "test" and r.get("metric") == name]
        if not rows:
            continue
        per_seed.setdefault(exp.dataset, {}).setdefault(exp.seed, {})[exp.encoder] = \
            stats.oriented({"v": float(rows[-1]["value"])}, hib)["v"]
        facts = rows[-1].get("facts") or {}
        if isinstance(facts.get("wall_seconds"), (int, float)):
            key = f"{exp.encoder} × {exp.dataset}"
            wall[key] = wall.get(key, 0.0) + float(facts["wall_seconds"])
        if facts.get("params"):
            params.setdefault(exp.dataset, {})[exp.encoder] = float(facts["params"])
    series = {b: {s: pd.Series(v, dtype=float) for s, v in seeds.items()} for b, seeds in per_seed.items()}
    values = pd.DataFrame({b: pd.concat(list(seeds.values()), axis=1).mean(axis=1) for b, seeds in series.items()},
                          index=list(plan.encoders))
    return FullResults(values, series, metric, wall, params)


# ---------------------------------------------------------------------------------------------- scores


Scores = dict[str, dict[str, dict[str, Any]]]  # score → benchmark → encoder → value (or why it is degenerate)


def score_values(plan: Any, benchmarks: Sequence[str], names: Sequence[str], *, compose_score: Callable[[list[str]], Any],
                 run_score: Callable[[Any], Any], records: Callable[[], list[dict[str, Any]]],
                 echo: Callable[..., None] = print, key: str = "scores") -> tuple[Scores, dict[str, float], Scores]:
    """Zero-training scores of every encoder on the classification benchmarks among ``benchmarks``:
    ``{score: {benchmark: {encoder: value}}}``, the seconds each benchmark's scoring took (feature passes + the
    scores; from the score records' facts, so stored scores count what they cost) and, in the same shape, why a
    value cannot discriminate (:meth:`gate.transferability.Metric.degenerate` on the record's rows, classes
    and feature rank). ``key``: the setting that named ``names`` (scores, baseline_scores), named in errors."""
    from gate.engine.build import resolved_config
    from gate.results import experiment_id
    from gate.scoring.stage import NeedsSourceHead
    from gate.transferability import SCORES

    wanted = sorted({n for name in names for n in (("ncti_seli", "ncti_ncc", "ncti_collapse") if name == "ncti"
                                                    else (name,))})
    values: Scores = {n: {} for n in names}
    seconds: dict[str, float] = {}
    degenerate: Scores = {}
    if not wanted:
        return values, seconds, degenerate
    check_score_heads(plan, names, key)
    seed0 = plan.experiments[0].seed
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
        extract = max((float((r.get("facts") or {}).get("extract_seconds") or 0.0) for r in rows.values()), default=0.0)
        spent = extract + sum(float((rows[m].get("facts") or {}).get("seconds") or 0.0) for m in wanted if m in rows)
        seconds[exp.dataset] = seconds.get(exp.dataset, 0.0) + spent
        marks = []
        for name in names:
            if name == "ncti":
                continue
            if name in rows:
                values[name].setdefault(exp.dataset, {})[exp.encoder] = float(rows[name]["value"])
                facts = rows[name].get("facts") or {}
                # a record stored before gate-score wrote num_classes and feature_rank: the dataset's declared
                # classes (at least those present) and the width (at least the rank), so the mark errs towards
                # flagging and says the rank was not recorded
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


# ------------------------------------------------------------------------------------------------ rank


@dataclasses.dataclass
class RankResult:
    rankings: dict[str, BenchmarkRanking]
    ledger: Ledger
    tier_ranking: pd.DataFrame
    dropped: list[str]
    full: FullResults | None = None
    validation: pd.DataFrame | None = None
    ceiling: dict[str, float] = dataclasses.field(default_factory=dict)
    variants: dict[str, tuple[dict[str, BenchmarkRanking], Ledger]] = dataclasses.field(default_factory=dict)
    scores: dict[str, dict[str, dict[str, float]]] = dataclasses.field(default_factory=dict)
    degenerate: dict[str, dict[str, dict[str, str]]] = dataclasses.field(default_factory=dict)  # as score_values
    not_run: list[str] = dataclasses.field(default_factory=list)   # benchmarks left to the others (proxy_benchmarks)
    cost_basis: str = "steps"       # how the budget was split over the benchmarks: "steps" or "measured" (probes)

    def predicted(self, rankings: Mapping[str, BenchmarkRanking] | None = None) -> pd.DataFrame:
        """Encoders × benchmarks of the predicted rankings, higher is better (minus the position)."""
        rankings = self.rankings if rankings is None else rankings
        return pd.DataFrame({b: r.predicted for b, r in rankings.items()})


def run_proxy(plan: Any, entries: Mapping[str, Sequence[Any]], ctx: ProxyContext, request: Request,
              seed_values: Mapping[str, Mapping[str, Mapping[str, float]]], seed_seconds: Mapping[str, float],
              full: FullResults | None, use_scores: bool = True, rank_by_full: bool = True,
              chosen: Sequence[str] | None = None, split: BudgetSplit | None = None
              ) -> tuple[dict[str, BenchmarkRanking], Ledger]:
    """The proxy on the ``chosen`` entries (default: every one), with the whole tier's budget (``split.budget``,
    default the request's) spread over them (:func:`gate.ranking.budget.subset_budget`, by ``split.full_cost``:
    the probes' measured seconds, default each benchmark's steps; :func:`measured_costs`). With
    ``rank_by_full``, a benchmark whose full runs are all stored is ranked by them at no cost; stored full runs'
    wall seconds (every seed) are the full cost the budget is taken of. A benchmark not chosen is not ranked; its
    full cost is the stored runs' seconds or, per encoder, the estimate on the chosen benchmarks scaled by
    ``split.full_cost``. The cost probes' seconds are charged to the ledger, and a benchmark's measured fixed
    cost per run to its plan (at least ``request.overhead_steps``)."""
    ledger = Ledger()
    for item, seconds in (split.probe_spent if split else {}).items():
        ledger.spend(item, seconds)
    rankings: dict[str, BenchmarkRanking] = {}
    candidates = proxy_candidates(entries, full, plan.encoders, rank_by_full)
    chosen = list(candidates) if chosen is None else [b for b in candidates if b in chosen]
    cost = dict(split.full_cost) if split else entry_steps({b: entries[b] for b in candidates})
    budget = subset_budget(split.budget if split else request.budget, cost, chosen)
    measured_overhead = split.overhead_steps if split else {}

    def stored_wall(bench: str) -> dict[str, float]:
        if full is None or not full.complete(bench, plan.encoders) or \
                len(full.per_seed.get(bench, {})) != len(plan.tier.seeds):
            return {}
        return {k: v for k, v in full.wall.items() if k.endswith(f" × {bench}") and v > 0}

    for bench, exps in entries.items():
        if bench not in candidates:
            col = full.values[bench]  # type: ignore[union-attr]
            order = sorted(plan.encoders, key=lambda e: -col[e])
            rankings[bench] = BenchmarkRanking(bench, full.metric[bench][0], True, 0, (), [], order, (), "full")  # type: ignore[union-attr]
            ctx.echo(f"[gate] rank  {bench}: every full run is stored; its ranking is the full one", flush=True)
            continue
        if bench not in chosen:
            continue
        seeds = {s: seed_values[s][bench] for s in (request.seed_scores if use_scores else ())
                 if bench in seed_values.get(s, {})}
        rankings[bench] = run_benchmark(bench, exps, ctx, budget=budget, eta=request.eta, max_rungs=request.max_rungs,
                                        overhead_steps=max(request.overhead_steps, measured_overhead.get(bench, 0.0)),
                                        full_seeds=len(plan.tier.seeds),
                                        ledger=ledger, seed_scores=seeds,
                                        score_seconds=seed_seconds.get(bench, 0.0) if seeds else 0.0,
                                        known_full=stored_wall(bench))
    ran = sum(cost[b] for b in chosen)
    for bench in (b for b in candidates if b not in chosen):
        known = stored_wall(bench)
        for enc in plan.encoders:
            key = f"{enc} × {bench}"
            parts = [ledger.estimated.get(f"{enc} × {b}", 0.0) for b in chosen]
            mine = None if None in parts else sum(parts)  # scaled from an unmeasured part: unmeasured too
            ledger.estimate(key, None if mine is None else mine * cost[bench] / ran if ran else 0.0, known.get(key))
    return rankings, ledger


def validate_against_full(result: RankResult, plan: Any, request: Request, benches: Sequence[str]) -> pd.DataFrame:
    """Predicted vs full (τ, τ_w, top-1 regret, bootstrap intervals) per benchmark and on the tier's mean rank,
    for the proxy and each baseline. ``benches``: the tier's benchmarks where every encoder has a full result and
    that the proxy had to rank (not ranked by their own full runs). Every method is graded on the tier's mean
    rank over all of ``benches``, whichever of them it predicts (the proxy on a subset, a score on the
    classification ones): one truth for all."""
    full = result.full
    assert full is not None
    benches = list(benches)
    truth = full.values.loc[list(plan.encoders), benches]

    def predicted(rankings: Mapping[str, BenchmarkRanking]) -> pd.DataFrame:
        return result.predicted({b: r for b, r in rankings.items() if b in benches}).reindex(list(plan.encoders))

    methods: dict[str, pd.DataFrame] = {"proxy": predicted(result.rankings)}
    marks: dict[str, Mapping[str, Mapping[str, str]]] = {}  # method → benchmark → encoder → why degenerate
    for name, (rankings, _) in result.variants.items():
        methods[name] = predicted(rankings)
    for score in request.baseline_scores:
        cols = {b: pd.Series(v) for b, v in result.scores.get(score, {}).items() if b in benches}
        if cols:
            methods[f"score:{score}"] = pd.DataFrame(cols).reindex(list(plan.encoders))
            marks[f"score:{score}"] = {b: v for b, v in result.degenerate.get(score, {}).items() if b in cols}
    # the static ranker: each benchmark's own runs' parameter counts (a task head or a text tower is part of the
    # model gate-run trains; one benchmark's counts are never mixed with another's)
    static = {}
    for b in benches:
        counts = dict(full.params.get(b, {}))
        counts.update({r.encoder: r.params for r in (result.rankings[b].results if b in result.rankings else [])
                       if math.isfinite(r.params)})
        if all(e in counts for e in plan.encoders):
            static[b] = pd.Series(counts)
    if static:
        methods["static:params"] = pd.DataFrame(static).reindex(list(plan.encoders))
    rows = []
    for method, pred in methods.items():
        mark = marks.get(method, {})
        for bench in pred.columns:
            row = stats.compare(pred[bench], truth[bench], n_boot=request.n_boot)
            note = degenerate_note({bench: mark.get(bench, {})}, len(plan.encoders), "encoders")
            rows.append({"method": method, "scope": bench, **row, "degenerate": note})
        if pred.shape[1] >= 1:
            row = stats.compare_tier(pred, truth, n_boot=request.n_boot)
            note = degenerate_note(mark, len(plan.encoders) * pred.shape[1], "encoder × benchmark scores")
            rows.append({"method": method, "scope": "tier", **row, "degenerate": note})
    return pd.DataFrame(rows)


def degenerate_note(marks: Mapping[str, Mapping[str, str]], total: int, of: str) -> str:
    """``"on 5 of 8 encoders: feature rank 490 ≥ 500 rows − 10 classes; ..."`` for the values that cannot discriminate
    (``{benchmark: {encoder: why}}``), each distinct reason once; empty where none is."""
    whys = [why for per_encoder in marks.values() for why in per_encoder.values()]
    return f"on {len(whys)} of {total} {of}: {'; '.join(dict.fromkeys(whys))}" if whys else ""


def ceilings(full: FullResults, benchmarks: Sequence[str]) -> dict[str, float]:
    """Seed-to-seed τ of the ground truth per benchmark, and ``tier`` (mean rank over benchmarks, pairs of
    seeds); NaN where fewer than two seeds are stored."""
    out = {b: stats.seed_ceiling(full.per_seed.get(b, {})) for b in benchmarks}
    seeds = sorted(set.intersection(*[set(full.per_seed.get(b, {})) for b in benchmarks])) if benchmarks else []
    taus = []
    for i, a in enumerate(seeds):
        for c in seeds[i + 1:]:
            va = pd.DataFrame({b: full.per_seed[b][a] for b in benchmarks})
            vc = pd.DataFrame({b: full.per_seed[b][c] for b in benchmarks})
            taus.append(stats.kendall_tau(-stats.mean_rank(va).to_numpy(), -stats.mean_rank(vc).to_numpy()))
    finite = [t for t in taus if np.isfinite(t)]
    out["tier"] = float(np.mean(finite)) if finite else math.nan
    return out


def summary_table(validation: pd.DataFrame, ceiling: Mapping[str, float]) -> pd.DataFrame:
    """One row per method: τ, τ_w and regret on the tier's mean rank (with intervals), the mean per-benchmark τ
    over the benchmarks it covers, and the ground truth's seed ceiling."""
    rows = []
    for method, grp in validation.groupby("method", sort=False):
        tier = grp[grp["scope"] == "tier"]
        bench = grp[grp["scope"] != "tier"]
        t = tier.iloc[0] if len(tier) else None
        rows.append({"method": method, "benchmarks": len(bench),
                     "tier_tau": t["tau"] if t is not None else math.nan,
                     "tier_tau_lo": t["tau_lo"] if t is not None else math.nan,
                     "tier_tau_hi": t["tau_hi"] if t is not None else math.nan,
                     "tier_tau_w": t["tau_w"] if t is not None else math.nan,
                     "tier_regret": t["regret"] if t is not None else math.nan,
                     "mean_bench_tau": float(np.nanmean(bench["tau"])) if bench["tau"].notna().any() else math.nan,
                     "mean_bench_tau_w": float(np.nanmean(bench["tau_w"])) if bench["tau_w"].notna().any() else math.nan,
                     "mean_bench_regret": float(np.nanmean(bench["regret"])) if bench["regret"].notna().any() else math.nan,
                     # a validation.csv read back has NaN for an empty note, one written before the column none
                     "degenerate": _text(t.get("degenerate")) if t is not None else ""})
    out = pd.DataFrame(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # a ceiling.json read back holds null where fewer than two seeds were stored
        bench_ceiling = [v for k, v in ceiling.items() if k != "tier" and v is not None and np.isfinite(v)]
    tier_ceiling = ceiling.get("tier")
    out.attrs["ceiling_tier"] = math.nan if tier_ceiling is None else tier_ceiling
    out.attrs["ceiling_mean_bench"] = float(np.mean(bench_ceiling)) if bench_ceiling else math.nan
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def summary_lines(table: pd.DataFrame) -> list[str]:
    """One printed line per method of :func:`summary_table`: τ on the tier's mean rank with its interval, τ_w,
    regret and the mean per-benchmark τ, and, beside the number, where a baseline score is degenerate."""
    return [f"  {row.method:<24} τ {shown(row.tier_tau, '+.3f')} [{shown(row.tier_tau_lo, '+.2f')}, "
            f"{shown(row.tier_tau_hi, '+.2f')}]  τ_w {shown(row.tier_tau_w, '+.3f')}  regret "
            f"{shown(row.tier_regret, '.2f')}  per-benchmark τ {shown(row.mean_bench_tau, '+.3f')} "
            f"({row.benchmarks} benchmarks)" + (f"  (degenerate {row.degenerate})" if row.degenerate else "")
            for row in table.itertuples(index=False)]


def compute_line(result: RankResult, budget: float) -> str:
    """The printed line of what the proxy spent against the full tier (``—`` and the parts where a cost was not
    measured, never "nan")."""
    led = result.ledger
    stored = led.from_stored_runs
    basis = "measured cost" if result.cost_basis == "measured" else "full steps"
    missing = (f"; not measured: {', '.join(led.unmeasured)} (a run resumed with no step left to time)"
               if led.unmeasured else "")
    return (f"[gate] compute: {minutes(led.spent_seconds)} spent; the full tier "
            f"{'took ' if stored else 'would take ~'}{minutes(led.full_seconds)} "
            f"({'its stored runs' if stored else 'estimated from the proxy step times'}"
            f"{'; benchmarks not run: scaled by their ' + basis if result.not_run and not stored else ''}) → "
            f"{shown(led.fraction)} of it (budget {budget}; {shown(led.estimated_fraction)} of the estimate from the "
            f"proxy's own step times){missing}")


def write_outputs(result: RankResult, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    rungs = pd.concat([r.table() for r in result.rankings.values()] or [pd.DataFrame()], ignore_index=True)
    files["rungs"] = out / "rungs.csv"
    rungs.to_csv(files["rungs"], index=False)
    pred = pd.DataFrame([{"benchmark": b, "encoder": e, "predicted_rank": i + 1, "source": r.source,
                          "seeded_by": ",".join(r.seeded_by)} for b, r in result.rankings.items()
                         for i, e in enumerate(r.order)])
    files["predictions"] = out / "predictions.csv"
    pred.to_csv(files["predictions"], index=False)
    files["tier_ranking"] = out / "tier_ranking.csv"
    result.tier_ranking.to_csv(files["tier_ranking"])
    cost = pd.DataFrame([{"item": k, "seconds": v} for k, v in result.ledger.spent.items()])
    files["cost"] = out / "cost.csv"
    cost.to_csv(files["cost"], index=False)
    files["ledger"] = out / "ledger.json"
    files["ledger"].write_text(json.dumps(result.ledger.to_json(), indent=1, allow_nan=False))
    if result.validation is not None:
        files["validation"] = out / "validation.csv"
        result.validation.to_csv(files["validation"], index=False)
        files["ceiling"] = out / "ceiling.json"
        files["ceiling"].write_text(json.dumps({k: finite_or_none(v) for k, v in result.ceiling.items()}, indent=1,
                                               allow_nan=False))  # null: fewer than two seeds stored
    return files


@dataclasses.dataclass(frozen=True)
class BudgetSplit:
    """How the tier's budget is spread: what each benchmark's full run costs (one unit for all: measured
    seconds, or steps), the cost probes' seconds, the budget left for the runs, and each measured benchmark's
    fixed cost of a run in its own steps (charged in its plan)."""

    full_cost: dict[str, float]
    probe_spent: dict[str, float]
    budget: float
    overhead_steps: dict[str, float]

    @property
    def measured(self) -> bool:
        return bool(self.probe_spent) and len(self.overhead_steps) == len(self.full_cost)


def measured_costs(plan: Any, entries: Mapping[str, Sequence[Any]], candidates: Sequence[str], ctx: ProxyContext,
                   request: Request) -> BudgetSplit:
    """How the budget is split over the benchmarks. Only a proxy on a subset of two or more candidates needs the
    benchmarks' relative costs (on all of them each gets the same fraction of its own cost); there, with
    ``cost_probe_steps`` > 0, they are measured (:func:`gate.ranking.proxy.probe_costs`), the probes' share of the
    tier (the first encoder's costs standing for every encoder's) comes off the budget, and each probe's fixed
    cost (building, validating: ``overhead / seconds per step``) is charged to every run of its benchmark's plan.
    Otherwise the costs are the benchmarks' steps.

    The first probe tells what all of them would take; where that is more than a quarter of the budget (a tier of
    runs so short that building a model costs as much as training it, like the CPU demo), probing stops there and
    the split is by steps, said in one line (the first benchmark's plan still charges the fixed cost measured)."""
    steps = {b: float(s) for b, s in entry_steps({b: entries[b] for b in candidates}).items()}
    if not request.cost_probe_steps or request.proxy_benchmarks is None or len(candidates) < 2:
        return BudgetSplit(steps, {}, request.budget, {})
    runs = len(plan.encoders) * len(plan.tier.seeds)

    def overhead(probes: Mapping[str, RunCost]) -> dict[str, float]:
        return {b: c.overhead_seconds / c.seconds_per_step for b, c in probes.items()}

    first, first_spent = probe_costs(entries, candidates[:1], ctx, request.cost_probe_steps)
    c0, w0 = first[candidates[0]].full_estimate(int(steps[candidates[0]])), sum(first_spent.values())
    tier0 = c0 * runs * sum(steps.values()) / steps[candidates[0]]  # the tier, scaled from the first by steps
    if w0 * len(candidates) / tier0 > request.budget / 4:
        ctx.echo(f"[gate] rank  measuring every benchmark's cost would take ~{w0 * len(candidates) / tier0:.3f} of "
                 f"the tier (more than a quarter of budget={request.budget}): the budget is split by steps, "
                 f"unmeasured", flush=True)
        return BudgetSplit(steps, first_spent, request.budget - w0 / tier0, overhead(first))
    rest, rest_spent = probe_costs(entries, candidates[1:], ctx, request.cost_probe_steps)
    probes, spent = {**first, **rest}, {**first_spent, **rest_spent}
    cost = {b: probes[b].full_estimate(int(steps[b])) for b in candidates}
    share = sum(spent.values()) / (sum(cost.values()) * runs)
    ctx.echo(f"[gate] rank  measured cost per full run, relative to {candidates[0]}: "
             + ", ".join(f"{b} {cost[b] / cost[candidates[0]]:.2f}×" for b in candidates)
             + f"; the probes took {share:.3f} of the tier, the runs get the rest ({request.budget - share:.3f})",
             flush=True)
    return BudgetSplit(cost, spent, request.budget - share, overhead(probes))


def rank_tier(plan: Any, request: Request, *, seed: int, ctx: ProxyContext,
              compose_score: Callable[[list[str]], Any] | None = None,
              run_score: Callable[[Any], Any] | None = None, validate: bool = True,
              proxy_without_scores: bool = True) -> RankResult:
    """The whole stage on an expanded tier ``plan`` (:func:`gate.tiers.expand.expand_tier`, every seed of the
    tier so the full results can be found): scores for seeding, the proxy, the tier's aggregate ranking with
    bootstrap intervals and, where every encoder's full runs are stored, the validation."""
    check_score_heads(plan, request.seed_scores, "scores")  # before a single run
    check_score_heads(plan, request.baseline_scores, "baseline_scores")
    entries, dropped = proxy_entries(plan, seed)
    for line in dropped:
        ctx.echo(f"[gate] rank  left out: {line}", flush=True)
    records = ctx.records()
    full = read_full(plan, records, list(entries))
    candidates = proxy_candidates(entries, full, plan.encoders, request.use_full_runs)
    split = measured_costs(plan, entries, candidates, ctx, request)
    chosen = choose_benchmarks(candidates, request.proxy_benchmarks, full_cost=split.full_cost, budget=split.budget,
                               seeds=len(plan.tier.seeds), run_fraction=request.run_fraction)
    if len(chosen) < len(candidates):
        ctx.echo(f"[gate] rank  the proxy runs on {len(chosen)} of the {len(candidates)} benchmarks it ranks "
                 f"({', '.join(chosen)}), with the tier's whole budget; the tier ranking is their mean rank",
                 flush=True)

    def scored(names: Sequence[str], benchmarks: Sequence[str], key: str) -> tuple[Scores, dict[str, float], Scores]:
        if not names or not benchmarks or compose_score is None or run_score is None:
            return {}, {}, {}
        return score_values(plan, benchmarks, names, compose_score=compose_score, run_score=run_score,
                            records=ctx.records, echo=ctx.echo, key=key)

    # the seeding scores' seconds are the proxy's (on the benchmarks it runs); the baselines' are not part of its
    # cost. Baselines only where a validation will compare them: a benchmark whose full runs are all stored and
    # that the proxy must rank (with use_full_runs, a complete benchmark is ranked by its full runs and not
    # validated): no feature passes otherwise
    seed_values, seed_seconds, seed_marks = scored(request.seed_scores, chosen, "scores")
    validated = [b for b in candidates if full.complete(b, plan.encoders)] if validate else []
    scores, _, marks = scored([s for s in request.baseline_scores if s not in request.seed_scores], validated,
                              "baseline_scores")
    scores, marks = {**scores, **seed_values}, {**marks, **seed_marks}
    rankings, ledger = run_proxy(plan, entries, ctx, request, seed_values, seed_seconds, full,
                                 rank_by_full=request.use_full_runs, chosen=chosen, split=split)
    pred = pd.DataFrame({b: r.predicted for b, r in rankings.items()}).reindex(list(plan.encoders))
    result = RankResult(rankings, ledger, stats.rank_intervals(pred, n_boot=request.n_boot), dropped, full,
                        scores=scores, degenerate=marks, not_run=[b for b in candidates if b not in chosen],
                        cost_basis="measured" if split.measured else "steps")
    if validate and validated:
        if request.seed_scores and proxy_without_scores:
            result.variants["proxy (no scores)"] = run_proxy(plan, entries, ctx, request, {}, {}, full, use_scores=False,
                                                             rank_by_full=request.use_full_runs, chosen=chosen,
                                                             split=split)
        result.validation = validate_against_full(result, plan, request, validated)
        result.ceiling = ceilings(full, validated)
    return result

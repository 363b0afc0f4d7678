"""How right a ranking was, where the tier's full runs are stored: τ, τ_w, top-1 regret and top-3 recall of v2 and of
every baseline against the full runs' mean, the leave-one-seed-out ceiling, and paired bootstrap differences."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from gate.analysis.ranks import kendall
from gate.families import family
from gate.ranking import complete
from gate.ranking.budget import finite_or_none
from gate.ranking.history import History
from gate.ranking.proxy import ProxyContext
from gate.ranking.request import STATIC_BASELINES, Request
from gate.ranking.scores import Scores, score_ranks, score_values, static_rankings


def validate(result: Any, truth: History, benches: Sequence[str], pool: Sequence[str], request: Request,
             plan: Any, compose_score: Any, run_score: Any, ctx: ProxyContext
             ) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
    """v2 and every baseline against the full runs (their mean over the tier's seeds, mean rank over ``benches``):
    τ, τ_w, top-1 regret (tier-mean units) and top-3 recall; the leave-one-seed-out ceiling (each truth seed alone
    against the mean of the others) and v2 graded against the same leave-one-out truths; paired bootstrap
    differences (encoders and benchmarks resampled together). ``result``: the call's
    :class:`gate.ranking.pipeline.RankResult` (its ranking, scores and static rankings)."""
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

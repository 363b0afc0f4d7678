"""Rank statistics for predicted-vs-full rankings: Kendall τ, weighted τ_w, top-1 regret, bootstrap intervals.

Conventions (one place, so the CLI, the report and the validation script agree):

* a *ranking* is given as values per encoder where **higher is better** (a metric that is lower-is-better is
  negated before it gets here; :func:`oriented`);
* ``kendall_tau`` is scipy's τ-b (ties allowed); ``weighted_tau`` is scipy's ``weightedtau`` with its default
  hyperbolic weigher over the ranks of the *full* values (``rank=`` the full ranking), so a swap near the top
  costs more than one near the bottom;
* ``top1_regret``: the full value of the truly best encoder minus the full value of the encoder the prediction
  puts first (in the full metric's own units, ≥ 0; 0 when the prediction picks the best);
* intervals are percentile bootstraps (95 %): over encoders (resampled with replacement) for one benchmark,
  over benchmarks for the tier; degenerate resamples (fewer than three distinct encoders, or a constant side)
  are skipped and the number kept is reported.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from gate.registry import Registry

CONFIDENCE = 0.95


def oriented(values: Mapping[str, float] | pd.Series, higher_is_better: bool) -> pd.Series:
    """Values turned so that higher is better (``-x`` for a lower-is-better metric)."""
    s = pd.Series(values, dtype=float)
    return s if higher_is_better else -s


def _aligned(pred: pd.Series, full: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    common = [e for e in full.index if e in pred.index and np.isfinite(pred[e]) and np.isfinite(full[e])]
    return pred[common].to_numpy(float), full[common].to_numpy(float)


def kendall_tau(pred: np.ndarray, full: np.ndarray) -> float:
    """Kendall τ-b of two value vectors (NaN when either is constant or fewer than two items)."""
    if len(pred) < 2 or np.ptp(pred) == 0 or np.ptp(full) == 0:
        return math.nan
    return float(stats.kendalltau(pred, full).statistic)


def weighted_tau(pred: np.ndarray, full: np.ndarray) -> float:
    """scipy's weighted τ (hyperbolic weigher), the weights following the *full* ranking's order."""
    if len(pred) < 2 or np.ptp(pred) == 0 or np.ptp(full) == 0:
        return math.nan
    order = np.argsort(np.argsort(-full, kind="stable"), kind="stable")  # 0 = the truly best
    return float(stats.weightedtau(pred, full, rank=order).statistic)


def top1_regret(pred: np.ndarray, full: np.ndarray) -> float:
    """Full value of the best encoder minus that of the predicted first (ties in the prediction: the worst of
    them, so a tie never hides a regret)."""
    if len(pred) == 0:
        return math.nan
    picked = np.flatnonzero(pred == pred.max())
    return float(full.max() - full[picked].min())


STATISTICS: Registry[Callable[[np.ndarray, np.ndarray], float]] = Registry("statistic")
STATISTICS.register("tau", kendall_tau)
STATISTICS.register("tau_w", weighted_tau)
STATISTICS.register("regret", top1_regret)


def _interval(samples: list[float]) -> tuple[float, float]:
    arr = np.asarray([s for s in samples if np.isfinite(s)], float)
    if arr.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(arr, [(1 - CONFIDENCE) / 2, 1 - (1 - CONFIDENCE) / 2])
    return float(lo), float(hi)


def compare(pred: pd.Series, full: pd.Series, *, n_boot: int = 1000, seed: int = 0) -> dict[str, float]:
    """τ, τ_w and top-1 regret of one benchmark's prediction against its full ranking (both higher-is-better
    values per encoder), with bootstrap intervals over encoders: ``tau``, ``tau_lo``, ``tau_hi``, ... and
    ``n`` (encoders compared), ``boot`` (resamples kept)."""
    p, f = _aligned(pred, full)
    out: dict[str, float] = {"n": float(len(p))}
    for name, fn in STATISTICS.items():
        out[name] = fn(p, f)
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {k: [] for k in STATISTICS}
    kept = 0
    for _ in range(n_boot if len(p) >= 3 else 0):
        idx = rng.integers(0, len(p), len(p))
        if len(set(idx.tolist())) < 3:
            continue
        kept += 1
        for name, fn in STATISTICS.items():
            draws[name].append(fn(p[idx], f[idx]))
    for name in STATISTICS:
        out[f"{name}_lo"], out[f"{name}_hi"] = _interval(draws[name])
    out["boot"] = float(kept)
    return out


def mean_rank(values: pd.DataFrame) -> pd.Series:
    """Encoders × benchmarks of higher-is-better values → each encoder's mean rank over the benchmarks
    (1 = best; ties share the mean rank). Scale-free, so a benchmark with a wide metric range (an MAE) does not
    outweigh the others. An encoder missing a benchmark gets no mean (NaN)."""
    ranks = values.rank(axis=0, ascending=False, method="average")
    out = ranks.mean(axis=1)
    out[values.isna().any(axis=1)] = math.nan
    return out


def compare_tier(pred: pd.DataFrame, full: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> dict[str, float]:
    """The tier's aggregate ranking (mean rank over benchmarks, :func:`mean_rank`) predicted vs full, with
    bootstrap intervals over the tier's benchmarks. ``pred`` and ``full``: encoders × benchmarks, higher is
    better. ``pred`` may cover only some of ``full``'s benchmarks (a prediction made on a subset of the tier, or a
    score defined on some families only): it is still graded against the *whole* tier's ranking, so every method
    faces the same truth. A bootstrap resample draws the tier's benchmarks; the prediction takes those of them it
    has (a draw with none is skipped). Regret is in mean-rank units of the full ranking."""
    tier = list(full.columns)
    encs = [e for e in full.index if e in pred.index]
    pred = pred.loc[encs, [b for b in tier if b in pred.columns]]
    full = full.loc[encs, tier]

    def stat(cols: Sequence[str]) -> dict[str, float] | None:
        mine = [b for b in cols if b in pred.columns]
        if not mine:
            return None
        p, f = -mean_rank(pred[mine]), -mean_rank(full[list(cols)])
        pv, fv = _aligned(p, f)
        return {name: fn(pv, fv) for name, fn in STATISTICS.items()}

    out: dict[str, float] = {"n": float(len(encs)), "benchmarks": float(pred.shape[1]), "tier_benchmarks": float(len(tier))}
    out.update(stat(tier) or dict.fromkeys(STATISTICS, math.nan))
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {k: [] for k in STATISTICS}
    for _ in range(n_boot if len(tier) >= 2 else 0):
        got = stat([tier[i] for i in rng.integers(0, len(tier), len(tier))])
        for name, value in (got or {}).items():
            draws[name].append(value)
    for name in STATISTICS:
        out[f"{name}_lo"], out[f"{name}_hi"] = _interval(draws[name])
    out["boot"] = float(len(draws["tau"]))
    return out


def rank_intervals(values: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Each encoder's tier rank (by mean rank over benchmarks) with a bootstrap interval over benchmarks:
    columns ``mean_rank``, ``rank``, ``rank_lo``, ``rank_hi``; sorted best first."""
    benches = list(values.columns)
    point = mean_rank(values)
    rank = point.rank(method="min")
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot if len(benches) >= 2 else 0):
        cols = [benches[i] for i in rng.integers(0, len(benches), len(benches))]
        draws.append(mean_rank(values[cols]).rank(method="min"))
    out = pd.DataFrame({"mean_rank": point, "rank": rank})
    if draws:
        boot = pd.concat(draws, axis=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out["rank_lo"] = boot.quantile((1 - CONFIDENCE) / 2, axis=1)
            out["rank_hi"] = boot.quantile(1 - (1 - CONFIDENCE) / 2, axis=1)
    else:
        out["rank_lo"] = out["rank_hi"] = out["rank"]
    return out.sort_values(["mean_rank"])


def seed_ceiling(per_seed: Mapping[int, pd.Series]) -> float:
    """Seed-to-seed agreement of a ground truth: the mean Kendall τ over every pair of seeds' values (one
    benchmark; higher is better). NaN with fewer than two seeds."""
    seeds = sorted(per_seed)
    taus = []
    for i, a in enumerate(seeds):
        for b in seeds[i + 1:]:
            taus.append(kendall_tau(*_aligned(per_seed[a], per_seed[b])))
    taus = [t for t in taus if np.isfinite(t)]
    return float(np.mean(taus)) if taus else math.nan

"""Every benchmark of the tier in the ranking: the benchmarks the proxy does not run, predicted from those it runs.

:func:`fit` learns, on a history of *other* encoders (:class:`gate.ranking.history.History`, the leakage rule), a
ridge regression from the run benchmarks' values to each other benchmark's (in each benchmark's z-scores over the
history's encoders; the ridge's strength chosen by leave-one-encoder-out), and its 80 % intervals from the
leave-one-out residuals. :meth:`Completion.predict` fills a pool's missing cells and says, per cell, ``observed``,
``completed`` or, for an encoder outside the history's range on a run benchmark (a z-score beyond the history's by
more than :data:`RANGE_MARGIN` of its spread), ``fallback``: the model does not extrapolate there, and that
encoder is ranked by its observed mean rank (Zhang et al.'s guard: fall back to the observed mean out of range).

Completion is used only where it wins: :func:`loo_taus` compares, on the history alone (encoders left out), the τ of
the tier ranking with and without it; the caller keeps the plain mean rank of the run benchmarks where completion
does not beat it. The functions take the history as an argument: nothing here is tuned on a fixed table.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from gate.analysis.ranks import kendall
from gate.ranking.history import History

#: An encoder whose z-score on a run benchmark lies this far (in units of the history's z-range) outside the history's
#: range is out of the model's range.
RANGE_MARGIN = 0.25
#: The ridge strengths tried (per encoder of the fit, in z-units), the best by leave-one-out error.
ALPHAS = (0.1, 0.3, 1.0, 3.0, 10.0)
#: The interval the completed values carry.
COVERAGE = 0.80


def mean_rank(values: np.ndarray) -> np.ndarray:
    """Rows = encoders, columns = benchmarks (higher is better) → each row's mean rank (1 = best; ties averaged)."""
    from scipy.stats import rankdata

    return rankdata(-values, axis=0, method="average").mean(axis=1)


def _ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Coefficients (with an intercept row first) of ridge from x (n × p) to y (n × t)."""
    n, p = x.shape
    xa = np.hstack([np.ones((n, 1)), x])
    reg = alpha * n * np.eye(p + 1)
    reg[0, 0] = 0.0
    return np.linalg.solve(xa.T @ xa + reg, xa.T @ y)


def _apply(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    return coef[0] + x @ coef[1:]


def _loo_residuals(x: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Leave-one-row-out residuals of the ridge (n × t), by refitting (n is small)."""
    out = np.empty_like(y)
    for i in range(x.shape[0]):
        keep = np.arange(x.shape[0]) != i
        out[i] = y[i] - _apply(_ridge(x[keep], y[keep], alpha), x[i:i + 1])[0]
    return out


@dataclasses.dataclass(frozen=True)
class Completion:
    """A fitted completion: observed benchmarks → every other benchmark of the tier."""

    observed: tuple[str, ...]
    targets: tuple[str, ...]
    coef: np.ndarray                 # (1 + observed) × targets, in z-units
    mean: pd.Series                  # per benchmark (observed and targets), the history's mean
    std: pd.Series                   # per benchmark, the history's spread (1 where constant)
    zrange: pd.DataFrame             # observed benchmarks × (low, high) of the history's z-scores
    interval: pd.DataFrame           # targets × (lo, hi): the residual quantiles of the 80 % interval, raw units
    tier_interval: tuple[float, float]   # the same for the tier's mean value (every benchmark)
    alpha: float
    encoders: int                    # history encoders it was fitted on

    def out_of_range(self, observed: pd.DataFrame) -> pd.Series:
        """Per encoder: whether any of its run benchmarks' z-scores lies outside the history's range (by more
        than :data:`RANGE_MARGIN` of the range)."""
        z = (observed[list(self.observed)] - self.mean[list(self.observed)]) / self.std[list(self.observed)]
        width = (self.zrange["high"] - self.zrange["low"]).clip(lower=1e-9)
        low = self.zrange["low"] - RANGE_MARGIN * width
        high = self.zrange["high"] + RANGE_MARGIN * width
        return ((z < low) | (z > high)).any(axis=1)

    def predict(self, observed: pd.DataFrame) -> pd.DataFrame:
        """Encoders × targets: the predicted values (raw units, the tier scale)."""
        z = ((observed[list(self.observed)] - self.mean[list(self.observed)]) / self.std[list(self.observed)]).to_numpy()
        pred = _apply(self.coef, z) * self.std[list(self.targets)].to_numpy() + self.mean[list(self.targets)].to_numpy()
        return pd.DataFrame(pred, index=observed.index, columns=list(self.targets))


def fit(history: History, observed: Sequence[str], targets: Sequence[str]) -> Completion:
    """Ridge from ``observed`` to each of ``targets``, fitted on the history's encoders with a value on all of
    them (z-scored per benchmark; the strength by leave-one-encoder-out error), with 80 % intervals from the
    leave-one-out residuals."""
    cols = list(dict.fromkeys([*observed, *targets]))
    frame = history.values[cols].dropna(how="any")
    if len(frame) < 3:
        raise ValueError(f"completion needs at least 3 history encoders with every benchmark, has {len(frame)}")
    mean = frame.mean()
    std = frame.std(ddof=0).replace(0.0, 1.0)
    z = (frame - mean) / std
    x, y = z[list(observed)].to_numpy(), z[list(targets)].to_numpy()
    best = min(ALPHAS, key=lambda a: float(np.mean(_loo_residuals(x, y, a) ** 2)) if y.size else 0.0)
    coef = _ridge(x, y, best)
    resid = _loo_residuals(x, y, best) * std[list(targets)].to_numpy() if y.size else np.zeros((len(frame), 0))
    interval = pd.DataFrame({"lo": [conformal_bounds(resid[:, j])[0] for j in range(resid.shape[1])],
                             "hi": [conformal_bounds(resid[:, j])[1] for j in range(resid.shape[1])]},
                            index=list(targets), dtype=float)
    # the tier's mean value: observed exactly, the rest predicted; its leave-one-out error
    tier_resid = resid.sum(axis=1) / len(cols) if resid.size else np.zeros(len(frame))
    zr = pd.DataFrame({"low": z[list(observed)].min(), "high": z[list(observed)].max()})
    return Completion(tuple(observed), tuple(targets), coef, mean, std, zr, interval, conformal_bounds(tier_resid),
                      best, len(frame))


def conformal_bounds(resid: np.ndarray, coverage: float = COVERAGE) -> tuple[float, float]:
    """The interval around a prediction from ``n`` leave-one-out residuals, with the conformal finite-sample
    correction (the ⌊(n+1)·a⌋-th smallest and the ⌈(n+1)·(1−a)⌉-th smallest residual, a = (1 − coverage)/2;
    Lei et al. 2018, Barber et al. 2021): plain quantiles of a dozen residuals cover a new encoder less often than
    they say (62–70 % for a nominal 80 % on the GATE table). Fewer residuals than the correction needs give the
    smallest and largest residual (the interval then covers less than ``coverage``)."""
    r = np.sort(np.asarray(resid, float))
    if r.size == 0:
        return 0.0, 0.0
    a = (1 - coverage) / 2
    lo = max(int(math.floor((r.size + 1) * a)), 1)
    hi = min(int(math.ceil((r.size + 1) * (1 - a))), r.size)
    return float(r[lo - 1]), float(r[hi - 1])


@dataclasses.dataclass(frozen=True)
class TierPrediction:
    """A pool's predicted tier ranking and what each cell of it rests on."""

    values: pd.DataFrame        # encoders × every benchmark: observed or completed values (the tier scale)
    sources: pd.DataFrame       # encoders × benchmarks: observed | completed | fallback
    mean_rank: pd.Series        # per encoder, lower is better (the ranking)
    tier_value: pd.Series       # per encoder, the predicted mean value over the tier's benchmarks
    tier_lo: pd.Series          # its 80 % interval
    tier_hi: pd.Series
    flagged: list[str]          # encoders outside the history's range: ranked by their observed mean rank
    completed: bool             # whether completion was used


def plain_residuals(history: History, run: Sequence[str], benchmarks: Sequence[str]) -> np.ndarray:
    """Each history encoder's tier mean (over ``benchmarks``) minus its mean over the ``run`` ones: what the plain
    mean of the run benchmarks misses of the tier's mean value."""
    frame = history.values[list(dict.fromkeys([*benchmarks, *run]))].dropna(how="any")
    return (frame[list(benchmarks)].mean(axis=1) - frame[list(run)].mean(axis=1)).to_numpy(float)


def predict_tier(observed: pd.DataFrame, benchmarks: Sequence[str], completion: Completion | None,
                 history: History | None = None) -> TierPrediction:
    """The tier ranking of the pool ``observed`` (encoders × run benchmarks): with ``completion``, the mean rank over
    every benchmark, the unrun ones predicted (an out-of-range encoder by its observed mean rank); without, the mean
    rank over the run benchmarks, and with a ``history`` the tier's mean value as the run benchmarks' mean plus the
    history's median difference between the two, its 80 % interval the conformal bounds of those differences
    (:func:`plain_residuals`; plain 10th/90th percentiles of them covered 60–70 % of held-out encoders on the GATE
    table, docs/ranking.md)."""
    run = [b for b in benchmarks if b in observed.columns]
    obs_rank = pd.Series(mean_rank(observed[run].to_numpy()), index=observed.index)
    obs_value = observed[run].mean(axis=1)
    if completion is None or not completion.targets:
        sources = pd.DataFrame("observed", index=observed.index, columns=run)
        resid = plain_residuals(history, run, benchmarks) if history is not None else np.zeros(0)
        if resid.size < 2:
            nan = pd.Series(math.nan, index=observed.index)
            return TierPrediction(observed[run], sources, obs_rank, obs_value, nan, nan, [], False)
        lo, hi = conformal_bounds(resid)
        return TierPrediction(observed[run], sources, obs_rank, obs_value + float(np.median(resid)), obs_value + lo,
                              obs_value + hi, [], False)
    pred = completion.predict(observed)
    values = pd.concat([observed[run], pred], axis=1)[list(benchmarks)]
    flagged = completion.out_of_range(observed)
    sources = pd.DataFrame({b: ["observed" if b in run else ("fallback" if flagged[e] else "completed")
                                for e in observed.index] for b in benchmarks}, index=observed.index)
    full_rank = pd.Series(mean_rank(values.to_numpy()), index=observed.index)
    # an encoder out of range keeps its observed mean rank, rescaled to the pool's full ranks (same 1..n scale)
    rank = full_rank.where(~flagged, obs_rank)
    tier = values.mean(axis=1).where(~flagged, obs_value)
    lo, hi = completion.tier_interval
    return TierPrediction(values, sources, rank, tier, tier + lo, tier + hi, [e for e in observed.index if flagged[e]],
                          True)


def loo_taus(history: History, observed: Sequence[str], benchmarks: Sequence[str], splits: Sequence[np.ndarray],
             noise: np.random.Generator | None = None) -> tuple[float, float]:
    """(τ with completion, τ without) of the tier ranking of held-out history encoders, averaged over ``splits``
    (boolean masks: True = held out), the truth being their mean rank over every benchmark. With ``noise``, a held
    out encoder's observed values are one seed's where the history has seeds (what a proxy run sees)."""
    frame = history.values[list(benchmarks)].dropna(how="any")
    with_c, without = [], []
    for held in splits:
        if held.sum() < 3 or (~held).sum() < 3:
            continue
        fit_h = dataclasses.replace(history, values=frame[~held])
        test = frame[held]
        seen = _one_seed(history, test, observed, noise)
        truth = mean_rank(test.to_numpy())
        plain = mean_rank(seen[list(observed)].to_numpy())
        without.append(kendall(-plain, -truth))
        others = [b for b in benchmarks if b not in observed]
        if others:
            comp = fit(fit_h, observed, others)
            with_c.append(kendall(-predict_tier(seen[list(observed)], benchmarks, comp).mean_rank.to_numpy(), -truth))
        else:
            with_c.append(without[-1])
    return (float(np.nanmean(with_c)) if with_c else math.nan, float(np.nanmean(without)) if without else math.nan)


def _one_seed(history: History, test: pd.DataFrame, observed: Sequence[str],
              noise: np.random.Generator | None) -> pd.DataFrame:
    if noise is None or not history.seeds:
        return test
    seen = test.copy()
    for b in observed:
        f = history.seeds.get(b)
        if f is None or f.shape[1] < 2:
            continue
        for e in test.index:
            if e in f.index:
                row = f.loc[e].dropna()
                if len(row):
                    seen.loc[e, b] = float(row.iloc[noise.integers(len(row))])
    return seen

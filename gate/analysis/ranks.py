"""Rank agreement of two short vectors — Kendall's τ-b and Spearman's ρ — in numpy: a table of tens of encoders
needs no scipy (whose ``stats`` costs gate-analysis 0.7 s to import). gate-rank grades its rankings with the same
τ-b (:mod:`gate.ranking.stats`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def kendall(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall τ-b of two vectors (NaN for fewer than two items or a constant side); small n, no scipy call."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 2:
        return math.nan
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    iu = np.triu_indices(x.size, 1)
    dx, dy = dx[iu], dy[iu]
    denom = math.sqrt(float(np.count_nonzero(dx)) * float(np.count_nonzero(dy)))
    return float(np.sum(dx * dy) / denom) if denom > 0 else math.nan


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman ρ over the pairs where both are known (as pandas' ``corr``): the Pearson correlation of the two
    vectors' ranks, ties averaged (NaN for fewer than two pairs or a constant side)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    both = np.isfinite(x) & np.isfinite(y)
    rx = pd.Series(x[both]).rank().to_numpy()
    ry = pd.Series(y[both]).rank().to_numpy()
    if rx.size < 2 or np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])

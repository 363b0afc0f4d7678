"""The rank statistics gate-rank reports, one place for each (the CLI, the report and the validation script agree):

* a *ranking* is given as values per encoder where **higher is better** (a lower-is-better metric, or a mean rank,
  is negated before it gets here);
* ``tau`` is Kendall's τ-b (:func:`gate.analysis.ranks.kendall`); ``tau_w`` is scipy's ``weightedtau`` with
  its default hyperbolic weigher over the ranks of the *full* values (``rank=`` the full ranking), so a swap near
  the top costs more than one near the bottom;
* ``regret``: the full value of the truly best encoder minus the full value of the encoder the prediction puts
  first (in the full metric's own units, ≥ 0; 0 when the prediction picks the best).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats

from gate.analysis.ranks import kendall
from gate.registry import Registry


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
STATISTICS.register("tau", kendall)
STATISTICS.register("tau_w", weighted_tau)
STATISTICS.register("regret", top1_regret)

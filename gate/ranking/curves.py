"""A short run's validation curve, extrapolated to the full run's steps.

A proxy run validates ``val_points`` times; gate-run records the checkpoint monitor at each validation
(``facts.val_curve``: ``[[step, value], ...]``) and, where the tier ranks the benchmark by another metric, that
metric's curve (``facts.tier_val_curve``); :func:`ranked_curve` picks the one the tier ranks by. :func:`extrapolate`
fits parametric learning curves to those points (Domhan et al., IJCAI 2015, keep a weighted ensemble of such
families; these are three of theirs) and reads each at the full run's step:

* ``pow3``: ``v(t) = c − a·t^(−α)`` (a power law approaching ``c``);
* ``exp3``: ``v(t) = c − a·exp(−b·t)`` (an exponential approach);
* ``log2``: ``v(t) = a + b·log t`` (no asymptote; two parameters).

The fits are weighted by their residuals (a fit that misses the points counts less); the prediction is their
weighted mean, its interval the range of the fits widened by the residual spread. A bounded metric bounds the
fits: an asymptote lies within the metric's range (``low``/``high``), and a fit whose value at the target leaves it
is dropped — clipped to the bound instead, several runs' ends met there and tied, however far apart their curves
were (pool H, docs/ranking.md: three of six encoders at accuracy 1.0, from last values 0.745 to 0.855). A
prediction is never below the curve's best value for a metric that improves (a run that continues keeps its best
checkpoint). With fewer than three points the last value is the prediction, its interval
the points' range. Plain least squares (scipy): nothing is downloaded, nothing unpickled.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def ranked_curve(facts: Mapping[str, Any], monitor: str) -> tuple[str, list]:
    """(metric, points) of a run's facts that the tier ranks it by: the tier metric's curve where one was recorded
    (it is not the checkpoint ``monitor``), else the monitor's (``[]``: none recorded)."""
    tier = facts.get("tier_val_curve")
    if isinstance(tier, Mapping) and tier.get("points"):
        return str(tier["metric"]), list(tier["points"])
    return monitor, list(facts.get("val_curve") or [])


@dataclasses.dataclass(frozen=True)
class Extrapolation:
    value: float
    lo: float
    hi: float
    method: str          # "ensemble" (of the fits named in ``fits``) or "last value"
    fits: tuple[str, ...] = ()


def _pow3(t, c, a, alpha):
    return c - a * np.power(t, -alpha)


def _exp3(t, c, a, b):
    return c - a * np.exp(-b * t)


def _log2(t, a, b):
    return a + b * np.log(t)


def extrapolate(points: Sequence[Sequence[float]], target: float, *, higher_is_better: bool = True,
                low: float = -math.inf, high: float = math.inf) -> Extrapolation:
    """The value a curve through ``points`` (``[step, value]``, steps > 0) reaches at step ``target``."""
    from scipy.optimize import curve_fit

    pts = sorted((float(s), float(v)) for s, v in points if math.isfinite(float(v)) and float(s) > 0)
    if not pts:
        return Extrapolation(math.nan, math.nan, math.nan, "none")
    t = np.array([p[0] for p in pts])
    v = np.array([p[1] for p in pts])
    # in "higher is better" orientation, so one family fits both directions
    y = v if higher_is_better else -v
    lo_b, hi_b = (low, high) if higher_is_better else (-high, -low)
    last = float(y[-1])
    if len(pts) < 3 or target <= t[-1]:
        spread = float(np.ptp(y)) if len(pts) > 1 else 0.0
        return _oriented(Extrapolation(last, last - spread, last + spread, "last value"), higher_is_better)
    scale = float(t[-1])
    ts, tt = t / scale, float(target) / scale
    span = max(float(np.ptp(y)), 1e-6)
    fits: dict[str, tuple[float, float]] = {}
    # an asymptote within the metric's range (an accuracy approaches at most 1), its start inside the bounds too
    c_lo, c_hi = (lo_b if math.isfinite(lo_b) else -np.inf), (hi_b if math.isfinite(hi_b) else np.inf)
    c0 = float(np.clip(y[-1] + span, c_lo, c_hi)) if c_hi > c_lo else y[-1] + span
    families = (("pow3", _pow3, [c0, span, 0.5], ([c_lo, 0.0, 0.01], [c_hi, np.inf, 5.0])),
                ("exp3", _exp3, [c0, span, 1.0], ([c_lo, 0.0, 1e-3], [c_hi, np.inf, 50.0])),
                ("log2", _log2, [y[0], span], ([-np.inf, -np.inf], [np.inf, np.inf])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn, p0, bounds in families:
            if len(pts) < len(p0):
                continue
            try:
                params, _ = curve_fit(fn, ts, y, p0=p0, bounds=bounds, maxfev=5000)
            except (RuntimeError, ValueError):
                continue
            pred = float(fn(tt, *params))
            resid = float(np.sqrt(np.mean((fn(ts, *params) - y) ** 2)))
            # a fit that leaves the metric's range at the target is no curve of that metric (log2 has no
            # asymptote): kept, it was clipped to the bound, and runs ranked there tied whatever they reached
            if math.isfinite(pred) and math.isfinite(resid) and lo_b <= pred <= hi_b:
                fits[name] = (pred, resid)
    if not fits:
        return _oriented(Extrapolation(last, last - span, last + span, "last value"), higher_is_better)
    weights = {n: 1.0 / (r + 0.05 * span) ** 2 for n, (_, r) in fits.items()}
    total = sum(weights.values())
    value = sum(weights[n] * fits[n][0] for n in fits) / total
    noise = max(r for _, r in fits.values())
    lo = min(p for p, _ in fits.values()) - noise
    hi = max(p for p, _ in fits.values()) + noise
    best_seen = float(np.max(y))
    value = float(np.clip(max(value, best_seen), lo_b, hi_b))
    lo, hi = float(np.clip(min(lo, value), lo_b, hi_b)), float(np.clip(max(hi, value), lo_b, hi_b))
    return _oriented(Extrapolation(value, lo, hi, "ensemble", tuple(sorted(fits))), higher_is_better)


def _oriented(e: Extrapolation, higher_is_better: bool) -> Extrapolation:
    if higher_is_better:
        return e
    return Extrapolation(-e.value, -e.hi, -e.lo, e.method, e.fits)

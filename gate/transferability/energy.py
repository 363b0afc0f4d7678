"""ETran's energy score.

Gholami, Akbari, Wang & Zhang, "ETran: Energy-Based Transferability Estimation", ICCV 2023. Checked against
the authors' code, mgholamikn/ETran ``metrics.py`` (``Energy_Score``), ``evaluate_metric.py`` (called as
``Energy_Score(features, 0.5, 'bot')``) and ``tw.py`` (how ETran combines it with its LDA score).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ._validation import check_features

__all__ = ["etran_energy"]


def etran_energy(features: Any, *, fraction: float = 0.005) -> float:
    r"""ETran's energy score (Gholami et al. 2023), higher is better; label-free.

    The features are read as logits of an energy model: each sample's negative free energy is
    ``s_i = log Σ_j exp(f_ij)`` (``torch.logsumexp`` over the ``d`` feature dimensions), and the score is the mean
    of the ``k = ⌊fraction · n⌋`` **lowest** ``s_i`` (the samples that look most out-of-distribution to the
    model). ``fraction = 0.005`` is the authors' call ``Energy_Score(features, percent=0.5, tail='bot')``, whose
    ``int(percent·10)·n // 1000`` is ``⌊0.005 n⌋``; ``fraction = 1`` averages every sample.

    Where this departs from the authors' code, and why:

    - ``k`` is at least 1: for ``n < 200`` the code averages an empty selection (NaN); here the lowest sample.
    - float64 throughout (the code's features are float32 arrays; values agree to float32 rounding).
    - Ties in ``s_i`` do not change the mean of the ``k`` lowest values, so the order among them is irrelevant.

    Not implemented — the rest of ETran: its LDA-based classification score (``LDA_Score``, the mean true-class
    posterior with ``coef = M V Vᵀ``, ``V`` from ``np.linalg.eigh`` of the non-symmetric ``S_λ⁻¹ S_b``: eigh's
    orthonormal eigenvector matrix makes ``V Vᵀ = I``, so it is the Euclidean nearest-class-mean posterior
    ``softmax_c(xᵀμ_c − ½‖μ_c‖² + log π_c)``), its SVD-based regression score, and the final ETran, which is
    **pool-relative**:
    ``0.15 · minmax(energy) + 0.85 · minmax(LDA score)`` over the models scored on one dataset (``tw.py``).
    The energy score alone ranks models exactly as its min–max normalisation does, so it needs no pool.

    Like any logit-based energy, the score is not scale invariant; ``f + c`` shifts it by ``c``.
    """
    f = check_features(features)
    try:
        frac = float(fraction)
    except (TypeError, ValueError):
        raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}") from None
    if not 0.0 < frac <= 1.0:
        raise ValueError(f"fraction must be in (0, 1] (the share of lowest-energy samples averaged), got {fraction!r}")
    n = f.shape[0]
    k = max(1, math.floor(round(frac * n, 9)))  # round(): 0.005·5000 is 25.000000000000004 in binary
    s = torch.logsumexp(f, dim=1)
    return float(torch.topk(s, k, largest=False, sorted=False).values.mean())

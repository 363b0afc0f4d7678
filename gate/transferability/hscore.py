"""H-score and shrinkage H-score.

- H-score: Bao, Li, Huang, Zheng, Zhao & Zhang, "An Information-Theoretic Approach to Transferability in Task
  Transfer Learning", ICIP 2019 (https://ieeexplore.ieee.org/document/8803726).
- Shrinkage H-score: Ibrahim, Ponomareva & Mazumder, "Newer is not always better: Rethinking transferability
  metrics, their peculiarities, stability and performance", ECML-PKDD 2022 (https://arxiv.org/abs/2110.06893),
  Section 4 and Eq. 8; Ledoit & Wolf, "A well-conditioned estimator for large-dimensional covariance
  matrices", J. Multivariate Analysis 2004.

Both scores are traces ``tr(Σ_f⁻¹ Σ_z)`` where ``Σ_f`` is the feature covariance and ``Σ_z`` the covariance of
the class-conditional means ``g_i = E[f | y_i]``. Writing ``X`` for the centred features (n×d) and ``M`` for the
normalised class indicators ``M_ic = [y_i = c] / √n_c`` (orthonormal columns), ``Σ_z = X^T M M^T X / n`` and
``Σ_f = X^T X / n``, so (with the same normalisation for both, which then cancels)

- ``h_score      = tr(M^T X (X^T X)^+ X^T M)``                (projection of M onto the span of X),
- ``shrinkage    = tr(M^T X (X^T X + λ I)^{-1} X^T M)``,  ``λ = n α σ / (1 − α)``, ``σ = tr(Σ_f) / d``,

the second being the paper's ``tr((Σ_f^α)^{-1} (1 − α) Σ_z)`` with ``Σ_f^α = (1 − α) Σ_f + α σ I``. Both are
evaluated on the smaller of the two Gram matrices ``X^T X`` (d×d) and ``K = X X^T`` (n×n); for ``n < d`` the
n×n route is the Woodbury identity of the paper's Eq. 8 (``X (X^T X + λI)^{-1} X^T = K (K + λ I)^{-1}``).
"""

from __future__ import annotations

from typing import Any

import torch

from . import _linalg
from ._validation import DTYPE, check_features, check_labels

__all__ = ["h_score", "shrinkage_h_score", "ledoit_wolf_shrinkage"]


def _centred_and_indicators(features: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
    f = check_features(features)
    lab, num_classes = check_labels(labels, f.shape[0], device=f.device)
    x = f - f.mean(0, keepdim=True)
    counts = torch.bincount(lab, minlength=num_classes).to(DTYPE)
    m = torch.zeros(f.shape[0], num_classes, dtype=DTYPE, device=f.device)
    m[torch.arange(f.shape[0], device=f.device), lab] = 1.0
    m = m / counts.sqrt()
    # X is centred, so only H M counts (Xᵀ M = Xᵀ H M); dropping M's component along 1 in advance keeps the
    # numerically-zero eigenvalue of K = X Xᵀ on the constant vector from leaking into the n×n routes.
    return x, m - m.mean(0, keepdim=True)


def h_score(features: Any, labels: Any, rcond: float | None = None) -> float:
    r"""H-score ``tr(Σ_f^+ Σ_z)`` (Bao et al. 2019), higher is better.

    ``Σ_f`` is the covariance of the features and ``Σ_z`` the covariance of the class-conditional means
    ``E[f | y]`` (each sample replaced by its class mean), both with the same normalisation; the inverse is the
    Moore–Penrose pseudo-inverse, eigenvalues below ``rcond · λ_max`` count as zero (default
    ``rcond = max(n, d) · eps``). Computed as ``tr(Mᵀ P_X M)`` on the smaller Gram matrix (see module doc).
    When ``n ≤ d + 1`` the centred features (rank ``≤ min(n − 1, d)``) generically span all of ``1^⊥`` (dimension
    ``n − 1``) and the score degenerates to ``C − 1``: use :func:`shrinkage_h_score` there.
    """
    x, m = _centred_and_indicators(features, labels)
    return _h_score(x, m, rcond)


def _h_score(x: torch.Tensor, m: torch.Tensor, rcond: float | None) -> float:
    n, d = x.shape
    if rcond is None:
        rcond = max(n, d) * torch.finfo(DTYPE).eps
    if n <= d:
        lam, u = _linalg.eigh(_linalg.xxt(x))
        proj = u.T @ m  # (n, C)
        keep = lam > rcond * lam.max()
        return float((proj[keep] ** 2).sum())
    lam, v = _linalg.eigh(_linalg.xtx(x))
    proj = v.T @ (x.T @ m)  # (d, C)
    keep = lam > rcond * lam.max()
    return float(((proj[keep] ** 2).sum(1) / lam[keep]).sum())


def ledoit_wolf_shrinkage(features: Any) -> float:
    """The Ledoit–Wolf shrinkage intensity, equal to ``sklearn.covariance.ledoit_wolf_shrinkage(features)``.

    Computed in ``O(n·d·min(n, d))`` through the smaller Gram matrix (``‖XᵀX‖_F = ‖XXᵀ‖_F``).
    """
    x = check_features(features, min_samples=1)
    x = x - x.mean(0, keepdim=True)
    return _lw_shrinkage(x, _gram(x))


def _gram(x: torch.Tensor) -> torch.Tensor:
    return _linalg.gram(x)


def _lw_shrinkage(x: torch.Tensor, gram: torch.Tensor) -> float:
    """sklearn's estimator on centred ``x`` given ``gram`` = XXᵀ or XᵀX (same Frobenius norm)."""
    n, d = x.shape
    if d == 1:
        return 0.0
    sq = (x * x).sum(1)  # ‖x_k‖²
    beta_sum = float((sq * sq).sum())  # Σ_ij (X²ᵀX²)_ij
    delta_sum = float((gram * gram).sum()) / n**2  # ‖XᵀX / n‖_F²
    mu = float(sq.sum()) / n / d
    beta = (beta_sum / n - delta_sum) / (d * n)
    delta = (delta_sum - 2.0 * mu * mu * d + d * mu**2) / d
    beta = min(beta, delta)
    return 0.0 if beta == 0 else beta / delta


def shrinkage_h_score(features: Any, labels: Any, alpha: float | None = None, *, fast: bool | None = None) -> float:
    r"""Shrinkage H-score (Ibrahim et al. 2022), higher is better.

    ``Σ_f^α = (1 − α) Σ_f + α (tr Σ_f / d) I`` and the score ``tr((Σ_f^α)^{-1} (1 − α) Σ_z)``, with ``Σ_f`` and
    ``Σ_z`` normalised alike (the normalisation cancels). ``alpha=None`` uses the Ledoit–Wolf estimate, equal
    to ``sklearn.covariance.ledoit_wolf_shrinkage(features)``; ``alpha=0`` is the plain :func:`h_score`
    (pseudo-inverse) and ``alpha=1`` gives 0.

    ``fast=None`` picks the n×n Woodbury route (Eq. 8 of the paper) when ``n < d`` and the d×d route otherwise;
    ``fast=True`` / ``False`` forces one. Both solve one Cholesky system and agree to rounding.
    """
    x, m = _centred_and_indicators(features, labels)
    n, d = x.shape
    use_nxn = (n < d) if fast is None else bool(fast)
    gram_small = _gram(x)
    if alpha is None:
        a = _lw_shrinkage(x, gram_small)
    else:
        try:
            a = float(alpha)
        except (TypeError, ValueError):
            raise ValueError(f"alpha must be a number in [0, 1] or None (Ledoit–Wolf), got {alpha!r}") from None
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"alpha must be in [0, 1] or None (Ledoit–Wolf), got {alpha!r}")
    if a >= 1.0:
        return 0.0
    if a == 0.0:
        return _h_score(x, m, None)
    sigma = float((x * x).sum()) / (n * d)  # tr(Σ_f) / d with Σ_f = XᵀX / n
    lam = n * a * sigma / (1.0 - a)
    if use_nxn:
        k = gram_small if n <= d else _linalg.xxt(x)
        return float(_ridge_trace(k, lam, k @ m, m))  # tr(Mᵀ K (K + λI)^{-1} M)
    s = gram_small if n > d else _linalg.xtx(x)
    r = x.T @ m
    return float(_ridge_trace(s, lam, r, r))  # tr(Rᵀ (XᵀX + λI)^{-1} R), R = XᵀM


def _ridge_trace(a: torch.Tensor, lam: float, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``tr(bᵀ (a + λI)^{-1} c)`` for PSD ``a`` by Cholesky, falling back to an eigendecomposition when the
    shifted matrix is numerically not positive definite (tiny λ)."""
    shifted = a + lam * torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
    chol, info = torch.linalg.cholesky_ex(shifted)
    if int(info) == 0:
        q1 = torch.linalg.solve_triangular(chol, b, upper=False)
        q2 = q1 if c is b else torch.linalg.solve_triangular(chol, c, upper=False)
        return (q1 * q2).sum()
    mu, u = _linalg.eigh(a)
    mu = mu.clamp_min(0) + lam
    keep = mu > mu.max() * a.shape[0] * torch.finfo(a.dtype).eps
    return ((u.T @ b)[keep] * (u.T @ c)[keep] / mu[keep, None]).sum()

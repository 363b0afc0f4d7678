"""LogME: the log maximum evidence of a Bayesian linear model on frozen features.

You, Liu, Wang & Long, "LogME: Practical Assessment of Pre-trained Models for Transfer Learning", ICML 2021
(https://arxiv.org/abs/2102.11005), Eq. 2 and Algorithm 1.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from . import _linalg
from ._validation import check_features, check_labels, check_targets, one_hot

__all__ = ["logme", "logme_per_target"]


def logme(features: Any, labels: Any, regression: bool = False, *, tol: float = 1e-10,
          max_iter: int = 10_000) -> float:
    r"""LogME of ``features`` for ``labels`` (higher is better).

    For every target column ``y`` (the one-hot columns of the labels for classification; the columns of
    ``labels`` for regression) LogME models ``y = F w + ε`` with ``w ~ N(0, α⁻¹ I_d)``, ``ε ~ N(0, β⁻¹ I_n)``
    and maximises the log evidence (You et al. 2021, Eq. 2)

    .. math::
        \mathcal L(α, β) = \tfrac n2 \log β + \tfrac d2 \log α - \tfrac n2 \log 2π
            - \tfrac β2 \lVert F m - y\rVert^2 - \tfrac α2 m^\top m - \tfrac12 \log|A|,

    with ``A = α I_d + β FᵀF`` and ``m = β A⁻¹ Fᵀ y``, by the fixed-point iteration of Algorithm 1:
    ``γ = Σ_i βσ_i / (α + βσ_i)``, ``α ← γ / mᵀm``, ``β ← (n − γ) / ‖F m − y‖²`` (``σ_i`` the eigenvalues of
    ``FᵀF``), until the ratio α/β (on which both updates depend) changes by less than ``tol`` (relative). The
    score is the mean over columns of ``L / n``.

    Exact when ``n < d``: ``FᵀF`` then has ``d − k`` zero eigenvalues (``k = min(n, d)``), and
    ``log|A| = Σ_{i≤k} log(α + βσ_i) + (d − k) log α`` sums over all ``d`` dimensions. Implementations that
    take a thin SVD and drop the ``(d − k) log α`` term return wrong values whenever ``n < d``. Here the
    evidence is evaluated in the equivalent marginal-likelihood form ``log N(y; 0, β⁻¹ I + α⁻¹ F Fᵀ)``, which
    holds those terms by construction. When ``n ≤ d`` and ``F`` has full row rank the evidence can keep
    increasing as β → ∞ (noise-free interpolation), where Algorithm 1 never converges; the supremum is returned.

    Speed: one symmetric eigendecomposition of the smaller Gram matrix (``FᵀF`` if ``n ≥ d``, else
    ``F Fᵀ``) is shared by all columns, which are then iterated together as vectors: each iteration costs
    ``O(k·C)``. Features are used as given (no centring, no bias), as in the paper.

    Args:
        features: ``(n, d)`` array or tensor (numpy or torch, any device; computed in float64).
        labels: integer class ids ``0..C-1`` of shape ``(n,)``; with ``regression=True`` real targets of shape
            ``(n,)`` or ``(n, K)``.
        regression: treat ``labels`` as real-valued targets.
        tol: relative tolerance on α/β for convergence.
        max_iter: iteration cap (a ``RuntimeWarning`` is issued if reached).

    Returns:
        The LogME score (average log evidence per sample), a Python float.
    """
    return float(logme_per_target(features, labels, regression=regression, tol=tol, max_iter=max_iter).mean())


def logme_per_target(features: Any, labels: Any, regression: bool = False, *, tol: float = 1e-10,
                     max_iter: int = 10_000) -> torch.Tensor:
    """The per-column evidence ``L_k / n`` (a float64 tensor of length C or K); :func:`logme` is its mean."""
    f = check_features(features)
    n = f.shape[0]
    if regression:
        y = check_targets(labels, n, device=f.device)
    else:
        lab, num_classes = check_labels(labels, n, device=f.device)
        y = one_hot(lab, num_classes)
    if not (tol > 0):
        raise ValueError(f"tol must be > 0, got {tol!r}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter!r}")
    sigma, z2, res0 = _spectrum(f, y)
    # The iteration works on small (k × C) arrays: threads would only add synchronisation (see _linalg).
    with _linalg.single_threaded(f.device):
        return _max_evidence(sigma, z2, res0, n, tol, int(max_iter))


def _spectrum(f: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eigenvalues ``σ`` (k,) of FᵀF, squared projections ``z² = (Uᵀy)²`` (k, K) onto the left singular
    vectors, and the residual energy of ``y`` outside their span (K,)."""
    n, d = f.shape
    eps = torch.finfo(f.dtype).eps
    if n <= d:
        # F Fᵀ = U diag(σ) Uᵀ with a complete orthonormal U (n×n): y is fully expanded, nothing is left over.
        sigma, u = _linalg.eigh(_linalg.xxt(f))
        sigma = sigma.clamp_min(0)
        sigma = torch.where(sigma > sigma.max() * max(n, d) * eps, sigma, torch.zeros_like(sigma))
        z = u.T @ y
        res0 = torch.zeros(y.shape[1], dtype=f.dtype, device=f.device)
    else:
        # FᵀF = V diag(σ) Vᵀ and Uᵀ y = diag(σ)^{-1/2} Vᵀ Fᵀ y for the non-zero σ.
        sigma, v = _linalg.eigh(_linalg.xtx(f))
        sigma = sigma.clamp_min(0)
        keep = sigma > sigma.max() * max(n, d) * eps
        sigma = torch.where(keep, sigma, torch.zeros_like(sigma))
        z = (v.T @ (f.T @ y)) / torch.where(keep, sigma, torch.ones_like(sigma)).sqrt()[:, None]
        z = torch.where(keep[:, None], z, torch.zeros_like(z))
        res0 = ((y * y).sum(0) - (z * z).sum(0)).clamp_min(0)
    return sigma, z * z, res0


def _max_evidence(sigma: torch.Tensor, z2: torch.Tensor, res0: torch.Tensor, n: int, tol: float, max_iter: int) -> torch.Tensor:
    """Vectorised fixed-point maximisation of the evidence for all K columns at once; returns L/n (K,).

    The updates ``α ← γ/mᵀm``, ``β ← (n − γ)/‖Fm − y‖²`` depend on (α, β) only through ``t = α/β`` (γ, mᵀm and
    the residual are functions of t), so Algorithm 1 is a one-dimensional fixed-point map on ``t`` per column.
    At its fixed point the evidence of Eq. 2 equals the marginal likelihood ``log N(y; 0, β⁻¹(I + FFᵀ/t))``
    maximised over β (``β⁻¹ = Q/n``), which is what is returned:

        L/n = −½ log(Q/n) − (1/2n) Σ_{i≤k} log(1 + σ_i/t) − ½(1 + log 2π),   Q = Σ_i z_i² t/(σ_i + t) + r₀.

    It contains ``log|A|`` over all d dimensions implicitly (exact for n < d). t is kept in
    ``[σ_max·1e-15, σ_max·1e15]``: when n ≤ d and F has full row rank, y can be interpolated and the evidence may
    increase all the way to β → ∞ (t → 0, where Algorithm 1 diverges); the value at the bound is then its
    supremum to ~1e-15 relative. The upper bound covers a target with no component in the span of F (t → ∞).
    """
    tiny = torch.finfo(sigma.dtype).tiny
    s = sigma[:, None]
    s_max = float(sigma.max())
    t_lo, t_hi = s_max * 1e-15, s_max * 1e15
    t = torch.ones(z2.shape[1], dtype=sigma.dtype, device=sigma.device).clamp(t_lo, t_hi)  # α = β = 1 (paper)
    converged = False
    for _ in range(max_iter):
        den = s + t
        gamma = (s / den).sum(0)
        m2 = (s * z2 / den**2).sum(0)
        res2 = ((t / den) ** 2 * z2).sum(0) + res0
        # t_new = α_new / β_new = (γ / mᵀm) / ((n − γ) / ‖Fm − y‖²)
        t_new = (gamma * res2) / ((n - gamma).clamp_min(0) * m2).clamp_min(tiny)
        t_new = torch.nan_to_num(t_new, nan=t_hi, posinf=t_hi).clamp(t_lo, t_hi)
        change = float(((t_new - t).abs() / t).max())
        t = t_new
        if change < tol:
            converged = True
            break
    if not converged:
        warnings.warn(f"logme: fixed-point iteration did not reach tol={tol} in max_iter={max_iter} iterations",
                      RuntimeWarning, stacklevel=3)
    den = s + t
    q = ((t / den) * z2).sum(0) + res0
    log_det = (torch.log(den) - torch.log(t)).sum(0)  # Σ_i log(1 + σ_i / t)
    evidence = -n / 2 * torch.log(q.clamp_min(tiny) / n) - log_det / 2 - n / 2 * (1 + math.log(2 * math.pi))
    return evidence / n

"""SFDA: the Self-challenging Fisher Discriminant Analysis score.

Shao, Zhao, Ge, Zhang, Yang, Wang, Shan & Luo, "Not All Models Are Equal: Predicting Model Transferability in a
Self-challenging Fisher Space", ECCV 2022. Checked against the authors' code, TencentARC/SFDA ``metrics.py``
(class ``SFDA``, functions ``SFDA_Score``, ``_class_means``, ``_cov``) and ``utils.py`` (``iterative_A``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from . import _linalg
from ._validation import DTYPE, check_features, check_labels, check_positive

__all__ = ["sfda"]

_POWER_STEPS = 3  # utils.iterative_A(Sw, max_iterations=3)
_RATE = 5.0  # shrinkage = max(exp(-5 · σ̂), 1e-10)
_FLOOR = 1e-10


def sfda(features: Any, labels: Any, *, shrinkage: float | None = None) -> float:
    r"""SFDA (Shao et al. 2022), in ``[0, 1]``, higher is better.

    With class means ``μ_c``, priors ``π_c = n_c / n`` and the within-class scatter
    ``S_w = (1/n) Σ_i (x_i − μ_{y_i})(x_i − μ_{y_i})ᵀ`` (= ``Σ_c π_c Cov_c``, biased covariances):

    1. shrinkage ``λ = max(exp(−5 σ̂), 1e-10)``, ``σ̂`` the authors' three-step power-iteration estimate of the
       largest eigenvalue of ``S_w`` (start ``v = S_w 1``; three times ``u = S_w v/‖S_w v‖``,
       ``v = S_w u/‖S_w u‖``; ``σ̂ = vᵀ S_w u``);
    2. regularised Fisher space ``S_λ = (1 − λ) S_w + λ (tr S_w / d) I`` and its Bayes posterior
       ``p(c | x) = softmax_c(xᵀ S_λ⁻¹ μ_c − ½ μ_cᵀ S_λ⁻¹ μ_c + log π_c)``;
    3. self-challenge (ConfMix): ``q_i = softmax_c(p(c | x_i))_{y_i}`` (a softmax of the probabilities, the
       authors' "softening"), ``x̃_i = q_i x_i + (1 − q_i) μ̄_{−y_i}`` with ``μ̄_{−c}`` the plain average of the
       other ``C − 1`` class means;
    4. step 2 again on ``x̃`` with the same ``λ``; ``SFDA = (1/n) Σ_i p̃(y_i | x̃_i)`` (a mean probability: the
       authors drop the log "in case of instability").

    Where this departs from the authors' code, and why:

    - The code solves the generalised eigenproblem ``S_b v = ρ S_λ v`` and forms ``coef = M V Vᵀ`` from **all**
      ``d`` eigenvectors (``V`` with ``Vᵀ S_λ V = I``); then ``V Vᵀ = S_λ⁻¹`` exactly, so ``S_b`` (and the total
      scatter it is derived from) never affects the score. Here ``S_λ⁻¹ Mᵀ`` is one Cholesky solve — the same
      numbers, without a d×d generalised eigendecomposition (agreement with the literal algorithm is tested).
    - Inputs stay float64 throughout; the code's ConfMix writes the mixed rows back into the caller's (float32)
      feature array, rounding them, and overwrites the caller's features. Here the inputs are never modified.
    - Labels are re-indexed to the classes present (as every gate score does); the code indexes its ConfMix
      loop and the final probabilities by the raw label ids, so it matches only for labels ``0..C-1``.
    - Where the power iteration breaks down — ``S_w 1 = 0``, e.g. features whose rows sum to a constant, such as
      probabilities — the code starts from rounding noise (or divides 0 by 0: NaN); here ``σ̂`` is then the
      exact largest eigenvalue of ``S_w``.
      Features without any within-class variance (every class a single point) raise ``ValueError``.

    ``λ`` depends on the absolute scale of the features (``σ̂`` has their squared units): SFDA, like the
    authors' code, is not scale invariant. It is invariant to translations and to relabelling the classes.

    Args:
        features: ``(n, d)`` array or tensor (numpy or torch, any device; computed in float64 on that device).
        labels: ``(n,)`` integer class ids.
        shrinkage: a fixed ``λ`` in ``(0, 1]`` instead of the adaptive rule (the code's ``SFDA(shrinkage=...)``).

    Cost: two ``d×d`` Gram matrices of ``n×d`` data, two ``d×d`` Cholesky factorisations, two ``(n×d)(d×C)``
    products.
    """
    device = features.device if isinstance(features, torch.Tensor) else torch.device("cpu")
    # Everything but the two Gram matrices is element-wise passes, small factorisations and (n×d)(d×C)
    # products, where a second thread on a busy 2-core machine only adds synchronisation (see _linalg).
    with _linalg.single_threaded(device):
        f = check_features(features)
        lab, num_classes = check_labels(labels, f.shape[0], device=f.device)
        if shrinkage is not None:
            shrinkage = check_positive(shrinkage, "shrinkage")
            if shrinkage > 1.0:
                raise ValueError(f"shrinkage must be in (0, 1] or None (the authors' adaptive rule), got {shrinkage!r}")
        n = f.shape[0]
        rows = torch.arange(n, device=f.device)
        counts = torch.bincount(lab, minlength=num_classes).to(DTYPE)
    probs, means, lam = _fisher_posterior(f, lab, num_classes, counts, shrinkage)
    with _linalg.single_threaded(device):
        # ConfMix: soften the posteriors by a second softmax and pull each sample towards the other classes.
        q = torch.softmax(probs, dim=1)[rows, lab][:, None]
        others = (means.sum(0, keepdim=True) - means) / (num_classes - 1)
        mixed = q * f + (1.0 - q) * others[lab]
    probs, _, _ = _fisher_posterior(mixed, lab, num_classes, counts, lam)
    return float(probs[rows, lab].mean())


def _fisher_posterior(x: torch.Tensor, lab: torch.Tensor, num_classes: int, counts: torch.Tensor,
                      shrinkage: float | None) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The posterior ``p(c | x_i)`` (n×C) in the regularised Fisher space, the class means and the ``λ`` used."""
    n, d = x.shape
    with _linalg.single_threaded(x.device):
        means = torch.zeros(num_classes, d, dtype=DTYPE, device=x.device).index_add_(0, lab, x) / counts[:, None]
        centred = x - means[lab]
    within = _linalg.xtx(centred) / n  # Σ_c π_c Cov_c (biased): one syrk, with every thread
    with _linalg.single_threaded(x.device):
        trace = float(within.diagonal().sum())
        if not trace > 0:
            raise ValueError("features have no within-class variance (every class is a single point): SFDA's "
                             "Fisher discriminant is undefined")
        if shrinkage is None:
            shrinkage = max(math.exp(-_RATE * max(_largest_eigenvalue(within), 0.0)), _FLOOR)
        shrunk = (1.0 - shrinkage) * within
        shrunk.diagonal().add_(shrinkage * trace / d)
        chol, info = torch.linalg.cholesky_ex(shrunk)
        if int(info) != 0:  # pragma: no cover - λ·tr/d > 0 on the diagonal of a PSD matrix: positive definite
            raise ValueError(f"SFDA: the shrunk within-class scatter is not positive definite (shrinkage={shrinkage})")
        coef = torch.cholesky_solve(means.T.contiguous(), chol)  # S_λ⁻¹ μ_c, (d, C)
        intercept = -0.5 * (means * coef.T).sum(1) + torch.log(counts / n)
        return torch.softmax(x @ coef + intercept, dim=1), means, shrinkage


def _largest_eigenvalue(a: torch.Tensor) -> float:
    """The authors' estimate (``utils.iterative_A``: three steps from ``A 1``); the exact largest eigenvalue where
    the iteration breaks down — ``A 1`` zero up to rounding (its direction is then rounding noise) or a step
    collapsing to the zero vector (where the code divides by zero)."""
    d = a.shape[0]
    v = a.sum(1)
    if float(torch.linalg.vector_norm(v)) <= 8 * d**1.5 * torch.finfo(a.dtype).eps * float(torch.linalg.matrix_norm(a)):
        return float(_linalg.eigvalsh(a)[-1])
    for _ in range(_POWER_STEPS):
        t = a @ v
        norm = torch.linalg.vector_norm(t)
        if not norm > 0:
            return float(_linalg.eigvalsh(a)[-1])
        u = t / norm
        t = a @ u
        norm = torch.linalg.vector_norm(t)
        if not norm > 0:
            return float(_linalg.eigvalsh(a)[-1])
        v = t / norm
    return float(v @ (a @ u))

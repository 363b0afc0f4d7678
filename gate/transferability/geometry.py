"""Scores of the feature geometry alone: TransRate, LFC and RankMe.

- TransRate: Huang, Huang, Xu, Chen, Wei, Zhang, "Frustratingly Easy Transferability Estimation", ICML 2022
  (https://arxiv.org/abs/2106.09362), Eq. 4–6 and the authors' reference code.
- LFC: Deshpande, Achille, Ravichandran, Li, Zancato, Fowlkes, Bhotika, Soatto & Perona, "A linearized
  framework and a new benchmark for model selection for fine-tuning", 2021 (https://arxiv.org/abs/2102.00084).
- RankMe: Garrido, Balestriero, Najman & LeCun, "RankMe: Assessing the Downstream Performance of Pretrained
  Self-Supervised Representations by Their Rank", ICML 2023 (https://arxiv.org/abs/2210.02885), Eq. 1.
"""

from __future__ import annotations

from typing import Any

import torch

from . import _linalg
from ._validation import check_features, check_labels, check_positive, gram, one_hot

__all__ = ["transrate", "lfc", "rankme", "coding_rate"]


def coding_rate(z: torch.Tensor, eps: float) -> torch.Tensor:
    """``R(Z) = ½ logdet(I_d + ZᵀZ / (n·eps))`` of an ``(n, d)`` tensor, on the smaller Gram matrix
    (``det(I_d + ZᵀZ/c) = det(I_n + ZZᵀ/c)``), by Cholesky."""
    n = z.shape[0]
    g = gram(z) / (n * eps)
    g.diagonal().add_(1.0)
    chol, info = torch.linalg.cholesky_ex(g)
    if int(info) == 0:
        return chol.diagonal().log().sum()
    return 0.5 * torch.linalg.slogdet(g)[1]  # pragma: no cover - I + PSD is always positive definite


def transrate(features: Any, labels: Any, eps: float = 1e-4) -> float:
    r"""TransRate (Huang et al. 2022), higher is better.

    ``TrR = R(Z) − (1/C) Σ_c R(Z_c)`` with the coding rate ``R(Z) = ½ logdet(I + ZᵀZ / (n·eps))``, ``Z`` the
    features centred by their global mean and ``Z_c`` its rows of class ``c`` (``n`` is then ``n_c``), as in
    the authors' code. Log-determinants come from Cholesky factors of the smaller Gram matrix of each block.
    """
    f = check_features(features)
    lab, num_classes = check_labels(labels, f.shape[0], device=f.device)
    eps = check_positive(eps, "eps")
    z = f - f.mean(0, keepdim=True)
    rate = coding_rate(z, eps)
    per_class = torch.stack([coding_rate(z[lab == c], eps) for c in range(num_classes)])
    return float(rate - per_class.mean())


def lfc(features: Any, labels: Any) -> float:
    r"""Label-Feature Correlation (Deshpande et al. 2021), in ``[-1, 1]``, higher is better.

    The centred-kernel alignment of the feature kernel ``Θ = F Fᵀ`` with the label kernel ``Y_ij = +1`` if
    ``y_i = y_j`` else ``−1``: ``⟨HΘH, HYH⟩_F / (‖HΘH‖_F ‖HYH‖_F)``, ``H = I − 11ᵀ/n``. Since
    ``HYH = 2 E_c E_cᵀ`` (``E_c`` the centred one-hot labels) and ``HΘH = X Xᵀ`` (``X`` the centred features),
    this is ``‖Xᵀ E_c‖_F² / (‖XᵀX‖_F ‖E_cᵀ E_c‖_F)``, computed without any n×n matrix when ``n > d``.
    """
    f = check_features(features)
    lab, num_classes = check_labels(labels, f.shape[0], device=f.device)
    x = f - f.mean(0, keepdim=True)
    e = one_hot(lab, num_classes)
    e = e - e.mean(0, keepdim=True)
    cross = x.T @ e
    return float((cross * cross).sum() / (torch.linalg.matrix_norm(gram(x)) * torch.linalg.matrix_norm(e.T @ e)))


def rankme(features: Any, eps: float = 1e-7) -> float:
    r"""RankMe (Garrido et al. 2023): the effective rank ``exp(−Σ_k p_k log p_k)``, higher is better.

    ``p_k = σ_k / ‖σ‖_1 + eps`` with ``σ_k`` the singular values of the (uncentred) feature matrix, as in the
    paper's Eq. 1. Singular values come from the eigenvalues of the smaller Gram matrix.
    """
    f = check_features(features)
    eps = check_positive(eps, "eps", allow_zero=True)
    sv = _linalg.eigvalsh(gram(f)).clamp_min(0).sqrt()
    p = sv / sv.sum() + eps
    return float(torch.exp(-torch.special.xlogy(p, p).sum()))

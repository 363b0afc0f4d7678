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
    r"""TransRate (Huang et al. 2022), higher is better, as computed by the widely used reference code.

    ``TrR = R(Z) − (1/C) Σ_c R(Z_c)`` with the coding rate ``R(Z) = ½ logdet(I + ZᵀZ / (n·eps))``, ``Z`` the
    features centred by their global mean and ``Z_c`` its rows of class ``c`` (``n`` is then ``n_c``). This is
    the ten-line ``transrate(features, labels, eps=1e-4)`` that accompanies the paper and is reproduced in
    common libraries (e.g. the Transfer-Learning-Library's ``tllib.ranking.transrate``), not a re-derivation
    from the paper's equations. Where they differ:

    - scale: the code uses ``1/(n·eps)`` inside the log-determinant, where the coding rate of the paper (after
      Yu et al.'s MCR², NeurIPS 2020) is written with ``d/(n·ε²)``; the code's ``eps`` plays the role of
      ``ε²/d``;
    - class weights: the conditional rate is the plain mean ``(1/C) Σ_c R(Z_c)``, whereas MCR²'s conditional
      coding rate weights each class by its share ``n_c/n``; the two agree for balanced classes;
    - preprocessing: only the global centring of the reference code is applied. Any projection, dimension
      reduction or whitening of the features used in the authors' experimental pipeline is not part of this
      function; apply it to ``features`` first if wanted.

    Log-determinants come from Cholesky factors of the smaller Gram matrix of each block. The per-class blocks
    are small (``n_c × n_c``), so they are computed with one thread (scoped by ``threadpoolctl``; no global
    setting changes): with the default two threads on a busy 2-core machine the per-class loop was measured
    an order of magnitude slower (see ``measurements/bench_transferability.py``).
    """
    f = check_features(features)
    lab, num_classes = check_labels(labels, f.shape[0], device=f.device)
    eps = check_positive(eps, "eps")
    z = f - f.mean(0, keepdim=True)
    rate = coding_rate(z, eps)  # one large Gram matrix: keeps every thread
    with _linalg.single_threaded(z.device):
        # Rows grouped by class once (a stable sort keeps their order), instead of a boolean mask per class.
        counts = torch.bincount(lab, minlength=num_classes).tolist()
        blocks = torch.split(z[torch.argsort(lab, stable=True)], counts)
        per_class = torch.stack([coding_rate(block, eps) for block in blocks])
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

"""N-LEEP: LEEP on the posteriors of a Gaussian mixture fitted to (PCA-reduced) features.

Li, Wang, Yang, Yu, Wang & Zhang, "Ranking Neural Checkpoints", CVPR 2021 (https://arxiv.org/abs/2011.11200),
Section 4.2; normalisation ``1 + N-LEEP / H(Y)`` from Ibrahim, Ponomareva & Mazumder, "Newer is not always
better", ECML-PKDD 2022 (https://arxiv.org/abs/2110.06893).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from . import _linalg
from ._validation import DTYPE, check_features, check_labels, entropy_of_labels
from .source import leep_from_probs

__all__ = ["nleep", "n_nleep", "pca_scores"]


def pca_scores(f: torch.Tensor, variance: float) -> torch.Tensor:
    """Principal-component scores of ``f`` keeping the fewest components whose explained-variance ratio exceeds
    ``variance`` (scikit-learn's rule for a fractional ``PCA(n_components=variance)``), from the eigendecomposition
    of the smaller Gram matrix of the centred data. ``variance=1`` keeps every component."""
    x = f - f.mean(0, keepdim=True)
    n, d = x.shape
    if n >= d:
        lam, vec = _linalg.eigh(_linalg.xtx(x))
    else:
        lam, vec = _linalg.eigh(_linalg.xxt(x))
    lam, vec = lam.flip(0).clamp_min(0), vec.flip(1)
    ratio = torch.cumsum(lam / lam.sum(), 0)
    k = len(lam) if variance >= 1.0 else int(torch.searchsorted(ratio, torch.tensor([variance], dtype=ratio.dtype,
                                                                                   device=ratio.device),
                                                                right=True)) + 1
    k = max(1, min(k, len(lam), min(n - 1, d) if n > 1 else 1))
    if n >= d:
        return x @ vec[:, :k]
    return vec[:, :k] * lam[:k].sqrt()


def nleep(features: Any, labels: Any, *, variance: float = 0.8, components_per_class: int = 5,
          covariance_type: str = "full", reg_covar: float = 1e-6, max_iter: int = 100,
          random_state: int = 0) -> float:
    """N-LEEP (Li et al. 2021), ``≤ 0``, higher is better.

    1. PCA keeping ``variance`` (default 80%) of the feature variance (scikit-learn's component-count rule,
       computed by :func:`pca_scores` from one symmetric eigendecomposition); the scores are then
       **standardised** to unit average variance (all divided by one common scale, ``√(tr Cov / q)``), so that
       the mixture — whose ``reg_covar`` is an absolute variance added to every covariance — sees the same data
       at any feature scale. Without it N-LEEP collapsed to the no-information value ``−H(Y)`` (``≈ −log C``)
       for features of scale 1e-5 (``reg_covar`` swamped the covariances) and failed ("ill-defined empirical
       covariance") at scale 1e6. One common scale, not one per component: it leaves the geometry that the
       k-means initialisation and EM see as in Li et al.'s PCA + GMM (at ordinary scales values move only
       through ``reg_covar``'s now relative size, ~1e-7 in the tests), whereas whitening each component would
       weight the weak components like the strong ones (it changed one test value from −0.17 to −0.58);
    2. a Gaussian mixture (scikit-learn ``GaussianMixture``) with ``components_per_class · C`` components
       (default ``5·C``, the paper's setting; capped at ``n``), ``covariance_type`` full as in the paper;
    3. LEEP (see :func:`gate.transferability.leep`) with the mixture posteriors ``p(v | x_i)`` in place of the
       source-model probabilities.

    Deterministic given ``random_state``. Runs on the CPU (scikit-learn); torch inputs are copied there.
    """
    f = check_features(features)
    lab, num_classes = check_labels(labels, f.shape[0], device=f.device)
    return float(_nleep(f, lab, num_classes, variance, components_per_class, covariance_type, reg_covar, max_iter,
                        random_state))


def _nleep(f: torch.Tensor, lab: torch.Tensor, num_classes: int, variance: float, components_per_class: int,
           covariance_type: str, reg_covar: float, max_iter: int, random_state: int) -> torch.Tensor:
    if not 0.0 < float(variance) <= 1.0:
        raise ValueError(f"variance must be in (0, 1], got {variance!r}")
    if int(components_per_class) < 1:
        raise ValueError(f"components_per_class must be >= 1, got {components_per_class!r}")
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    scores = pca_scores(f, float(variance))
    scale = float(scores.var(0).mean().sqrt())  # unit average variance: scale-free (see nleep)
    x = (scores / (scale if scale > 0 else 1.0)).cpu().numpy()
    n_components = min(int(components_per_class) * num_classes, x.shape[0])
    gmm = GaussianMixture(n_components=n_components, covariance_type=covariance_type, reg_covar=reg_covar,
                          max_iter=max_iter, random_state=random_state)
    # EM works on many tiny (q×q) factorisations, where BLAS threading only adds synchronisation overhead
    # (an order of magnitude on a busy 2-core machine): run it single-threaded.
    with warnings.catch_warnings(), _linalg.single_threaded("cpu"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        post = gmm.fit(x).predict_proba(x)
    post = torch.from_numpy(np.ascontiguousarray(post)).to(DTYPE)
    post = post / post.sum(1, keepdim=True)
    return leep_from_probs(post, lab.cpu(), num_classes)


def n_nleep(features: Any, labels: Any, **kwargs: Any) -> float:
    """Normalised N-LEEP ``1 + N-LEEP / H(Y)`` (Ibrahim et al. 2022); keyword arguments as :func:`nleep`."""
    f = check_features(features)
    lab, num_classes = check_labels(labels, f.shape[0], device=f.device)
    params = dict(variance=0.8, components_per_class=5, covariance_type="full", reg_covar=1e-6, max_iter=100,
                  random_state=0)
    unknown = set(kwargs) - set(params)
    if unknown:
        raise TypeError(f"n_nleep got unexpected keyword arguments {sorted(unknown)}; valid: {sorted(params)}")
    params.update(kwargs)
    value = _nleep(f, lab, num_classes, **params)
    return float(1 + value / entropy_of_labels(lab.cpu(), num_classes))

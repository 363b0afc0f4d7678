"""NCTI: the Neural Collapse inspired Transferability Index.

Wang, Luo, Zheng, Huang & Baktashmotlagh, "How Far Pre-trained Models Are from Neural Collapse on the Target
Dataset Informs their Transferability", ICCV 2023. Checked against the authors' code, BUserName/NCTI
``metrics.py`` (``NCTI_Score``: the three per-model terms) and ``evaluate_metric_group1_cpu.py`` (how the terms
of a pool of models are normalised and combined).

NCTI is **relative to a pool of models**: each of its three terms is min–max normalised across the models
scored on one dataset before they are added. A function of one model's features can only return the terms;
:func:`ncti_terms` does, and :func:`ncti` combines the terms of a pool. ``SCORES`` registers the three terms as
per-model scores (``ncti_seli``, ``ncti_ncc``, ``ncti_collapse``, all higher-is-better), so that ``gate-score``
records them per encoder and NCTI of any pool can be formed from the records afterwards.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from . import _linalg
from ._validation import check_features, check_labels

__all__ = ["NCTITerms", "ncti_terms", "ncti", "ncti_seli", "ncti_ncc", "ncti_collapse"]

_COMPONENTS = 64  # PCA(n_components=64)
_SHRINK_FROM = 32  # shrinkage = exp(-Σ of the 32 largest explained variances)
_FLOOR = 1e-10  # at or below it: LinearDiscriminantAnalysis(solver="svd"), no shrinkage


@dataclasses.dataclass(frozen=True)
class NCTITerms:
    """The three per-model terms of NCTI, as the authors' ``NCTI_Score`` returns them.

    - ``seli``: ``‖Z − 1z̄ᵀ‖_*``, the nuclear norm of the centred LDA projection (simplex encoded label
      interpolation; higher is better);
    - ``ncc``: ``(1/n) Σ_i p(y_i | x_i)``, the LDA (nearest class centre) posterior of the true class (higher is
      better);
    - ``vc``: ``log Σ_c ‖P_c‖_*``, the nuclear norms of each class's posterior matrix (within-class variability:
      **lower** is better, i.e. more collapsed).
    """

    seli: float
    ncc: float
    vc: float


def ncti_terms(features: Any, labels: Any) -> NCTITerms:
    r"""The three NCTI terms of one model's features (see :class:`NCTITerms`); combine a pool with :func:`ncti`.

    As in the authors' ``NCTI_Score``:

    1. PCA to ``k = 64`` components (scores ``X``, centred), explained variances ``ν_1 ≥ ν_2 ≥ …`` (``1/(n−1)``);
    2. ``a = exp(−Σ_{j≤32} ν_j)``; if ``a ≤ 1e-10`` scikit-learn's ``LinearDiscriminantAnalysis(solver="svd")``,
       else ``LinearDiscriminantAnalysis(solver="eigen", shrinkage=a)``, fitted on ``(X, y)``;
    3. ``Z`` = its transform of ``X`` (``min(C − 1, k)`` discriminant directions), centred: ``seli = ‖Z‖_*``;
    4. ``P`` = its ``predict_proba(X)``: ``ncc = mean_i P[i, y_i]``, ``vc = log Σ_c ‖P[y = c]‖_*``.

    Where this departs from the authors' code, and why:

    - PCA is exact (the leading eigenvectors of the smaller Gram matrix, as ``PCA(svd_solver="full")``); the
      code's ``PCA(n_components=64)`` lets scikit-learn pick its randomised solver for large inputs, unseeded
      (it draws from numpy's global RNG), which approximates the same components: on 3000×256 ReLU-like
      features with 30 classes the randomised solver moved the three terms by 1e-6 to 2e-4 (relative), by a
      different amount for each seed.
    - ``k = min(64, d, n − 1)``: the code fails for ``d < 64`` or ``n ≤ 64``; components beyond ``n − 1`` have zero
      variance (noise that the LDA would whiten up), so they are not kept. The shrinkage sums the
      ``min(32, k)`` leading variances.
    - Labels are re-indexed to the classes present (the code's per-class loop and ``P[i, y_i]`` index raw ids).

    The LDA is scikit-learn's own estimator — the authors' classifier, with its rank handling — on the
    ``n × k`` scores (on the CPU: small). The shrinkage rule depends on the absolute scale of the features, so
    the terms are not scale invariant; they are invariant to rotations and translations of the features.
    """
    device = features.device if isinstance(features, torch.Tensor) else torch.device("cpu")
    with _linalg.single_threaded(device):  # element-wise checks: threads only synchronise (see _linalg)
        f = check_features(features)
        lab, num_classes = check_labels(labels, f.shape[0], device=f.device)
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    scores, variances = _principal_scores(f, min(_COMPONENTS, f.shape[1], f.shape[0] - 1))
    shrinkage = math.exp(-float(variances[:_SHRINK_FROM].sum()))
    if shrinkage <= _FLOOR:
        lda = LinearDiscriminantAnalysis(solver="svd")
    else:
        lda = LinearDiscriminantAnalysis(solver="eigen", shrinkage=shrinkage)
    x = scores.cpu().numpy()
    y = lab.cpu().numpy()
    # Small (n × k) problems and per-class SVDs: threads only synchronise (scoped, see _linalg).
    with _linalg.single_threaded("cpu"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Variables are collinear")  # handled by the svd solver's rank cut
        z = lda.fit_transform(x, y)
        probs = lda.predict_proba(x)
        z = torch.from_numpy(np.ascontiguousarray(z))
        probs = torch.from_numpy(np.ascontiguousarray(probs))
        y_t = torch.from_numpy(y)
        seli = float(torch.linalg.svdvals(z - z.mean(0, keepdim=True)).sum())
        ncc = float(probs[torch.arange(len(y_t)), y_t].mean())
        order = torch.argsort(y_t, stable=True)
        blocks = torch.split(probs[order], torch.bincount(y_t, minlength=num_classes).tolist())
        vc = math.log(float(sum(torch.linalg.svdvals(block).sum() for block in blocks)))
    return NCTITerms(seli=seli, ncc=ncc, vc=vc)


def _principal_scores(f: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The scores on the ``k`` leading principal components and their explained variances (descending)."""
    with _linalg.single_threaded(f.device):
        x = f - f.mean(0, keepdim=True)
    n, d = x.shape
    gram = _linalg.xtx(x) if n >= d else _linalg.xxt(x)  # the one step that keeps every thread
    lam, vec = _linalg.eigh(gram)
    with _linalg.single_threaded(f.device):
        lam, vec = lam.flip(0)[:k].clamp_min(0), vec.flip(1)[:, :k]
        scores = x @ vec if n >= d else vec * lam.sqrt()
    return scores, lam / (n - 1)


def ncti_seli(features: Any, labels: Any) -> float:
    """NCTI's ``seli`` term of one model (see :func:`ncti_terms`); higher is better."""
    return ncti_terms(features, labels).seli


def ncti_ncc(features: Any, labels: Any) -> float:
    """NCTI's ``ncc`` term of one model (see :func:`ncti_terms`); higher is better."""
    return ncti_terms(features, labels).ncc


def ncti_collapse(features: Any, labels: Any) -> float:
    """``−vc`` (see :func:`ncti_terms`): NCTI's within-class variability term negated, so that higher is better
    (more collapsed), like every score in ``SCORES``."""
    return -ncti_terms(features, labels).vc


def ncti(pool: Mapping[str, NCTITerms | Mapping[str, float]]) -> dict[str, float]:
    r"""NCTI of every model of a pool scored on one dataset (the authors' ``evaluate_metric_group1_cpu.py``):

    ``NCTI_m = ŝeli_m + n̂cc_m − v̂c_m``, each term min–max normalised over the pool
    (``t̂_m = (t_m − min_j t_j) / (max_j t_j − min_j t_j)``), so ``NCTI ∈ [−1, 2]``; higher is better.

    ``pool`` maps a model name to its :class:`NCTITerms`, or to its recorded scores
    ``{"ncti_seli": …, "ncti_ncc": …, "ncti_collapse": …}`` (``ncti_collapse = −vc``; since the normalisation
    of ``−vc`` is ``1 − v̂c``, the same value results). Departure: a term equal for every model (a pool of one,
    say) has no spread to normalise; the authors' division by zero gives NaN, here it contributes 0.
    """
    if not pool:
        raise ValueError("pool must hold the NCTI terms of at least one model, got an empty mapping")
    terms = {name: _as_terms(name, value) for name, value in pool.items()}
    columns = {key: np.array([getattr(t, key) for t in terms.values()], dtype=np.float64) for key in ("seli", "ncc", "vc")}
    normalised = {key: _min_max(values) for key, values in columns.items()}
    return {name: float(normalised["seli"][i] + normalised["ncc"][i] - normalised["vc"][i])
            for i, name in enumerate(terms)}


def _as_terms(name: str, value: Any) -> NCTITerms:
    if isinstance(value, NCTITerms):
        return value
    keys = ("ncti_seli", "ncti_ncc", "ncti_collapse")
    if not isinstance(value, Mapping) or not set(keys) <= set(value):
        raise ValueError(f"pool[{name!r}] must be NCTITerms or a mapping with keys {list(keys)}, got {value!r}")
    out = NCTITerms(seli=float(value["ncti_seli"]), ncc=float(value["ncti_ncc"]), vc=-float(value["ncti_collapse"]))
    if not all(math.isfinite(v) for v in (out.seli, out.ncc, out.vc)):
        raise ValueError(f"pool[{name!r}] holds a non-finite NCTI term: {value!r}")
    return out


def _min_max(values: np.ndarray) -> np.ndarray:
    spread = values.max() - values.min()
    return (values - values.min()) / spread if spread > 0 else np.zeros_like(values)

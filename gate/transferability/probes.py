"""Probe accuracies on frozen features: k-nearest-neighbour and linear (logistic-regression) probes.

Both are cross-validated on the given features and labels with scikit-learn's ``StratifiedKFold(n_splits,
shuffle=True, random_state)``, and both return the mean over folds of the fold's accuracy — what
``sklearn.model_selection.cross_val_score(estimator, X, y, cv=that_splitter).mean()`` returns.

- k-NN: the k-nearest-neighbour rule (Cover & Hart, "Nearest neighbor pattern classification", IEEE Trans.
  Information Theory 1967), as frozen-feature evaluation uses it (e.g. Wu, Xiong, Yu & Lin, CVPR 2018; Caron et
  al., "Emerging Properties in Self-Supervised Vision Transformers", ICCV 2021 — there with a temperature-weighted
  vote; here a plain majority vote, scikit-learn's ``KNeighborsClassifier(weights="uniform")``).
- Linear probe: multinomial logistic regression on standardised features (Kornblith, Shlens & Le, "Do Better
  ImageNet Models Transfer Better?", CVPR 2019, whose linear evaluation is L-BFGS logistic regression).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import _linalg
from ._validation import check_features, check_labels

__all__ = ["knn_acc", "linear_probe_acc", "stratified_folds"]

_METRICS = ("cosine", "euclidean")
_CHUNK = 1 << 22  # test × train distances held at once (32 MiB of float64)


def _positive_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def stratified_folds(labels: np.ndarray, n_splits: int, random_state: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) index pairs of ``StratifiedKFold(n_splits, shuffle=True, random_state)``.

    ``n_splits`` is lowered to the size of the largest class when every class is smaller (scikit-learn would
    refuse: a tiny subsample still gets a cross-validated number); a class smaller than ``n_splits`` is absent
    from some test folds, and scikit-learn says so with a ``UserWarning``. Fewer than two samples in every
    class leaves nothing to cross-validate: ``ValueError``.
    """
    from sklearn.model_selection import StratifiedKFold

    largest = int(np.bincount(labels).max())
    if largest < 2:
        raise ValueError("labels: every class has a single sample; cross-validation needs a class with >= 2 samples")
    splitter = StratifiedKFold(n_splits=min(n_splits, largest), shuffle=True, random_state=random_state)
    return list(splitter.split(np.zeros((len(labels), 1)), labels))


def knn_acc(features: Any, labels: Any, *, k: int = 20, metric: str = "cosine", n_splits: int = 5,
            random_state: int = 0) -> float:
    r"""Cross-validated k-NN accuracy on frozen features, in ``[0, 1]``, higher is better.

    Each test sample takes the majority label of its ``k`` nearest training samples (``min(k, n_train)``);
    a tie between labels goes to the smallest class id, as in scikit-learn's ``KNeighborsClassifier``
    (``weights="uniform"``); ties in distance (duplicated points) are broken arbitrarily, as there.
    ``metric="cosine"`` ranks by cosine similarity (``1 − cos`` is scikit-learn's cosine distance; a zero row has
    distance 1 to everything); ``metric="euclidean"`` by Euclidean distance.

    Defaults: ``k = 20`` and cosine similarity, the usual frozen-feature k-NN evaluation (Wu et al. 2018; Caron et
    al. 2021); 5 stratified folds. Computed with torch on the features' device, float64, in chunks of test rows
    (one ``n_test × n_train`` block at a time). Deterministic given ``random_state`` (the folds).
    """
    f = check_features(features)
    lab, num_classes = check_labels(labels, f.shape[0], device=f.device)
    k = _positive_int(k, "k", 1)
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {list(_METRICS)}, got {metric!r}")
    n_splits = _positive_int(n_splits, "n_splits", 2)
    folds = stratified_folds(lab.cpu().numpy(), n_splits, random_state)
    if metric == "cosine":
        f = f / torch.linalg.vector_norm(f, dim=1, keepdim=True).clamp_min(torch.finfo(f.dtype).tiny)
    sq = (f * f).sum(1)
    accuracies = []
    for train, test in folds:
        train_t = torch.as_tensor(train, device=f.device)
        ref, ref_lab, ref_sq = f[train_t], lab[train_t], sq[train_t]
        kk = min(k, len(train))
        correct = 0
        step = max(1, _CHUNK // len(train))
        for start in range(0, len(test), step):
            rows = torch.as_tensor(test[start:start + step], device=f.device)
            sim = f[rows] @ ref.T  # larger = nearer: cos, or −½‖a − b‖² up to a per-row constant; every thread
            with _linalg.single_threaded(f.device):  # element-wise passes and selection: one thread (see _linalg)
                if metric == "euclidean":
                    sim = sim - 0.5 * ref_sq[None, :]
                nearest = torch.topk(sim, kk, dim=1).indices
                votes = torch.zeros(len(rows), num_classes, dtype=torch.int64, device=f.device)
                votes.scatter_add_(1, ref_lab[nearest], torch.ones_like(nearest))
                correct += int((votes.argmax(1) == lab[rows]).sum())  # argmax: the first (smallest) id among ties
        accuracies.append(correct / len(test))
    return float(np.mean(accuracies))


def linear_probe_acc(features: Any, labels: Any, *, C: float = 1.0, max_iter: int = 1000, n_splits: int = 5,
                     random_state: int = 0) -> float:
    r"""Cross-validated linear-probe accuracy on frozen features, in ``[0, 1]``, higher is better.

    Per fold: ``StandardScaler`` fitted on the training part, then scikit-learn's ``LogisticRegression(C=C,
    max_iter=max_iter)`` (multinomial, L2 penalty ``½‖W‖²``, L-BFGS), accuracy on the test part.

    Defaults, and why: features are standardised so that one ``C`` means the same regularisation for every
    encoder whatever the scale of its features (scores must be comparable across encoders); ``C = 1``
    (scikit-learn's default) — a fixed value, because tuning ``C`` per encoder (as Kornblith et al. 2019 do)
    multiplies the cost by the size of the grid, and a fixed moderate L2 penalty keeps the problem strongly
    convex even when ``d > n``; ``max_iter = 1000`` instead of scikit-learn's 100, because on a thousand
    standardised features L-BFGS can stop at 100 iterations before converging, and then the accuracy measures the
    iteration budget rather than the features (scikit-learn's ``ConvergenceWarning`` is passed on if 1000 is
    not enough either).

    Runs on the CPU (scikit-learn), in a scoped one-thread ``threadpoolctl`` limit (measured 4x faster than the
    default threads on a busy 2-core machine; on an idle many-core machine this forgoes parallel BLAS); torch
    inputs are copied there. L-BFGS is deterministic, so the value is a function of ``random_state`` (the
    folds) alone.
    """
    f = check_features(features)
    lab, _ = check_labels(labels, f.shape[0], device=f.device)
    try:
        c = float(C)
    except (TypeError, ValueError):
        raise ValueError(f"C must be a positive number, got {C!r}") from None
    if not (np.isfinite(c) and c > 0):
        raise ValueError(f"C must be a positive number (inverse L2 strength), got {C!r}")
    max_iter = _positive_int(max_iter, "max_iter", 1)
    n_splits = _positive_int(n_splits, "n_splits", 2)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = f.cpu().numpy()
    y = lab.cpu().numpy()
    accuracies = []
    # One thread (scoped): with its default threads (OpenMP loss, BLAS) L-BFGS took 14-16 s against 3-4 s
    # single-threaded at n=5000, d=1024, C=100 on this project's busy 2-core machine.
    with _linalg.single_threaded("cpu"):
        for train, test in stratified_folds(y, n_splits, random_state):
            present = np.unique(y[train])
            if len(present) < 2:  # a tiny subsample's fold: every prediction is the one class seen in training
                accuracies.append(float((y[test] == present[0]).mean()))
                continue
            probe = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter))
            probe.fit(x[train], y[train])
            accuracies.append(float((probe.predict(x[test]) == y[test]).mean()))
    return float(np.mean(accuracies))

"""Shared, scikit-learn-style input checks for the transferability metrics.

Every public metric funnels its inputs through these helpers, so that all of them reject the same bad
inputs with the same kind of message: a ``ValueError`` that names the offending argument and says what
would be valid. Inputs may be numpy arrays, torch tensors (any device) or nested lists; the helpers
return float64 torch tensors on the input's device (labels follow the features' device).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

DTYPE = torch.float64


def as_tensor(x: Any, name: str, *, device: torch.device | None = None) -> torch.Tensor:
    """``x`` as a torch tensor (no copy where possible), on ``device`` if given, else where it lives."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # pragma: no cover - exotic inputs
            raise ValueError(f"{name} must be array-like (numpy array or torch tensor), got {type(x).__name__}") from exc
        if arr.dtype == object or arr.dtype.kind in "USV":
            raise ValueError(f"{name} must be numeric, got an array of dtype {arr.dtype}")
        if arr.dtype.kind == "b":
            arr = arr.astype(np.int64)
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.is_complex():
        raise ValueError(f"{name} must be real-valued, got a complex tensor")
    if device is not None and t.device != device:
        t = t.to(device)
    return t


def _check_finite(t: torch.Tensor, name: str) -> None:
    # A finite sum has no NaN or infinite term: one reduction (2.7 ms for 5000×1024 float64, against 57 ms for
    # the element-wise test, which then runs only to count the bad entries or when the sum overflows).
    if t.is_floating_point() and not bool(torch.isfinite(t.sum())) and not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s); all entries must be finite")


def check_features(x: Any, name: str = "features", *, min_samples: int = 2) -> torch.Tensor:
    """A finite ``(n, d)`` float64 matrix with ``n >= min_samples`` rows that are not all identical."""
    t = as_tensor(x, name)
    if t.ndim == 1:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_features), got shape {tuple(t.shape)}; "
                         "reshape a single feature with x.reshape(-1, 1)")
    if t.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_features), got shape {tuple(t.shape)}")
    n, d = t.shape
    if n < min_samples:
        raise ValueError(f"{name} needs at least {min_samples} samples (rows), got n={n}")
    if d < 1:
        raise ValueError(f"{name} needs at least one feature (column), got shape {tuple(t.shape)}")
    t = t.to(DTYPE)
    _check_finite(t, name)
    if (n < 2 or not bool((t[1] != t[0]).any())) and bool((t == t[:1]).all()):  # rows 0, 1 differ: fine
        raise ValueError(f"{name} is constant (every row is identical): no metric can be computed from it")
    return t


def check_labels(y: Any, n: int, name: str = "labels", *, device: torch.device | None = None,
                 other: str = "features") -> tuple[torch.Tensor, int]:
    """Class labels as int64 ``0..C-1`` with at least two classes present.

    Labels must be integers (an integer dtype, or floats with integral values) in ``0..K-1``; classes of
    ``0..K-1`` that do not occur are dropped, so the returned labels are re-indexed to the ``C`` classes
    present (this is what every metric uses, and it makes them invariant to unused class ids).
    Returns ``(labels, C)``.
    """
    t = as_tensor(y, name, device=device)
    if t.ndim == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of integer class ids 0..C-1, got shape {tuple(t.shape)}")
    if t.shape[0] != n:
        raise ValueError(f"{name} has {t.shape[0]} entries but {other} has {n} rows; they must have the same length")
    if t.is_floating_point():
        _check_finite(t, name)
        if not bool((t == torch.round(t)).all()):
            raise ValueError(f"{name} must be integer class ids 0..C-1, got non-integer values "
                             "(for a regression target use regression=True where the metric supports it)")
    t = t.to(torch.int64)
    if n and int(t.min()) < 0:
        raise ValueError(f"{name} must be integer class ids 0..C-1, got a negative id {int(t.min())}")
    classes, inverse = torch.unique(t, return_inverse=True)
    if classes.numel() < 2:
        raise ValueError(f"{name} must contain at least 2 classes, got {classes.numel()} "
                         f"(class ids present: {classes.tolist()})")
    return inverse, int(classes.numel())


def check_targets(y: Any, n: int, name: str = "labels", *, device: torch.device | None = None) -> torch.Tensor:
    """A finite regression target of shape ``(n,)`` or ``(n, K)``, returned as float64 ``(n, K)``."""
    t = as_tensor(y, name, device=device)
    if t.ndim == 1:
        t = t[:, None]
    if t.ndim != 2:
        raise ValueError(f"{name} must have shape (n,) or (n, K) for regression, got shape {tuple(t.shape)}")
    if t.shape[0] != n:
        raise ValueError(f"{name} has {t.shape[0]} rows but features has {n}; they must have the same length")
    t = t.to(DTYPE)
    _check_finite(t, name)
    return t


def check_probs(p: Any, name: str = "source_probs", *, atol: float = 1e-3) -> torch.Tensor:
    """A finite ``(n, Z)`` matrix of probabilities: non-negative rows that sum to 1 (within ``atol``)."""
    t = as_tensor(p, name)
    if t.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_source_classes), got shape {tuple(t.shape)}")
    if t.shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 samples (rows), got n={t.shape[0]}")
    if t.shape[1] < 1:
        raise ValueError(f"{name} needs at least one source class (column), got shape {tuple(t.shape)}")
    t = t.to(DTYPE)
    _check_finite(t, name)
    if bool((t < 0).any()):
        raise ValueError(f"{name} must be probabilities, got {int((t < 0).sum())} negative entries "
                         "(pass softmax(logits), not logits)")
    sums = t.sum(dim=1)
    worst = float((sums - 1).abs().max())
    if worst > atol:
        raise ValueError(f"{name} rows must sum to 1 (probabilities), but a row sums to {float(sums[(sums - 1).abs().argmax()]):.6g}"
                         " (pass softmax(logits), not logits)")
    return t


def check_source_labels(z: Any, n: int, name: str = "source_labels", *, device: torch.device | None = None) -> torch.Tensor:
    """Hard source labels: integer ids ``>= 0`` of shape ``(n,)``; a probability matrix is reduced by argmax."""
    t = as_tensor(z, name, device=device)
    if t.ndim == 2 and t.shape[1] > 1:
        return check_probs(t, name).argmax(dim=1)
    if t.ndim == 2:
        t = t[:, 0]
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D integer source-class ids (or an (n, Z) probability matrix), "
                         f"got shape {tuple(t.shape)}")
    if t.shape[0] != n:
        raise ValueError(f"{name} has {t.shape[0]} entries but labels has {n}; they must have the same length")
    if t.is_floating_point():
        _check_finite(t, name)
        if not bool((t == torch.round(t)).all()):
            raise ValueError(f"{name} must be integer source-class ids, got non-integer values")
    t = t.to(torch.int64)
    if int(t.min()) < 0:
        raise ValueError(f"{name} must be non-negative integer ids, got {int(t.min())}")
    return t


def check_positive(value: Any, name: str, *, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'} and finite, got {value!r}")
    return v


def one_hot(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(labels, num_classes).to(DTYPE)


def entropy_of_labels(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Empirical entropy H(Y) in nats of integer labels ``0..C-1``."""
    p = torch.bincount(labels, minlength=num_classes).to(DTYPE) / labels.shape[0]
    p = p[p > 0]
    return -(p * p.log()).sum()


def gram(x: torch.Tensor) -> torch.Tensor:
    """The smaller of ``x xᵀ`` and ``xᵀ x`` (their non-zero eigenvalues coincide)."""
    from ._linalg import gram as _gram

    return _gram(x)

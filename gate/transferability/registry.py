"""The metric registries used by ``gate-score`` and the analysis stage.

``SCORES`` holds the supervised transferability scores, each declaring which input it needs: ``"features"``
(the encoder's pooled features) or ``"source_probs"`` (its source-head probabilities, only for encoders with a
classification head). NCTI is relative to a pool of models, so its three per-model terms are registered
(``ncti_seli``, ``ncti_ncc``, ``ncti_collapse``); :func:`gate.transferability.ncti` combines a pool's terms.
A score that fits a matrix of the features on the very rows it scores declares which (``fits``); where the rank of
the features reaches that matrix's largest rank the score no longer depends on the labels, and
:meth:`Metric.degenerate` says so (measurements/score_degeneracy.py; docs/design.md "Transferability scores").
``DISCREPANCIES`` holds the unsupervised source–target discrepancies. Directions and citations are not stated
here: :attr:`Metric.higher_is_better` and :attr:`Metric.citation` read them from :mod:`gate.metrics`, the one
registry of metric names (all scores are higher-is-better there, all discrepancies lower-is-better).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from .. import metrics as _metrics
from ..registry import Registry
from . import collapse, discrepancy, energy, evidence, fisher, geometry, hscore, mixture, probes, source
from ._validation import check_features

__all__ = ["Metric", "SCORES", "DISCREPANCIES", "applicable_scores", "feature_rank"]

# The matrix a score fits on the rows it scores → its largest rank: n rows centred per class span at most n − C
# dimensions, centred once n − 1. Once the features' own rank reaches it, the fit is exact for any labels.
FITTED = {"within-class scatter": lambda n, c: (n - c, f"{n} rows − {c} classes"),
          "covariance": lambda n, c: (n - 1, f"{n} rows − 1")}


def feature_rank(features: Any) -> int:
    """The rank of the centred features: eigenvalues of their covariance above ``max(n, d) · eps`` (float64) of the
    largest — the rank H-score's pseudo-inverse keeps (its default ``rcond``), and about the smallest direction
    SFDA's floor shrinkage (``λ = 1e-10`` of the mean eigenvalue) still resolves. Not the width: pooled features are
    often far from full rank (EfficientNet-Lite0 at 32 px on 500 digits: width 1280, rank 241), and real features'
    spectra fall to rounding (~1e-17 of the largest singular value) well below this tolerance (~5e-7 at n = 500,
    d = 1280), while a float32 tolerance (~2e-4) would cut real directions (random-init EfficientNetV2: 1e-4 – 6e-5)."""
    x = check_features(features)
    n, d = x.shape
    sv = torch.linalg.svdvals(x - x.mean(0))
    return int(((sv / sv[0]) ** 2 > max(n, d) * torch.finfo(sv.dtype).eps).sum())


@dataclasses.dataclass(frozen=True)
class Metric:
    """A named metric: its function and the input it needs; direction and citation come from
    :mod:`gate.metrics` (``KeyError`` if the name is not registered there)."""

    name: str
    fn: Callable[..., float]
    needs: str = "features"
    uses_labels: bool = True
    fits: str | None = None  # a key of FITTED: the matrix it fits on the rows it scores

    def __post_init__(self) -> None:
        if self.fits is not None and self.fits not in FITTED:
            raise ValueError(f"metric {self.name!r}: fits={self.fits!r}; known: {sorted(FITTED)} or None")

    def degenerate(self, num_samples: int, num_classes: int, *, feature_rank: int | None = None,
                   feature_dim: int | None = None) -> str | None:
        """Why this score cannot discriminate on ``num_samples`` rows in ``num_classes`` classes whose features have
        rank ``feature_rank`` (:func:`feature_rank`), e.g. ``"feature rank 499 ≥ 500 rows − 10 classes"``, or None:
        a score that fits a matrix on the rows it scores (``fits``) gives its ceiling for any labels once the
        features' rank reaches that matrix's largest. Without the rank (a record stored before it was), the width
        ``feature_dim`` bounds it, and the reason says the rank decides."""
        if self.fits is None:
            return None
        if feature_rank is None and feature_dim is None:
            raise ValueError(f"{self.name}: degenerate() needs feature_rank (or, without it, feature_dim)")
        most, rows = FITTED[self.fits](int(num_samples), int(num_classes))
        if feature_rank is not None:
            return f"feature rank {int(feature_rank)} ≥ {rows}" if feature_rank >= most else None
        return (f"width {int(feature_dim)} ≥ {rows}, feature rank not recorded (it decides; gate-score force=true "
                "records it)") if feature_dim >= most else None

    @property
    def higher_is_better(self) -> bool:
        return _metrics.higher_is_better(self.name)

    @property
    def citation(self) -> str:
        info = _metrics.lookup(self.name)
        if info is None:
            _metrics.higher_is_better(self.name)  # raises the registry's KeyError
        return info.citation

    def __call__(self, *, labels: Any = None, features: Any = None, source_probs: Any = None, **kwargs: Any) -> float:
        data = features if self.needs == "features" else source_probs
        if data is None:
            raise ValueError(f"metric {self.name!r} needs {self.needs!r}, which was not given")
        if self.uses_labels:
            if labels is None:
                raise ValueError(f"metric {self.name!r} needs labels")
            return float(self.fn(data, labels, **kwargs))
        return float(self.fn(data, **kwargs))


SCORES: Registry[Metric] = Registry("transferability score")
DISCREPANCIES: Registry[Metric] = Registry("discrepancy")
for _metric in (
        Metric("logme", evidence.logme),
        Metric("h_score", hscore.h_score, fits="covariance"),  # C − 1 from rank n − 1
        Metric("shrinkage_h_score", hscore.shrinkage_h_score),
        Metric("nleep", mixture.nleep),
        Metric("n_nleep", mixture.n_nleep),
        Metric("transrate", geometry.transrate),
        Metric("lfc", geometry.lfc),
        Metric("rankme", geometry.rankme, uses_labels=False),
        Metric("sfda", fisher.sfda, fits="within-class scatter"),  # 1 from rank n − C
        Metric("ncti_seli", collapse.ncti_seli),
        Metric("ncti_ncc", collapse.ncti_ncc),
        Metric("ncti_collapse", collapse.ncti_collapse),
        Metric("etran_energy", energy.etran_energy, uses_labels=False),
        Metric("knn_acc", probes.knn_acc),
        Metric("linear_probe_acc", probes.linear_probe_acc),
        Metric("leep", source.leep, needs="source_probs"),
        Metric("n_leep", source.n_leep, needs="source_probs"),
        Metric("nce", source.nce, needs="source_probs"),
        Metric("n_nce", source.n_nce, needs="source_probs"),
):
    SCORES.register(_metric.name, _metric)
for _metric in (
        Metric("coral", discrepancy.coral, uses_labels=False),
        Metric("mmd", discrepancy.mmd, uses_labels=False),
        Metric("cmd", discrepancy.cmd, uses_labels=False),
        Metric("ot", discrepancy.ot, uses_labels=False),
        Metric("kld", discrepancy.kld, uses_labels=False),
        Metric("wd", discrepancy.wd, uses_labels=False),
):
    DISCREPANCIES.register(_metric.name, _metric)


def applicable_scores(has_source_probs: bool, names: list[str] | None = None) -> list[str]:
    """The score names to compute: ``names`` (validated) or every score whose input is available."""
    if names is None:
        return [k for k, m in SCORES.items() if m.needs == "features" or has_source_probs]
    unknown = [k for k in names if k not in SCORES]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known: {sorted(SCORES)}")
    missing = [k for k in names if SCORES[k].needs == "source_probs" and not has_source_probs]
    if missing:
        raise ValueError(f"metric(s) {missing} need source-class probabilities, but the encoder has no source "
                         "classification head; drop them or pick an encoder with num_source_classes")
    return list(dict.fromkeys(names))

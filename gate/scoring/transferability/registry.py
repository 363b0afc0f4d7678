"""The metric registries used by ``gate-score`` and the analysis stage.

``SCORES`` holds the supervised transferability scores, each declaring which input it needs: ``"features"``
(the encoder's pooled features) or ``"source_probs"`` (its source-head probabilities, only for encoders with a
classification head). NCTI is relative to a pool of models, so its three per-model terms are registered
(``ncti_seli``, ``ncti_ncc``, ``ncti_collapse``); :func:`gate.scoring.transferability.ncti` combines a pool's terms.
``DISCREPANCIES`` holds the unsupervised source–target discrepancies. Directions and citations are not stated
here: :attr:`Metric.higher_is_better` and :attr:`Metric.citation` read them from :mod:`gate.metrics`, the one
registry of metric names (all scores are higher-is-better there, all discrepancies lower-is-better).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ... import metrics as _metrics
from . import collapse, discrepancy, energy, evidence, fisher, geometry, hscore, mixture, probes, source

__all__ = ["Metric", "SCORES", "DISCREPANCIES", "applicable_scores"]

INPUTS = ("features", "source_probs")


@dataclasses.dataclass(frozen=True)
class Metric:
    """A named metric: its function and the input it needs; direction and citation come from
    :mod:`gate.metrics` (``KeyError`` if the name is not registered there)."""

    name: str
    fn: Callable[..., float]
    needs: str = "features"
    uses_labels: bool = True

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


SCORES: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("logme", evidence.logme),
        Metric("h_score", hscore.h_score),
        Metric("shrinkage_h_score", hscore.shrinkage_h_score),
        Metric("nleep", mixture.nleep),
        Metric("n_nleep", mixture.n_nleep),
        Metric("transrate", geometry.transrate),
        Metric("lfc", geometry.lfc),
        Metric("rankme", geometry.rankme, uses_labels=False),
        Metric("sfda", fisher.sfda),
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
    )
}

DISCREPANCIES: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("coral", discrepancy.coral, uses_labels=False),
        Metric("mmd", discrepancy.mmd, uses_labels=False),
        Metric("cmd", discrepancy.cmd, uses_labels=False),
        Metric("ot", discrepancy.ot, uses_labels=False),
        Metric("kld", discrepancy.kld, uses_labels=False),
        Metric("wd", discrepancy.wd, uses_labels=False),
    )
}


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

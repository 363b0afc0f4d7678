"""The metric registries used by ``gate-score`` and the analysis stage.

``SCORES`` holds the supervised transferability scores (all higher-is-better), each declaring which input it
needs: ``"features"`` (the encoder's pooled features) or ``"source_probs"`` (its source-head probabilities,
only for encoders with a classification head). ``DISCREPANCIES`` holds the unsupervised source–target
discrepancies (all lower-is-better).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from . import discrepancy, evidence, geometry, hscore, mixture, source

__all__ = ["Metric", "SCORES", "DISCREPANCIES", "applicable_scores"]

INPUTS = ("features", "source_probs")


@dataclasses.dataclass(frozen=True)
class Metric:
    """A named metric: its function, direction and the input it needs."""

    name: str
    fn: Callable[..., float]
    higher_is_better: bool
    needs: str = "features"
    uses_labels: bool = True
    citation: str = ""

    def __call__(self, *, labels: Any = None, features: Any = None, source_probs: Any = None, **kwargs: Any) -> float:
        data = features if self.needs == "features" else source_probs
        if data is None:
            raise ValueError(f"metric {self.name!r} needs {self.needs!r}, which was not given")
        if self.uses_labels:
            if labels is None:
                raise ValueError(f"metric {self.name!r} needs labels")
            return float(self.fn(data, labels, **kwargs))
        return float(self.fn(data, **kwargs))


def _m(name: str, fn: Callable[..., float], needs: str = "features", uses_labels: bool = True,
       citation: str = "", higher_is_better: bool = True) -> Metric:
    return Metric(name, fn, higher_is_better, needs, uses_labels, citation)


SCORES: dict[str, Metric] = {
    m.name: m
    for m in (
        _m("logme", evidence.logme, citation="You et al., ICML 2021"),
        _m("h_score", hscore.h_score, citation="Bao et al., ICIP 2019"),
        _m("shrinkage_h_score", hscore.shrinkage_h_score, citation="Ibrahim et al., ECML-PKDD 2022"),
        _m("nleep", mixture.nleep, citation="Li et al., CVPR 2021"),
        _m("n_nleep", mixture.n_nleep, citation="Li et al. 2021; Ibrahim et al. 2022"),
        _m("transrate", geometry.transrate, citation="Huang et al., ICML 2022"),
        _m("lfc", geometry.lfc, citation="Deshpande et al. 2021"),
        _m("rankme", geometry.rankme, uses_labels=False, citation="Garrido et al., ICML 2023"),
        _m("leep", source.leep, needs="source_probs", citation="Nguyen et al., ICML 2020"),
        _m("n_leep", source.n_leep, needs="source_probs", citation="Nguyen et al. 2020; Ibrahim et al. 2022"),
        _m("nce", source.nce, needs="source_probs", citation="Tran et al., ICCV 2019"),
        _m("n_nce", source.n_nce, needs="source_probs", citation="Tran et al. 2019; Ibrahim et al. 2022"),
    )
}

DISCREPANCIES: dict[str, Metric] = {
    m.name: m
    for m in (
        _m("coral", discrepancy.coral, uses_labels=False, higher_is_better=False, citation="Sun & Saenko 2016"),
        _m("mmd", discrepancy.mmd, uses_labels=False, higher_is_better=False, citation="Gretton et al. 2012"),
        _m("cmd", discrepancy.cmd, uses_labels=False, higher_is_better=False, citation="Zellinger et al. 2017"),
        _m("ot", discrepancy.ot, uses_labels=False, higher_is_better=False, citation="Flamary et al. 2021 (POT)"),
        _m("kld", discrepancy.kld, uses_labels=False, higher_is_better=False, citation="Gaussian closed form"),
        _m("wd", discrepancy.wd, uses_labels=False, higher_is_better=False, citation="Gaussian closed form"),
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

"""The zero-training prior: what the pool's scores and static facts say before any proxy run, and when it, not the
proxy, gives the ranking.

Components (each a ranking of the pool, higher is better):

* ``prior`` scores (``conf/rank.yaml`` says which by default): gate-score's on the tier's benchmarks whose family
  takes scores, each score's ranking its mean rank over those benchmarks;
* ``static`` facts (:data:`STATIC`; ``conf/rank.yaml`` says which by default): an encoder's parameter count, and the
  top-1 accuracy its pretrained weights publish on their source task (``source_top1`` in
  ``conf/encoder/<name>.yaml``, from the weights' card: never a fine-tuned number of the table being predicted).

The prior's ranking is the mean of its components' ranks (:func:`combine`). It orders the proxy's first allocation
(the runs of the encoders it ranks first come first) and it is the fallback (:func:`decide`): when no proxy run fits
the budget, or when the proxy is less reliable than the prior — judged by the proxy seeds' agreement (or, with one
seed, the selection's held-out τ on the history) against the prior's τ on the history's encoders where the history
holds their scores — the ranking is the prior's, and the printout says which and why. The decision never reads the
validation's truth.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from gate.analysis.ranks import kendall

#: The static facts an encoder config may declare (``source_top1``) or a run records (``params``).
STATIC = ("params", "source_top1")
#: Below this agreement between proxy seeds (mean pairwise τ) the proxy says little: the prior is preferred where it
#: has anything to say.
WEAK_AGREEMENT = 0.2


def ranks(values: Mapping[str, float], encoders: Sequence[str]) -> pd.Series:
    """A component's ranking of ``encoders`` (1 = best; higher value is better; ties share the mean rank)."""
    s = pd.Series({e: values.get(e, math.nan) for e in encoders}, dtype=float)
    return s.rank(ascending=False, method="average")


def combine(components: Mapping[str, pd.Series]) -> pd.Series:
    """The prior's ranking: the mean rank over its components (each a Series of ranks), lower is better."""
    frame = pd.DataFrame(dict(components))
    return frame.mean(axis=1, skipna=True)


def agreement(rankings: Sequence[pd.Series]) -> float:
    """Mean pairwise Kendall τ between rankings (NaN for fewer than two)."""
    taus = [kendall(-a.to_numpy(float), -b.reindex(a.index).to_numpy(float))
            for i, a in enumerate(rankings) for b in rankings[i + 1:]]
    finite = [t for t in taus if math.isfinite(t)]
    return float(np.mean(finite)) if finite else math.nan


def kendalls_w(rankings: Sequence[pd.Series]) -> float:
    """Kendall's coefficient of concordance W of ``m`` rankings of the same ``n`` items (1 = identical)."""
    if len(rankings) < 2:
        return math.nan
    frame = pd.DataFrame({i: r.rank(method="average") for i, r in enumerate(rankings)}).dropna()
    m, n = frame.shape[1], frame.shape[0]
    if n < 2:
        return math.nan
    totals = frame.sum(axis=1)
    s = float(((totals - totals.mean()) ** 2).sum())
    return 12 * s / (m ** 2 * (n ** 3 - n))


@dataclasses.dataclass(frozen=True)
class Decision:
    source: str          # proxy | prior | static
    why: str


def decide(*, proxy_ran: bool, seed_agreement: float, history_tau: float, prior_available: bool,
           prior_history_tau: float, static_available: bool) -> Decision:
    """Whose ranking gate-rank gives (see the module docstring). ``seed_agreement``: mean pairwise τ of the proxy
    seeds' tier rankings (NaN with one seed); ``history_tau``: the selection's held-out τ on the history;
    ``prior_history_tau``: the prior's τ against the history encoders' tier ranking (NaN where the history holds no
    scores)."""
    if not proxy_ran:
        if prior_available:
            return Decision("prior", "no proxy run fitted the budget")
        return Decision("static", "neither a proxy run nor the prior's feature passes fitted the budget")
    proxy_rel = seed_agreement if math.isfinite(seed_agreement) else history_tau
    what = (("the proxy seeds agree at τ {:.2f}" if math.isfinite(seed_agreement)
             else "the selection ranks held-out history encoders at τ {:.2f}").format(proxy_rel)
            if math.isfinite(proxy_rel) else "the proxy's reliability is unknown")
    if prior_available and math.isfinite(prior_history_tau) and math.isfinite(proxy_rel) and prior_history_tau > proxy_rel:
        return Decision("prior", f"{what}, below the prior's τ {prior_history_tau:.2f} on the history's encoders")
    if prior_available and math.isfinite(seed_agreement) and seed_agreement < WEAK_AGREEMENT:
        return Decision("prior", f"{what}: below {WEAK_AGREEMENT}, the proxy's seeds disagree")
    return Decision("proxy", what)

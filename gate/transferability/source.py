"""Scores from a source model's classification head: LEEP, NCE and their label-entropy normalisations.

- LEEP: Nguyen, Hassner, Seeger & Archambeau, "LEEP: A New Measure to Evaluate Transferability of Learned
  Representations", ICML 2020 (https://arxiv.org/abs/2002.12462).
- NCE: Tran, Nguyen & Hassner, "Transferability and Hardness of Supervised Classification Tasks", ICCV 2019
  (https://arxiv.org/abs/1908.08142).
- N-LEEP / N-NCE normalisation ``1 + score / H(Y)``: Ibrahim, Ponomareva & Mazumder, "Newer is not always
  better: Rethinking transferability metrics, their peculiarities, stability and performance", ECML-PKDD
  2022 (https://arxiv.org/abs/2110.06893).
"""

from __future__ import annotations

from typing import Any

import torch

from ._validation import DTYPE, as_tensor, check_labels, check_probs, check_source_labels, entropy_of_labels, one_hot

__all__ = ["leep", "nce", "n_leep", "n_nce", "leep_from_probs"]


def leep(source_probs: Any, labels: Any) -> float:
    r"""LEEP (Nguyen et al. 2020), ``≤ 0``, higher is better.

    With ``θ(x_i)`` the source model's predicted distribution over its ``Z`` source classes:

    - empirical joint ``P̂(y, z) = (1/n) Σ_{i: y_i = y} θ(x_i)_z``,
    - conditional ``P̂(y | z) = P̂(y, z) / Σ_{y'} P̂(y', z)``,
    - ``LEEP = (1/n) Σ_i log Σ_z P̂(y_i | z) θ(x_i)_z``.

    Source classes with zero mass (``P̂(z) = 0``, i.e. ``θ(x_i)_z = 0`` for every ``i``) get ``P̂(y|z) = 0``;
    they multiply zero probabilities, so the score stays finite.

    Args:
        source_probs: ``(n, Z)`` source-class probabilities (rows sum to 1), e.g. ``softmax(source_logits)``.
        labels: ``(n,)`` integer target class ids ``0..C-1``.
    """
    probs = check_probs(source_probs, "source_probs")
    lab, num_classes = check_labels(labels, probs.shape[0], device=probs.device, other="source_probs")
    return float(leep_from_probs(probs, lab, num_classes))


def leep_from_probs(probs: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """LEEP on already-validated float64 ``probs`` and labels ``0..C-1`` (a 0-d tensor)."""
    n = probs.shape[0]
    joint = one_hot(labels, num_classes).T @ probs / n  # (C, Z)
    marginal = joint.sum(0, keepdim=True)  # (1, Z)
    cond = torch.where(marginal > 0, joint / torch.where(marginal > 0, marginal, torch.ones_like(marginal)),
                       torch.zeros_like(joint))  # P(y | z)
    eep = (probs * cond[labels]).sum(1)  # Σ_z P(y_i | z) θ_iz
    # 0 < eep ≤ 1: every i has some z with θ_iz > 0 and then P(y_i|z) ≥ θ_iz / (n P(z)) > 0; and eep is a mean of
    # P(y_i|z) ≤ 1 under weights θ_i that sum to 1. Rows summing to 1 + ε (rounding: 7e-19 was seen) could push
    # the log a hair above 0, a value no log-probability can take: clamp both ends, rounding only.
    return eep.clamp(min=torch.finfo(DTYPE).tiny, max=1.0).log().mean()


def nce(source_labels: Any, labels: Any) -> float:
    r"""Negative conditional entropy ``NCE = −H(Y | Z)`` (Tran et al. 2019), ``≤ 0``, higher is better.

    ``Z`` are hard "dummy" labels from the source model (the argmax of its head) and
    ``−H(Y|Z) = Σ_{y,z} P̂(y, z) log P̂(y | z)`` from the empirical joint counts.

    Args:
        source_labels: ``(n,)`` integer source-class ids, or an ``(n, Z)`` probability matrix (its argmax is used).
        labels: ``(n,)`` integer target class ids ``0..C-1``.
    """
    lab, z = _nce_inputs(source_labels, labels)
    return float(_nce(lab, z))


def _nce_inputs(source_labels: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
    src = as_tensor(source_labels, "source_labels")
    if src.ndim not in (1, 2):
        raise ValueError(f"source_labels must be 1-D integer ids or an (n, Z) probability matrix, got shape {tuple(src.shape)}")
    lab, _ = check_labels(labels, src.shape[0], device=src.device, other="source_labels")
    z = check_source_labels(src, src.shape[0])
    return lab, z.to(lab.device)


def _nce(labels: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    n = labels.shape[0]
    _, zc = torch.unique(z, return_inverse=True)
    num_classes = int(labels.max()) + 1
    joint = torch.zeros(num_classes, int(zc.max()) + 1, dtype=DTYPE, device=labels.device)
    joint.index_put_((labels, zc), torch.ones(n, dtype=DTYPE, device=labels.device), accumulate=True)
    joint /= n
    pz = joint.sum(0, keepdim=True)
    mask = joint > 0
    return (joint[mask] * (joint / pz.expand_as(joint))[mask].log()).sum()


def n_leep(source_probs: Any, labels: Any) -> float:
    """Normalised LEEP ``1 + LEEP / H(Y)`` (Ibrahim et al. 2022), ``H(Y)`` the empirical label entropy (nats)."""
    probs = check_probs(source_probs, "source_probs")
    lab, num_classes = check_labels(labels, probs.shape[0], device=probs.device, other="source_probs")
    return float(1 + leep_from_probs(probs, lab, num_classes) / entropy_of_labels(lab, num_classes))


def n_nce(source_labels: Any, labels: Any) -> float:
    """Normalised NCE ``1 + NCE / H(Y)`` (Ibrahim et al. 2022), in ``[0, 1]`` since ``0 ≤ H(Y|Z) ≤ H(Y)``."""
    lab, z = _nce_inputs(source_labels, labels)
    value = 1 + _nce(lab, z) / entropy_of_labels(lab, int(lab.max()) + 1)
    return float(value.clamp(0.0, 1.0))

"""The contrastive adapter's metrics (torchmetrics): retrieval accuracy among each query's candidates and
Winoground's text, image and group scores, apart from :mod:`gate.adapters.contrastive` so that reading the
adapter's declaration (the config checks, a tier's expansion) does not import torchmetrics (seconds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torchmetrics import Metric

from .retrieval import DIRECTIONS, WINOGROUND_SCORES, candidate_ids, candidates, positives, query_rows


def distinct_count(mask: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
    """(Q,) for each row of ``mask`` (Q x N, bool), how many distinct ``ids`` ((N,), one per column) its True
    columns hold; with ``ids`` None every column is distinct."""
    if ids is None:
        return mask.sum(dim=1)
    _, index = torch.unique(ids, return_inverse=True)
    seen = torch.zeros(mask.shape[0], int(index.max()) + 1, device=mask.device)
    return (seen.index_add_(1, index, mask.to(seen.dtype)) > 0).sum(dim=1)


def retrieval_hits(scores: torch.Tensor, match: torch.Tensor, k: int, candidate: torch.Tensor | None = None,
                   ids: torch.Tensor | None = None) -> torch.Tensor:
    """(Q,) bool: for each query row of ``scores`` (queries x candidates), whether a correct candidate
    (``match``, queries x candidates, bool) ranks within the top ``k`` of its candidates (``candidate``, bool; all
    of the row when None). The best-scored correct candidate counts; a wrong candidate that scores at least as
    high (a tie included) ranks above it. Columns with equal ``ids`` ((N,); None: all distinct) are one candidate
    (one image shown by several rows, one text in several rows), which ranks where its best column does: a wrong
    cartoon with four caption rows takes one of the top k, not four."""
    if candidate is not None:
        match = match & candidate
    best = scores.masked_fill(~match, float("-inf")).max(dim=1, keepdim=True).values
    wrong = ~match if candidate is None else candidate & ~match
    return distinct_count((scores >= best) & wrong, ids) < k


class RetrievalAccuracy(Metric):
    """Top-k retrieval accuracy of one direction of (B, B) image x text logits, each query ranked among the
    distinct candidates of its candidate group (the whole batch for a plain match-matrix target; distinct: rows
    showing one image, or one caption text, are one candidate, :func:`retrieval_hits`). ``compute`` is NaN when
    any query was ranked among k or fewer candidates (a hit by construction: undefined, never a number)."""

    full_state_update = False
    higher_is_better = True

    def __init__(self, k: int, direction: str = "img2txt", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        self.k = int(k)
        self.direction = direction
        # counts (exact in float32 up to 2**24 queries)
        self.add_state("hits", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("undefined", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, logits: torch.Tensor, target) -> None:
        match, allowed, ids = positives(target), candidates(target), candidate_ids(target, self.direction)
        if self.direction == "txt2img":
            logits, match, allowed = logits.t(), match.t(), None if allowed is None else allowed.t()
        rows = query_rows(target, logits.shape[0], logits.device)
        hits = retrieval_hits(logits, match, self.k, allowed, ids)[rows]
        everything = torch.ones(logits.shape, dtype=torch.bool, device=logits.device)
        count = distinct_count(everything if allowed is None else allowed, ids)[rows]  # distinct candidates
        self.hits += hits.sum()
        self.total += hits.numel()
        self.undefined += (count <= self.k).sum()

    def compute(self) -> torch.Tensor:
        if self.undefined > 0:
            return torch.full_like(self.hits, float("nan"))
        return self.hits / self.total.clamp_min(1.0)


def winoground_examples(target: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The two query rows ``(a, b)`` of each Winoground example in a batch target, paired by ``pair`` id. Every
    example must have exactly its two rows among the batch's queries (the adapter serves them so)."""
    rows = query_rows(target, len(target["pair"]), target["pair"].device)
    ids = target["pair"][rows]
    ids, order = torch.sort(ids, stable=True)
    rows = rows[order]
    complete = len(ids) % 2 == 0 and bool((ids[0::2] == ids[1::2]).all()) and bool((ids[1:-1:2] != ids[2::2]).all())
    if not complete:
        raise ValueError("a Winoground example does not have exactly its two rows among the queries of one batch "
                         "(its rows must be adjacent in the split, and retrieval_candidates even)")
    return rows[0::2], rows[1::2]


class WinogroundScore(Metric):
    """Winoground's text, image or group score (Thrush et al., CVPR 2022) from the (B, B) image x caption logits
    of a batch whose target pairs the two rows of each example (``pair``): the fraction of examples where, with
    ``s(i, c)`` the similarity of image i and caption c of the example (rows a and b),

    * text: ``s(a, a) > s(a, b)`` and ``s(b, b) > s(b, a)`` (each image prefers its own caption);
    * image: ``s(a, a) > s(b, a)`` and ``s(b, b) > s(a, b)`` (each caption prefers its own image);
    * group: both.
    """

    full_state_update = False
    higher_is_better = True

    def __init__(self, score: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if score not in WINOGROUND_SCORES:
            raise ValueError(f"score must be one of {WINOGROUND_SCORES}, got {score!r}")
        self.score = score
        self.add_state("correct", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, logits: torch.Tensor, target: Mapping[str, torch.Tensor]) -> None:
        a, b = winoground_examples(target)
        aa, bb, ab, ba = logits[a, a], logits[b, b], logits[a, b], logits[b, a]  # ab: image a, caption b
        text = (aa > ab) & (bb > ba)
        image = (aa > ba) & (bb > ab)
        correct = {"text": text, "image": image, "group": text & image}[self.score]
        self.correct += correct.sum()
        self.total += correct.numel()

    def compute(self) -> torch.Tensor:
        if self.total == 0:
            return torch.full_like(self.total, float("nan"))
        return self.correct / self.total

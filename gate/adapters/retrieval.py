"""How a retrieval batch's target is read (the contrastive adapter's loss and its metrics both read it): which texts
match which images, each row's candidates, which rows are queries. Torch alone, so the adapter's module does not
import its metrics' torchmetrics."""

from __future__ import annotations

from collections.abc import Mapping

import torch

#: The two ways of retrieving: images query captions, captions query images.
DIRECTIONS = ("img2txt", "txt2img")
#: Winoground's scores (an example's two images and two captions each right for its own).
WINOGROUND_SCORES = ("text", "image", "group")


def positives(target) -> torch.Tensor:
    """(B, B) bool, images x texts: which texts are correct for which images. ``target`` is a batch target
    (:func:`gate.adapters.contrastive.retrieval_target`), a match matrix (:func:`gate.adapters.contrastive.match_matrix`)
    or a (B,) group index per example (same index, same caption: :func:`gate.adapters.contrastive.match_groups`)."""
    if isinstance(target, Mapping):
        return target["match"].to(torch.bool)
    if target.ndim == 2:
        return target.to(torch.bool)
    return target[:, None] == target[None, :]


def candidates(target) -> torch.Tensor | None:
    """(B, B) bool: which rows are each row's candidates (its candidate group), or None (the whole batch)."""
    if isinstance(target, Mapping) and "group" in target:
        group = target["group"]
        return group[:, None] == group[None, :]
    return None


def candidate_ids(target, direction: str) -> torch.Tensor | None:
    """(B,) which item each candidate column of ``direction`` is: for img2txt the caption text (``text_id``), for
    txt2img the image (``image_id``: an ``image_group``'s rows are one image); None (every column its own
    candidate) for a plain tensor target."""
    if isinstance(target, Mapping):
        return target.get("text_id" if direction == "img2txt" else "image_id")
    return None


def query_rows(target, n: int, device) -> torch.Tensor:
    """The indices of the rows ranked as queries (every row unless the target says otherwise)."""
    if isinstance(target, Mapping) and "queries" in target:
        return target["queries"]
    return torch.arange(n, device=device)

"""Zero-shot image-text retrieval: a CLIP-style two-tower head on the encoder's pooled image features.

Design (the GATE paper's zero-shot image-text family, Flickr30K / NYCC / Winoground):

* image side: the evaluated encoder's pooled ``features`` -> a linear projection -> L2-normalised;
* text side: a text tower (any :class:`~gate.encoders.base.GATEEncoder` that takes text; the adapter YAML
  builds the packaged offline all-MiniLM-L6-v2 as a nested ``_target_`` config) -> its own linear projection
  -> L2-normalised. ``freeze_text_tower`` (default true) freezes the tower's body and trains only its
  projection, which keeps CPU runs cheap (no backward pass through the text transformer) and keeps the
  measurement about the image encoder; false fine-tunes the whole tower with the run's recipe;
* a learnable temperature: ``logit_scale`` = log(1/0.07) at initialisation, its exponential clamped to at
  most 100, as in CLIP (Radford et al. 2021);
* predictions: the batch's (B, B) image x text similarity logits; loss: the symmetric CLIP loss (mean of the
  image->text and text->image cross-entropies).

Captions are tokenised on the data side (:meth:`ZeroShotContrastive.example_targets`, by the text tower's own
transform) into ``caption_input_ids`` / ``caption_attention_mask`` (and a 63-bit ``caption_id`` hash of the
text). Which texts of a batch are correct for which images is the batch's target, a (B, B) boolean **match
matrix** (:func:`match_matrix`): ``match[i, j]`` says text j is a correct caption for image i. Two things make a
text correct for an image other than its own row's:

* the same caption: a caption can describe several images (a stand-in's caption vocabulary is finite; real
  datasets repeat generic captions too);
* the same image: where a dataset declares a target of kind ``image_group`` (NYCC's ``contest_number``: a cartoon
  has one row per finalist caption), rows of one group show one image, so each of their captions is correct for
  all of them. Without the group, two rows of one cartoon in a batch have identical image embeddings, the
  tie counts against the match, and their text-to-image hits are always 0.

In general text j is correct for image i when some row of the batch pairs image i's image with text j's caption
(the composition of the two relations). Without an ``image_group`` target every row is its own group: the matrix
is "same caption", exactly as before the groups existed.

The loss spreads each query's target uniformly over its correct candidates (a multi-positive CLIP loss; plain
CLIP targets when every row is its own group and captions are unique) rather than masking the other correct
candidates out of the softmax. Why: the metrics count a hit for any correct candidate, so the loss puts all of a
query's probability on the correct set; for a caption of a cartoon seen in two rows the two candidate images are
the same embedding, their logits are equal, and a uniform target over them is exactly what the model can reach
(the old one-hot target could never be met and pushed on an impossible distinction). Masking would also work for
the text side, but for the image side it would let a cartoon's captions drift apart freely; the spread keeps one
rule for both sides and for repeated captions. The metrics count a hit when any correct candidate ranks within
the top k.

Metrics ``img2txt_acc@{1,5}`` and ``txt2img_acc@{1,5}`` are ranked WITHIN each evaluation batch, as GATE does:
each image is ranked against the captions of its own batch (of ``data.eval_batch_size``), so the numbers
depend on the eval batch size, and the last, smaller batch of a split counts too (its examples face fewer
distractors, and a top-k with k >= its size is a hit). Ties with a wrong caption count against the match
(a collapsed model that scores everything equally gets no hits); ties among correct candidates do not.
Checkpoint ensembles average the per-batch logits (each checkpoint's temperature included).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torchmetrics import Metric, MetricCollection

from ..encoders.base import GATEEncoder
from .base import Adapter

INIT_TEMPERATURE = 0.07
MAX_LOGIT_SCALE = 100.0
DIRECTIONS = ("img2txt", "txt2img")


def caption_hash(text: str) -> int:
    """A stable 63-bit id of a caption (equal texts, equal ids; independent of PYTHONHASHSEED)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def match_groups(caption_ids: torch.Tensor) -> torch.Tensor:
    """For each example, the index of the first example in the batch with the same caption id: (B,) int64."""
    same = caption_ids[:, None] == caption_ids[None, :]
    return same.to(torch.uint8).argmax(dim=1)  # the first True of each row (the diagonal is always True)


def match_matrix(caption_ids: torch.Tensor, image_groups: torch.Tensor | None = None) -> torch.Tensor:
    """(B, B) bool: text j is a correct caption for image i, i.e. some row k of the batch shows image i's image
    (same ``image_groups`` id; without groups only row i itself) with text j's caption (same ``caption_ids``)."""
    same_caption = caption_ids[:, None] == caption_ids[None, :]
    if image_groups is None:
        return same_caption
    same_image = image_groups[:, None] == image_groups[None, :]
    return (same_image.to(torch.float32) @ same_caption.to(torch.float32)) > 0


def positives(target: torch.Tensor) -> torch.Tensor:
    """(B, B) bool, images x texts: which texts are correct for which images. ``target`` is a match matrix
    (:func:`match_matrix`) or a (B,) group index per example (same index, same caption: :func:`match_groups`)."""
    if target.ndim == 2:
        return target.to(torch.bool)
    return target[:, None] == target[None, :]


def clip_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Symmetric CLIP loss of (B, B) image x text logits; every correct candidate of a query is a target (uniform
    weight over them), which is CLIP's ``arange`` target when each image has exactly its own caption."""
    match = positives(target).to(logits.dtype)
    image_to_text = match / match.sum(dim=1, keepdim=True)
    text_to_image = match.t() / match.t().sum(dim=1, keepdim=True)
    return (F.cross_entropy(logits, image_to_text) + F.cross_entropy(logits.t(), text_to_image)) / 2


def retrieval_hits(scores: torch.Tensor, match: torch.Tensor, k: int) -> torch.Tensor:
    """(Q,) bool: for each query row of ``scores`` (queries x candidates), whether a correct candidate
    (``match``, queries x candidates, bool) ranks within the top ``k`` of its batch. The best-scored correct
    candidate counts; a wrong candidate that scores at least as high (a tie included) ranks above it."""
    best = scores.masked_fill(~match, float("-inf")).max(dim=1, keepdim=True).values
    above = ((scores >= best) & ~match).sum(dim=1)
    return above < k


class RetrievalAccuracy(Metric):
    """Top-k retrieval accuracy within each batch, for one direction of (B, B) image x text logits."""

    full_state_update = False
    higher_is_better = True

    def __init__(self, k: int, direction: str = "img2txt", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        self.k = int(k)
        self.direction = direction
        self.add_state("hits", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, logits: torch.Tensor, target: torch.Tensor) -> None:
        match = positives(target)
        scores, match = (logits, match) if self.direction == "img2txt" else (logits.t(), match.t())
        hits = retrieval_hits(scores, match, self.k)
        self.hits += hits.sum()
        self.total += hits.numel()

    def compute(self) -> torch.Tensor:
        return self.hits / self.total.clamp_min(1.0)


def image_group_column(spec) -> str | None:
    """The dataset's column of target kind ``image_group`` (rows showing the same image), or None."""
    targets = dict(getattr(spec, "targets", None) or {})
    return next((column for column, kind in targets.items() if kind == "image_group"), None)


def _drop_text_tower(module, state_dict, prefix, local_metadata) -> None:
    for key in [k for k in state_dict if k.startswith(prefix + "text_tower.")]:
        del state_dict[key]


def _restore_text_tower(module, state_dict, prefix, *args) -> None:
    for key, value in module.text_tower.state_dict(prefix=prefix + "text_tower.", keep_vars=False).items():
        state_dict.setdefault(key, value)


class ZeroShotContrastive(Adapter):
    """CLIP-style image-text retrieval head (module docstring); checkpoints ranked by val ``img2txt_acc@1``.

    text_tower: a text encoder (built by Hydra from the nested config); its ``features`` are projected.
    embed_dim: width of the shared embedding space.
    freeze_text_tower: freeze the tower's body (its projection always trains).
    caption column: the dataset's target of kind ``caption``; image groups: its target of kind ``image_group``,
    if it declares one (rows showing the same image).
    """

    tasks = frozenset({"zero_shot"})
    needs = frozenset({"features"})
    monitor = "img2txt_acc@1"
    # Captions name left/right relations: a horizontal flip would make them wrong.
    augment_inputs = False

    def __init__(self, feature_dim: int, text_tower: GATEEncoder, spec=None, embed_dim: int = 256,
                 freeze_text_tower: bool = True, top_k: Sequence[int] = (1, 5)) -> None:
        super().__init__()
        if not isinstance(text_tower, GATEEncoder) or not text_tower.accepts("text"):
            raise ValueError(f"ZeroShotContrastive needs a text tower (a gate encoder that takes text), got "
                             f"{type(text_tower).__name__}")
        self.caption_column = spec.column("caption") if spec is not None else "caption"
        self.group_column = image_group_column(spec)
        self.text_tower = text_tower
        self.freeze_text_tower = bool(freeze_text_tower)
        if self.freeze_text_tower:
            self.text_tower.requires_grad_(False)
        self.image_projection = nn.Linear(feature_dim, embed_dim)
        self.text_projection = nn.Linear(text_tower.feature_dim, embed_dim)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1.0 / INIT_TEMPERATURE)))
        self.top_k = tuple(int(k) for k in top_k)
        self._tokenize = text_tower.transform("text", train=False)
        if self.freeze_text_tower:
            # A frozen body is rebuilt from its packaged weights by the config: checkpoints leave it out (it
            # is ~90 MB of every checkpoint for MiniLM) and loading one puts the built weights back.
            self.register_state_dict_post_hook(_drop_text_tower)
            self.register_load_state_dict_pre_hook(_restore_text_tower)

    # ------------------------------------------------------------------------------------------ model
    def scale(self) -> torch.Tensor:
        """The temperature's inverse, exp(logit_scale), clamped to at most 100 (as CLIP does)."""
        return self.logit_scale.clamp(max=math.log(MAX_LOGIT_SCALE)).exp()

    def embed_text(self, batch: Mapping[str, Any]) -> torch.Tensor:
        mask = batch["caption_attention_mask"]
        # Captions are padded to the tower's max_length: drop the columns every caption of the batch pads
        # (padding is masked out of attention and pooling, so the features are the same, at less cost).
        length = max(int(mask.sum(dim=1).max()), 1)
        text = {"input_ids": batch["caption_input_ids"][:, :length], "attention_mask": mask[:, :length]}
        if self.freeze_text_tower:
            # A frozen body runs without dropout. Set here rather than in train(): Lightning warns about
            # submodules left in eval mode when fitting starts.
            self.text_tower.eval()
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.freeze_text_tower):
            features = self.text_tower(text).features
        return F.normalize(self.text_projection(features), dim=-1)

    def forward(self, encoded, batch) -> torch.Tensor:
        image = F.normalize(self.image_projection(encoded.features), dim=-1)
        text = self.embed_text(batch)
        return self.scale() * image @ text.t()

    def target(self, batch) -> torch.Tensor:
        """The batch's (B, B) match matrix (:func:`match_matrix`)."""
        return match_matrix(batch["caption_id"], batch.get("image_group"))

    def loss(self, predictions, target) -> torch.Tensor:
        return clip_loss(predictions.float(), target)

    def make_metrics(self) -> MetricCollection:
        return MetricCollection({f"{direction}_acc@{k}": RetrievalAccuracy(k, direction)
                                 for direction in DIRECTIONS for k in self.top_k})

    # ------------------------------------------------------------------------------------------- data
    def example_targets(self, row) -> dict[str, torch.Tensor]:
        caption = str(row[self.caption_column])
        tokens = self._tokenize(caption)
        out = {"caption_input_ids": tokens["input_ids"], "caption_attention_mask": tokens["attention_mask"],
               "caption_id": torch.tensor(caption_hash(caption), dtype=torch.long)}
        if self.group_column is not None:  # any id type (a contest number, a file name) as a stable 63-bit hash
            out["image_group"] = torch.tensor(caption_hash(str(row[self.group_column])), dtype=torch.long)
        return out

    def target_columns(self, spec) -> list[str]:
        group = image_group_column(spec)
        return [spec.column("caption"), *([group] if group else [])]

    def stratify_labels(self, spec, split):
        return None

    def check_split(self, spec, name: str, split) -> None:
        column = spec.column("caption")
        captions = split[column]
        if not captions:
            raise ValueError(f"dataset {spec.name!r}: split {name!r} is empty")
        for index, caption in enumerate(captions):
            if not isinstance(caption, str) or not caption.strip():
                raise ValueError(f"dataset {spec.name!r}: split {name!r} example {index} has an empty caption "
                                 f"({column}={caption!r}); every image needs a text to match")

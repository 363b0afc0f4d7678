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
* predictions: the batch's (B, B) image x text similarity logits, in fp32 under any autocast (:func:`embed`);
  loss: the symmetric CLIP loss (mean of the image->text and text->image cross-entropies).

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

**Candidates.** Retrieval is ranked within **candidate groups** of ``retrieval_candidates`` rows (64, GATE's
evaluation batch), not within whatever evaluation batch fits the device: an evaluation split is cut, in its fixed
order, into consecutive groups of exactly ``C = retrieval_candidates`` rows, and each image is ranked against the
captions of its own group (each caption against its group's images). The number of candidates is part of the metric
(the same embeddings give acc@1 0.919 / 0.827 / 0.712 among 64 / 256 / 1024), so it is an adapter setting (in the
experiment id) and ``data.eval_batch_size`` only says how many whole groups share a forward pass
(``max(1, eval_batch_size // C)`` of them: evaluation batches are multiples of ``C``, never a group cut in two).
The rows left over at the end of a split (``r = n mod C``) are ranked in a last group made of the split's **last C
rows**: its first ``C - r`` rows, already ranked in the group before, are candidates again but not queries again.
So every query is ranked among the candidates of exactly ``C`` rows and every row is a query once, whatever the
batch size;
a split of fewer than ``C`` rows is one group of all its rows (a warning says so). Groups are whole batches, and
batches go whole to data-parallel ranks (round-robin, :mod:`gate.data.distributed`), so groups stay whole there too.
Training batches are unchanged: the loss of a training batch is CLIP's over the whole batch.

Metrics: ``img2txt_acc@k`` / ``txt2img_acc@k`` (k in ``top_k``, default 1 and 5): the fraction of queries with a
correct candidate among the top k of their group; ties with a wrong candidate count against the match (a collapsed
model that scores everything equally gets no hits); ties among correct candidates do not. A candidate is a distinct
**image** (txt2img) or a distinct **caption text** (img2txt): the rows of one ``image_group`` (an NYCC cartoon's
caption rows) are one image, rows with the same caption one text, and each counts once, where its best row ranks.
Standard retrieval ranks unique images (LAION-AI/CLIP_benchmark ``metrics/zeroshot_retrieval.py`` encodes each image
once and points each caption at it); counting rows let one wrong cartoon with four caption rows fill four of the
top 5. ``acc@k`` means something only with **more than k candidates** (with k or fewer every query is a hit): the
config check refuses ``retrieval_candidates <= max(top_k)``, a test split whose candidate groups hold k distinct
captions (images) or fewer leaves ``img2txt_acc@k`` (``txt2img_acc@k``) out (one warning), and a validation value
ranked among k or fewer candidates computes NaN, never a number. A split of one row (a loss of 0,
nothing to rank) is refused. The evaluation loss is the same symmetric loss within each query's group, averaged over
the queries, so it does not depend on the batch size either.

**Winoground** (a dataset declaring a target of kind ``contrast_pair``: the two rows of one example, two images and
two captions with the same words in another order): besides in-batch retrieval, the standard scores of Thrush et
al. (CVPR 2022) from each example's 2 x 2 similarities ``s(image, caption)``: ``winoground_text`` (both images score
their own caption above the other caption), ``winoground_image`` (both captions score their own image above the
other image) and ``winoground_group`` (both), each the fraction of examples, strict ``>`` (a tie fails).

Checkpoint ensembles average the per-batch logits (each checkpoint's temperature included). The metric states are
sums with ``dist_reduce_fx="sum"``, so they reduce exactly across data-parallel ranks, and the collection has no
compute groups (torchmetrics would merge metrics whose states happen to be equal after the first batch, e.g. every
acc@k at 1.0, and from then on update only one of them).
"""

from __future__ import annotations

import functools
import hashlib
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from ..encoders.base import GATEEncoder
from ..settings import TOP_K, Bool, Int, Setting, show
from .base import Adapter, in_float32
from .retrieval import DIRECTIONS, WINOGROUND_SCORES, candidates, positives, query_rows

if TYPE_CHECKING:
    from torchmetrics import MetricCollection

INIT_TEMPERATURE = 0.07
MAX_LOGIT_SCALE = 100.0
#: GATE's evaluation batch for the zero-shot image-text tier (gate/tiers/configs/zero_shot_learning.py:
#: BATCH_SIZE = 64, given to get_model_selection as train and eval batch size).
DEFAULT_RETRIEVAL_CANDIDATES = 64


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


def embed(projection: nn.Linear, features: torch.Tensor) -> torch.Tensor:
    """``features`` projected and L2-normalised, in their dtype (called by :func:`~gate.adapters.base.in_float32`:
    the projections, the normalisation and the similarity matmul run in fp32 even under ``bf16-mixed``, whose
    rounding made near ties exact ties, which Winoground's strict ``>`` and retrieval's ties-count-against both
    score as failures)."""
    return F.normalize(F.linear(features, projection.weight.to(features.dtype), projection.bias.to(features.dtype)),
                       dim=-1)


# ------------------------------------------------------------------------------------------ candidate groups
def candidate_groups(n: int, size: int) -> list[tuple[int, int, int]]:
    """The candidate groups of an evaluation split of ``n`` rows, as ``(start, stop, first_query)`` row ranges:
    consecutive groups of ``size`` rows; the ``n mod size`` rows left at the end are ranked in a last group made
    of the split's last ``size`` rows, whose rows before ``first_query`` (ranked already) are candidates only.
    A split of fewer than ``size`` rows is one group."""
    if n < 1 or size < 1:
        raise ValueError(f"candidate groups need n >= 1 and size >= 1, got n={n}, size={size}")
    if n <= size:
        return [(0, n, 0)]
    full = n // size
    groups = [(g * size, (g + 1) * size, g * size) for g in range(full)]
    if n > full * size:
        groups.append((n - size, n, full * size))
    return groups


class CandidateGroupSplit(Dataset):
    """An evaluation split served by candidate groups (:func:`candidate_groups`): item ``p`` is a row of ``data``
    with ``candidate_group`` (which group it is a candidate in), ``query`` (whether it is ranked as a query there)
    and ``row`` (its index in the split). A row of the last group that was ranked in the group before appears
    twice: once as a query, once as a candidate only."""

    def __init__(self, data: Dataset, size: int) -> None:
        self.data, self.size = data, int(size)
        self.groups = candidate_groups(len(data), self.size)
        self.entries = [(row, g, row >= first) for g, (start, stop, first) in enumerate(self.groups)
                        for row in range(start, stop)]

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, position: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([position])[0]

    def __getitems__(self, positions: list[int]) -> list[dict[str, torch.Tensor]]:
        entries = [self.entries[int(p)] for p in positions]
        fetch = getattr(self.data, "__getitems__", None)  # one columnar fetch for the batch where the split has it
        rows = fetch([row for row, _, _ in entries]) if fetch is not None else [self.data[row] for row, _, _ in entries]
        return [dict(item, candidate_group=torch.tensor(group, dtype=torch.long), query=torch.tensor(query),
                     row=torch.tensor(row, dtype=torch.long)) for item, (row, group, query) in zip(rows, entries)]

    def batches(self, groups_per_batch: int) -> list[list[int]]:
        """Batches of whole groups, ``groups_per_batch`` consecutive groups each (the last batch may hold fewer)."""
        per, out, position = max(1, int(groups_per_batch)), [], 0
        sizes = [stop - start for start, stop, _ in self.groups]
        for first in range(0, len(sizes), per):
            count = sum(sizes[first:first + per])
            out.append(list(range(position, position + count)))
            position += count
        return out


def evaluation_loader(data: Dataset, candidates: int, batch_size: int, num_workers: int = 0, **loader: Any
                      ) -> DataLoader:
    """An evaluation split served in candidate groups of ``candidates`` rows (:class:`CandidateGroupSplit`),
    ``max(1, batch_size // candidates)`` whole groups per batch, in the split's order (``loader``: the data
    module's ``collate_fn`` and ``pin_memory``)."""
    grouped = CandidateGroupSplit(data, candidates)
    return DataLoader(grouped, batch_sampler=grouped.batches(batch_size // int(candidates)), num_workers=num_workers,
                      persistent_workers=num_workers > 0,
                      generator=torch.Generator().manual_seed(0),  # no draw from the global stream (a run's prefix)
                      **loader)


# ---------------------------------------------------------------------------------------------- targets
def retrieval_target(batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """A batch's target: ``queries`` (the indices of the rows ranked as queries; first, so that the target's length
    is the number of scored rows), ``match`` ((B, B) bool, :func:`match_matrix`), ``group`` ((B,) the candidate
    group of each row: a row's candidates are the rows of its group), ``image_id`` / ``text_id`` ((B,) which image
    and which caption text each row shows: rows with equal ids are one candidate,
    :func:`~.contrastive_metrics.retrieval_hits`) and, for Winoground-style data, ``pair`` ((B,) the example id of
    each row). A batch without group columns (training) is one group of queries; without ``image_group`` every row
    shows its own image."""
    image_groups = batch.get("image_group")
    match = match_matrix(batch["caption_id"], image_groups)
    n = match.shape[0]
    query = batch.get("query")
    group = batch.get("candidate_group")
    target = {"queries": torch.arange(n, device=match.device) if query is None else torch.nonzero(query).flatten(),
              "match": match,
              "group": torch.zeros(n, dtype=torch.long, device=match.device) if group is None else group,
              "image_id": torch.arange(n, device=match.device) if image_groups is None else image_groups,
              "text_id": batch["caption_id"]}
    if batch.get("pair_id") is not None:
        target["pair"] = batch["pair_id"]
    return target


def _soft_cross_entropy(scores: torch.Tensor, positive: torch.Tensor, candidate: torch.Tensor | None) -> torch.Tensor:
    """(Q,) cross-entropy of each row of ``scores`` against a target spread uniformly over its ``positive``
    entries, the softmax taken over its ``candidate`` entries only."""
    if candidate is not None:
        scores = scores.masked_fill(~candidate, float("-inf"))
        positive = positive & candidate
    log_p = scores.log_softmax(dim=1).masked_fill(~positive, 0.0)  # 0 where the target is 0 (no 0 * -inf)
    weight = positive.to(scores.dtype)
    return -(weight * log_p).sum(dim=1) / weight.sum(dim=1)


def clip_loss(logits: torch.Tensor, target) -> torch.Tensor:
    """Symmetric CLIP loss of (B, B) image x text logits; every correct candidate of a query is a target (uniform
    weight over them), which is CLIP's ``arange`` target when each image has exactly its own caption. With a batch
    target (:func:`retrieval_target`) each query is scored within its candidate group and only query rows count."""
    match = positives(target)
    allowed = candidates(target)
    rows = query_rows(target, logits.shape[0], logits.device)
    image_to_text = _soft_cross_entropy(logits, match, allowed)[rows]
    text_to_image = _soft_cross_entropy(logits.t(), match.t(), None if allowed is None else allowed.t())[rows]
    return (image_to_text.mean() + text_to_image.mean()) / 2


# ---------------------------------------------------------------------------------------------- metrics
# ---------------------------------------------------------------------------------------------- adapter
def image_group_column(spec) -> str | None:
    """The dataset's column of target kind ``image_group`` (rows showing the same image), or None."""
    return _column_of_kind(spec, "image_group")


def contrast_pair_column(spec) -> str | None:
    """The dataset's column of target kind ``contrast_pair`` (a Winoground example's id), or None."""
    return _column_of_kind(spec, "contrast_pair")


def _column_of_kind(spec, kind: str) -> str | None:
    targets = dict(getattr(spec, "targets", None) or {})
    return next((column for column, k in targets.items() if k == kind), None)


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
    top_k: the k of the recorded ``acc@k`` (1 must be among them: it ranks checkpoints).
    retrieval_candidates: how many rows each query is ranked among in evaluation (more than ``max(top_k)``).
    caption column: the dataset's target of kind ``caption``; image groups: its target of kind ``image_group``,
    if it declares one (rows showing the same image); Winoground examples: its target of kind ``contrast_pair``.
    """

    tasks = frozenset({"zero_shot"})
    needs = frozenset({"features"})
    monitor = "img2txt_acc@1"
    settings = {
        "embed_dim": Int(1, meaning="width of the shared embedding space"),
        "freeze_text_tower": Bool(meaning="freeze the text tower's body (its projection always trains)"),
        "text_tower": Setting("section", meaning="the text encoder (built by Hydra)"),
        "top_k": TOP_K,
        "retrieval_candidates": Int(2, meaning="rows each query is ranked among in evaluation"),
    }
    # Captions name left/right relations: a horizontal flip would make them wrong.
    augment_inputs = False
    # Evaluation batches hold the split's rows in order (a repeated row at the end of a split: see ``row``), so the
    # validation picture can show each row's raw caption (gate.engine.training.visuals).
    eval_rows_in_order = True

    @classmethod
    def check_config(cls, cfg: Mapping[str, Any]) -> list[str]:
        """acc@k is meaningful only with more than k candidates and 1 among the ks (val img2txt_acc@1 ranks
        checkpoints); a Winoground-style example's two rows must share a candidate group (an even group size); a
        one-pair batch has nothing to contrast (its loss is 0); a one-row evaluation split is always a hit. An
        evaluation batch smaller than a candidate group is only warned about (each batch holds one whole group)."""
        adapter, data, dataset = (cfg.get(k) if isinstance(cfg.get(k), Mapping) else {}
                                  for k in ("adapter", "data", "dataset"))
        problems = []
        top_k = adapter.get("top_k")
        if TOP_K.valid(top_k) and 1 not in top_k:
            problems.append(f"adapter.top_k={show(top_k)} is invalid: expected a list of ks >= 1 that includes 1 (val "
                            f"img2txt_acc@1 ranks checkpoints)")
        most = max(top_k) if TOP_K.valid(top_k) else 1
        candidates = adapter.get("retrieval_candidates")
        candidates = candidates if cls.settings["retrieval_candidates"].valid(candidates) else None
        if candidates is not None and candidates <= most:
            problems.append(f"adapter.retrieval_candidates={candidates} is invalid: acc@{most} needs more than {most} "
                            f"candidates (every query would be a hit); GATE ranks among {DEFAULT_RETRIEVAL_CANDIDATES}")
        targets = dataset.get("targets")
        if (candidates is not None and candidates % 2 and isinstance(targets, Mapping) and
                "contrast_pair" in targets.values()):
            problems.append(f"adapter.retrieval_candidates={candidates} is invalid: dataset {dataset.get('name', '?')} "
                            f"holds pairs of rows (a contrast_pair target): use an even number, e.g. 64")
        one = Int(1, high=1)
        if one.valid(data.get("batch_size")):
            problems.append("data.batch_size=1 is invalid: a contrastive batch needs >= 2 image-caption pairs (one pair "
                            "has no negative: its loss is 0 and nothing is learnt)")
        for split in ("val", "test"):
            if one.valid(data.get(f"max_{split}_samples")):
                problems.append(f"data.max_{split}_samples=1 is invalid: retrieval needs >= 2 rows (one candidate is "
                                f"always a hit)")
        evaluation = data.get("eval_batch_size") or data.get("batch_size")
        if candidates is not None and Int(1).valid(evaluation) and evaluation < candidates:
            warnings.warn(f"data.eval_batch_size={evaluation} is smaller than adapter.retrieval_candidates="
                          f"{candidates}: each evaluation batch holds one whole candidate group of {candidates} rows",
                          stacklevel=3)
        return problems

    def __init__(self, feature_dim: int, text_tower: GATEEncoder, spec=None, embed_dim: int = 256,
                 freeze_text_tower: bool = True, top_k: Sequence[int] = (1, 5),
                 retrieval_candidates: int = DEFAULT_RETRIEVAL_CANDIDATES) -> None:
        super().__init__()
        if not isinstance(text_tower, GATEEncoder) or not text_tower.accepts("text"):
            raise ValueError(f"ZeroShotContrastive needs a text tower (a gate encoder that takes text), got "
                             f"{type(text_tower).__name__}")
        self.top_k = tuple(sorted({int(k) for k in top_k}))
        if not self.top_k or self.top_k[0] < 1 or 1 not in self.top_k:
            raise ValueError(f"adapter.top_k={list(top_k)} is invalid: expected ks >= 1 including 1 (val "
                             f"{self.monitor} ranks checkpoints)")
        self.retrieval_candidates = int(retrieval_candidates)
        if self.retrieval_candidates <= max(self.top_k):
            raise ValueError(f"adapter.retrieval_candidates={retrieval_candidates} is invalid: acc@{max(self.top_k)} "
                             f"needs more than {max(self.top_k)} candidates (GATE ranks among "
                             f"{DEFAULT_RETRIEVAL_CANDIDATES})")
        self.caption_column = spec.column("caption") if spec is not None else "caption"
        self.group_column = image_group_column(spec)
        self.pair_column = contrast_pair_column(spec)
        #: split name -> direction -> the fewest distinct candidates (texts for img2txt, images for txt2img) of its
        #: candidate groups, filled by :meth:`check_split` (the test split's counts decide which acc@k are recorded)
        self.fewest_candidates: dict[str, dict[str, int]] = {}
        self.text_tower = text_tower
        self.freeze_text_tower = bool(freeze_text_tower)
        if self.freeze_text_tower:
            self.text_tower.requires_grad_(False)
        self.image_projection = nn.Linear(feature_dim, embed_dim)
        self.text_projection = nn.Linear(text_tower.feature_dim, embed_dim)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1.0 / INIT_TEMPERATURE)))
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
        return in_float32(functools.partial(embed, self.text_projection), features)

    def embed_image(self, features: torch.Tensor) -> torch.Tensor:
        return in_float32(functools.partial(embed, self.image_projection), features)

    def forward(self, encoded, batch) -> torch.Tensor:
        """The (B, B) image x text logits, in fp32 under any autocast (:func:`embed`)."""
        image, text = self.embed_image(encoded.features), self.embed_text(batch)
        return in_float32(lambda i, t: self.scale() * i @ t.t(), image, text)

    def target(self, batch) -> dict[str, torch.Tensor]:
        """The batch's target (:func:`retrieval_target`): query rows, match matrix, candidate groups (and
        Winoground pairs)."""
        return retrieval_target(batch)

    def loss(self, predictions, target) -> torch.Tensor:
        return clip_loss(predictions.float(), target)

    def make_metrics(self) -> MetricCollection:
        from torchmetrics import MetricCollection

        from .contrastive_metrics import RetrievalAccuracy, WinogroundScore

        ranked = self.fewest_candidates.get("test", dict.fromkeys(DIRECTIONS, self.retrieval_candidates))
        metrics = {f"{direction}_acc@{k}": RetrievalAccuracy(k, direction)
                   for direction in DIRECTIONS for k in self.top_k if k < ranked[direction]}
        if self.pair_column is not None:
            metrics.update({f"winoground_{score}": WinogroundScore(score) for score in WINOGROUND_SCORES})
        # No compute groups: torchmetrics merges metrics whose states are equal after the first update (every
        # acc@k at 1.0, or at 0.0) and then updates only the first of them.
        return MetricCollection(metrics, compute_groups=False)

    # ------------------------------------------------------------------------------------------- data
    def example_targets(self, row) -> dict[str, torch.Tensor]:
        caption = str(row[self.caption_column])
        tokens = self._tokenize(caption)
        out = {"caption_input_ids": tokens["input_ids"], "caption_attention_mask": tokens["attention_mask"],
               "caption_id": torch.tensor(caption_hash(caption), dtype=torch.long)}
        if self.group_column is not None:  # any id type (a contest number, a file name) as a stable 63-bit hash
            out["image_group"] = torch.tensor(caption_hash(str(row[self.group_column])), dtype=torch.long)
        if self.pair_column is not None:
            out["pair_id"] = torch.tensor(caption_hash(str(row[self.pair_column])), dtype=torch.long)
        return out

    def target_columns(self, spec) -> list[str]:
        extra = [c for c in (image_group_column(spec), contrast_pair_column(spec)) if c]
        return [spec.column("caption"), *extra]

    def stratify_labels(self, spec, split):
        return None

    def dataloader(self, data: Dataset, *, shuffle: bool, batch_size: int, seed: int, num_workers: int,
                   split: str = "train", **loader: Any) -> DataLoader:
        """Training: plain shuffled batches. Evaluation: the split's candidate groups in order
        (:class:`CandidateGroupSplit`), ``max(1, batch_size // retrieval_candidates)`` whole groups per batch."""
        if shuffle:
            return super().dataloader(data, shuffle=True, batch_size=batch_size, seed=seed, num_workers=num_workers,
                                      split=split, **loader)
        return evaluation_loader(data, self.retrieval_candidates, batch_size, num_workers, **loader)

    def check_split(self, spec, name: str, split) -> None:
        column = spec.column("caption")
        captions = split[column]
        if not captions:
            raise ValueError(f"dataset {spec.name!r}: split {name!r} is empty")
        for index, caption in enumerate(captions):
            if not isinstance(caption, str) or not caption.strip():
                raise ValueError(f"dataset {spec.name!r}: split {name!r} example {index} has an empty caption "
                                 f"({column}={caption!r}); every image needs a text to match")
        n = len(captions)
        if n < 2:
            raise ValueError(f"dataset {spec.name!r}: split {name!r} has {n} row: retrieval needs at least 2 (one "
                             f"candidate is always a hit and its loss is 0); use a larger split or cap")
        if name == "train":
            return
        pair = contrast_pair_column(spec)
        if pair is not None:
            self._check_pairs(spec, name, split[pair])
        if n < self.retrieval_candidates:
            warnings.warn(f"dataset {spec.name!r}: split {name!r} has {n} rows, fewer than adapter.retrieval_candidates"
                          f"={self.retrieval_candidates}: its queries are ranked among all {n}", stacklevel=2)
        group = image_group_column(spec)
        images = list(range(n)) if group is None else [str(v) for v in split[group]]
        ranges = candidate_groups(n, self.retrieval_candidates)
        fewest = {"img2txt": min(len(set(captions[start:stop])) for start, stop, _ in ranges),
                  "txt2img": min(len(set(images[start:stop])) for start, stop, _ in ranges)}
        self.fewest_candidates[name] = fewest
        short = {direction: [k for k in self.top_k if k >= fewest[direction]] for direction in DIRECTIONS}
        if any(short.values()) and name == "test":
            left_out = ", ".join(f"{direction}_acc@{ks}" for direction, ks in short.items() if ks)
            warnings.warn(f"dataset {spec.name!r}: the test split has {n} rows, and its candidate groups hold as few "
                          f"as {fewest['img2txt']} distinct captions and {fewest['txt2img']} distinct images, so "
                          f"{left_out} (which need more than k candidates) are not recorded", stacklevel=2)

    def _check_pairs(self, spec, name: str, ids) -> None:
        """Winoground: the two rows of an example are adjacent (rows 2e and 2e+1), so both sit in one candidate
        group and one batch (with an even ``retrieval_candidates``)."""
        if self.retrieval_candidates % 2:
            raise ValueError(f"adapter.retrieval_candidates={self.retrieval_candidates} is invalid for dataset "
                             f"{spec.name!r}: its examples are pairs of rows, so it must be even (e.g. 64)")
        ids = list(ids)
        bad = next((i for i in range(0, len(ids), 2)
                    if i + 1 >= len(ids) or ids[i] != ids[i + 1] or (i + 2 < len(ids) and ids[i + 2] == ids[i])), None)
        if bad is not None:
            raise ValueError(f"dataset {spec.name!r}: split {name!r} row {bad} (id {ids[bad]!r}) is not one of two "
                             f"adjacent rows of its example; Winoground's scores need both rows of every example in "
                             f"order (a data.max_{name}_samples cap below the split's size shuffles rows: leave it "
                             f"null)")

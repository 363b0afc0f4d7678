"""Relational reasoning (visual question answering): image tokens and question tokens through a small
transformer, one answer head per answer type.

Design (the GATE paper's relational family, CLEVR / CLEVR-Math):

* image side: the encoder's ``tokens`` (B, N, D) -> LayerNorm -> linear projection to ``width``;
* question side: a deterministic hashing word tokenizer (:func:`hash_words`: lowercase words, each hashed
  with BLAKE2 into one of ``vocab_buckets`` ids; id 0 pads) -> an embedding table. No vocabulary file is
  needed and any question text works (unseen words hash like seen ones; two words may share a bucket);
* both sequences get fixed sinusoidal position encodings (word order matters: "is the bag left of the
  sneaker?") and a learned type embedding (image token / question token); a learned class token is
  prepended and a pre-norm transformer encoder (``depth`` layers, ``heads`` heads, width ``width``) reads
  all of it (question padding masked out);
* ONE linear head per answer type on the class token's output. The answer types and their answers come from
  the dataset's ``options.answer_types`` (answer type -> number of answers, or the list of answer names); the
  order there is the order of the answer-type ids. Predictions are the concatenation of all heads' logits
  (B, sum of answer counts); each example is scored on its own head's slice only: the loss is the
  cross-entropy of that slice against the answer id (averaged over the batch), and the argmax of that slice
  is its predicted answer.

Metrics: ``acc@1`` over all examples and ``acc@1/<answer type>`` per type; checkpoints ranked by val
``acc@1``. An answer type with no question in a split has no accuracy (0/0): once :meth:`check_split` has seen the
test split, ``acc@1/<type>`` is made only for the types it holds (one warning names the others; on a split
without the type such a key computes NaN, never 0). GATE's code likewise logs a type's accuracy only for batches
that hold it. Target: ``{"answer": (B,), "answer_type": (B,)}``. The question is tokenised on the data side
(:meth:`RelationalReasoner.example_targets`) into ``question_ids`` (B, ``max_question_tokens``); its column is
``options.question_column`` (default ``question``). Checkpoint ensembles average the concatenated logits.
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..settings import DROPOUT, POSITIVE, Int, divisible
from .base import Adapter

if TYPE_CHECKING:
    from torchmetrics import MetricCollection

WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")


def hash_words(text: str, buckets: int, length: int) -> torch.Tensor:
    """``text`` as ``length`` word ids in [1, buckets) (0 pads; words past ``length`` are dropped)."""
    words = WORD.findall(text.lower())[:length]
    ids = [1 + int.from_bytes(hashlib.blake2b(w.encode("utf-8"), digest_size=8).digest(), "big") % (buckets - 1)
           for w in words]
    return torch.tensor(ids + [0] * (length - len(ids)), dtype=torch.long)


def sinusoidal(length: int, width: int, device=None) -> torch.Tensor:
    """The fixed (length, width) sine/cosine position encoding of Vaswani et al. 2017."""
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, width, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / width))
    out = torch.zeros(length, width, device=device)
    out[:, 0::2] = torch.sin(position * freq)
    out[:, 1::2] = torch.cos(position * freq)[:, : width // 2]
    return out


def answer_types_of(options: Mapping[str, Any]) -> dict[str, int]:
    """``options.answer_types`` (type -> answer count, or type -> answer names) as type -> answer count."""
    declared = options.get("answer_types")
    if not isinstance(declared, Mapping) or not declared:
        raise ValueError("a relational dataset declares options.answer_types: {answer type: number of answers "
                         "(or the list of answer names)}")
    counts = {str(t): (len(v) if isinstance(v, Sequence) and not isinstance(v, str) else int(v))
              for t, v in declared.items()}
    small = {t: n for t, n in counts.items() if n < 1}
    if small:
        raise ValueError(f"every answer type needs at least 1 answer, got {small}")
    return counts


class RelationalReasoner(Adapter):
    """Question answering over image tokens with one head per answer type (module docstring).

    width, depth, heads, mlp_ratio, dropout: the transformer's size.
    vocab_buckets, max_question_tokens: the hashing tokenizer's id space and question length.
    """

    tasks = frozenset({"relational"})
    loss_splits_across_devices = True  # a mean over examples (gate.engine.training.distributed)
    needs = frozenset({"tokens"})
    monitor = "acc@1"
    settings = {"width": Int(1), "depth": Int(1), "heads": Int(1), "mlp_ratio": POSITIVE, "dropout": DROPOUT,
                "vocab_buckets": Int(2), "max_question_tokens": Int(1)}
    setting_rules = (divisible("width", "heads"),)
    # Questions name left/right relations: a horizontal flip would make the answers wrong.
    augment_inputs = False

    def __init__(self, token_dim: int, spec, width: int = 128, depth: int = 2, heads: int = 4,
                 mlp_ratio: float = 2.0, dropout: float = 0.1, vocab_buckets: int = 4096,
                 max_question_tokens: int = 24) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"RelationalReasoner: width={width} must be divisible by heads={heads}")
        if vocab_buckets < 2 or max_question_tokens < 1:
            raise ValueError("RelationalReasoner: vocab_buckets must be >= 2 and max_question_tokens >= 1")
        self.answer_types = answer_types_of(spec.options)
        self.type_names = list(self.answer_types)
        counts = torch.tensor(list(self.answer_types.values()), dtype=torch.long)
        self.register_buffer("counts", counts, persistent=False)
        self.register_buffer("offsets", torch.cumsum(counts, 0) - counts, persistent=False)
        self.question_column = str(spec.options.get("question_column", "question"))
        self.answer_column, self.type_column = spec.column("answer"), spec.column("answer_type")
        self.vocab_buckets, self.max_question_tokens = int(vocab_buckets), int(max_question_tokens)
        self.width = width

        self.image_norm = nn.LayerNorm(token_dim)
        self.image_projection = nn.Linear(token_dim, width)
        self.word_embedding = nn.Embedding(vocab_buckets, width, padding_idx=0)
        self.kind_embedding = nn.Embedding(2, width)  # 0 image token, 1 question token
        self.class_token = nn.Parameter(torch.zeros(1, 1, width))
        nn.init.normal_(self.class_token, std=0.02)
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=int(width * mlp_ratio), dropout=dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.heads = nn.ModuleList(nn.Linear(width, n) for n in self.answer_types.values())
        #: split name -> which answer types it holds (bool per type), filled by :meth:`check_split`.
        self.split_types: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------------------------------ model
    def forward(self, encoded, batch) -> torch.Tensor:
        if encoded.tokens is None:
            raise ValueError("RelationalReasoner needs the encoder's tokens (EncoderOutput.tokens is None)")
        image = self.image_projection(self.image_norm(encoded.tokens))  # (B, N, W)
        ids = batch["question_ids"]  # (B, L)
        words = self.word_embedding(ids)
        image = image + sinusoidal(image.shape[1], self.width, image.device) + self.kind_embedding.weight[0]
        words = words + sinusoidal(ids.shape[1], self.width, ids.device) + self.kind_embedding.weight[1]
        b = ids.shape[0]
        sequence = torch.cat([self.class_token.expand(b, -1, -1), image.to(words.dtype), words], dim=1)
        pad = torch.cat([torch.zeros(b, 1 + image.shape[1], dtype=torch.bool, device=ids.device), ids == 0], dim=1)
        pooled = self.norm(self.transformer(sequence, src_key_padding_mask=pad)[:, 0])
        return torch.cat([head(pooled) for head in self.heads], dim=1)

    def target(self, batch) -> dict[str, torch.Tensor]:
        return {"answer": batch["answer"], "answer_type": batch["answer_type"]}

    def loss(self, predictions, target) -> torch.Tensor:
        from .relational_metrics import own_slices  # (the metric's reading of the heads, shared)

        logits = own_slices(predictions.float(), target["answer_type"], self.offsets, self.counts)
        return F.cross_entropy(logits, target["answer"])

    def make_metrics(self) -> MetricCollection:
        from torchmetrics import MetricCollection

        from .relational_metrics import AnswerAccuracy

        counts = list(self.answer_types.values())
        held = self.split_types.get("test")  # every type until the test split has been checked
        metrics = {"acc@1": AnswerAccuracy(counts)}
        metrics.update({f"acc@1/{name}": AnswerAccuracy(counts, index) for index, name in enumerate(self.type_names)
                        if held is None or held[index]})
        # compute_groups=False: the metrics share state names (correct, total); torchmetrics would group two whose
        # counts are equal after the first batch (e.g. two answer types absent from it) and report one for both.
        return MetricCollection(metrics, compute_groups=False)

    # ------------------------------------------------------------------------------------------- data
    def example_targets(self, row) -> dict[str, torch.Tensor]:
        return {"question_ids": hash_words(str(row[self.question_column]), self.vocab_buckets,
                                           self.max_question_tokens),
                "answer": torch.as_tensor(int(row[self.answer_column]), dtype=torch.long),
                "answer_type": torch.as_tensor(int(row[self.type_column]), dtype=torch.long)}

    def target_columns(self, spec) -> list[str]:
        return [str(spec.options.get("question_column", "question")), spec.column("answer"), spec.column("answer_type")]

    def stratify_labels(self, spec, split):
        return None

    def check_split(self, spec, name: str, split) -> None:
        counts = answer_types_of(spec.options)
        question = str(spec.options.get("question_column", "question"))
        answer, kind = spec.column("answer"), spec.column("answer_type")
        where = f"dataset {spec.name!r}: split {name!r}"
        if len(split) == 0:
            raise ValueError(f"{where} is empty")
        for column in (question, answer, kind):
            if column not in split.column_names:
                raise ValueError(f"{where} has no column {column!r} (columns: {split.column_names})")
        table = split.select_columns([answer, kind]).with_format("numpy")[:]
        answers, kinds = np.asarray(table[answer]), np.asarray(table[kind])
        for values, column in ((answers, answer), (kinds, kind)):
            if not np.issubdtype(values.dtype, np.integer):
                raise ValueError(f"{where} has non-integer {column!r} ({values.dtype})")
        names = list(counts)
        bad_kind = np.flatnonzero((kinds < 0) | (kinds >= len(names)))
        if bad_kind.size:
            i = int(bad_kind[0])
            raise ValueError(f"{where} example {i} has an unknown answer type {column_value(kind, kinds[i])}; the "
                             f"dataset declares {len(names)} answer types (ids 0..{len(names) - 1}: {names})")
        limit = np.asarray(list(counts.values()))[kinds]
        bad_answer = np.flatnonzero((answers < 0) | (answers >= limit))
        if bad_answer.size:
            i = int(bad_answer[0])
            t = names[int(kinds[i])]
            raise ValueError(f"{where} example {i} has {column_value(answer, answers[i])} outside its answer type "
                             f"{t!r}, which has {counts[t]} answers (ids 0..{counts[t] - 1})")
        for i, text in enumerate(split[question]):
            if not isinstance(text, str) or not WORD.search(text.lower()):
                raise ValueError(f"{where} example {i} has an empty question ({question}={text!r})")
        held = np.bincount(kinds, minlength=len(names)) > 0
        self.split_types[name] = held
        if name == "test" and not held.all():
            missing = [t for t, h in zip(names, held) if not h]
            warnings.warn(f"{where} has no question of answer type(s) {missing}: their acc@1/<type> is undefined and "
                          f"not recorded", stacklevel=2)


def column_value(column: str, value: Any) -> str:
    return f"{column}={int(value)}"

"""Few-shot classification with prototypical networks (Snell et al. 2017) on variable-shape episodes.

Design:

* An episode is one batch: the support and query inputs stacked in one input tensor (supports first), the
  support and query labels relabelled ``0..N-1`` within the episode, and ``num_ways``. The encoder sees the
  whole episode at once; :meth:`ProtoNet.target` is the query labels and the batch size is the query count.
* Head: pooled features (optionally through a learned linear projection, ``projection_dim``); a class's
  prototype is the mean of its support features; a query's logits are the negative squared Euclidean
  distances to the prototypes; the loss is cross-entropy over the queries (the prototypical loss).
* Episodes, MetaDataset-style as in GATE: ``N`` ways uniform in ``[min_ways, min(max_ways, classes in the
  split)]`` (classes drawn without replacement), per class ``k`` shots uniform in ``[min_shots, min(max_shots,
  images of the class - queries)]`` (imbalanced supports, as in MetaDataset) and ``queries_per_class`` queries.
  Two more of GATE's rules, off by default, on for the GATE benchmarks (their ``options.episodes``):
  ``max_support`` caps the support images of an episode (GATE: 250; classes are filled in order, each keeping
  room for ``min_shots`` of every class still to come) and ``adaptive_queries`` takes ``min(queries_per_class,
  smallest chosen class // 2)`` queries (at least 1, leaving ``min_shots``), so a class of 3 images still serves.
  Training episodes are drawn fresh every step from a generator seeded by the run seed; validation and test
  episodes are a fixed set seeded by ``eval_seed`` and the split name, so every checkpoint, every encoder and
  every run seed is scored on the same episodes (paired comparisons; checkpoint ensembles combine episode by
  episode).
* A dataset states its episode protocol in ``options.episodes`` (GATE's values per benchmark, see
  conf/dataset/*.yaml and docs/datasets.md); the adapter's keys default to it (conf/adapter/protonet.yaml) and
  ``max_support`` / ``adaptive_queries`` are read from it unless given.
* Metrics (:class:`~.few_shot_metrics.EpisodeAccuracy`): ``acc@1`` is the **mean over episodes** of each episode's query accuracy
  (the few-shot convention, and GATE's epoch mean of per-episode accuracies): every episode weighs the same, so
  a 50-way episode with 250 queries does not outweigh a 5-way one with 25, as pooling all queries would.
  ``acc@1_ci95`` is the half-width of its 95% confidence interval, ``1.96 · std / sqrt(episodes)`` with the
  population std (ddof 0) of the per-episode accuracies, as Meta-Dataset's trainer computes it. One metric
  update is one episode (one batch). Checkpoints are ranked by ``acc@1``. The states are sums (accuracies, their
  squares, episodes), so they reduce exactly across data-parallel ranks.
* Ensembles average the checkpoints' class probabilities per query (returned as log-probabilities), not the
  raw negative distances, whose scale differs between checkpoints. The ensemble tester combines the members'
  predictions batch by batch, i.e. episode by episode, so ``ensemble_<k>/acc@1`` is a per-episode mean too.

``data.batch_size`` / ``data.eval_batch_size`` do not apply: an episode's size is set by its ways and shots.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, Sampler

from ..data.resumable import ResumableLoader
from ..settings import Bool, Int, ordered
from .base import Adapter, in_float32

if TYPE_CHECKING:
    from torchmetrics import MetricCollection


def prototypical_logits(support: torch.Tensor, support_label: torch.Tensor, query: torch.Tensor,
                        num_ways: int) -> torch.Tensor:
    """Negative squared Euclidean distances (Q, N) from each query (Q, D) to the class means of ``support``
    (S, D) with labels in ``0..num_ways-1``."""
    counts = torch.bincount(support_label, minlength=num_ways).to(support.dtype)
    prototypes = torch.zeros(num_ways, support.shape[1], dtype=support.dtype, device=support.device)
    prototypes = prototypes.index_add(0, support_label, support) / counts.clamp_min(1).unsqueeze(1)
    distances = ((query * query).sum(1, keepdim=True) - 2 * query @ prototypes.T
                 + (prototypes * prototypes).sum(1).unsqueeze(0))
    return -distances.clamp_min(0)


class EpisodeSampler:
    """Draws MetaDataset-style episodes (indices into a split) from the split's class labels.

    :meth:`check` raises a ValueError naming the dataset and the split when no valid episode exists (too few
    classes, or a class with fewer images than ``min_shots + queries``); :meth:`sample` draws the episode of a
    seed (same seed, same episode).
    """

    def __init__(self, labels: Sequence[int] | np.ndarray, *, min_ways: int, max_ways: int, min_shots: int,
                 max_shots: int, queries: int, dataset: str = "dataset", split: str = "train",
                 class_names: Sequence[str] = (), max_support: int | None = None,
                 adaptive_queries: bool = False) -> None:
        self.labels = np.asarray(labels, dtype=np.int64)
        self.min_ways, self.max_ways = int(min_ways), int(max_ways)
        self.min_shots, self.max_shots, self.queries = int(min_shots), int(max_shots), int(queries)
        self.max_support = int(max_support) if max_support is not None else None
        self.adaptive_queries = bool(adaptive_queries)
        self.dataset, self.split, self.class_names = dataset, split, tuple(class_names)
        self.classes = np.unique(self.labels)
        self.members = {int(c): np.flatnonzero(self.labels == c) for c in self.classes}

    def _class(self, c: int) -> str:
        return f"class {c} ({self.class_names[c]})" if 0 <= c < len(self.class_names) else f"class {c}"

    def _where(self) -> str:
        return f"dataset {self.dataset!r}: split {self.split!r}"

    def check(self) -> None:
        if self.classes.size < self.min_ways:
            raise ValueError(f"{self._where()} holds {self.classes.size} classes, fewer than the {self.min_ways} "
                             f"ways an episode needs at least (adapter.min_ways)")
        for c, members in self.members.items():
            self._check_class(c, members, self.min_shots)

    def _check_class(self, c: int, members: np.ndarray, shots: int) -> None:
        queries, keys = ((1, "adapter.min_shots + 1 query (adaptive_queries)") if self.adaptive_queries else
            (self.queries, "adapter.min_shots + adapter.queries_per_class"))
        if members.size < shots + queries:
            shown = ", ".join(str(int(i)) for i in members[:5]) + (", ..." if members.size > 5 else "")
            raise ValueError(f"{self._where()}: {self._class(c)} has only {members.size} examples (example(s) {shown}), "
                             f"but an episode asks for {shots} shots + {queries} queries of it ({keys})")

    def _queries(self, chosen: np.ndarray) -> int:
        """Queries per class of an episode: fixed, or GATE's rule (half the smallest chosen class, at most
        ``queries``, at least 1, leaving it ``min_shots`` support images)."""
        if not self.adaptive_queries:
            return self.queries
        smallest = min(self.members[int(c)].size for c in chosen)
        return max(1, min(self.queries, smallest // 2, smallest - self.min_shots))

    def sample(self, seed: int) -> dict[str, np.ndarray]:
        """The episode of ``seed``: support/query indices into the split and their episode labels 0..N-1."""
        rng = np.random.default_rng(seed)
        self.check()
        ways = int(rng.integers(self.min_ways, min(self.max_ways, self.classes.size) + 1))
        chosen = rng.choice(self.classes, size=ways, replace=False)
        queries = self._queries(chosen)
        support, support_label, query, query_label = [], [], [], []
        used = 0
        for new, c in enumerate(chosen):
            members = self.members[int(c)]
            most = min(self.max_shots, members.size - queries)
            if self.max_support is not None:  # keep room for min_shots of every class still to come
                most = min(most, self.max_support - used - (ways - new - 1) * self.min_shots)
            shots = int(rng.integers(self.min_shots, most + 1))
            used += shots
            picked = rng.choice(members, size=shots + queries, replace=False)
            support.append(picked[:shots])
            query.append(picked[shots:])
            support_label.append(np.full(shots, new))
            query_label.append(np.full(queries, new))
        return {"support": np.concatenate(support), "support_label": np.concatenate(support_label),
                "query": np.concatenate(query), "query_label": np.concatenate(query_label),
                "classes": chosen.astype(np.int64)}


class EpisodeDataset(Dataset):
    """Episodes of a split, indexed by episode seed: each item is one collated episode batch (no length: the
    loader's seed sampler says how many)."""

    def __init__(self, data: Dataset, sampler: EpisodeSampler, label_key: str = "label",
                 collate_fn: Callable | None = None) -> None:
        self.data, self.sampler, self.label_key = data, sampler, label_key
        self.collate_fn = collate_fn or torch.utils.data.default_collate

    def __getitem__(self, seed: int) -> dict[str, torch.Tensor]:
        episode = self.sampler.sample(int(seed))
        indices = [int(i) for i in np.concatenate([episode["support"], episode["query"]])]
        fetch = getattr(self.data, "__getitems__", None)  # one columnar fetch for the episode where the split has it
        items = fetch(indices) if fetch is not None else [self.data[i] for i in indices]
        inputs = self.collate_fn([{k: v for k, v in item.items() if k != self.label_key} for item in items])
        return {**inputs,
                "support_label": torch.as_tensor(episode["support_label"], dtype=torch.long),
                "query_label": torch.as_tensor(episode["query_label"], dtype=torch.long),
                "classes": torch.as_tensor(episode["classes"], dtype=torch.long),
                "num_ways": torch.tensor(len(episode["classes"]), dtype=torch.long)}


class FreshSeeds(Sampler[int]):
    """``count`` new episode seeds per epoch from a generator seeded once (fresh episodes every step,
    reproducible from the run seed)."""

    def __init__(self, count: int, seed: int) -> None:
        self.count = count
        self.generator = torch.Generator().manual_seed(int(seed))

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        return iter(torch.randint(0, 2**62, (self.count,), generator=self.generator).tolist())


def eval_seeds(count: int, eval_seed: int, split: str) -> list[int]:
    """The fixed episode seeds of an evaluation split (independent of the run seed and the encoder)."""
    state = np.random.SeedSequence([int(eval_seed), zlib.crc32(split.encode())]).generate_state(count, np.uint64)
    return [int(s) >> 2 for s in state]


class ProtoNet(Adapter):
    """Prototypical-network head for ``few_shot`` datasets (see the module docstring)."""

    tasks = frozenset({"few_shot"})
    needs = frozenset({"features"})
    monitor = "acc@1"
    settings = {
        "projection_dim": Int(1, nullable=True, null_means="no projection"),
        "min_ways": Int(2), "max_ways": Int(2), "min_shots": Int(1), "max_shots": Int(1),
        "queries_per_class": Int(1), "train_episodes": Int(1), "val_episodes": Int(1), "test_episodes": Int(1),
        "eval_seed": Int(0),
        "max_support": Int(1, nullable=True, null_means="the dataset's options.episodes, else no cap"),
        "adaptive_queries": Bool(nullable=True, null_means="the dataset's options.episodes, else false"),
    }
    setting_rules = (ordered("min_ways", "max_ways"), ordered("min_shots", "max_shots"))
    batch_unit = "episode"
    batch_key = None  # an episode's size comes from its ways and shots

    def __init__(self, feature_dim: int, spec=None, projection_dim: int | None = None, min_ways: int = 5,
                 max_ways: int = 50, min_shots: int = 2, max_shots: int = 15, queries_per_class: int = 5,
                 train_episodes: int = 1000, val_episodes: int = 50, test_episodes: int = 100,
                 eval_seed: int = 0, max_support: int | None = None, adaptive_queries: bool | None = None) -> None:
        super().__init__()
        episodes = dict((getattr(spec, "options", None) or {}).get("episodes") or {})
        max_support = episodes.get("max_support") if max_support is None else max_support
        adaptive_queries = bool(episodes.get("adaptive_queries", False)) if adaptive_queries is None else adaptive_queries
        bounds = dict(min_ways=min_ways, max_ways=max_ways, min_shots=min_shots, max_shots=max_shots,
                      queries_per_class=queries_per_class, train_episodes=train_episodes,
                      val_episodes=val_episodes, test_episodes=test_episodes)
        low = {k: v for k, v in bounds.items() if int(v) < 1}
        if low:
            raise ValueError(f"ProtoNet: {low} must be >= 1")
        if min_ways < 2 or max_ways < min_ways or max_shots < min_shots:
            raise ValueError(f"ProtoNet needs 2 <= min_ways <= max_ways and min_shots <= max_shots, got ways "
                             f"{min_ways}..{max_ways}, shots {min_shots}..{max_shots}")
        if int(test_episodes) < 2:
            raise ValueError(f"ProtoNet: test_episodes={test_episodes}; the 95% confidence interval of the episode "
                             f"mean (acc@1_ci95) needs at least 2 test episodes")
        if max_support is not None and int(max_support) < max_ways * min_shots:
            raise ValueError(f"ProtoNet: max_support={max_support} support images cannot hold {max_ways} ways of "
                             f"{min_shots} shots; raise it to >= {max_ways * min_shots} or lower max_ways")
        self.max_support = int(max_support) if max_support is not None else None
        self.adaptive_queries = bool(adaptive_queries)
        self.spec = spec
        self.min_ways, self.max_ways = int(min_ways), int(max_ways)
        self.min_shots, self.max_shots, self.queries = int(min_shots), int(max_shots), int(queries_per_class)
        self.train_episodes, self.val_episodes, self.test_episodes = train_episodes, val_episodes, test_episodes
        self.eval_seed = int(eval_seed)
        self.projection = nn.Linear(feature_dim, int(projection_dim)) if projection_dim else None

    # ------------------------------------------------------------------------------------------ model
    def forward(self, encoded, batch: Mapping[str, Any]) -> torch.Tensor:
        features = encoded.features
        if self.projection is not None:
            features = self.projection(features)
        support_label = batch["support_label"]
        n_support = support_label.shape[0]
        ways = int(batch["num_ways"])
        # Distances in fp32 even under mixed precision: squared norms of wide features overflow bf16 precision.
        return in_float32(lambda f: prototypical_logits(f[:n_support], support_label, f[n_support:], ways), features)

    def target(self, batch: Mapping[str, Any]) -> torch.Tensor:
        return batch["query_label"]

    def loss(self, predictions, target) -> torch.Tensor:
        return F.cross_entropy(predictions.float(), target)

    def make_metrics(self) -> MetricCollection:
        from torchmetrics import MetricCollection

        from .few_shot_metrics import EpisodeAccuracy

        return MetricCollection({"acc@1": EpisodeAccuracy("mean"), "acc@1_ci95": EpisodeAccuracy("ci95")})

    def combine(self, predictions: Sequence[torch.Tensor]) -> torch.Tensor:
        """Log of the checkpoints' mean class probabilities per query (one episode)."""
        log_probs = torch.stack([F.log_softmax(p.float(), dim=-1) for p in predictions])
        return torch.logsumexp(log_probs, dim=0) - math.log(len(predictions))

    # ------------------------------------------------------------------------------------------- data
    @property
    def _label_column(self) -> str:
        return self.spec.column("class") if self.spec is not None else "label"

    def example_targets(self, row: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {"label": torch.as_tensor(int(row[self._label_column]), dtype=torch.long)}

    def target_columns(self, spec) -> list[str]:
        return [spec.column("class")]

    def _sampler(self, labels, split: str) -> EpisodeSampler:
        spec = self.spec
        return EpisodeSampler(labels, min_ways=self.min_ways, max_ways=self.max_ways, min_shots=self.min_shots,
                              max_shots=self.max_shots, queries=self.queries,
                              dataset=spec.name if spec is not None else "dataset", split=split,
                              class_names=spec.class_names if spec is not None else (),
                              max_support=self.max_support, adaptive_queries=self.adaptive_queries)

    def check_split(self, spec, name: str, split) -> None:
        super().check_split(spec, name, split)
        self._sampler(self.stratify_labels(spec, split), name).check()

    def _labels(self, data: Dataset) -> np.ndarray:
        """The class labels of a served split: one Arrow read for a TransformedSplit, else item by item."""
        split = getattr(data, "split", None)
        if split is not None and self._label_column in getattr(split, "column_names", ()):
            from ..data.splits import labels_of

            return labels_of(split, self._label_column)
        return np.array([int(data[i]["label"]) for i in range(len(data))], dtype=np.int64)

    def dataloader(self, data: Dataset, *, shuffle: bool, batch_size: int, seed: int, num_workers: int,
                   split: str = "train", collate_fn: Callable | None = None, pin_memory: bool = False) -> DataLoader:
        """Episodes of ``data``: fresh seeded ones when shuffling (training), else the split's fixed set."""
        sampler = self._sampler(self._labels(data), split)
        sampler.check()
        if shuffle:
            seeds: Sampler[int] | list[int] = FreshSeeds(self.train_episodes, seed)
        else:
            seeds = eval_seeds(self.val_episodes if split == "val" else self.test_episodes, self.eval_seed, split)
        return (ResumableLoader if shuffle else DataLoader)(
            EpisodeDataset(data, sampler, collate_fn=collate_fn), batch_size=None, sampler=seeds,
                          num_workers=num_workers, persistent_workers=num_workers > 0, pin_memory=pin_memory,
                          generator=torch.Generator().manual_seed(seed))  # no draw from the global stream

"""Video classification and regression (the GATE paper's video family: HMDB51, UCF-101, Kinetics-400, iWildCam).

Design (both adapters share :class:`TemporalAdapter`):

* The encoder runs per frame: a batch of clips ``{"video": (B, T, C, H, W)}`` (an image encoder's transform
  applied frame by frame, :func:`gate.encoders.base.frames_transform`) is reshaped to ``B*T`` images, encoded,
  and the pooled features come back as ``(B, T, D)``. So any image encoder serves; one that does not take
  images is refused when the adapter is built.
* A temporal head: the frame features are projected to ``width``, learned frame-position embeddings (one per
  frame, ``T = dataset.options.frames``) are added, a pre-norm transformer encoder (``depth`` layers; the paper
  uses 4, the CPU default is 2) mixes the frames, and the clip embedding (the mean of the frame outputs, or a
  learned CLS token's output with ``pool: cls``) goes through a linear head.
* :class:`TemporalClassifier` (``temporal_classification``, targets ``{column: clip_label}``): cross-entropy,
  ``acc@1`` and ``acc@5``, checkpoints by val ``acc@1``, ensembles average the logits. ``acc@k`` for k >= C
  (e.g. ``acc@5`` with 3 or 5 classes: every label is among the top k, so it is 1 whatever the model) is left
  out with one warning, the rule of the image classifier (GATE's code records it as ``top_min(5, C)`` = 100 %).
* :class:`TemporalRegressor` (``temporal_regression``, targets ``{column: clip_value}``): predictions are in the
  target's own units; with ``standardize: true`` (the default) the head predicts the standardised target and
  the loss is the MSE in standardised units, ``((prediction - y) / std)^2``, where ``mean``/``std`` are the
  TRAIN split's (computed when the data module checks the train split and kept in the buffers
  ``target_mean``/``target_std``, so checkpoints carry them). Metrics ``mae`` and ``mse`` (torchmetrics, target
  units) and ``r2`` (1 − MSE / the split's target variance: what a tier mean averages), checkpoints by val ``mae``
  (lower is better), ensembles average the predictions.
* Clips are served ``clips_per_batch`` at a time (GATE's video batch size is 8 clips), which replaces
  ``data.batch_size`` (that counts images; a clip is T images through the encoder). Per-frame random
  augmentation is off (``augment_inputs = False``): it would be drawn independently per frame and break motion.

Bad input stops with a ValueError naming the dataset, the split and the example index: clips whose frame
count differs from ``options.frames``, labels outside ``0..C-1``, non-finite regression targets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from ..settings import CLASSES, DROPOUT, POSITIVE, SMOOTHING, TOP_K, Bool, Choice, Int, divisible
from .base import Adapter
from .classification import defined_top_k

if TYPE_CHECKING:
    from torchmetrics import MetricCollection

POOLS = ("mean", "cls")


def declared_frames(spec) -> int:
    """The frames per clip a video dataset declares (``options.frames``), with a clear error when absent."""
    frames = (spec.options or {}).get("frames") if spec is not None else None
    if not Int(1).valid(frames):
        name = spec.name if spec is not None else "?"
        raise ValueError(f"dataset {name!r}: options.frames={frames!r} is invalid: a video dataset declares its "
                         f"frames per clip as an integer >= 1 (options: {{frames: 8}})")
    return frames


def clip_lengths(split, column: str) -> np.ndarray | None:
    """The frame count of every clip in ``column`` (one Arrow pass, respecting selections), or None when the
    column is not stored as a list of frames (e.g. encoded video files). A fixed-shape ``Array3D`` column has
    one frame count; a variable-shape one (``shape=(None, H, W)``) or nested lists may differ per clip."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = split.select_columns([column]).with_format("arrow")[:]
    values = table.column(column)
    if isinstance(values.type, pa.ExtensionType):  # e.g. datasets' ArrayND: nested lists underneath
        values = pa.chunked_array([chunk.storage for chunk in values.chunks], type=values.type.storage_type)
    if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)
            or pa.types.is_fixed_size_list(values.type)):
        return None
    return np.asarray(pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False))


class TemporalAdapter(Adapter):
    """Per-frame encoding + frame-position embeddings + a small transformer + a head on the clip embedding."""

    needs = frozenset({"features"})
    settings = {
        "width": Int(1), "depth": Int(1), "heads": Int(1), "mlp_ratio": POSITIVE, "dropout": DROPOUT,
        "pool": Choice("mean", "cls"),
        "clips_per_batch": Int(1, nullable=True, null_means="data.batch_size"),
        "eval_clips_per_batch": Int(1, nullable=True, null_means="data.eval_batch_size"),
    }
    setting_rules = (divisible("width", "heads"),)
    augment_inputs = False
    batch_unit = "clip"
    batch_key = "adapter.clips_per_batch"
    loss_splits_across_devices = True  # a mean over examples (gate.engine.training.distributed)

    def __init__(self, feature_dim: int, spec, outputs: int, width: int = 128, depth: int = 2, heads: int = 4,
                 mlp_ratio: float = 2.0, dropout: float = 0.0, pool: str = "mean",
                 clips_per_batch: int | None = 8, eval_clips_per_batch: int | None = 32) -> None:
        super().__init__()
        name = type(self).__name__
        if pool not in POOLS:
            raise ValueError(f"{name}: pool={pool!r} is invalid: choose one of {list(POOLS)}")
        for key, value in (("width", width), ("depth", depth), ("heads", heads)):
            if int(value) < 1:
                raise ValueError(f"{name}: {key}={value} is invalid: must be >= 1")
        if width % heads:
            raise ValueError(f"{name}: width={width} is not divisible by heads={heads}")
        for key, value in (("clips_per_batch", clips_per_batch), ("eval_clips_per_batch", eval_clips_per_batch)):
            if value is not None and int(value) < 1:
                raise ValueError(f"{name}: {key}={value} is invalid: must be >= 1 (or null for data.batch_size)")
        self.spec = spec
        self.frames = declared_frames(spec)
        self.pool = pool
        self.clips_per_batch = clips_per_batch
        self.eval_clips_per_batch = eval_clips_per_batch
        self.projection = nn.Linear(feature_dim, width)
        self.position = nn.Parameter(torch.zeros(1, self.frames, width))
        nn.init.trunc_normal_(self.position, std=0.02)
        self.cls = nn.Parameter(torch.zeros(1, 1, width)) if pool == "cls" else None
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=int(width * mlp_ratio), dropout=dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, int(depth), enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, outputs)

    # ------------------------------------------------------------------------------------------ model
    @property
    def _where(self) -> str:
        return f"dataset {self.spec.name!r}" if self.spec is not None else "the dataset"

    def frame_features(self, encoder, batch: Mapping[str, Any]) -> torch.Tensor:
        """Pooled per-frame features (B, T, D): the clips' B*T frames through the image encoder at once."""
        if "video" not in batch:
            raise ValueError(f"{type(self).__name__} needs video batches ({{'video': (B, T, C, H, W)}}); "
                             f"{self._where} gave keys {sorted(batch)}")
        video = batch["video"]
        if video.ndim != 5:
            raise ValueError(f"{self._where}: a video batch must be (B, T, C, H, W), got shape {tuple(video.shape)}")
        b, t = video.shape[:2]
        if t != self.frames:
            raise ValueError(f"{self._where}: a batch holds clips of {t} frames, but the dataset declares "
                             f"options.frames={self.frames}")
        features = encoder({"image": video.flatten(0, 1)}).features
        return features.reshape(b, t, -1)

    def predict(self, encoder, batch: Mapping[str, Any]) -> torch.Tensor:
        return self.temporal(self.frame_features(encoder, batch))

    def temporal(self, frames: torch.Tensor) -> torch.Tensor:
        """The head's output for per-frame features (B, T, D)."""
        x = self.projection(frames) + self.position
        if self.cls is not None:
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.norm(self.transformer(x))
        clip = x[:, 0] if self.cls is not None else x.mean(dim=1)
        return self.head(clip)

    def forward(self, encoded, batch) -> torch.Tensor:
        """Pooled features of a batch's frames (``encoded.features`` (B*T, D), clip by clip) -> predictions."""
        features = encoded.features
        return self.temporal(features.reshape(-1, self.frames, features.shape[-1]))

    # ------------------------------------------------------------------------------------------- data
    @property
    def target_column(self) -> str:
        raise NotImplementedError

    def target(self, batch: Mapping[str, Any]) -> torch.Tensor:
        return batch[self.target_column]

    def target_columns(self, spec) -> list[str]:
        return [self.target_column]

    def check_split(self, spec, name: str, split) -> None:
        where = f"dataset {spec.name!r}: split {name!r}"
        if len(split) == 0:
            raise ValueError(f"{where} is empty")
        lengths = clip_lengths(split, spec.input_column)
        if lengths is not None:
            bad = np.flatnonzero(lengths != self.frames)
            if bad.size:
                i = int(bad[0])
                raise ValueError(f"{where}: example {i} is a clip of {int(lengths[i])} frames, but the dataset "
                                 f"declares options.frames={self.frames} (every clip needs exactly that many; "
                                 f"{bad.size} clip(s) differ)")

    def dataloader(self, data: Dataset, *, shuffle: bool, batch_size: int, seed: int, num_workers: int,
                   split: str = "train", **loader: Any) -> DataLoader:
        clips = self.clips_per_batch if shuffle else self.eval_clips_per_batch
        return super().dataloader(data, shuffle=shuffle, batch_size=int(clips or batch_size), seed=seed,
                                  num_workers=num_workers, split=split, **loader)

    # ------------------------------------------------------------------------------------ compatibility
    def check_compatible(self, spec, encoder) -> None:
        super().check_compatible(spec, encoder)
        name = getattr(encoder, "config_name", None) or type(encoder).__name__
        if spec.modality != "video":
            raise ValueError(f"adapter {type(self).__name__} serves video datasets, but dataset {spec.name!r} is "
                             f"{spec.modality}")
        if "image" not in getattr(encoder, "modalities", ()):
            raise ValueError(f"adapter {type(self).__name__} runs the encoder frame by frame, but encoder {name} "
                             f"takes {sorted(encoder.modalities)}, not images; choose an image encoder")


class TemporalClassifier(TemporalAdapter):
    """Video classification (see the module docstring): CE, ``acc@1``/``acc@5``, checkpoints by val ``acc@1``."""

    tasks = frozenset({"temporal_classification"})
    monitor = "acc@1"
    settings = {**TemporalAdapter.settings, "num_classes": CLASSES, "label_smoothing": SMOOTHING, "top_k": TOP_K}

    def __init__(self, feature_dim: int, spec, num_classes: int, label_smoothing: float = 0.0,
                 top_k: tuple[int, ...] = (1, 5), **head: Any) -> None:
        if num_classes < 2:
            raise ValueError(f"TemporalClassifier needs num_classes >= 2, got {num_classes}")
        super().__init__(feature_dim, spec, outputs=num_classes, **head)
        self.num_classes = num_classes
        self.label_smoothing = label_smoothing
        self.top_k = defined_top_k(top_k, num_classes, f"{type(self).__name__} on dataset "
                                                       f"{getattr(spec, 'name', '?')!r}")
        self.column = spec.column("clip_label")

    @property
    def target_column(self) -> str:
        return self.column

    def loss(self, predictions, target) -> torch.Tensor:
        return F.cross_entropy(predictions.float(), target, label_smoothing=self.label_smoothing)

    def make_metrics(self) -> MetricCollection:
        from .classification_metrics import accuracy_metrics

        return accuracy_metrics(self.num_classes, self.top_k)

    def example_targets(self, row: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {self.column: torch.as_tensor(int(row[self.column]), dtype=torch.long)}

    def check_split(self, spec, name: str, split) -> None:
        super().check_split(spec, name, split)
        from ..data.spec import check_split

        check_split(spec, name, self.stratify_labels(spec, split), self.column)


class TemporalRegressor(TemporalAdapter):
    """Video regression (see the module docstring): MSE (standardised by the train split's mean/std when
    ``standardize``), ``mae``/``mse`` in target units, checkpoints by val ``mae``."""

    tasks = frozenset({"temporal_regression"})
    monitor = "mae"
    settings = {**TemporalAdapter.settings, "standardize": Bool(meaning="train on standardised targets")}

    def __init__(self, feature_dim: int, spec, standardize: bool = True, **head: Any) -> None:
        super().__init__(feature_dim, spec, outputs=1, **head)
        self.column = spec.column("clip_value")
        self.standardize = bool(standardize)
        self.register_buffer("target_mean", torch.zeros((), dtype=torch.float32))
        self.register_buffer("target_std", torch.ones((), dtype=torch.float32))

    @property
    def target_column(self) -> str:
        return self.column

    def temporal(self, frames: torch.Tensor) -> torch.Tensor:
        """Predictions (B,) in the target's units, always float32: under bf16 autocast the head's output is
        bf16, whose 8-bit mantissa would round a de-standardised value near 500 to a multiple of 2."""
        z = super().temporal(frames).squeeze(-1)
        return z.float() * self.target_std.float() + self.target_mean.float()

    def loss(self, predictions, target) -> torch.Tensor:
        error = (predictions.float() - target.float()) / self.target_std
        return (error * error).mean()

    def make_metrics(self) -> MetricCollection:
        # r2 puts the error on a scale without units (0: no better than the split's mean), which is how a
        # regression benchmark enters tier means (docs/tiers.md); mae and mse stay in the target's units.
        from torchmetrics import MeanAbsoluteError, MeanSquaredError, MetricCollection, R2Score

        return MetricCollection({"mae": MeanAbsoluteError(), "mse": MeanSquaredError(), "r2": R2Score()})

    def example_targets(self, row: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {self.column: torch.as_tensor(float(row[self.column]), dtype=torch.float32)}

    def stratify_labels(self, spec, split) -> None:
        return None  # a real-valued target: computed splits are plain seeded splits

    def check_split(self, spec, name: str, split) -> None:
        super().check_split(spec, name, split)
        where = f"dataset {spec.name!r}: split {name!r}"
        raw = split.select_columns([self.column]).with_format("numpy")[:][self.column]
        try:
            values = np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError):
            values = None
        if values is None or values.ndim != 1:
            raise ValueError(f"{where}: column {self.column!r} must hold one real number per clip")
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{where}: example {i} has {self.column}={float(values[i])!r}; a regression target must be "
                             f"a finite number ({bad.size} example(s) are not)")
        if name == "train" and self.standardize:
            std = float(values.std())
            self.target_mean.fill_(float(values.mean()))
            self.target_std.fill_(std if std > 0 else 1.0)

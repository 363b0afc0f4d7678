"""Semantic segmentation and volumetric (medical) segmentation: the GATE multi-level transformer decoder.

Decoder (GATE, Antoniou et al. 2024, "segmentation adapter"): every level of the encoder's multi-level features
(``EncoderOutput.levels`` with their ``grids``, shallow to deep) is resampled bilinearly to one ``grid_size`` x
``grid_size`` grid and the levels are concatenated channel-wise; a 1x1 projection brings them to ``hidden_dim``;
``depth`` pre-norm transformer blocks (with a learned position embedding) mix the grid tokens; a per-pixel linear
classifier gives class logits on the grid, which are upsampled bilinearly to the mask's size. The defaults are
small (grid 16, width 128, 2 blocks) so CPU runs stay quick; the paper's widths are a config change away.

Loss: a weighted sum of cross-entropy, focal loss (gamma 2) and soft Dice, all ignoring ``ignore_index`` pixels
(from the dataset spec). Classes are the mask's classes including background (``num_classes`` counts it).

* :class:`SegmentationAdapter` (task "segmentation", target kind ``mask``): dataset-level metrics over all
  pixels of a split, pooled (one confusion matrix per split; ``ignore_index`` pixels left out):

  - ``miou``: IoU averaged over the classes present in the target OR the prediction (a class predicted but
    absent from the target has IoU 0 and counts: it is a real false positive; a class absent from both is 0/0
    and does not count) — the rule of GATE's ``IoUMetric`` and of mmseg's ``total_area_to_metrics``;
  - ``mean_acc``: per-class pixel accuracy (recall) averaged over the classes present in the TARGET only (a
    class absent from the target has no accuracy, 0/0, even when predicted) — GATE's and mmseg's rule;
  - ``overall_acc``: pixel accuracy; ``dice``: macro F1 over classes (= Dice), classes absent from both target
    and prediction left out, like ``miou``.

  Checkpoints are ranked by val ``miou`` (as GATE's segmentation evaluator does).
* :class:`MedicalSegmentationAdapter`: rows are 2-D slices of 3-D volumes (a target of kind ``volume`` holds
  each slice's volume id). Training is per slice; metrics are computed PER VOLUME (as the ACDC challenge does):
  per-volume statistics are accumulated by volume id in :class:`~.segmentation_metrics.VolumeSegmentationMetric`, so a volume's slices
  are re-assembled whatever the batch order or batching, each volume is scored on its own and the scores are
  averaged over volumes. ``dice`` averages the foreground structures; ``dice/<structure>`` (from the dataset's
  class names, e.g. ``dice/right_ventricle``) is each structure's Dice averaged over volumes, the numbers the
  ACDC challenge reports. Checkpoints are ranked by val ``dice``.

GATE differences. The paper decodes at a larger grid with wider blocks and trains at 224-1024 px; here only
sizes differ (config keys). For medical segmentation (ACDC) GATE's code computes NO hard Dice: it reports IoU,
mean and overall accuracy POOLED over all test pixels with background-labelled pixels dropped
(``IoUMetric(ignore_index=0)``), and ranks checkpoints by its soft-Dice training loss on val. Ours is the
per-volume Dice of the challenge, so ACDC numbers are not comparable with the paper's (docs/metrics.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..data.columns import column_values
from ..settings import CLASSES, DROPOUT, LOSS_WEIGHT, POSITIVE, Bool, Float, Int, divisible, some_positive
from .base import Adapter
from .multilabel import metric_key

if TYPE_CHECKING:
    from torchmetrics import MetricCollection

_NO_IGNORE = -100  # the label F.cross_entropy ignores when the dataset declares no ignore_index


class LevelsDecoder(nn.Module):
    """Multi-level features -> per-pixel class logits on a ``grid_size`` grid (the GATE segmentation decoder)."""

    def __init__(self, level_dims: list[int], num_classes: int, grid_size: int = 16, hidden_dim: int = 128,
                 depth: int = 2, num_heads: int = 4, mlp_ratio: float = 2.0, dropout: float = 0.0) -> None:
        super().__init__()
        if not level_dims:
            raise ValueError("the segmentation decoder needs at least one level of encoder features")
        if hidden_dim % num_heads:
            raise ValueError(f"hidden_dim={hidden_dim} must be divisible by num_heads={num_heads}")
        self.grid_size = int(grid_size)
        self.project = nn.Sequential(nn.Conv2d(sum(level_dims), hidden_dim, kernel_size=1),
                                     nn.BatchNorm2d(hidden_dim), nn.GELU())
        self.position = nn.Parameter(torch.zeros(1, self.grid_size ** 2, hidden_dim))
        nn.init.trunc_normal_(self.position, std=0.02)
        block = nn.TransformerEncoderLayer(hidden_dim, num_heads, dim_feedforward=int(hidden_dim * mlp_ratio),
                                           dropout=dropout, activation="gelu", batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, depth, enable_nested_tensor=False) if depth > 0 else nn.Identity()
        self.norm = nn.LayerNorm(hidden_dim)
        self.classifier = nn.Linear(hidden_dim, num_classes)

    def forward(self, levels: list[torch.Tensor], grids: list[tuple[int, int]],
                size: tuple[int, int]) -> torch.Tensor:
        g = self.grid_size
        maps = []
        for level, (h, w) in zip(levels, grids):
            fmap = level.transpose(1, 2).reshape(level.shape[0], level.shape[2], h, w)
            maps.append(F.interpolate(fmap, size=(g, g), mode="bilinear", align_corners=False))
        x = self.project(torch.cat(maps, dim=1))  # (B, hidden, g, g)
        tokens = self.blocks(x.flatten(2).transpose(1, 2) + self.position)
        logits = self.classifier(self.norm(tokens)).transpose(1, 2).reshape(x.shape[0], -1, g, g)
        return F.interpolate(logits, size=tuple(size), mode="bilinear", align_corners=False)


def segmentation_losses(logits: torch.Tensor, target: torch.Tensor, ignore_index: int | None,
                        gamma: float = 2.0, eps: float = 1.0) -> dict[str, torch.Tensor]:
    """Cross-entropy, focal and soft-Dice losses of (B, C, H, W) logits against a (B, H, W) class map; pixels
    equal to ``ignore_index`` take no part. Dice is averaged over classes (soft, smoothed by ``eps``)."""
    logits = logits.float()
    ignore = _NO_IGNORE if ignore_index is None else int(ignore_index)
    valid = target != ignore
    n_valid = valid.sum().clamp(min=1)
    ce_map = F.cross_entropy(logits, target, ignore_index=ignore, reduction="none")  # 0 on ignored pixels
    ce = ce_map.sum() / n_valid
    focal = ((1.0 - torch.exp(-ce_map)) ** gamma * ce_map).sum() / n_valid
    # Soft Dice per class without a (B, C, H, W) one-hot: a class's intersection is the sum of its probability over
    # the pixels labelled with it, and its target area is a pixel count (ADE20K's one-hot would be C × the mask).
    probs = logits.softmax(dim=1)
    classes = torch.where(valid, target, 0)
    at_target = probs.gather(1, classes.unsqueeze(1)).squeeze(1)[valid]
    labelled = classes[valid]
    inter = torch.zeros(logits.shape[1], dtype=probs.dtype, device=probs.device).index_add(0, labelled, at_target)
    area = torch.bincount(labelled, minlength=logits.shape[1]).to(probs.dtype)
    predicted = (probs * valid.unsqueeze(1)).sum((0, 2, 3))
    dice = 1.0 - ((2 * inter + eps) / (predicted + area + eps)).mean()
    return {"ce": ce, "focal": focal, "dice": dice}


class SegmentationAdapter(Adapter):
    """The GATE segmentation decoder on the encoder's multi-level features; CE + focal + Dice loss; dataset-level
    ``miou``, ``mean_acc``, ``overall_acc`` and ``dice``. Best checkpoint by val ``miou``."""

    tasks = frozenset({"segmentation"})
    needs = frozenset({"levels"})
    monitor = "miou"
    settings = {
        "num_classes": CLASSES,
        "grid_size": Int(1, meaning="the decoder's output grid (cells per side)"),
        "hidden_dim": Int(1),
        "depth": Int(0, meaning="transformer blocks over the grid (0: none, the decoder's documented identity)"),
        "num_heads": Int(1),
        "mlp_ratio": POSITIVE,
        "dropout": DROPOUT,
        "ce_weight": LOSS_WEIGHT,
        "focal_weight": LOSS_WEIGHT,
        "dice_weight": LOSS_WEIGHT,
        "focal_gamma": Float(0.0, meaning="the focal loss's focusing exponent"),
        "ignore_index": Int(nullable=True, null_means="the dataset's"),
    }
    setting_rules = (divisible("hidden_dim", "num_heads"), some_positive("ce_weight", "focal_weight", "dice_weight"))
    #: Spatial targets: a random flip of the image alone would misalign it with its mask.
    augment_inputs = False

    def __init__(self, level_dims: list[int], num_classes: int, spec=None, grid_size: int = 16,
                 hidden_dim: int = 128, depth: int = 2, num_heads: int = 4, mlp_ratio: float = 2.0,
                 dropout: float = 0.0, ce_weight: float = 1.0, focal_weight: float = 1.0, dice_weight: float = 1.0,
                 focal_gamma: float = 2.0, ignore_index: int | None = None) -> None:
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"{type(self).__name__} needs num_classes >= 2 (background included), got {num_classes}")
        self.num_classes = int(num_classes)
        # The dataset spec is the source of truth for ignored pixels; the argument serves specless use (tests).
        self.ignore_index = spec.ignore_index if spec is not None and spec.ignore_index is not None else ignore_index
        self.decoder = LevelsDecoder(list(level_dims), self.num_classes, grid_size, hidden_dim, depth, num_heads,
                                     mlp_ratio, dropout)
        self.weights = {"ce": float(ce_weight), "focal": float(focal_weight), "dice": float(dice_weight)}
        if not any(self.weights.values()):
            raise ValueError(f"{type(self).__name__}: every loss weight is 0 ({self.weights})")
        self.focal_gamma = float(focal_gamma)
        self.mask_column = spec.column("mask") if spec is not None else "mask"
        #: split name -> which classes its masks hold (bool per class), filled by :meth:`check_split`.
        self.split_classes: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------------------------------ model
    def forward(self, encoded, batch) -> torch.Tensor:
        if encoded.levels is None or encoded.grids is None:
            raise ValueError(f"{type(self).__name__} needs multi-level features (EncoderOutput.levels and grids)")
        mask = batch.get("mask") if isinstance(batch, Mapping) else None
        size = tuple(mask.shape[-2:]) if mask is not None else tuple(batch["image"].shape[-2:])
        return self.decoder(encoded.levels, encoded.grids, size)

    def target(self, batch) -> torch.Tensor:
        return batch["mask"]

    def _mask(self, target) -> torch.Tensor:
        return target["mask"] if isinstance(target, Mapping) else target

    def loss(self, predictions, target) -> torch.Tensor:
        parts = segmentation_losses(predictions, self._mask(target), self.ignore_index, self.focal_gamma)
        return sum(w * parts[name] for name, w in self.weights.items() if w)

    def make_metrics(self) -> MetricCollection:
        from .segmentation_metrics import segmentation_metrics

        return segmentation_metrics(self.num_classes, self.ignore_index)

    # ------------------------------------------------------------------------------------------- data
    def example_targets(self, row) -> dict[str, torch.Tensor]:
        return {"mask": torch.as_tensor(np.asarray(row[self.mask_column]), dtype=torch.long)}

    def target_columns(self, spec) -> list[str]:
        return [spec.column("mask")]

    def stratify_labels(self, spec, split):
        return None  # a mask is no single label

    def check_split(self, spec, name: str, split) -> None:
        """Every mask value in [0, num_classes) or equal to ``ignore_index``. Records which classes the split's
        masks hold (:attr:`split_classes`), so per-class metrics are made only for classes a split can score."""
        column = spec.column("mask")
        if len(split) == 0:
            raise ValueError(f"dataset {spec.name!r}: split {name!r} is empty")
        present = np.zeros(spec.num_classes, dtype=bool)
        for start, masks in _chunks(split, column):
            for offset, mask in enumerate(masks):
                mask = np.asarray(mask)
                bad = (mask < 0) | (mask >= spec.num_classes)
                if spec.ignore_index is not None:
                    bad &= mask != spec.ignore_index
                if not bad.any():
                    keep = (mask >= 0) & (mask < spec.num_classes)
                    if spec.ignore_index is not None:
                        keep &= mask != spec.ignore_index
                    values = mask[keep]
                    present |= np.bincount(values.astype(np.int64).ravel(), minlength=spec.num_classes) > 0
                if bad.any():
                    values = sorted({int(v) for v in np.unique(mask[bad])})[:5]
                    raise ValueError(
                        f"dataset {spec.name!r}: split {name!r} example {start + offset}: {column!r} holds label(s) "
                        f"{values} outside 0..{spec.num_classes - 1}"
                        + (f" (ignore_index {spec.ignore_index})" if spec.ignore_index is not None else
                           " (no ignore_index declared)"))
        self.split_classes[name] = present


def _chunks(split, column: str, size: int = 512):
    """(start index, numpy values of ``column``) over a HF split, a chunk at a time."""
    for start in range(0, len(split), size):
        yield start, column_values(split, column, start, start + size)


class MedicalSegmentationAdapter(SegmentationAdapter):
    """The same decoder on 2-D slices of 3-D volumes, trained per slice and scored per volume: ``dice``,
    ``miou``, ``mean_acc`` (foreground classes unless ``include_background``) and ``overall_acc``, each averaged
    over volumes, and ``dice/<structure>`` per scored class (named by :func:`metric_key` of the dataset's class
    name, else the class index). Loss Dice + CE (weights in the config). Best checkpoint by val ``dice``.

    A structure the test split's masks never hold has no Dice to record: once :meth:`check_split` has seen the
    test split, ``dice/<structure>`` is made only for the structures it holds (one warning names the others)."""

    monitor = "dice"
    settings = {**SegmentationAdapter.settings, "include_background": Bool(meaning="score the background class too")}

    def __init__(self, level_dims: list[int], num_classes: int, spec=None, grid_size: int = 16,
                 hidden_dim: int = 128, depth: int = 2, num_heads: int = 4, mlp_ratio: float = 2.0,
                 dropout: float = 0.0, ce_weight: float = 1.0, focal_weight: float = 0.0, dice_weight: float = 1.0,
                 focal_gamma: float = 2.0, ignore_index: int | None = None, include_background: bool = False) -> None:
        super().__init__(level_dims, num_classes, spec, grid_size, hidden_dim, depth, num_heads, mlp_ratio, dropout,
                         ce_weight, focal_weight, dice_weight, focal_gamma, ignore_index)
        self.include_background = include_background
        self.volume_column = spec.column("volume") if spec is not None else "volume"
        names = list(spec.class_names) if spec is not None and len(spec.class_names) == self.num_classes else []
        keys = [metric_key(n) for n in names] if names else [str(i) for i in range(self.num_classes)]
        if len(set(keys)) != len(keys):  # two names that read the same as keys: fall back to indices
            keys = [str(i) for i in range(self.num_classes)]
        self.class_keys = keys

    def target(self, batch) -> dict[str, torch.Tensor]:
        return {"mask": batch["mask"], "volume": batch["volume"]}

    def scored_classes(self) -> list[int]:
        """The classes with a ``dice/<structure>`` key: the foreground (every class with ``include_background``),
        restricted to those the test split's masks hold once :meth:`check_split` has seen it."""
        classes = list(range(0 if self.include_background else 1, self.num_classes))
        held = self.split_classes.get("test")
        return classes if held is None else [c for c in classes if held[c]]

    def make_metrics(self) -> MetricCollection:
        from torchmetrics import MetricCollection

        from .segmentation_metrics import VolumeSegmentationMetric

        metrics = {
            score: VolumeSegmentationMetric(self.num_classes, score, self.include_background, self.ignore_index)
            for score in ("dice", "miou", "mean_acc", "overall_acc")}
        for c in self.scored_classes():
            metrics[f"dice/{self.class_keys[c]}"] = VolumeSegmentationMetric(
                self.num_classes, "dice", self.include_background, self.ignore_index, class_index=c)
        return MetricCollection(metrics, compute_groups=False)

    def example_targets(self, row) -> dict[str, torch.Tensor]:
        out = super().example_targets(row)
        out["volume"] = torch.as_tensor(int(row[self.volume_column]), dtype=torch.long)
        return out

    def target_columns(self, spec) -> list[str]:
        return [*super().target_columns(spec), spec.column("volume")]

    def check_split(self, spec, name: str, split) -> None:
        """Mask labels as for 2-D segmentation; every slice has a volume id (an integer >= 0), and the slices of
        one volume share one mask shape. A test split without some structure says so (its Dice is not recorded)."""
        super().check_split(spec, name, split)
        scored = range(0 if self.include_background else 1, self.num_classes)
        absent = [self.class_keys[c] for c in scored if not self.split_classes[name][c]]
        if name == "test" and absent:
            warnings.warn(f"dataset {spec.name!r}: split 'test' holds no pixel of {absent}: their per-structure Dice "
                          f"is undefined and not recorded (dice averages the structures each volume holds)",
                          stacklevel=2)
        column = spec.column("volume")
        volumes = split[column]  # plain Python values (None where missing)
        shapes: dict[int, tuple[tuple[int, ...], int]] = {}
        for index, volume in enumerate(volumes):
            if not isinstance(volume, (int, np.integer)) or isinstance(volume, bool) or volume < 0:
                raise ValueError(f"dataset {spec.name!r}: split {name!r} example {index}: slice has no valid volume id "
                                 f"({column!r} = {volume!r}; expected an integer >= 0)")
        mask_column = spec.column("mask")
        for start, masks in _chunks(split, mask_column):
            for offset, mask in enumerate(masks):
                index = start + offset
                vid, shape = int(volumes[index]), tuple(np.shape(mask))
                first = shapes.setdefault(vid, (shape, index))
                if first[0] != shape:
                    raise ValueError(f"dataset {spec.name!r}: split {name!r} example {index}: slice of volume {vid} "
                                     f"has a {shape} mask, but the volume's slice at example {first[1]} is "
                                     f"{first[0]}; the slices of a volume must share one shape")

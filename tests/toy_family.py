"""A toy task family, declared the way a user adds one: this one module holds its adapter, its registry entry
and its stand-in; the test (tests/test_task_family_registry.py) writes its two YAML files (the adapter's and the
dataset's) to a config dir of its own.

``toy_brightness``: regress the mean brightness (in [0, 1]) of a small grey image. Its target kind,
``brightness``, is new too: the family brings it (``new_target_kinds``).

Not a benchmark: the stand-in is synthetic (seeded noise images whose brightness is the target), so no
source schema is claimed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torchmetrics import MeanAbsoluteError, MeanSquaredError, MetricCollection

from gate.adapters.base import Adapter
from gate.families import TaskFamily, register_family
from gate.settings import Bool

FAMILY = TaskFamily(
    name="toy_brightness", targets=frozenset({"brightness"}), has_classes=False,
    new_target_kinds={"brightness": "the mean brightness of the image, a real number in [0, 1]"},
    default_adapter="toy_regressor", metrics=("loss", "mae", "mse"), summary_label="Toy Reg")


class ToyRegressor(Adapter):
    """A linear head on pooled features predicting one real value; MSE loss; ``mae``/``mse``; best by val mae."""

    tasks = frozenset({FAMILY.name})
    monitor = "mae"
    loss_splits_across_devices = True
    settings = {"squash": Bool()}  # a user's adapter declares its settings on the class (gate.settings)

    def __init__(self, feature_dim: int, spec, squash: bool = True) -> None:
        super().__init__()
        self.column = spec.column("brightness")
        self.squash = bool(squash)
        self.head = nn.Linear(feature_dim, 1)

    def forward(self, encoded, batch) -> torch.Tensor:
        out = self.head(encoded.features).squeeze(-1).float()
        return torch.sigmoid(out) if self.squash else out

    def target(self, batch: Mapping[str, Any]) -> torch.Tensor:
        return batch[self.column]

    def loss(self, predictions, target) -> torch.Tensor:
        return nn.functional.mse_loss(predictions.float(), target.float())

    def make_metrics(self) -> MetricCollection:
        return MetricCollection({"mae": MeanAbsoluteError(), "mse": MeanSquaredError()})

    def example_targets(self, row: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {self.column: torch.as_tensor(float(row[self.column]), dtype=torch.float32)}

    def stratify_labels(self, spec, split) -> None:
        return None  # a real-valued target: plain seeded splits

    def check_split(self, spec, name: str, split) -> None:
        values = np.asarray(split.select_columns([self.column]).with_format("numpy")[:][self.column], dtype=float)
        if values.size == 0 or not np.isfinite(values).all():
            raise ValueError(f"dataset {spec.name!r}: split {name!r} needs finite {self.column!r} values")


register_family(FAMILY)


def toy_brightness(size: int = 96, image: int = 12, seed: int = 0):
    """The stand-in: ``size`` seeded ``image``-px grey images, each uniform noise scaled by its own brightness
    level; the target is the image's actual mean brightness in [0, 1]. One ``train`` split (gate computes
    val and test from the dataset's ``splits:`` fractions)."""
    import datasets

    rng = np.random.default_rng(seed)
    level = rng.uniform(0.1, 0.9, size)
    pixels = np.clip(rng.uniform(0.0, 2.0, (size, image, image)) * level[:, None, None], 0.0, 1.0)
    images = (pixels * 255).round().astype(np.uint8)
    brightness = images.reshape(size, -1).mean(axis=1) / 255.0
    features = datasets.Features({"image": datasets.List(datasets.List(datasets.Value("uint8"))),
                                  "brightness": datasets.Value("float32")})
    train = datasets.Dataset.from_dict({"image": images.tolist(), "brightness": brightness.astype(np.float32)},
                                       features=features)
    return datasets.DatasetDict({"train": train})

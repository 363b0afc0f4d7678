"""The task spec a dataset config declares, and the checks every split must pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

TASKS = ("classification", "multilabel", "segmentation", "few_shot", "zero_shot", "relational", "temporal")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """What adapters and analysis need to know about a dataset (from ``conf/dataset/<name>.yaml``)."""

    name: str
    modality: str
    task: str
    num_classes: int
    metrics: tuple[str, ...] = ("acc@1",)
    tier_metric: str = "acc@1"
    family: str = ""
    class_names: tuple[str, ...] = ()
    input_column: str = ""

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"dataset {self.name!r}: task {self.task!r} is not one of {TASKS}")
        if self.num_classes < 2 and self.task in ("classification", "multilabel", "few_shot"):
            raise ValueError(f"dataset {self.name!r} declares {self.num_classes} classes; a {self.task} "
                             f"task needs at least 2")
        if not self.input_column:
            object.__setattr__(self, "input_column", self.modality)


def check_split(spec: DatasetSpec, split: str, labels: Sequence[int] | np.ndarray) -> None:
    """Raise ValueError naming the dataset and split when a split is empty or its labels are invalid."""
    labels = np.asarray(labels)
    if labels.size == 0:
        raise ValueError(f"dataset {spec.name!r}: split {split!r} is empty")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"dataset {spec.name!r}: split {split!r} has non-integer labels ({labels.dtype})")
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= spec.num_classes:
        raise ValueError(f"dataset {spec.name!r}: split {split!r} has labels in [{low}, {high}] but the dataset "
                         f"declares num_classes={spec.num_classes} (valid labels 0..{spec.num_classes - 1})")
    if split == "train" and np.unique(labels).size < 2:
        raise ValueError(f"dataset {spec.name!r}: split 'train' has fewer than 2 distinct classes")

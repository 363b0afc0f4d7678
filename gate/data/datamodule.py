"""The Lightning DataModule that serves any registered dataset to any encoder through any task adapter.

Task-neutral: inputs go through the encoder's transform (video frame by frame through an image encoder),
targets through the adapter's :meth:`~gate.adapters.base.Adapter.example_targets`, and the adapter decides how
a split is served (batches or episodes). No target column is named here.

Where the work happens (docs/design.md, "Inputs"): the loader's workers decode each example to uint8 and stack
the batch (the transform's ``collate``); the batch crosses to the device as uint8 (pinned on CUDA), and there
:meth:`GATEDataModule.on_after_batch_transfer` runs the transform's per-batch step (float, resize, flip,
normalise) on the whole batch, for training, validation, testing and every ensemble member alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import datasets
import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from ..encoders.base import device_transform
from .columns import arrow_values, numeric_feature
from .distributed import shard_loader
from .spec import DatasetSpec


def _numeric_columns(split: datasets.Dataset, columns: list[str]) -> list[str]:
    """The columns numpy can hold (strings stay Python objects)."""
    def is_text(feature) -> bool:
        return isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")

    return [c for c in columns if c in split.features and not is_text(split.features[c])]


class TransformedSplit(Dataset):
    """A HF split as model-ready items: the encoder's input transform plus the adapter's target tensors.

    A batch of rows is read in one columnar fetch (:meth:`__getitems__`, which PyTorch's loader calls with a batch's
    indices): fixed-shape numeric columns (images, clips and masks stored as nested lists, as the offline stand-ins
    and Fashion-MNIST are) come out of Arrow as one array, not row by row through Python lists — on Fashion-MNIST
    1.1 ms per row fetched alone, 0.01 ms in a batch of 64. Columns of other kinds (encoded images, text) are read
    as each row's Python values, as a single-row fetch reads them."""

    def __init__(self, split: datasets.Dataset, input_column: str, transform: Callable,
                 example_targets: Callable[[dict[str, Any]], dict[str, torch.Tensor]],
                 columns: list[str] | None = None) -> None:
        wanted = [input_column, *(columns if columns is not None else [c for c in split.column_names
                                                                       if c != input_column])]
        self.columns = [c for c in dict.fromkeys(wanted) if c in split.column_names]
        self.split = split.with_format("numpy", columns=_numeric_columns(split, wanted), output_all_columns=True)
        # batch fetches: numeric columns straight from Arrow, the others (encoded images, text) as Python values
        fast = [c for c in self.columns if numeric_feature(split.features.get(c))]
        slow = [c for c in self.columns if c not in fast]
        self._fast = split.select_columns(fast).with_format("arrow") if fast else None
        self._slow = split.select_columns(slow).with_format(None) if slow else None
        self.input_column = input_column
        self.transform = transform
        self.example_targets = example_targets

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self._item(self.split[int(index)])

    def __getitems__(self, indices: list[int]) -> list[dict[str, torch.Tensor]]:
        indices = [int(i) for i in indices]
        columns: dict[str, Any] = {}
        if self._fast is not None:
            table = self._fast[indices]
            columns.update({name: arrow_values(table.column(name)) for name in table.column_names})
        if self._slow is not None:
            columns.update(self._slow[indices])
        return [self._item({name: values[j] for name, values in columns.items()}) for j in range(len(indices))]

    def _item(self, row: dict[str, Any]) -> dict[str, torch.Tensor]:
        item = dict(self.transform(row[self.input_column]))
        item.update(self.example_targets(row))
        return item


class GATEDataModule(L.LightningDataModule):
    """Holds the train/val/test splits of one dataset, the encoder's transforms and the adapter's targets."""

    def __init__(self, spec: DatasetSpec, splits: datasets.DatasetDict, encoder, adapter, batch_size: int,
                 eval_batch_size: int | None = None, num_workers: int = 0, seed: int = 0,
                 pin_memory: bool = False) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"data.batch_size must be >= 1, got {batch_size}")
        self.spec = spec
        self.splits = splits
        self.encoder = encoder
        self.adapter = adapter
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.num_workers = num_workers
        self.pin_memory = bool(pin_memory)
        self.seed = seed
        self._data: dict[str, TransformedSplit] = {}
        for name, split in splits.items():
            missing = [c for c in [spec.input_column, *adapter.target_columns(spec)] if c not in split.column_names]
            if missing:
                raise ValueError(f"dataset {spec.name!r}: split {name!r} has columns {split.column_names}, "
                                 f"not {missing}")
            if len(split) == 0:
                raise ValueError(f"dataset {spec.name!r}: split {name!r} is empty")
            adapter.check_split(spec, name, split)
        # The input transform with (training) and without (evaluation) augmentation: per example in the workers,
        # per batch on the device.
        augment = bool(getattr(adapter, "augment_inputs", True))
        self.transforms = {train: encoder.input_transform(spec.modality, train and augment) for train in (True, False)}

    def split_rows(self) -> dict[str, dict[str, int | None]]:
        """Per split, the rows it serves (``used``) and the rows it had before ``data.max_<split>_samples`` capped
        it (``of``; None when the splits did not come through :func:`gate.data.splits.make_splits`)."""
        before = getattr(self.splits, "rows_before_caps", None) or {}
        return {name: {"used": len(split), "of": before.get(name)} for name, split in self.splits.items()}

    def setup(self, stage: str | None = None) -> None:
        if self._data:
            return
        for name, split in self.splits.items():
            self._data[name] = TransformedSplit(split, self.spec.input_column, self.transforms[name == "train"],
                                                self.adapter.example_targets, self.adapter.target_columns(self.spec))

    def split_dataloader(self, split: str, shuffle: bool = False) -> DataLoader:
        if split not in self.splits:
            raise ValueError(f"dataset {self.spec.name!r} has no split {split!r}; splits: {sorted(self.splits)}")
        self.setup()
        loader = self.adapter.dataloader(self._data[split], shuffle=shuffle,
                                         batch_size=self.batch_size if shuffle else self.eval_batch_size,
                                         seed=self.seed, num_workers=self.num_workers, split=split,
                                         collate_fn=getattr(self.transforms[split == "train"], "collate", None),
                                         pin_memory=self.pin_memory)
        trainer = self.trainer  # the Trainer serving this module (None outside one)
        world = int(trainer.world_size) if trainer is not None else 1
        return shard_loader(loader, trainer.global_rank if trainer is not None else 0, world, train=shuffle,
                            splittable=bool(getattr(self.adapter, "loss_splits_across_devices", False)),
                            what=f"{split} split of {self.spec.name}")

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """The input transform's per-batch step on the device (uint8 → the encoder's normalised float inputs);
        the training transform (with its augmentation) while fitting, the evaluation one otherwise."""
        trainer = self.trainer
        step = device_transform(self.transforms[bool(trainer is not None and trainer.training)])
        return step(batch) if step is not None else batch

    def train_dataloader(self) -> DataLoader:
        return self.split_dataloader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.split_dataloader("val")

    def test_dataloader(self) -> DataLoader:
        return self.split_dataloader("test")

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

from typing import Any

import datasets
import lightning as L
from torch.utils.data import DataLoader

from ..encoders.base import device_transform
from .distributed import shard_loader
from .spec import DatasetSpec
from .transformed import TransformedSplit


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

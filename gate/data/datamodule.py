"""The Lightning DataModule that serves any registered dataset to any encoder."""

from __future__ import annotations

from collections.abc import Callable

import datasets
import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from .spec import DatasetSpec, check_split
from .splits import labels_of


class TransformedSplit(Dataset):
    """A HF split seen through an encoder transform: item -> {model inputs..., "label": int64 tensor}."""

    def __init__(self, split: datasets.Dataset, input_column: str, transform: Callable):
        self.split = split.with_format("numpy", columns=[input_column, "label"]) if input_column != "text" \
            else split
        self.input_column = input_column
        self.transform = transform

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        row = self.split[int(index)]
        item = dict(self.transform(row[self.input_column]))
        item["label"] = torch.as_tensor(int(row["label"]), dtype=torch.long)
        return item


class GATEDataModule(L.LightningDataModule):
    """Holds the train/val/test splits of one dataset and the encoder's transforms for them."""

    def __init__(self, spec: DatasetSpec, splits: datasets.DatasetDict,
                 transform_factory: Callable[[str, bool], Callable], batch_size: int = 64,
                 eval_batch_size: int | None = None, num_workers: int = 0, seed: int = 0) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"data.batch_size must be >= 1, got {batch_size}")
        self.spec = spec
        self.splits = splits
        self.transform_factory = transform_factory
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.num_workers = num_workers
        self.seed = seed
        self._data: dict[str, TransformedSplit] = {}
        for name, split in splits.items():
            if spec.input_column not in split.column_names:
                raise ValueError(f"dataset {spec.name!r}: split {name!r} has columns {split.column_names}, "
                                 f"no input column {spec.input_column!r}")
            check_split(spec, name, labels_of(split))

    def setup(self, stage: str | None = None) -> None:
        if self._data:
            return
        for name, split in self.splits.items():
            transform = self.transform_factory(self.spec.modality, name == "train")
            self._data[name] = TransformedSplit(split, self.spec.input_column, transform)

    def split_dataloader(self, split: str, shuffle: bool = False) -> DataLoader:
        if split not in self.splits:
            raise ValueError(f"dataset {self.spec.name!r} has no split {split!r}; splits: {sorted(self.splits)}")
        self.setup()
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(self._data[split], batch_size=self.batch_size if shuffle else self.eval_batch_size,
                          shuffle=shuffle, generator=generator if shuffle else None,
                          num_workers=self.num_workers, persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self.split_dataloader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.split_dataloader("val")

    def test_dataloader(self) -> DataLoader:
        return self.split_dataloader("test")

    def predict_dataloader(self) -> DataLoader:
        return self.split_dataloader("test")

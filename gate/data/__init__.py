"""Datasets: specs, offline and hub sources, deterministic splits, the DataModule."""

from .datamodule import GATEDataModule, TransformedSplit
from .spec import DatasetSpec, check_split
from .splits import make_splits

__all__ = ["GATEDataModule", "TransformedSplit", "DatasetSpec", "check_split", "make_splits"]

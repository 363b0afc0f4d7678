"""Datasets: specs, offline and hub sources, deterministic splits, the DataModule.

The names below are imported on first use (PEP 562), so importing a light module of this package (``gate.data.spec``
for the analysis, ``gate.data.hub`` for gate-data) does not import torch, Lightning and torchmetrics, which imports
matplotlib's pyplot (tests/test_analysis_side_effects.py)."""

from importlib import import_module

_LAZY = {"GATEDataModule": ".datamodule", "TransformedSplit": ".transformed", "DatasetSpec": ".spec",
         "check_split": ".spec", "make_splits": ".splits"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The task-adapter contract (docs/design.md, "Adapter").

An adapter owns everything task-specific, so the data module, the model, the trainer, ensembling and
feature extraction stay task-neutral and never name a target:

* data: how a raw example's target columns become tensors (:meth:`Adapter.example_targets`), how a split is
  checked (:meth:`Adapter.check_split`), stratified (:meth:`Adapter.stratify_labels`) and served in batches
  or episodes (:meth:`Adapter.dataloader`);
* model: how the encoder is applied (:meth:`Adapter.predict`: per image, per frame, ...), the head
  (:meth:`Adapter.forward`), what the target of a batch is (:meth:`Adapter.target`) and its size, the loss;
* evaluation: a ``torchmetrics`` collection whose keys are the recorded metric names (directions in
  :mod:`gate.metrics`), the validation metric that ranks checkpoints (:attr:`Adapter.monitor`), and how the
  predictions of several checkpoints combine into an ensemble (:meth:`Adapter.combine`).

One module per task family; each declares what it needs from the encoder (:attr:`Adapter.needs`: pooled
``features``, ``tokens`` or multi-level ``levels``) and fails clearly when the encoder cannot supply it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from .. import metrics
from ..data.resumable import ResumableLoader
from ..encoders.base import EncoderOutput, GATEEncoder

if TYPE_CHECKING:  # the metrics are built when a run evaluates: torchmetrics takes seconds to import
    from torchmetrics import MetricCollection

Target = torch.Tensor | Mapping[str, torch.Tensor]


def target_length(target: Target) -> int:
    """How many examples a target (a tensor, or a mapping of tensors) covers."""
    if isinstance(target, Mapping):
        return len(next(iter(target.values())))
    return len(target)


def to_cpu(value: Any) -> Any:
    """Tensors (also inside mappings and sequences) detached on the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, Mapping):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def float32(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in at least float32 (float64 stays float64; bf16 and fp16 are widened)."""
    return tensor.to(torch.promote_types(tensor.dtype, torch.float32))


def in_float32(function: Callable[..., torch.Tensor], *tensors: torch.Tensor) -> torch.Tensor:
    """``function(*tensors)`` with the tensors in at least float32 (:func:`float32`) and autocast off on their
    device: for a head's computation whose precision decides a recorded number (distances, similarities compared
    strictly), which ``bf16-mixed`` autocast would run in bf16 (8 significant bits). A parameter the function
    applies must be cast to its inputs' dtype there (under ``bf16-true`` it is bf16)."""
    with torch.autocast(device_type=tensors[0].device.type, enabled=False):
        return function(*(float32(t) for t in tensors))


class Adapter(nn.Module, abc.ABC):
    #: Task families (DatasetSpec.task) this adapter can serve.
    tasks: frozenset[str] = frozenset()
    #: What the encoder must provide (GATEEncoder.provides): "features", "tokens", "levels", "source_logits".
    needs: frozenset[str] = frozenset({"features"})
    #: The validation metric (without the "val/" prefix) that ranks checkpoints; its direction comes from the
    #: metric registry (:mod:`gate.metrics`).
    monitor: str = "loss"
    #: What one training batch counts (``example``, ``clip``, ``episode``) and the gate-run key that sets how
    #: many (None: nothing sets it, e.g. an episode's size comes from its ways and shots). A paper tier applies a
    #: dataset's ``paper_protocol.batch_size`` to this key when its ``batch_unit`` (default ``example``) is
    #: this unit (:func:`gate.tiers.expand.paper_protocol_overrides`).
    batch_unit: str = "example"
    batch_key: str | None = "data.batch_size"
    #: Whether the loss of a batch is a mean of per-example terms, so that data-parallel ranks can each take a
    #: slice of the global batch and their averaged gradients equal one device's (gate.engine.training.distributed). False
    #: (the safe default) for losses over a whole batch (an episode, in-batch contrastive pairs, a batch Dice):
    #: then the device count enters the experiment id. The adapter's YAML states it again (``loss_splits_across_devices:``,
    #: gate.settings.ADAPTER_FACTS) for the experiment id, which reads it without importing the class; gate-run
    #: refuses a YAML that contradicts it.
    loss_splits_across_devices: bool = False
    # An adapter declares its own config keys beside its code: ``settings = {key: gate.settings.Setting}`` (every
    # constructor key a config may set) and optionally ``setting_rules`` (rules across them); gate-run's validation
    # checks the ``adapter:`` section against them before anything is built (gate.settings.adapter_section).

    @classmethod
    def check_config(cls, cfg: Mapping[str, Any]) -> list[str]:
        """This adapter's rules that read other sections of a composed run config (the dataset, ``data.*``), each a
        clause naming its key. Validation calls it before anything is built, once every section passed its own
        schema (gate/settings.py); a value another section declares may still be invalid here: read it checked."""
        return []

    @classmethod
    def missing_needs(cls, encoder: Any) -> set[str]:
        """What this adapter needs (:attr:`needs`) that ``encoder`` (an instance or its class) does not provide;
        empty where its class says what it provides only once built (a property)."""
        provides = getattr(encoder, "provides", frozenset({"features"}))
        if not isinstance(provides, (set, frozenset)):
            return set()
        return set(cls.needs) - set(provides)

    # ------------------------------------------------------------------------------------------ model
    def predict(self, encoder: GATEEncoder, batch: Mapping[str, Any]) -> torch.Tensor:
        """Predictions for a batch: encode its inputs, then apply the head (override to encode per frame, ...)."""
        return self(encoder(batch), batch)

    @abc.abstractmethod
    def forward(self, encoded: EncoderOutput, batch: Mapping[str, Any]) -> torch.Tensor:
        """Predictions (e.g. logits) for a batch from the encoder's outputs."""

    def target(self, batch: Mapping[str, Any]) -> Target:
        """The part of a batch the predictions are scored against (default: the ``label`` tensor)."""
        return batch["label"]

    def batch_size(self, batch: Mapping[str, Any]) -> int:
        """How many scored examples a batch holds (for logging, averaging and throughput)."""
        return target_length(self.target(batch))

    @abc.abstractmethod
    def loss(self, predictions: torch.Tensor, target: Target) -> torch.Tensor:
        """The training loss of a batch's predictions against its target."""

    @abc.abstractmethod
    def make_metrics(self) -> MetricCollection:
        """A fresh metric collection (``update(predictions, target)``); keys are the recorded metric names."""

    def combine(self, predictions: Sequence[torch.Tensor]) -> torch.Tensor:
        """Ensemble the predictions of several checkpoints for one batch (default: average the logits)."""
        return torch.stack(list(predictions)).mean(dim=0)

    @property
    def monitor_mode(self) -> str:
        """``"max"`` or ``"min"``: how checkpoints are ranked by :attr:`monitor`."""
        return metrics.monitor_mode(self.monitor)

    def higher_is_better(self, metric: str) -> bool:
        return metrics.higher_is_better(metric)

    # ------------------------------------------------------------------------------------------- data
    def example_targets(self, row: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """The target tensors of one raw example (no batch dimension). Default: an int64 ``label``."""
        return {"label": torch.as_tensor(int(row["label"]), dtype=torch.long)}

    def target_columns(self, spec) -> list[str]:
        """The raw columns :meth:`example_targets` reads (default: every declared target column)."""
        return list(spec.targets)

    def stratify_labels(self, spec, split) -> np.ndarray | None:
        """Labels to stratify computed splits by (a HF split in, an int array out), or None for a plain split."""
        column = spec.label_column
        if column is None or column not in split.column_names:
            return None
        return np.asarray(split.select_columns([column]).with_format("numpy")[:][column])

    def check_split(self, spec, name: str, split) -> None:
        """Raise a ValueError naming the dataset, the split and the example index when targets are invalid."""
        from ..data.spec import check_split

        column = spec.label_column
        if column is not None:
            check_split(spec, name, self.stratify_labels(spec, split), column)

    def dataloader(self, data: Dataset, *, shuffle: bool, batch_size: int, seed: int, num_workers: int,
                   split: str = "train", collate_fn: Callable | None = None, pin_memory: bool = False) -> DataLoader:
        """How a split is served (default: plain batches; few-shot serves episodes). ``collate_fn`` (the encoder's
        input transform's, which stacks images of several sizes) and ``pin_memory`` are the data module's."""
        # a generator of its own for every split: an unshuffled loader without one still draws its base seed from the
        # global stream on every pass, so a run that validates more often trained on other random numbers (a
        # shorter run was not the prefix of a longer one)
        # (training: a loader that a run resumed mid-epoch continues where it stopped)
        generator = torch.Generator().manual_seed(seed)
        return (ResumableLoader if shuffle else DataLoader)(
            data, batch_size=batch_size, shuffle=shuffle, generator=generator, num_workers=num_workers,
            persistent_workers=num_workers > 0, collate_fn=collate_fn, pin_memory=pin_memory)

    # ------------------------------------------------------------------------------------ compatibility
    def check_compatible(self, spec, encoder: GATEEncoder) -> None:
        """Raise a clear error if this adapter cannot serve the dataset's task with this encoder."""
        name = getattr(encoder, "config_name", None) or type(encoder).__name__
        if spec.task not in self.tasks:
            raise ValueError(f"adapter {type(self).__name__} serves tasks {sorted(self.tasks)}, but dataset "
                             f"{spec.name!r} is a {spec.task!r} task")
        missing = self.missing_needs(encoder)
        if missing:
            raise ValueError(f"adapter {type(self).__name__} needs {sorted(missing)} from the encoder, which "
                             f"encoder {name} does not provide (it provides {sorted(encoder.provides)})")

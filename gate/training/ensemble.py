"""Test with ensembles of the top-k validation checkpoints (logits averaged), GATE-paper style."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import lightning as L
import torch

from ..adapters.base import target_length, targets_equal
from ..model import GATEModel


def ranked_checkpoints(checkpoint_callback: L.pytorch.callbacks.ModelCheckpoint) -> list[str]:
    """The saved top-k checkpoint paths, best first (the callback's best model first among ties)."""
    reverse = checkpoint_callback.mode == "max"
    scored = sorted(checkpoint_callback.best_k_models.items(), key=lambda item: float(item[1]), reverse=reverse)
    ranked = [path for path, _ in scored]
    best = checkpoint_callback.best_model_path
    return [best, *(p for p in ranked if p != best)] if best in ranked else ranked


def ensemble_metrics(model: GATEModel, predictions: Sequence[Sequence[torch.Tensor]], targets: Sequence,
                     sizes: Sequence[int]) -> dict[str, float]:
    """Metrics of the ensembles of the first k checkpoints, as ``ensemble_<k>/<metric>``.

    ``predictions[c][b]`` is checkpoint c's prediction for test batch b, ``targets[b]`` that batch's target.
    Predictions are combined batch by batch (the adapter's :meth:`combine`), so batch-shaped predictions (an
    episode's logits, a batch's image-text similarities) ensemble as correctly as per-example ones.
    """
    out: dict[str, float] = {}
    adapter = model.adapter
    for k in sizes:
        if k > len(predictions):
            continue
        metrics = adapter.make_metrics()
        loss_sum, count = 0.0, 0
        for b, target in enumerate(targets):
            combined = adapter.combine([p[b] for p in predictions[:k]])
            metrics.update(combined, target)
            n = target_length(target)
            loss_sum += float(adapter.loss(combined, target)) * n
            count += n
        for name, value in metrics.compute().items():
            out[f"ensemble_{k}/{name}"] = float(value)
        out[f"ensemble_{k}/loss"] = loss_sum / max(count, 1)
    return out


def predict_with_checkpoints(trainer: L.Trainer, model: GATEModel, datamodule: L.LightningDataModule,
                             checkpoints: Sequence[str], known: tuple[list, list] | None = None
                             ) -> tuple[list[list[torch.Tensor]], list]:
    """Per-batch test-split predictions of each checkpoint (Lightning's predict loop), and the batch targets.

    ``known``: (per-batch predictions, per-batch targets) of ``checkpoints[0]`` from an earlier pass, reused
    instead of predicting again.
    """
    predictions, targets = ([known[0]], known[1]) if known is not None else ([], None)
    for path in checkpoints[len(predictions):]:
        batches = trainer.predict(model, datamodule=datamodule, ckpt_path=path)
        predictions.append([b["predictions"] for b in batches])
        these = [b["target"] for b in batches]
        if targets is not None and (len(these) != len(targets) or
                                    not all(targets_equal(x, y) for x, y in zip(these, targets))):
            raise RuntimeError("the test split changed between checkpoints; ensembles would be wrong")
        targets = these
    return predictions, targets


def test_ensembles(trainer: L.Trainer, model: GATEModel, datamodule: L.LightningDataModule,
                   checkpoints: Sequence[str], sizes: Sequence[int] = (1, 3, 5)) -> dict[str, float]:
    """Ensemble metrics of the top-k checkpoints (``checkpoints`` ranked best first, as taken right after
    fitting: ``trainer.test(ckpt_path=...)`` restores the callback state of the checkpoint it loads).

    Call right after ``trainer.test`` on ``checkpoints[0]``: its test pass (kept in ``model.test_outputs``)
    stands in for that checkpoint's predictions.
    """
    checkpoints = list(checkpoints)[: max(sizes)]
    missing = [k for k in sizes if k > len(checkpoints)]
    if missing:
        warnings.warn(f"only {len(checkpoints)} validation checkpoints were kept; skipping ensembles of "
                      f"size {missing} (validate more often or train longer)", stacklevel=2)
    if not checkpoints:
        return {}
    known = None
    if model.test_outputs:
        known = ([p for p, _ in model.test_outputs], [t for _, t in model.test_outputs])
    predictions, targets = predict_with_checkpoints(trainer, model, datamodule, checkpoints, known)
    return ensemble_metrics(model, predictions, targets, sizes)

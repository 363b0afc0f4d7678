"""Test with ensembles of the top-k validation checkpoints (logits averaged), GATE-paper style."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import lightning as L
import torch

from ..model import GATEModel


def ranked_checkpoints(checkpoint_callback: L.pytorch.callbacks.ModelCheckpoint) -> list[str]:
    """The saved top-k checkpoint paths, best first (the callback's best model first among ties)."""
    reverse = checkpoint_callback.mode == "max"
    scored = sorted(checkpoint_callback.best_k_models.items(), key=lambda item: float(item[1]), reverse=reverse)
    ranked = [path for path, _ in scored]
    best = checkpoint_callback.best_model_path
    return [best, *(p for p in ranked if p != best)] if best in ranked else ranked


def ensemble_metrics(model: GATEModel, predictions: Sequence[torch.Tensor], target: torch.Tensor,
                     sizes: Sequence[int]) -> dict[str, float]:
    """Metrics of the ensembles of the first k prediction sets, as ``ensemble_<k>/<metric>``."""
    out: dict[str, float] = {}
    for k in sizes:
        if k > len(predictions):
            continue
        combined = model.adapter.combine(predictions[:k])
        metrics = model.adapter.make_metrics()
        metrics.update(combined, target)
        for name, value in metrics.compute().items():
            out[f"ensemble_{k}/{name}"] = float(value)
        out[f"ensemble_{k}/loss"] = float(model.adapter.loss(combined, {"label": target}))
    return out


def predict_with_checkpoints(trainer: L.Trainer, model: GATEModel, datamodule: L.LightningDataModule,
                             checkpoints: Sequence[str], known: tuple[torch.Tensor, torch.Tensor] | None = None
                             ) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Test-split predictions of each checkpoint (Lightning's predict loop), and the targets.

    ``known``: (predictions, targets) of ``checkpoints[0]`` from an earlier pass, reused instead of predicting.
    """
    predictions, target = ([known[0]], known[1]) if known is not None else ([], None)
    for path in checkpoints[len(predictions):]:
        batches = trainer.predict(model, datamodule=datamodule, ckpt_path=path)
        predictions.append(torch.cat([b["predictions"] for b in batches]))
        this_target = torch.cat([b["target"] for b in batches])
        if target is not None and not torch.equal(target, this_target):
            raise RuntimeError("the test split changed order between checkpoints; ensembles would be wrong")
        target = this_target
    return predictions, target


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
        known = (torch.cat([p for p, _ in model.test_outputs]), torch.cat([t for _, t in model.test_outputs]))
    predictions, target = predict_with_checkpoints(trainer, model, datamodule, checkpoints, known)
    return ensemble_metrics(model, predictions, target, sizes)

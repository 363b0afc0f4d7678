"""Feature extraction with an on-disk cache: one pass of an encoder over one dataset split.

``cached_features(config, split, max_samples, cache_dir)`` returns a :class:`FeatureSet` — pooled features
``(n, D)``, integer labels ``(n,)`` and, for encoders with a source classification head, source-class
probabilities ``(n, S)`` (softmax of the head's logits). The first call builds the encoder and the split,
runs the encoder once (eval mode, no gradients, deterministic evaluation transform — never the training
augmentation, whatever the split) and saves the result; later calls with the same key load it. The encoder is
built seeded from the config's ``seed`` (:func:`gate.engine.build.build_encoder`), so a randomly initialised encoder
gives the same features on every extraction (the cache is never what makes them agree).

The cache key is a hash of everything that changes the numbers: the resolved encoder config (including its
``image_size`` and other transform settings), the resolved dataset config, the split, the seed (which fixes
the deterministic splits and the subsample) and ``max_samples``. Files live at
``<cache_dir>/features/<encoder>/<dataset>/<split>-<key>.pt`` with a readable ``.json`` of the key next to
them, and are written atomically (temporary file, then rename).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..engine.build import build_encoder, build_spec, build_splits, to_plain
from ..engine.training.checkpoints import is_complete_checkpoint
from ..files import atomic_write, atomic_write_text, set_aside
from ..results import stable_hash

__all__ = ["FeatureSet", "feature_cache_key", "feature_cache_path", "extract_features", "cached_features"]

SPLITS = ("train", "val", "test")


@dataclasses.dataclass
class FeatureSet:
    """One pass of features over one split."""

    features: torch.Tensor  # (n, D) float32
    labels: torch.Tensor  # (n,) int64
    source_probs: torch.Tensor | None  # (n, S) float32 rows summing to 1, or None without a source head
    meta: dict[str, Any]
    path: Path | None = None
    from_cache: bool = False
    seconds: float = 0.0  # extraction time (0 when loaded from the cache)

    @property
    def num_samples(self) -> int:
        return int(self.features.shape[0])


def feature_cache_key(config: Mapping[str, Any], split: str, max_samples: int | None) -> dict[str, Any]:
    """The plain-data description of a feature pass (what the cache is keyed by)."""
    config = to_plain(config)
    # "init": features cached before encoders were built seeded came from an unrecorded random initialisation
    # (for a scratch encoder); the marker keeps them from being reused.
    key = {"encoder": to_plain(config["encoder"]), "dataset": to_plain(config["dataset"]), "split": split,
           "seed": int(config.get("seed", 0)), "max_samples": None if max_samples is None else int(max_samples),
           "init": "seeded"}
    # A capped split of a grouped dataset holds whole groups (gate.data.splits.cap_unit); features cached when
    # caps took random rows describe other examples, and the marker keeps them from being reused.
    if max_samples is not None and _cap_unit(key["dataset"]) is not None:
        key["cap"] = "whole groups"
    return key


def _cap_unit(dataset_cfg: Mapping[str, Any]) -> str | None:
    from ..data.splits import cap_unit

    spec = build_spec(dataset_cfg)
    return cap_unit(spec.task, spec.targets, (dataset_cfg.get("splits") or {}).get("group_column"), spec.label_column)


def feature_cache_path(cache_dir: str | os.PathLike, key: Mapping[str, Any]) -> Path:
    digest = stable_hash(dict(key))
    return (Path(cache_dir).expanduser().resolve() / "features" / str(key["encoder"].get("name", "encoder"))
            / str(key["dataset"].get("name", "dataset")) / f"{key['split']}-{digest}.pt")


@torch.inference_mode()
def extract_features(encoder, loader, *, label_key: str = "label", device: str | torch.device = "cpu",
                     progress: bool = True, desc: str = "features", on_device=None
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Run ``encoder`` over ``loader`` (dict batches holding the labels under ``label_key``); return features,
    labels and source probabilities (None when the encoder returns no source logits). ``on_device``: the input
    transform's per-batch step (:func:`gate.encoders.base.device_transform`), run once a batch is on ``device``,
    as in fine-tuning."""
    from tqdm.auto import tqdm

    device = torch.device(device)
    was_training = encoder.training
    encoder.eval().to(device)
    feats, labels, probs = [], [], []
    try:
        for batch in tqdm(loader, desc=desc, disable=not progress, unit="batch", leave=False):
            label = batch.pop(label_key)
            inputs = {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v
                      for k, v in batch.items()}
            out = encoder(on_device(inputs) if on_device is not None else inputs)
            feats.append(out.features.float().cpu())
            labels.append(label.long().cpu())
            if out.source_logits is not None:
                probs.append(torch.softmax(out.source_logits.double(), dim=1).float().cpu())
    finally:
        encoder.train(was_training)
    if not feats:
        raise ValueError(f"{desc}: the data loader yielded no batches")
    if probs and len(probs) != len(feats):  # pragma: no cover - an encoder that sometimes returns logits
        raise RuntimeError("the encoder returned source logits for some batches but not others")
    return torch.cat(feats), torch.cat(labels), torch.cat(probs) if probs else None


def cached_features(config: Mapping[str, Any], split: str = "train", max_samples: int | None = None,
                    cache_dir: str | os.PathLike | None = None, *, refresh: bool = False, batch_size: int = 128,
                    num_workers: int = 0, device: str | torch.device = "cpu", progress: bool = True,
                    pin_memory: bool | None = None) -> FeatureSet:
    """Features of ``config.encoder`` on split ``split`` of ``config.dataset`` (at most ``max_samples``,
    a seeded subsample), from the cache in ``cache_dir`` when present (``refresh=True`` re-extracts).

    ``config`` needs ``encoder``, ``dataset`` and ``seed`` (e.g. a composed ``score.yaml``); ``cache_dir=None``
    disables the cache.
    """
    import time

    from torch.utils.data import DataLoader

    from ..data.datamodule import TransformedSplit
    from ..encoders.base import device_transform

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if max_samples is not None and int(max_samples) < 2:
        raise ValueError(f"max_samples must be >= 2 or null (the whole split), got {max_samples!r}")
    key = feature_cache_key(config, split, max_samples)
    path = feature_cache_path(cache_dir, key) if cache_dir is not None else None
    if path is not None and path.is_file() and not refresh:
        blob = _load_cached(path)
        if blob is not None:
            return FeatureSet(blob["features"], blob["labels"], blob.get("source_probs"), dict(key), path,
                              from_cache=True)

    start = time.perf_counter()
    # Seeded from the experiment's seed: a randomly initialised encoder (resnet18_scratch) gives the same features
    # on every extraction, and the same initial weights as a fine-tuning run of that seed.
    encoder = build_encoder(key["encoder"], key["dataset"].get("modality"), seed=key["seed"])
    spec = build_spec(key["dataset"])
    encoder.check_modality(spec.modality, spec.name)
    column = spec.label_column
    if column is None:
        raise ValueError(f"dataset {spec.name!r} ({spec.task}) has no single-label target: transferability "
                         f"scores need class labels")
    splits = build_splits(key["dataset"], seed=key["seed"], max_samples={split: key["max_samples"]}, spec=spec)

    def labels_only(row):
        return {column: torch.as_tensor(int(row[column]), dtype=torch.long)}

    transform = encoder.input_transform(spec.modality, False)
    data = TransformedSplit(splits[split], spec.input_column, transform, labels_only, [column])
    # the fine-tuning path: uint8 examples stacked by the transform's collate, pinned (default: for a CUDA device),
    # and the per-batch step (resize, normalise) on the device
    loader = DataLoader(data, batch_size=int(batch_size), shuffle=False, num_workers=int(num_workers),
                        collate_fn=getattr(transform, "collate", None),
                        pin_memory=torch.device(device).type == "cuda" if pin_memory is None else bool(pin_memory))
    desc = f"{key['encoder'].get('name', 'encoder')} × {spec.name}/{split}"
    feats, labels, probs = extract_features(encoder, loader, label_key=column, device=device, progress=progress,
                                            desc=desc, on_device=device_transform(transform))
    seconds = time.perf_counter() - start
    if path is not None:
        _save_atomic(path, {"features": feats, "labels": labels, "source_probs": probs}, key)
    return FeatureSet(feats, labels, probs, dict(key), path, from_cache=False, seconds=seconds)


def _load_cached(path: Path) -> dict[str, Any] | None:
    """A cached feature file, or None after moving a truncated or unreadable one aside (it is re-extracted)."""
    if not is_complete_checkpoint(path):
        set_aside(path, "a truncated feature cache file")
        return None
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable cache file is re-extracted, never trusted
        set_aside(path, f"an unreadable feature cache file ({type(err).__name__})")
        return None
    if not isinstance(blob, dict) or not {"features", "labels"} <= set(blob):
        set_aside(path, "not a feature cache file")
        return None
    return blob


def _save_atomic(path: Path, blob: dict[str, Any], key: Mapping[str, Any]) -> None:
    atomic_write(path, lambda tmp: torch.save(blob, tmp))
    atomic_write_text(path.with_suffix(".json"), json.dumps(key, indent=2, sort_keys=True, default=str) + "\n")

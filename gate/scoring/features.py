"""Feature extraction with an on-disk cache: one pass of an encoder over one dataset split.

``cached_features(config, split, max_samples, cache_dir)`` returns a :class:`FeatureSet` — pooled features
``(n, D)``, integer labels ``(n,)`` and, for encoders with a source classification head, source-class
probabilities ``(n, S)`` (softmax of the head's logits). The first call builds the encoder and the split,
runs the encoder once (eval mode, no gradients, deterministic evaluation transform — never the training
augmentation, whatever the split) and saves the result; later calls with the same key load it. The encoder is
built seeded from the config's ``seed`` (:func:`gate.engine.build.build_encoder`), so a randomly initialised encoder
gives the same features on every extraction (the cache is never what makes them agree).

The cache key is a hash of everything that changes the numbers: the resolved encoder config (including its
``image_size`` and other transform settings), the stamp (name, size, mtime) of the local weights an encoder config
points to (``checkpoint_path``, ``model_path``: new weights written to the same path are another encoder), the
resolved dataset config, the split, the seed (which fixes the deterministic splits and the subsample) and
``max_samples``. Files live at ``<cache_dir>/features/<encoder>/<dataset>/<split>-<key>.pt`` with a key file
(``.json``) next to them holding the key and the sha256 of the tensor file, both written atomically (temporary
file, then rename).

A cache file is used only when it is provably the pass asked for: its key file holds this very key (a file copied
or renamed from another encoder's, dataset's or split's place names that one), its bytes hash to the sha256 the
key file recorded (a tensor file replaced or edited does not), its tensors fit the split (rows, finite
features, and labels equal to the split's own) and its features are as wide as the encoder declares (a copied
tensor file with its hash written into the key file is another encoder's width). Both files must be regular files
of their own: a FIFO, a link or a folder in their place is moved aside before anything reads it. Anything else —
and a file written before key files held a hash — is moved aside as ``<name>.corrupt-<time>`` with a warning saying
why, and the features are extracted again: a cache can cost an extraction, never a wrong score.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..engine.build import build_encoder, build_spec, build_splits
from ..engine.training.checkpoints import is_complete_checkpoint
from ..errors import GateError
from ..files import atomic_torch_save, atomic_write_text, file_kind, open_regular, set_aside
from ..paths import inside
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
    """The plain-data description of a feature pass (what the cache is keyed by), from gate-score's checked config
    (plain data: :func:`gate.engine.validate.parse_score`)."""
    # "init": features cached before encoders were built seeded came from an unrecorded random initialisation
    # (for a scratch encoder); the marker keeps them from being reused.
    key = {"encoder": config["encoder"], "dataset": config["dataset"], "split": split,
           "seed": int(config["seed"]), "max_samples": None if max_samples is None else int(max_samples),
           "init": "seeded"}
    weights = _weights_stamp(key["encoder"])
    if weights:  # only where local weights are named: every other key (and its cache) is unchanged
        key["weights"] = weights
    # A capped split of a grouped dataset holds whole groups (gate.data.splits.cap_unit); features cached when
    # caps took random rows describe other examples, and the marker keeps them from being reused.
    if max_samples is not None and _cap_unit(key["dataset"]) is not None:
        key["cap"] = "whole groups"
    return key


#: Encoder config keys that may name local weights (a file, or a folder of files).
WEIGHT_KEYS = ("checkpoint_path", "model_path")


def _weights_stamp(node: Any) -> list[list[Any]]:
    """(path, size, mtime) of every local file the encoder config's weight keys name, at any depth (a stem's
    body); a hub id or a packaged name that is no local path adds nothing."""
    from ..data.loaders._dense import file_stamp

    files: list[Path] = []

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                if k in WEIGHT_KEYS and isinstance(v, str) and v and Path(v).expanduser().exists():
                    where = Path(v).expanduser().resolve()
                    files.extend([where] if where.is_file() else (p for p in where.rglob("*") if p.is_file()))
                else:
                    walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(node)
    return [list(stamp) for stamp in file_stamp(files)]


def _cap_unit(dataset_cfg: Mapping[str, Any]) -> str | None:
    from ..data.splits import cap_unit

    spec = build_spec(dataset_cfg)
    return cap_unit(spec.task, spec.targets, (dataset_cfg.get("splits") or {}).get("group_column"), spec.label_column)


def feature_cache_path(cache_dir: str | os.PathLike, key: Mapping[str, Any]) -> Path:
    digest = stable_hash(dict(key))
    return inside(Path(cache_dir).expanduser().resolve() / "features", key["encoder"].get("name", "encoder"),
                  key["dataset"].get("name", "dataset"), f"{key['split']}-{digest}.pt", what="encoder, dataset or split name")


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

    ``config`` needs ``encoder``, ``dataset`` and ``seed``, as plain data: gate-score's checked config
    (:func:`gate.engine.validate.parse_score`'s ``config``); ``cache_dir=None`` disables the cache.
    """
    import time

    from torch.utils.data import DataLoader

    from ..data.transformed import TransformedSplit
    from ..encoders.base import device_transform

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if max_samples is not None and int(max_samples) < 2:
        raise ValueError(f"max_samples must be >= 2 or null (the whole split), got {max_samples!r}")
    key = feature_cache_key(config, split, max_samples)
    path = feature_cache_path(cache_dir, key) if cache_dir is not None else None
    spec = build_spec(key["dataset"])
    column = spec.label_column
    if column is None:
        raise ValueError(f"dataset {spec.name!r} ({spec.task}) has no single-label target: transferability "
                         f"scores need class labels")
    splits = build_splits(key["dataset"], seed=key["seed"], max_samples={split: key["max_samples"]}, spec=spec)
    if path is not None:
        _set_aside_unless_regular(path)  # a FIFO, a link or a folder: moved aside before it is read or written
    encoder = None
    if path is not None and path.is_file() and not refresh:
        from ..data.splits import labels_of

        truth = torch.as_tensor(labels_of(splits[split], column).astype("int64"))
        blob = _load_cached(path, key, truth)
        if blob is not None:
            # Seeded from the experiment's seed (as below): the encoder whose declared width the features must have
            encoder = build_encoder(key["encoder"], key["dataset"].get("modality"), seed=key["seed"])
            width = int(blob["features"].shape[1])
            if width == int(encoder.feature_dim):
                return FeatureSet(blob["features"], blob["labels"], blob.get("source_probs"), dict(key), path,
                                  from_cache=True)
            _refuse_pair(path, f"a feature cache file whose features are {width} features wide where "
                               f"{_describe(key)}'s encoder gives {int(encoder.feature_dim)} (another encoder's)")

    start = time.perf_counter()
    # Seeded from the experiment's seed: a randomly initialised encoder (resnet18_scratch) gives the same features
    # on every extraction, and the same initial weights as a fine-tuning run of that seed.
    if encoder is None:
        encoder = build_encoder(key["encoder"], key["dataset"].get("modality"), seed=key["seed"])
    encoder.check_modality(spec.modality, spec.name)

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


def _describe(key: Mapping[str, Any]) -> str:
    return (f"{(key.get('encoder') or {}).get('name', '?')} × {(key.get('dataset') or {}).get('name', '?')}/"
            f"{key.get('split', '?')}")


def _refuse_pair(path: Path, why: str, stacklevel: int = 5) -> None:
    """Move a cache file aside with its key file (for inspection): it is extracted again, never scored."""
    target = set_aside(path, why, stacklevel=stacklevel)
    key_file = path.with_suffix(".json")
    if os.path.lexists(key_file):  # its key file goes with it, whatever it is
        key_file.replace(target.with_name(target.name + ".json"))


def _set_aside_unless_regular(path: Path) -> None:
    """A cache file or key file that is not a regular file of its own (a FIFO would block the read while the
    experiment's lock is held, a link to /dev/zero would be read without end, a folder cannot be written) is moved
    aside with its partner before anything reads or extracts."""
    for member in (path, path.with_suffix(".json")):
        try:
            mode = os.lstat(member).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            what = "a link" if stat.S_ISLNK(mode) else file_kind(mode)
            if member == path:
                _refuse_pair(path, f"{what}, not a feature cache file", stacklevel=4)
            else:
                set_aside(member, f"{what}, not a feature cache key file", stacklevel=4)
                if os.path.lexists(path):
                    set_aside(path, "a feature cache file without a key file that identifies it", stacklevel=4)
            return


def _load_cached(path: Path, key: Mapping[str, Any], labels: torch.Tensor) -> dict[str, Any] | None:
    """The cached features of the pass ``key`` (``labels``: the split's own), or None after moving aside a file
    that is not provably that pass (see the module docstring): it is then extracted again, never scored."""
    from ..data.hub import sha256_of

    def refuse(why: str) -> None:
        _refuse_pair(path, why, stacklevel=6)

    if not is_complete_checkpoint(path):
        return refuse("a truncated feature cache file")
    try:
        with open_regular(path.with_suffix(".json"), "feature cache key file") as fh:
            record = json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError, GateError):
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("key"), dict) or "sha256" not in record:
        return refuse("a feature cache file without a key file that identifies it (written before key files held "
                      "a content hash, or copied without one)")
    if stable_hash(record["key"]) != stable_hash(json.loads(json.dumps(dict(key), default=str))):
        other, mine = _describe(record["key"]), _describe(key)
        return refuse(f"the features of another feature pass ({other}{' with other settings' if other == mine else ''}"
                      f"), not of {mine}")
    if sha256_of(path) != record["sha256"]:
        return refuse("a feature cache file whose bytes are not the bytes its key file recorded (replaced or "
                      "edited after it was written)")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable cache file is re-extracted, never trusted
        return refuse(f"an unreadable feature cache file ({type(err).__name__})")
    if not isinstance(blob, dict) or not {"features", "labels"} <= set(blob):
        return refuse("not a feature cache file")
    feats, got, probs, n = blob["features"], blob["labels"], blob.get("source_probs"), len(labels)
    shaped = (isinstance(feats, torch.Tensor) and feats.ndim == 2 and feats.shape[0] == n and isinstance(got, torch.Tensor)
              and got.shape == (n,) and (probs is None or isinstance(probs, torch.Tensor) and probs.ndim == 2
                                         and probs.shape[0] == n))
    if not shaped:
        return refuse(f"a feature cache file whose tensors do not fit {_describe(key)} ({n} rows)")
    if not torch.equal(got.long(), labels):
        return refuse(f"a feature cache file whose labels are not those of {_describe(key)}")
    if not (torch.isfinite(feats).all() and (probs is None or torch.isfinite(probs).all())):
        return refuse("a feature cache file holding non-finite features")
    return blob


def _save_atomic(path: Path, blob: dict[str, Any], key: Mapping[str, Any]) -> None:
    """The tensor file, then its key file with the tensor file's sha256 (a reader trusts the pair only)."""
    from ..data.hub import sha256_of

    atomic_torch_save(path, blob, "a feature cache file")
    record = {"key": dict(key), "sha256": sha256_of(path)}
    atomic_write_text(path.with_suffix(".json"), json.dumps(record, indent=2, sort_keys=True, default=str,
                                                            allow_nan=False) + "\n")

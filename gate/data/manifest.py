"""Split manifests: the train/val/test split of a dataset, computed once from a seed, written to disk, reused.

A builder returns the source's own splits (``train`` / ``validation`` / ``test``, whichever the source has). The
splits it lacks are carved here, **once**, from ``dataset.splits.seed`` (never the run seed: every run and every
encoder sees the same split) and stored as a JSON manifest::

    {"dataset": "cifar100",
     "train": [source indices], "val": [...], "test": [...],
     "from": {"train": "train", "val": "train", "test": "test"},   # the source split each one indexes
     "source": {"splits": {"train": 50000, "test": 10000}, "revision": "...", "hash": "..."},
     "recipe": {"seed": 0, "val_fraction": 0.05, "test_fraction": 0.2, "stratify": "label", "group": null}}

under ``<manifest_dir>/<dataset>-<recipe hash>.json``. It is written atomically under a file lock (twin runs
create it once), and checked on every load: indices in range, splits drawn from the same source split disjoint
(also by group, when rows are grouped), and the source hash equal to that of the data on disk now. The source hash
covers the pinned revision, the split sizes and column names, and the content of the target columns, so a
changed source (another revision, a truncated copy) is caught even when the files sit in another directory.

A few-shot source with one split of all its classes (Omniglot's ``full``) is carved **by class** instead
(``splits.by_class: {train: 1200, val: 200, test: 223}``, GATE's class split): its classes sorted by id, the first
1200 to train, the next 200 to val, the last 223 to test, every example of a class with its class. The recipe
then holds ``by_class`` (so another carve is another manifest file), the manifest holds ``classes: {split: [class
ids]}``, and the check also refuses a class on two sides.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError, GateError
from ..files import atomic_write_text
from ..paths import path_part

if TYPE_CHECKING:
    import datasets

SPLIT_ALIASES = {"validation": "val", "valid": "val", "dev": "val"}
SPLITS = ("train", "val", "test")
MANIFEST_VERSION = 1


class ManifestError(GateError, ValueError):
    """A manifest that cannot be trusted (overlapping splits, out-of-range indices, a changed source)."""


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def column_digest(ds: datasets.Dataset, column: str) -> str:
    """A sha256 of one scalar/text column's values (one Arrow read; image columns are not hashed)."""
    table = ds.select_columns([column]).with_format("arrow")[:]
    values = table.column(0).to_pylist()
    return _digest(values)


def _hashable_columns(ds: datasets.Dataset, columns: list[str]) -> list[str]:
    import datasets  # imported where used: reading a dataset config need not load it
    out = []
    for column in columns:
        feature = ds.features.get(column)
        if isinstance(feature, datasets.ClassLabel) or (
                isinstance(feature, datasets.Value) and feature.dtype not in ("binary", "large_binary")):
            out.append(column)
        elif isinstance(feature, (datasets.Sequence, datasets.List)) and isinstance(
                getattr(feature, "feature", None), (datasets.Value, datasets.ClassLabel)):
            out.append(column)
    return out


def first_shared(groups: Mapping[str, set]) -> tuple[str, str, set] | None:
    """The first pair of groups (in the mapping's order) that share members, with what they share; None if the
    groups are disjoint."""
    names = list(groups)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if shared := groups[a] & groups[b]:
                return a, b, shared
    return None


def source_fingerprint(raw: Mapping[str, datasets.Dataset], revision: str | None = None,
                       columns: list[str] | None = None) -> dict[str, Any]:
    """What the manifest's source hash covers: revision, split sizes, column names and the content of
    ``columns`` (targets, ids) of every source split."""
    splits = {name: len(ds) for name, ds in raw.items()}
    parts: dict[str, Any] = {"revision": revision, "splits": splits}
    for name, ds in sorted(raw.items()):
        parts[f"columns/{name}"] = sorted(ds.column_names)
        for column in _hashable_columns(ds, [c for c in (columns or []) if c in ds.column_names]):
            parts[f"content/{name}/{column}"] = column_digest(ds, column)
    return {"splits": splits, "revision": revision, "hash": _digest(parts)[:32]}


def recipe_of(split_cfg: Mapping[str, Any] | None, stratify: str | None, group: str | None = None) -> dict[str, Any]:
    """The split recipe (what the manifest's file name hashes): seed, fractions, stratify and group columns,
    the roles of source splits (``{validation: test}``) and, for a class carve, ``by_class`` (class counts per
    split) with ``class_order`` (how classes are ranked before the carve). What ``split_cfg`` (a dataset's
    ``splits:``) leaves out comes from conf/dataset_defaults/splits.yaml; it is checked against
    :data:`gate.settings.SPLIT_RECIPE`."""
    from ..settings import SPLIT_RECIPE, check

    problems = check(_given(split_cfg), SPLIT_RECIPE, "dataset.splits")
    if problems:
        raise ConfigError("; ".join(problems))
    return checked_recipe(split_cfg, stratify, group)


def _given(split_cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in dict(split_cfg or {}).items() if v is not None}


def checked_recipe(split_cfg: Mapping[str, Any] | None, stratify: str | None, group: str | None = None) -> dict[str, Any]:
    """:func:`recipe_of` for a ``splits:`` block already checked against :data:`gate.settings.SPLIT_RECIPE` (as
    part of its dataset section, :func:`gate.data.spec.dataset_problems`): the engine's splits take this, so a run
    checks its recipe once."""
    from ..settings import SPLIT_RECIPE, yaml_defaults

    cfg = {**yaml_defaults(SPLIT_RECIPE), **_given(split_cfg)}
    recipe = {"seed": int(cfg["seed"]), "val_fraction": float(cfg["val_fraction"]),
              "test_fraction": float(cfg["test_fraction"]), "stratify": stratify,
              "group": group if group is not None else cfg["group_column"],
              "roles": dict(cfg["roles"] or {})}
    if cfg["by_class"] is not None:  # only then: every other recipe (and its file name) stays as it was
        if not stratify:
            raise ConfigError("dataset.splits.by_class carves splits by class, but the dataset declares no class "
                              "target to carve by")
        recipe["by_class"] = {s: int(cfg["by_class"][s]) for s in SPLITS}
        recipe["class_order"] = "sorted"
    bad = {k: v for k, v in recipe["roles"].items() if v not in SPLITS}
    if bad:
        raise ConfigError(f"dataset.splits.roles maps source splits to {bad}; valid roles: {list(SPLITS)}")
    return recipe


def manifest_dir_of(cfg: Mapping[str, Any]) -> Path | None:
    """Where a composed run's split manifests live: ``${paths.data}/manifests`` (None without ``paths.data``). A
    composed config resolves the value as it is read; no copy of the section is made."""
    data = (cfg.get("paths") or {}).get("data")
    return Path(data).expanduser() / "manifests" if data else None


def manifest_path(manifest_dir: str | os.PathLike, dataset: str, recipe: Mapping[str, Any]) -> Path:
    return Path(manifest_dir) / f"{path_part(dataset, 'dataset.name')}-{_digest(dict(recipe))[:12]}.json"


def _normalise(raw: Mapping[str, datasets.Dataset], dataset: str,
               roles: Mapping[str, str] | None = None) -> dict[str, datasets.Dataset]:
    """The source splits under our names: ``roles`` first (e.g. ``{validation: test}`` where the official
    validation set serves as the test set), then the usual aliases (validation -> val)."""
    out: dict[str, datasets.Dataset] = {}
    for name, ds in raw.items():
        ours = (roles or {}).get(name) or SPLIT_ALIASES.get(name, name)
        if ours in out:
            raise ManifestError(f"dataset {dataset!r}: the source has two splits that both mean {ours!r}: {sorted(raw)}")
        out[ours] = ds
    if "train" not in out:
        raise ManifestError(f"dataset {dataset!r}: the source gave splits {sorted(raw)} but no 'train' split")
    return out


def _labels(ds: datasets.Dataset, column: str | None, index: np.ndarray) -> np.ndarray | None:
    if not column or column not in ds.column_names:
        return None
    labels = np.asarray(ds.select_columns([column]).with_format("numpy")[:][column])[index]
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer) or labels.size == 0:
        return None
    counts = np.bincount(labels - labels.min())
    return labels if counts[counts > 0].min() >= 2 else None


def _groups(ds: datasets.Dataset, column: str | None, index: np.ndarray) -> np.ndarray | None:
    if not column:
        return None
    if column not in ds.column_names:
        raise ManifestError(f"splits.group_column {column!r} is not a column of the source ({ds.column_names})")
    return np.asarray(ds.select_columns([column]).with_format("numpy")[:][column])[index]


def _carve(ds: datasets.Dataset, index: np.ndarray, fraction: float, seed: int, stratify: str | None,
           group: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Split source indices ``index`` into (rest, carved): seeded, stratified by ``stratify`` when every class
    has two members, whole groups together when ``group`` is set."""
    from sklearn.model_selection import GroupShuffleSplit, train_test_split

    if index.size < 2:
        raise ManifestError(f"cannot carve a {fraction:.0%} split out of {index.size} example(s)")
    groups = _groups(ds, group, index)
    if groups is not None:
        rest, carved = next(GroupShuffleSplit(n_splits=1, test_size=fraction, random_state=seed)
                            .split(index, groups=groups))
        return np.sort(index[rest]), np.sort(index[carved])
    labels = _labels(ds, stratify, index)
    try:
        rest, carved = train_test_split(index, test_size=fraction, random_state=seed, stratify=labels)
    except ValueError:  # too few examples per class for the fraction: a plain seeded split
        rest, carved = train_test_split(index, test_size=fraction, random_state=seed)
    return np.sort(rest), np.sort(carved)


def carve_classes(labels: np.ndarray, counts: Mapping[str, int], dataset: str = "dataset") -> dict[str, np.ndarray]:
    """GATE's class split of a few-shot source (``gate/data/few_shot/core.py``): the distinct class ids sorted,
    then consecutive ranges of ``counts[train]``, ``counts[val]``, ``counts[test]`` classes. The counts must
    cover every class (GATE's ``int(n * 1200/1623)``, ``int(n * 200/1623)``, ``int(n * 223/1623)`` give exactly
    1200, 200 and 223 for Omniglot's n = 1623)."""
    classes = np.unique(np.asarray(labels))
    wanted = sum(counts[s] for s in SPLITS)
    if classes.size != wanted:
        raise ManifestError(f"dataset {dataset!r}: splits.by_class {dict(counts)} asks for {wanted} classes but the "
                            f"source holds {classes.size}; give counts that sum to {classes.size}")
    ends = np.cumsum([counts[s] for s in SPLITS])
    starts = ends - np.asarray([counts[s] for s in SPLITS])
    return {s: classes[a:b] for s, a, b in zip(SPLITS, starts, ends)}


def _column(ds: datasets.Dataset, column: str | None, dataset: str) -> np.ndarray:
    if not column or column not in ds.column_names:
        raise ManifestError(f"dataset {dataset!r}: the class carve reads column {column!r}, which the source does "
                            f"not have ({ds.column_names})")
    return np.asarray(ds.select_columns([column]).with_format("numpy")[:][column])


def _by_class_manifest(raw: Mapping[str, datasets.Dataset], dataset: str, recipe: Mapping[str, Any],
                       source: Mapping[str, Any]) -> dict[str, Any]:
    if len(raw) != 1:
        raise ManifestError(f"dataset {dataset!r}: splits.by_class carves train/val/test out of one source split, "
                            f"but the source has {sorted(raw)}")
    origin = next(iter(raw))
    labels = _column(raw[origin], recipe.get("stratify"), dataset)
    classes = carve_classes(labels, recipe["by_class"], dataset)
    manifest = {"version": MANIFEST_VERSION, "dataset": dataset,
                **{s: np.flatnonzero(np.isin(labels, classes[s])).tolist() for s in SPLITS},
                "from": {s: origin for s in SPLITS}, "classes": {s: classes[s].tolist() for s in SPLITS},
                "source": dict(source), "recipe": dict(recipe)}
    check_manifest(manifest, raw, dataset)
    return manifest


def compute_manifest(raw: Mapping[str, datasets.Dataset], dataset: str, recipe: Mapping[str, Any],
                     source: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest of ``raw`` (the source's splits) under ``recipe``: splits the source has are kept whole; a
    missing test split is carved from train, then a missing val split from what remains of train. With
    ``by_class`` the one source split is carved by class (:func:`carve_classes`)."""
    if recipe.get("by_class"):
        return _by_class_manifest(raw, dataset, recipe, source)
    splits = _normalise(raw, dataset, recipe.get("roles"))
    index = {name: np.arange(len(ds)) for name, ds in splits.items() if name in SPLITS}
    origin = {name: name for name in index}
    seed = int(recipe["seed"])
    if "test" not in index:
        index["train"], index["test"] = _carve(splits["train"], index["train"], recipe["test_fraction"], seed,
                                               recipe.get("stratify"), recipe.get("group"))
        origin["test"] = "train"
    if "val" not in index:
        index["train"], index["val"] = _carve(splits["train"], index["train"], recipe["val_fraction"], seed + 1,
                                              recipe.get("stratify"), recipe.get("group"))
        origin["val"] = "train"
    ours = {((recipe.get("roles") or {}).get(n) or SPLIT_ALIASES.get(n, n)): n for n in raw}
    manifest = {"version": MANIFEST_VERSION, "dataset": dataset,
                **{name: index[name].tolist() for name in SPLITS},
                "from": {name: ours[origin[name]] for name in SPLITS},
                "source": dict(source), "recipe": dict(recipe)}
    check_manifest(manifest, raw, dataset)
    return manifest


def check_manifest(manifest: Mapping[str, Any], raw: Mapping[str, datasets.Dataset], dataset: str,
                   path: str | os.PathLike | None = None, source: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`ManifestError` naming the dataset and the file when the manifest is malformed, its source
    hash differs from ``source``, an index is out of range, or two splits share a source example (or group)."""
    where = f" ({path})" if path else ""
    fix = (f"recompute it with `gate-data prepare dataset={dataset} force=true`" if path
           else "this is a bug in the split recipe")
    for name in SPLITS:
        if not isinstance(manifest.get(name), list) or name not in manifest.get("from", {}):
            raise ManifestError(f"dataset {dataset!r}: split manifest{where} has no valid {name!r} split; {fix}")
    if source is not None and manifest.get("source", {}).get("hash") != source.get("hash"):
        raise ManifestError(
            f"dataset {dataset!r}: split manifest{where} was computed from a different source (hash "
            f"{manifest.get('source', {}).get('hash')} with splits {manifest.get('source', {}).get('splits')}, the data "
            f"on disk now: {source.get('hash')} with splits {source.get('splits')}); {fix}")
    seen: dict[str, dict[str, np.ndarray]] = {}
    for name in SPLITS:
        origin = manifest["from"][name]
        if origin not in raw:
            raise ManifestError(f"dataset {dataset!r}: split manifest{where} takes {name!r} from source split "
                                f"{origin!r}, which the source does not have ({sorted(raw)}); {fix}")
        idx = np.asarray(manifest[name], dtype=np.int64)
        if idx.size == 0:
            raise ManifestError(f"dataset {dataset!r}: split manifest{where} has an empty {name!r} split; {fix}")
        size = len(raw[origin])
        if idx.min() < 0 or idx.max() >= size:
            raise ManifestError(f"dataset {dataset!r}: split manifest{where} indexes {name!r} outside source split "
                                f"{origin!r} (indices {int(idx.min())}..{int(idx.max())}, size {size}); {fix}")
        if np.unique(idx).size != idx.size:
            raise ManifestError(f"dataset {dataset!r}: split manifest{where} repeats examples within {name!r}; {fix}")
        for other, other_idx in seen.get(origin, {}).items():
            shared = np.intersect1d(idx, other_idx)
            if shared.size:
                raise ManifestError(f"dataset {dataset!r}: split manifest{where} puts {shared.size} example(s) of "
                                    f"source split {origin!r} in both {other!r} and {name!r} (first: index "
                                    f"{int(shared[0])}); the splits must be disjoint; {fix}")
        seen.setdefault(origin, {})[name] = idx
    if manifest.get("recipe", {}).get("by_class"):
        _check_class_carve(manifest, raw, dataset, where, fix)
    group = manifest.get("recipe", {}).get("group")
    if group:
        for origin, by_split in seen.items():
            if len(by_split) < 2 or group not in raw[origin].column_names:
                continue
            column = np.asarray(raw[origin].select_columns([group]).with_format("numpy")[:][group])
            names = list(by_split)
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    shared = np.intersect1d(column[by_split[a]], column[by_split[b]])
                    if shared.size:
                        raise ManifestError(f"dataset {dataset!r}: split manifest{where} puts rows of {group} "
                                            f"{shared[0]!r} in both {a!r} and {b!r}; {fix}")


def _check_class_carve(manifest: Mapping[str, Any], raw: Mapping[str, datasets.Dataset], dataset: str, where: str,
                       fix: str) -> None:
    """A class carve's splits hold the classes its manifest names, as many as its recipe asks, none on two
    sides, and every example of each (a class is never split between sides)."""
    recipe = manifest["recipe"]
    recorded = manifest.get("classes")
    if not isinstance(recorded, Mapping) or sorted(recorded) != sorted(SPLITS):
        raise ManifestError(f"dataset {dataset!r}: split manifest{where} carves by class but does not record "
                            f"which classes went where; {fix}")
    labels = {origin: _column(raw[origin], recipe.get("stratify"), dataset) for origin in set(manifest["from"].values())}
    held = {name: set(np.unique(labels[manifest["from"][name]][np.asarray(manifest[name], dtype=np.int64)]).tolist())
            for name in SPLITS}
    if overlap := first_shared({name: held[name] for name in SPLITS}):
        a, b, shared = overlap
        raise ManifestError(f"dataset {dataset!r}: split manifest{where} puts class {min(shared)!r} in both "
                            f"{a!r} and {b!r} ({len(shared)} shared); the class splits must be disjoint; {fix}")
    for name in SPLITS:
        named = set(recorded[name])
        if held[name] != named or len(named) != recipe["by_class"][name]:
            raise ManifestError(f"dataset {dataset!r}: split manifest{where} gives {name!r} {len(held[name])} "
                                f"class(es), but records {len(named)} and the recipe asks for "
                                f"{recipe['by_class'][name]}; {fix}")
        members = np.flatnonzero(np.isin(labels[manifest["from"][name]], list(named)))
        if members.size != len(manifest[name]):
            raise ManifestError(f"dataset {dataset!r}: split manifest{where} leaves {members.size - len(manifest[name])} "
                                f"example(s) of {name!r}'s classes out of {name!r}; {fix}")


def _atomic_write(path: Path, payload: Mapping[str, Any]) -> None:
    atomic_write_text(path, json.dumps(payload, separators=(",", ":"), allow_nan=False) + "\n")


def read_manifest(path: str | os.PathLike, dataset: str) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ManifestError(f"dataset {dataset!r}: split manifest {path} cannot be read ({err}); recompute it "
                            f"with `gate-data prepare dataset={dataset} force=true`") from err


def load_or_create(raw: Mapping[str, datasets.Dataset], dataset: str, recipe: Mapping[str, Any],
                   source: Mapping[str, Any], manifest_dir: str | os.PathLike | None,
                   force: bool = False) -> tuple[dict[str, Any], Path | None, bool]:
    """The manifest for (dataset, recipe): read and checked when it exists, else computed and written once
    (atomic write under a file lock). ``force`` recomputes it. Returns (manifest, path, created)."""
    if manifest_dir is None:
        return compute_manifest(raw, dataset, recipe, source), None, True
    from filelock import FileLock

    path = manifest_path(manifest_dir, dataset, recipe)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if path.is_file() and not force:
            manifest = read_manifest(path, dataset)
            check_manifest(manifest, raw, dataset, path=path, source=source)
            return manifest, path, False
        manifest = compute_manifest(raw, dataset, recipe, source)
        _atomic_write(path, manifest)
        return manifest, path, True


def apply_manifest(raw: Mapping[str, datasets.Dataset], manifest: Mapping[str, Any]) -> datasets.DatasetDict:
    """The train/val/test splits a manifest names (rows of the source splits, in manifest order)."""
    import datasets  # imported where used: reading a dataset config need not load it
    out = {}
    for name in SPLITS:
        source = raw[manifest["from"][name]]
        index = manifest[name]
        out[name] = source if len(index) == len(source) and index == list(range(len(source))) else source.select(index)
    return datasets.DatasetDict(out)

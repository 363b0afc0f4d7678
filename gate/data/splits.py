"""Train/val/test splits of a dataset: the split manifest (computed once from ``dataset.splits.seed``), then
optional caps on split sizes.

Caps (``data.max_train_samples`` etc.) are applied after the manifest, as a seeded shuffle-and-take: the train
cap with the run seed (a replica trains on its own subset, part of its training randomness), the val and test
caps with the split seed (every run, seed and encoder is scored on the same examples: paired comparisons).

A dataset whose rows come in groups is capped by **whole groups** (:func:`cap_unit`): the group column its split
declares (``splits.group_column``: ACDC's patients, HAM10K's lesions, ...), else its volume or image-group target
(slices of one volume are scored together: a capped volume would be scored on a fragment), else, for few-shot, its classes
(a kept class keeps every image, so episodes draw from it as they would uncapped). Groups are taken in a seeded
order until the cap is reached; the last one is kept only if that leaves the total nearer the cap, so the
total is within half a group of the cap (at least one group is kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import datasets
import numpy as np

from .manifest import SPLIT_ALIASES, apply_manifest, load_or_create, source_fingerprint

__all__ = ["SPLIT_ALIASES", "labels_of", "make_splits", "cap_splits", "cap_unit"]


def labels_of(ds: datasets.Dataset, column: str) -> np.ndarray:
    """A label column as a numpy array (one Arrow read, no per-row Python copy; respects selections)."""
    return np.asarray(ds.select_columns([column]).with_format("numpy")[:][column])


def cap_unit(task: str, targets: Mapping[str, str], group_column: str | None,
             label_column: str | None) -> str | None:
    """The column whose groups a cap keeps whole: the split's declared group column, else the column of a
    ``volume`` (slices of one volume) or ``image_group`` (rows of one image) target, else the class column for a
    family whose caps keep whole classes (few-shot: its registry entry); None when rows stand alone."""
    from ..families import family
    if group_column:
        return group_column
    grouped = [c for c, kind in targets.items() if kind in ("volume", "image_group")]
    if grouped:
        return grouped[0]
    return label_column if family(task).caps_whole_classes else None


def _whole_groups(ds: datasets.Dataset, cap: int, seed: int, column: str) -> datasets.Dataset:
    """Rows of whole groups of ``column``, groups in a seeded order, the total nearest ``cap`` (within half a
    group); rows keep their order in ``ds``."""
    groups = labels_of(ds, column)
    ids, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    order = np.random.default_rng(seed).permutation(ids.size)
    totals = np.cumsum(sizes[order])
    reach = int(np.searchsorted(totals, cap))  # the first prefix whose total reaches the cap
    taken = reach + 1
    if reach > 0 and totals[reach] - cap > cap - totals[reach - 1]:
        taken = reach  # the prefix without that last group is nearer the cap
    keep = np.zeros(ids.size, dtype=bool)
    keep[order[:taken]] = True
    return ds.select(np.flatnonzero(keep[inverse]))


def cap_splits(splits: Mapping[str, datasets.Dataset], max_samples: Mapping[str, int | None] | None,
               run_seed: int, split_seed: int, group_column: str | None = None) -> dict[str, datasets.Dataset]:
    """Each split capped at its ``max_samples`` (see the module docstring); by whole groups of ``group_column``
    when given."""
    out = dict(splits)
    for name, cap in (max_samples or {}).items():
        if cap is None or name not in out:
            continue
        if cap < 1:
            raise ValueError(f"max_samples for split {name!r} must be >= 1, got {cap}")
        if cap < len(out[name]):
            seed = run_seed if name == "train" else split_seed
            if group_column:
                if group_column not in out[name].column_names:
                    raise ValueError(f"split {name!r} has no column {group_column!r} to cap by whole groups "
                                     f"(columns: {out[name].column_names})")
                out[name] = _whole_groups(out[name], int(cap), seed, group_column)
            else:
                out[name] = out[name].shuffle(seed=seed).select(range(cap))
    return out


def make_splits(raw: datasets.DatasetDict, seed: int, recipe: Mapping[str, Any],
                max_samples: dict[str, int | None] | None = None, num_classes: int | None = None,
                name: str = "dataset", manifest_dir: str | Path | None = None, revision: str | None = None,
                hash_columns: list[str] | None = None, force: bool = False,
                cap_group_column: str | None = None) -> datasets.DatasetDict:
    """Return a DatasetDict with exactly ``train``, ``val`` and ``test``.

    ``recipe`` is the split recipe (:func:`gate.data.manifest.recipe_of`, or ``checked_recipe`` for a dataset
    section already checked): splits the source provides are kept; a missing test split is carved from train
    (``test_fraction``), then a missing val split from what remains (``val_fraction``), seeded by the recipe's
    ``seed`` (the split seed, not the run ``seed``), stratified by its ``stratify`` column (or whole groups of its
    ``group`` column together). With a ``manifest_dir`` the split is written there once and reused (see
    :mod:`gate.data.manifest`). A recipe with ``by_class`` (``{train: n, val: n, test: n}``) carves a one-split
    few-shot source by class instead (:func:`gate.data.manifest.carve_classes`, classes by ``stratify``).
    ``num_classes`` (single-label tasks) must equal the classes present in the whole training split.
    ``max_samples`` caps splits after the manifest (:func:`cap_splits`), by whole groups of
    ``cap_group_column`` (default the recipe's ``group``; :func:`cap_unit` chooses it for a dataset config); the
    result's ``rows_before_caps`` attribute says how many rows each split had before.
    """
    label_column, group_column = recipe["stratify"], recipe["group"]
    columns = [c for c in (label_column, group_column, *(hash_columns or [])) if c]
    source = source_fingerprint(raw, revision=revision, columns=columns)
    manifest, _, _ = load_or_create(raw, name, recipe, source, manifest_dir, force=force)
    splits = apply_manifest(raw, manifest)
    if num_classes is not None and label_column:  # on the whole training split, before any cap
        present = np.unique(labels_of(splits["train"], label_column))
        if present.size != num_classes:
            raise ValueError(f"dataset {name!r} declares num_classes={num_classes}, but its train split holds "
                             f"{present.size} classes; set dataset.num_classes={present.size}")
    capped = cap_splits(splits, max_samples, run_seed=seed, split_seed=recipe["seed"],
                        group_column=cap_group_column or group_column)
    out = datasets.DatasetDict({n: capped[n] for n in ("train", "val", "test")})
    # A number measured on a capped split is shown as such (gate.analysis marks it): the run's facts say how many
    # rows each split had before its cap (GATEDataModule.split_rows).
    out.rows_before_caps = {n: len(splits[n]) for n in ("train", "val", "test")}
    return out

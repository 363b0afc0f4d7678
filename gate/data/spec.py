"""The task spec a dataset config declares: its input, its task family and the kinds of its targets.

The engine is task-neutral: the data module, the model, ensembling and feature extraction never name a target
column. A dataset says which columns hold targets and of which kind; the task adapter reads them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..families import TARGET_KINDS  # the registry of task families owns the target kinds

# What each task family reads (its target kinds, whether it has classes, its default targets) is declared by the
# family's own entry in the registry (gate.families, next to its adapter), not here.


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """What adapters and analysis need to know about a dataset (from ``conf/dataset/<name>.yaml``).

    targets: target column -> kind (:data:`TARGET_KINDS`), e.g. ``{"label": "class"}`` or
        ``{"mask": "mask", "volume": "volume"}``.
    heads: several label columns of one dataset, ``{column: number of classes}`` (Happywhale:
        ``{individual: 15587, species: 30}``), each a ``class`` target scored by its own head. The first is the
        primary head: its count is ``num_classes``, its column :attr:`label_column` (the tier metric, the
        checkpoint monitor, split stratification and transferability scores use it). Empty: one label column.
    options: task-specific facts the adapter reads (answer types, frames per clip, ...).
    paper_group: the GATE paper's benchmark group (``Img Class``, ``Medical Seg``, ...) that analysis averages it
        in; default: its task family's ``summary_label``. Not the task family (that is ``task``).
    tier_range: ``(low, high)``, the span of ``tier_metric`` that analysis maps onto 0–1 in tier means (values
        outside are clipped); None: the metric registry's range (gate.analysis.meta).
    notes_vs_gate: where its numbers depart from the GATE paper's protocol (printed beside it in reports).
    """

    name: str
    modality: str
    task: str
    num_classes: int
    metrics: tuple[str, ...] = ("acc@1",)
    tier_metric: str = "acc@1"
    paper_group: str = ""
    class_names: tuple[str, ...] = ()
    input_column: str = ""
    targets: Mapping[str, str] = dataclasses.field(default_factory=dict)
    ignore_index: int | None = None
    heads: Mapping[str, int] = dataclasses.field(default_factory=dict)
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    tier_range: tuple[float, float] | None = None
    notes_vs_gate: str = ""

    def __post_init__(self) -> None:
        from ..families import family as family_of

        try:
            fam = family_of(self.task)
        except ValueError as err:
            raise ValueError(f"dataset {self.name!r}: {err}") from None
        if self.num_classes < 2 and fam.has_classes:
            raise ValueError(f"dataset {self.name!r} declares {self.num_classes} classes; a {self.task} "
                             f"task needs at least 2")
        if not self.input_column:
            object.__setattr__(self, "input_column", self.modality)
        if not self.paper_group:
            object.__setattr__(self, "paper_group", fam.summary_label)
        targets = dict(self.targets) or dict(fam.default_targets)
        unknown = {c: k for c, k in targets.items() if k not in TARGET_KINDS}
        if unknown:
            raise ValueError(f"dataset {self.name!r}: unknown target kind(s) {unknown}; known: {sorted(TARGET_KINDS)}")
        missing = fam.targets - set(targets.values())
        if missing:
            raise ValueError(f"dataset {self.name!r}: a {self.task} task needs target(s) of kind {sorted(missing)}; "
                             f"declare them under targets: (column: kind)")
        foreign = {c: k for c, k in targets.items() if k not in fam.target_kinds}
        if foreign:
            raise ValueError(f"dataset {self.name!r}: a {self.task} task reads no target(s) {foreign}; its kinds are "
                             f"{sorted(fam.target_kinds)}")
        object.__setattr__(self, "targets", targets)
        object.__setattr__(self, "heads", self._checked_heads())
        object.__setattr__(self, "options", dict(self.options))

    def _checked_heads(self) -> dict[str, int]:
        """``heads`` as {column: count}, checked against the targets of kind ``class`` and ``num_classes``."""
        heads = {str(c): n for c, n in dict(self.heads).items()}
        classes = [c for c, k in self.targets.items() if k == "class"]
        if not heads:
            if len(classes) > 1:
                raise ValueError(f"dataset {self.name!r} declares {len(classes)} class targets {classes}; declare "
                                 f"heads: {{column: number of classes}} for them (the first is the primary head)")
            return {}
        bad = {c: n for c, n in heads.items() if isinstance(n, bool) or not isinstance(n, int) or n < 2}
        if bad:
            raise ValueError(f"dataset {self.name!r}: heads {bad} must be class counts >= 2")
        if sorted(heads) != sorted(classes):
            raise ValueError(f"dataset {self.name!r}: heads {list(heads)} must name exactly its targets of kind "
                             f"'class' ({classes})")
        primary = next(iter(heads))
        if heads[primary] != self.num_classes:
            raise ValueError(f"dataset {self.name!r}: the primary head {primary!r} has {heads[primary]} classes but "
                             f"num_classes={self.num_classes}; they must agree")
        return heads

    def classes_of(self, column: str) -> int:
        """The number of classes of a label column: its head's count, else ``num_classes``."""
        return int(self.heads.get(column, self.num_classes))

    def column(self, kind: str) -> str:
        """The column holding the target of ``kind`` (a ValueError naming the dataset when there is none)."""
        for column, k in self.targets.items():
            if k == kind:
                return column
        raise ValueError(f"dataset {self.name!r} has no target of kind {kind!r} (targets: {dict(self.targets)})")

    @property
    def label_column(self) -> str | None:
        """The single-label column that stratifies splits and feeds transferability scores, if any (with
        several heads: the primary head's)."""
        if self.heads:
            return next(iter(self.heads))
        for kind in ("class", "clip_label"):
            if kind in self.targets.values():
                return self.column(kind)
        return None


#: Keys of dataset configs written before issue 16, refused with the key that replaced them: read silently, the
#: old spelling would be ignored (a benchmark averaged in no group, a tier run at the wrong image size).
RENAMED_DATASET_KEYS = {
    "family": "paper_group (the GATE paper's benchmark group; the task family is dataset.task)",
    "protocol": "paper_protocol (the paper's image size and batch size for this benchmark)",
    # issue 24: one declared range per tier metric replaced a scale, bound and turn applied to any metric found
    **{key: "tier_range ([low, high] of tier_metric, mapped onto 0-1 in tier means; direction from gate/metrics.py)"
       for key in ("tier_scale", "tier_bound", "tier_turn")},
}


def renamed_key_problems(section: Mapping[str, Any], where: str, renamed: Mapping[str, str]) -> list[str]:
    """One message per old key of ``section`` (a config section at ``where``) naming the key that replaced it."""
    return [f"{where}.{old} was renamed: write {where}.{new}" for old, new in renamed.items()
            if isinstance(section, Mapping) and old in section]


def spec_from_config(cfg: Mapping[str, Any]) -> DatasetSpec:
    """The :class:`DatasetSpec` of a dataset config section (plain data: a resolved ``dataset`` section or a
    dataset YAML as read). The one reader of a dataset config's own keys, for the engine and for analysis."""
    problems = renamed_key_problems(cfg, "dataset", RENAMED_DATASET_KEYS)
    if problems:
        raise ValueError(f"dataset {cfg.get('name', '?')!r}: " + "; ".join(problems))
    missing = [k for k in ("name", "modality", "task", "num_classes") if cfg.get(k) is None]
    if missing:
        raise ValueError(f"dataset {cfg.get('name', '?')!r}: missing {missing} (a dataset config declares name, "
                         f"modality, task and num_classes)")

    tier_range = cfg.get("tier_range")
    if tier_range is not None:
        try:
            low, high = (float(v) for v in tier_range)
        except (TypeError, ValueError):
            low = high = math.nan
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"dataset {cfg.get('name', '?')!r}: tier_range={tier_range!r} is invalid: give "
                             f"[low, high] with finite low < high (the span of tier_metric mapped onto 0-1)")
        tier_range = (low, high)
    return DatasetSpec(name=str(cfg["name"]), modality=cfg["modality"], task=cfg["task"],
                       num_classes=int(cfg["num_classes"]), metrics=tuple(cfg.get("metrics", ("acc@1",))),
                       tier_metric=cfg.get("tier_metric", "acc@1"), paper_group=cfg.get("paper_group") or "",
                       class_names=tuple(cfg.get("class_names") or ()), input_column=cfg.get("input_column", ""),
                       targets=cfg.get("targets") or {}, ignore_index=cfg.get("ignore_index"),
                       heads=cfg.get("heads") or {}, options=cfg.get("options") or {},
                       tier_range=tier_range,
                       notes_vs_gate=" ".join(str(cfg.get("notes_vs_gate") or "").split()))


def load_dataset_spec(path: str | Path) -> DatasetSpec:
    """The :class:`DatasetSpec` of a dataset YAML file (``conf/dataset/<name>.yaml`` or a user's own) without
    composing a whole run: the keys the spec holds, their ``${dataset.*}`` interpolations resolved within the file.
    A ValueError naming the file when it is not a dataset config the engine would accept."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(path)
    try:
        doc = OmegaConf.load(path)
    except (OSError, yaml.YAMLError, OmegaConfBaseException) as err:
        raise ValueError(f"dataset config {path} cannot be read: {' '.join(str(err).split())}") from None
    if not OmegaConf.is_dict(doc):
        raise ValueError(f"dataset config {path} must be a mapping of dataset keys")
    root = OmegaConf.create({"dataset": doc})
    wanted = [f.name for f in dataclasses.fields(DatasetSpec)] + list(RENAMED_DATASET_KEYS)
    try:
        plain = {k: OmegaConf.to_container(root.dataset[k], resolve=True) if OmegaConf.is_config(root.dataset[k])
                 else root.dataset[k] for k in wanted if k in root.dataset}
    except OmegaConfBaseException as err:
        raise ValueError(f"dataset config {path}: {' '.join(str(err).split())}") from None
    plain.setdefault("name", path.stem)
    try:
        return spec_from_config(plain)
    except (ValueError, TypeError) as err:
        raise ValueError(f"dataset config {path}: {err}") from None


def check_split(spec: DatasetSpec, split: str, labels, column: str = "label") -> None:
    """Raise ValueError naming the dataset and split when a split of class ids is empty or out of range (the
    range of ``column``'s head, :meth:`DatasetSpec.classes_of`)."""
    labels = np.asarray(labels)
    classes = spec.classes_of(column)
    if labels.size == 0:
        raise ValueError(f"dataset {spec.name!r}: split {split!r} is empty")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"dataset {spec.name!r}: split {split!r} has non-integer {column!r} ({labels.dtype})")
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= classes:
        bad = int(np.flatnonzero((labels < 0) | (labels >= classes))[0])
        declared = f"heads.{column}={classes}" if column in spec.heads else f"num_classes={classes}"
        raise ValueError(f"dataset {spec.name!r}: split {split!r} has labels in [{low}, {high}] but the dataset "
                         f"declares {declared} (valid labels 0..{classes - 1}; "
                         f"first bad: example {bad}, {column}={int(labels[bad])})")
    if split == "train" and np.unique(labels).size < 2:
        raise ValueError(f"dataset {spec.name!r}: split 'train' has fewer than 2 distinct classes")

"""The task spec a dataset config declares: its input, its task family and the kinds of its targets.

The engine is task-neutral: the data module, the model, ensembling and feature extraction never name a target
column. A dataset says which columns hold targets and of which kind; the task adapter reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..families import TARGET_KINDS  # the registry of task families owns the target kinds
from ..files import read_config_yaml

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
    metrics: tuple[str, ...] = ()   # default: (tier_metric,)
    tier_metric: str = ""           # default: its task family's (gate.families.TaskFamily.tier_metric)
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

        problems = family_problems(self.name, self.task, self.num_classes, self.targets, self.heads)
        if problems:
            raise ValueError("; ".join(problems))
        fam = family_of(self.task)
        if not self.input_column:
            object.__setattr__(self, "input_column", self.modality)
        if not self.paper_group:
            object.__setattr__(self, "paper_group", fam.summary_label)
        if not self.tier_metric:
            object.__setattr__(self, "tier_metric", fam.tier_metric)
        object.__setattr__(self, "name", str(self.name))
        object.__setattr__(self, "num_classes", int(self.num_classes))
        object.__setattr__(self, "metrics", tuple(self.metrics) or (self.tier_metric,))
        object.__setattr__(self, "class_names", tuple(self.class_names))
        object.__setattr__(self, "notes_vs_gate", " ".join(str(self.notes_vs_gate).split()))
        if self.tier_range is not None:
            object.__setattr__(self, "tier_range", (float(self.tier_range[0]), float(self.tier_range[1])))
        object.__setattr__(self, "targets", dict(self.targets) or dict(fam.default_targets))
        object.__setattr__(self, "heads", {str(c): n for c, n in dict(self.heads).items()})
        object.__setattr__(self, "options", dict(self.options))

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


def family_problems(name: str, task: Any, num_classes: Any, targets: Any = None, heads: Any = None,
                    metrics: Any = (), tier_metric: Any = "", class_names: Any = (), where: str = "dataset") -> list[str]:
    """The rules a dataset's task family sets (gate.families): a registered family; at least 2 classes where its
    targets are classes; target kinds it reads, the ones it needs among them; heads that name exactly the class
    targets; and where given, metrics it records and as many class names as classes. Each clause names the
    dataset."""
    from ..families import family, family_names

    try:
        fam = family(task)
    except ValueError:
        return [f"{where}.task={task!r} is invalid: expected a registered task family: one of {list(family_names())}"]
    problems = []
    if num_classes < 2 and fam.has_classes:
        problems.append(f"{where}.num_classes={num_classes} is invalid: dataset {name!r} declares {num_classes} classes; "
                        f"a {task} task needs at least 2")
    if class_names and len(class_names) != num_classes:
        problems.append(f"{where}.num_classes={num_classes} is invalid: dataset {name} names {len(class_names)} "
                        f"classes in {where}.class_names; the two must agree")
    for key, value in (("metrics", list(metrics or ())), ("tier_metric", tier_metric)):
        names = [value] if isinstance(value, str) else value
        # fam.records: a metric of the family's entry that gate/metrics.py registers (so its direction is known)
        foreign = [m for m in names if m and not fam.records(m)]
        if foreign:
            problems.append(f"{where}.{key}={value!r} is invalid: dataset {name} names {foreign}, which a {fam.name} "
                            f"task never records; valid: {list(fam.metrics)} (with qualifiers such as acc@1/<type>)")
    targets = dict(targets or {}) or dict(fam.default_targets)
    unknown = {c: k for c, k in targets.items() if k not in TARGET_KINDS}
    missing = fam.targets - set(targets.values())
    foreign_kinds = {c: k for c, k in targets.items() if k not in fam.target_kinds and k in TARGET_KINDS}
    if unknown:
        problems.append(f"dataset {name!r}: unknown target kind(s) {unknown}; known: {sorted(TARGET_KINDS)}")
    if missing:
        problems.append(f"dataset {name!r}: a {task} task needs target(s) of kind {sorted(missing)}; declare them "
                        f"under targets: (column: kind)")
    if foreign_kinds:
        problems.append(f"dataset {name!r}: a {task} task reads no target(s) {foreign_kinds}; its kinds are "
                        f"{sorted(fam.target_kinds)}")
    return problems + _head_problems(name, num_classes, targets, dict(heads or {}))


def _head_problems(name: str, num_classes: int, targets: Mapping[str, str], heads: Mapping[Any, Any]) -> list[str]:
    """``heads`` ({column: count}) against the targets of kind ``class`` and ``num_classes``."""
    from ..settings import CLASSES

    classes = [c for c, k in targets.items() if k == "class"]
    if not heads:
        return [] if len(classes) <= 1 else [
            f"dataset {name!r} declares {len(classes)} class targets {classes}; declare heads: {{column: number of "
            f"classes}} for them (the first is the primary head)"]
    bad = {c: n for c, n in heads.items() if not CLASSES.valid(n)}
    if bad:
        return [f"dataset {name!r}: heads {bad} must be class counts >= 2"]
    if sorted(map(str, heads)) != sorted(classes):
        return [f"dataset {name!r}: heads {list(heads)} must name exactly its targets of kind 'class' ({classes})"]
    primary = next(iter(heads))
    if heads[primary] != num_classes:
        return [f"dataset {name!r}: the primary head {primary!r} has {heads[primary]} classes but "
                f"num_classes={num_classes}; they must agree"]
    return []


def dataset_problems(cfg: Any, where: str = "dataset", *, run: bool = True) -> list[str]:
    """Every problem of a dataset config section (plain data), each a clause naming its key: the declared schema
    (:data:`gate.settings.DATASET`: types, ranges, unknown and renamed keys, its splits and paper_protocol blocks, a
    builder key its ``_target_`` does not take), its ``source:`` block (:func:`gate.data.hub.source_problems`),
    and the rules of its task family (:func:`family_problems`). The one dataset checker: gate-run's and gate-score's
    validation, the spec the engine builds and the dataset files analysis reads all go through it. ``run``: also
    the rule only a run needs, that its metrics are ones its family records (analysis reads other tables too)."""
    from ..settings import DATASET, Setting, check
    from .hub import source_problems

    problems = check(cfg, DATASET, where)
    if not isinstance(cfg, Mapping):
        return problems
    source = cfg.get("source")
    if DATASET.settings["source"].valid(source) and source is not None:
        problems += [f"{where}.source: {p}" for p in source_problems(source)]
    ok = {k: v for k, v in cfg.items() if isinstance(DATASET.settings.get(k), Setting) and DATASET.settings[k].valid(v)}
    if all(k in ok for k in ("task", "num_classes")):
        problems += family_problems(str(cfg.get("name", "?")), ok["task"], ok["num_classes"], ok.get("targets"),
                                    ok.get("heads"), ok.get("metrics") if run else (),
                                    (ok.get("tier_metric") or "") if run else "", ok.get("class_names"), where)
    return problems


def spec_from_config(cfg: Mapping[str, Any]) -> DatasetSpec:
    """The :class:`DatasetSpec` of a dataset config section (plain data: a resolved ``dataset`` section or a
    dataset YAML as read), checked by :func:`dataset_problems`. The one reader of a dataset config's own keys, for
    the engine and for analysis."""
    problems = dataset_problems(cfg, run=False)  # a run's own rules: gate.engine.validate, before the spec is built
    if problems:
        raise ValueError(f"dataset {cfg.get('name', '?')!r}: " + "; ".join(problems))
    return checked_spec(cfg)


def checked_spec(cfg: Mapping[str, Any]) -> DatasetSpec:
    """The :class:`DatasetSpec` of a dataset section that :func:`dataset_problems` has passed: gate-run's and
    gate-score's validation check the section once, and their parse builds the spec with this."""
    # every key the spec holds, as given (a null: the spec's default); the spec normalises them itself
    return DatasetSpec(**{f.name: cfg[f.name] for f in dataclasses.fields(DatasetSpec) if cfg.get(f.name) is not None})


def load_dataset_spec(path: str | Path) -> DatasetSpec:
    """The :class:`DatasetSpec` of a dataset YAML file (``conf/dataset/<name>.yaml`` or a user's own) without
    composing a whole run, checked like a composed one: its keys, those the spec holds with their ``${dataset.*}``
    interpolations resolved within the file (the others as written where they point outside it).
    A ValueError naming the file when it is not a dataset config the engine would accept."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(path)
    try:
        doc = read_config_yaml(path)
        if not isinstance(doc, dict):
            raise ValueError(f"dataset config {path} must be a mapping of dataset keys")
        # interpolations: OmegaConf resolves them within the file; a file without one is its own plain data
        plain = _resolved_within(OmegaConf.create({"dataset": doc}), path) if "${" in repr(doc) else dict(doc)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, OmegaConfBaseException) as err:
        raise ValueError(f"dataset config {path} cannot be read: {' '.join(str(err).split())}") from None
    plain.setdefault("name", path.stem)
    try:
        return spec_from_config(plain)
    except (ValueError, TypeError) as err:
        raise ValueError(f"dataset config {path}: {err}") from None


def _resolved_within(root, path: Path) -> dict[str, Any]:
    """A dataset YAML's keys (``root.dataset``) with the ``${dataset.*}`` interpolations of those the spec holds
    resolved within the file; the others as written where they do not resolve there."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    wanted = {f.name for f in dataclasses.fields(DatasetSpec)}
    plain = {}
    for key in root.dataset:
        try:
            node = root.dataset[key]
            plain[key] = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
        except OmegaConfBaseException as err:
            if key in wanted:  # a key the spec holds must resolve within the file; the others are checked as written
                raise ValueError(f"dataset config {path}: {' '.join(str(err).split())}") from None
            plain[key] = OmegaConf.to_container(root.dataset, resolve=False)[key]
    return plain


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

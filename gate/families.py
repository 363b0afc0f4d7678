"""The task-family registry: everything gate knows about a task family, declared once as data.

A task family (``dataset.task`` in a dataset config) is one YAML file, ``conf/family/<name>.yaml``, whose keys are
the fields of :class:`TaskFamily`: the target kinds it reads, whether its targets are classes, the metrics it records,
its summary label, its renderer, whether transferability scores apply. Every other module asks this registry
(:func:`family`) instead of keeping a table or an if-chain on task names.

Why data and not a call in the adapter's module: a lookup then reads a small YAML file and imports no adapter, so
the modules that only need a family's facts (the dataset checks, the experiment id, tiers, gate-analysis) never load
torch (tests/test_task_family_registry.py imports them in a fresh interpreter). A family of your own is registered
by :func:`register_family` (import its module first, as gate-run does for ``adapter._target_``), or, from a package
of your own, by naming that module in the ``gate.task_families`` entry points of its package
(``tests/test_task_family_registry.py`` registers a toy family from the test directory and fine-tunes it).

Metric directions are not restated: each metric name a family records must be registered in :mod:`gate.metrics`,
and :meth:`TaskFamily.directions` reads them from there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from .registry import Registry

# What a target column can hold (one example):
TARGET_KINDS = {
    "class": "an integer class id in [0, num_classes)",
    "multi_hot": "a 0/1 vector of length num_classes",
    "mask": "an (H, W) integer class map in [0, num_classes) (or ignore_index)",
    "volume": "the id of the 3-D volume a 2-D slice belongs to (its masks are scored per volume)",
    "caption": "a text describing the input",
    "image_group": "the id of the image a row shows, where several rows show one image (their texts all match it)",
    "contrast_pair": "the id of a Winoground-style example: its two rows (two images, two captions with the same words in "
                     "another order) are each right only for its own image; scored by the text, image and group scores",
    "answer": "an integer answer id within its answer type",
    "answer_type": "an integer answer-type id in [0, len(answer_types))",
    "clip_label": "an integer class id of a whole clip",
    "clip_value": "a real value of a whole clip",
}

__all__ = ["FAMILIES", "TaskFamily", "register_family", "family", "families", "family_names", "unregister_family"]


@dataclasses.dataclass(frozen=True)
class TaskFamily:
    """One task family.

    name: the ``dataset.task`` value.
    targets: the target kinds (:data:`TARGET_KINDS`) a dataset of this family must declare.
    optional_targets: kinds it may declare too (a volume id, an image group); any other kind is refused.
    has_classes: whether its targets are classes (``num_classes >= 2``); otherwise datasets declare 1.
    default_targets: the targets of a dataset that declares none (``{"label": "class"}``).
    default_adapter: the adapter config (``conf/adapter/<name>.yaml``) that serves it unless a dataset says
        otherwise (named in error messages and by ``gate-data list``).
    metrics: the base metric names its adapters record (``acc@1``, ``miou``; qualified names such as
        ``acc@1/<answer type>`` count under their base), each registered in :mod:`gate.metrics`.
    summary_label: the label of its benchmarks in tier summaries when a dataset config gives no ``family:``.
    renderer: the name of its validation figure in ``gate.engine.training.visuals.RENDERERS`` (None: no figure).
    transferability: whether gate-score's transferability scores apply (one class label per example, the same
        classes in every split); gate-tier scores only such datasets.
    caps_whole_classes: whether a sample cap keeps whole classes (episodes need every image of a class), when the
    dataset declares no other group (gate.data.splits.cap_unit).
    closed_label_set: whether its train split must hold exactly ``num_classes`` classes (single-label tasks whose
        splits share one label set; not few-shot, whose splits hold disjoint classes).
    min_eval_examples: the fewest examples a val/test split cap may leave, with ``min_eval_reason`` (why).
    tier_metric: the metric that represents its benchmarks in tier means where a dataset names none (its
        ``tier_metric:``); default: its first metric other than ``loss``.
    new_target_kinds: target kinds this family brings, ``{kind: what one example holds}``; registering the family
        adds them to :data:`TARGET_KINDS` (a kind already known with another meaning is refused).
    """

    name: str
    targets: frozenset[str]
    default_adapter: str
    metrics: tuple[str, ...]
    summary_label: str
    optional_targets: frozenset[str] = frozenset()
    has_classes: bool = True
    default_targets: Mapping[str, str] = dataclasses.field(default_factory=dict)
    renderer: str | None = None
    transferability: bool = False
    closed_label_set: bool = False
    caps_whole_classes: bool = False
    min_eval_examples: int = 1
    min_eval_reason: str = ""
    new_target_kinds: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tier_metric: str = ""

    def __post_init__(self) -> None:
        from . import metrics

        if not self.name or not self.name.isidentifier():
            raise ValueError(f"task family name {self.name!r} must be a non-empty identifier")
        object.__setattr__(self, "targets", frozenset(self.targets))
        object.__setattr__(self, "optional_targets", frozenset(self.optional_targets))
        object.__setattr__(self, "metrics", tuple(self.metrics))
        object.__setattr__(self, "default_targets", dict(self.default_targets))
        object.__setattr__(self, "new_target_kinds", dict(self.new_target_kinds))
        clash = {k: d for k, d in self.new_target_kinds.items() if k in TARGET_KINDS and TARGET_KINDS[k] != d}
        if clash:
            raise ValueError(f"task family {self.name!r}: target kind(s) {sorted(clash)} already mean something else "
                             f"({ {k: TARGET_KINDS[k] for k in clash} }); name new kinds differently")
        known = set(TARGET_KINDS) | set(self.new_target_kinds)
        unknown = sorted((self.targets | self.optional_targets | set(self.default_targets.values())) - known)
        if unknown:
            raise ValueError(f"task family {self.name!r}: unknown target kind(s) {unknown}; known: {sorted(known)} "
                             f"(declare a kind of its own in new_target_kinds)")
        if not self.targets:
            raise ValueError(f"task family {self.name!r} declares no target kinds")
        if self.default_targets and not self.targets <= set(self.default_targets.values()):
            raise ValueError(f"task family {self.name!r}: default_targets {self.default_targets} lack kind(s) "
                             f"{sorted(self.targets - set(self.default_targets.values()))}")
        if not self.metrics:
            raise ValueError(f"task family {self.name!r} declares no metrics")
        missing = [m for m in self.metrics if m not in metrics.METRICS]
        if missing:
            raise ValueError(f"task family {self.name!r}: metric(s) {missing} are not in gate.metrics; register them "
                             f"with gate.metrics.register(name, higher_is_better) first")
        if not self.tier_metric:
            object.__setattr__(self, "tier_metric", next((m for m in self.metrics if m != "loss"), self.metrics[0]))
        if self.tier_metric not in self.metrics:
            raise ValueError(f"task family {self.name!r}: tier_metric {self.tier_metric!r} is not one of its metrics "
                             f"{list(self.metrics)}")
        if int(self.min_eval_examples) < 1:
            raise ValueError(f"task family {self.name!r}: min_eval_examples must be >= 1")

    @property
    def target_kinds(self) -> frozenset[str]:
        """Every kind a dataset of this family may declare (required and optional)."""
        return self.targets | self.optional_targets

    def directions(self) -> dict[str, bool]:
        """``{metric: higher_is_better}`` of the metrics it records, read from :mod:`gate.metrics`."""
        from . import metrics

        return {m: metrics.higher_is_better(m) for m in self.metrics}

    def records(self, metric: str) -> bool:
        """Whether a recorded or declared metric name (``acc@1``, ``acc@1/count``, ``val/miou``) is one of its
        metrics (qualifiers stripped as :func:`gate.metrics.lookup` strips them)."""
        from . import metrics

        info = metrics.lookup(metric)
        return info is not None and info.name in self.metrics


def _load(name: str | None = None) -> None:
    """Register family ``name`` (every family when None) from its packaged YAML file, once each (other packages'
    families come through the entry-point group, :data:`FAMILIES`)."""
    import yaml

    for stem, path in _packaged().items():
        if (name is None or stem == name) and stem not in _loaded:
            register_family(TaskFamily(name=stem, **(yaml.safe_load(path.read_text()) or {})))
            _loaded.add(stem)


ENTRY_POINTS = "gate.task_families"  # the entry-point group naming a registering module of another package
_loaded: set[str] = set()  # packaged families already read
FAMILIES: Registry[TaskFamily] = Registry(
    "task family", group=ENTRY_POINTS, loader=_load,
    hint=f" (a family of your own is registered by gate.families.register_family in its adapter's module: import it "
         f"first, or name that module in the {ENTRY_POINTS} entry points of its package)")


def register_family(fam: TaskFamily) -> TaskFamily:
    """Add a task family. Registering an equal entry again is a no-op (a module imported twice); a different
    entry under a registered name is refused, so two modules cannot silently disagree about a family."""
    if not isinstance(fam, TaskFamily):
        raise TypeError(f"register_family expects a TaskFamily, got {type(fam).__name__}")
    if fam.name in FAMILIES and FAMILIES[fam.name] != fam:
        raise ValueError(f"task family {fam.name!r} is already registered with other facts; unregister it first")
    TARGET_KINDS.update(fam.new_target_kinds)
    return FAMILIES.register(fam.name, fam)


def unregister_family(name: str) -> None:
    """Remove a family and the target kinds only it brought (tests that register a toy family clean up with this)."""
    fam = FAMILIES.unregister(name)
    if fam is None:
        return
    still = {k for f in FAMILIES.values() for k in f.new_target_kinds}
    for kind in set(fam.new_target_kinds) - still:
        TARGET_KINDS.pop(kind, None)


def _packaged() -> dict[str, Path]:
    """gate's own families: ``conf/family/<name>.yaml``, by name."""
    import gate.conf

    folder = Path(gate.conf.__file__).resolve().parent / "family"
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


def family(name: str) -> TaskFamily:
    """The registered family ``name``; a ValueError naming the known ones when there is none."""
    return FAMILIES.lookup(name)


def families() -> dict[str, TaskFamily]:
    """Every registered family (the packaged ones included), by name."""
    return FAMILIES.all()


def family_names() -> tuple[str, ...]:
    return tuple(sorted(families()))

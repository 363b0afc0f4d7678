"""The declared settings of every adapter and of the tier launcher: a type and a range per key, in one place.

:func:`gate.engine.validate.validate_run_config` checks a composed ``adapter:`` section against the schema of its
``_target_`` class, and gate-tier checks its ``launcher:`` section, before any data or model is built. A key that
is not declared is refused too (a misspelt ``+adapter.focal_wieght=1`` would otherwise be dropped by the
constructor or fail deep inside it), so a new key cannot skip its range: ``tests/test_settings_schema.py`` checks
that every key of every ``conf/adapter/*.yaml`` is declared here and is a constructor parameter.

The defaults are not restated here: they live in the YAML files (one place). An adapter of your own (a class
not listed in :data:`ADAPTER_SETTINGS`) may declare ``settings = {key: Setting, ...}`` (and optionally
``setting_rules``) as class attributes; without them only its task family is checked.

This module is plain data and small functions: no torch, so validation stays cheap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

# Keys of a config section that describe it (records, docs) rather than configure it (gate.engine.build.META_KEYS).
META_KEYS = ("_target_", "name", "architecture")


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One key's type and range. ``kind``: ``int`` | ``float`` | ``bool`` | ``str`` | ``choice`` | ``int_list`` |
    ``str_list`` | ``mapping`` | ``section`` (a nested config with a ``_target_``). Numbers lie in
    ``[low, high]`` (``low_open`` / ``high_open`` exclude the bound); ``nullable`` also accepts null, and
    ``null_means`` says what null does (for the message)."""

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    nullable: bool = False
    null_means: str = ""
    unique: bool = False       # lists: no item twice (seeds=0,0 would run one experiment twice)
    min_items: int = 0         # lists: at least this many items

    def expected(self) -> str:
        """What a valid value looks like, in words."""
        if self.kind in ("int", "float"):
            what = "an integer" if self.kind == "int" else "a number"
            if self.low is not None and self.high is not None:
                lo, hi = "(" if self.low_open else "[", ")" if self.high_open else "]"
                what += f" in {lo}{self.low}, {self.high}{hi}"
            elif self.low is not None:
                what += f" {'>' if self.low_open else '>='} {self.low}"
            elif self.high is not None:
                what += f" {'<' if self.high_open else '<='} {self.high}"
        elif self.kind == "choice":
            what = f"one of {list(self.choices)}"
        elif self.kind in ("int_list", "str_list"):
            what = ("a non-empty " if self.min_items else "a ") + "list of " + (
                "integers" + (f" >= {self.low}" if self.low is not None else "") if self.kind == "int_list"
                else "non-empty strings") + (", each once" if self.unique else "")
        else:
            what = {"bool": "true or false", "str": "a string",
                    "mapping": "a mapping of key: value", "section": "a config section with a _target_"}[self.kind]
        if self.nullable:
            what += " or null" + (f" ({self.null_means})" if self.null_means else "")
        return what

    def problem(self, key: str, value: Any) -> str | None:
        """None when ``value`` is valid for this setting, else one clause naming ``key``."""
        if value is None and self.nullable:
            return None
        if self._valid(value):
            return None
        return f"{key}={_show(value)} is invalid: expected {self.expected()}"

    def _in_range(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))

    def _valid(self, value: Any) -> bool:
        kind = self.kind
        if kind == "int":
            return _is_int(value) and self._in_range(value)
        if kind == "float":
            return _is_number(value) and value == value and self._in_range(value)  # NaN is never in range
        if kind == "bool":
            return isinstance(value, bool)
        if kind == "str":
            return isinstance(value, str) and bool(value.strip())
        if kind == "choice":
            return isinstance(value, str) and value in self.choices
        if kind in ("int_list", "str_list"):
            if not isinstance(value, (list, tuple)) or len(value) < self.min_items:
                return False
            if self.unique and len(set(map(repr, value))) != len(value):
                return False
            if kind == "int_list":
                return all(_is_int(v) and self._in_range(v) for v in value)
            return all(isinstance(v, str) and v.strip() for v in value)
        if kind == "mapping":
            return isinstance(value, Mapping)
        if kind == "section":
            return isinstance(value, Mapping) and isinstance(value.get("_target_"), str)
        raise ValueError(f"unknown setting kind {kind!r}")


def Int(low: int | None = None, **kw: Any) -> Setting:  # noqa: N802 - reads as a type in the tables below
    return Setting("int", low=low, **kw)


def Float(low: float | None = None, high: float | None = None, **kw: Any) -> Setting:  # noqa: N802
    return Setting("float", low=low, high=high, **kw)


def Bool(**kw: Any) -> Setting:  # noqa: N802
    return Setting("bool", **kw)


def Choice(*choices: str, **kw: Any) -> Setting:  # noqa: N802
    return Setting("choice", choices=tuple(choices), **kw)


# A rule across keys: (keys it reads, the check: values -> problem text or None). Skipped when one of its keys is
# missing or already invalid on its own.
Rule = tuple[tuple[str, ...], Callable[..., "str | None"]]


def divisible(a: str, b: str) -> Rule:
    return (a, b), lambda x, y: None if x % y == 0 else f"{a}={x} must be divisible by {b}={y}"


def ordered(low: str, high: str) -> Rule:
    return (low, high), lambda x, y: None if x <= y else f"{low}={x} must be <= {high}={y}"


def some_positive(*keys: str) -> Rule:
    return keys, lambda *vs: None if any(v > 0 for v in vs) else f"{', '.join(keys)} are all 0: no loss to train on"


# Shared pieces.
DROPOUT = Float(0.0, 1.0, high_open=True)
SMOOTHING = Float(0.0, 1.0, high_open=True)
CLASSES = Int(2)
TOP_K = Setting("int_list", low=1, min_items=1, unique=True)
POSITIVE = Float(0.0, low_open=True)
LOSS_WEIGHT = Float(0.0)

_SEGMENTATION = {
    "num_classes": CLASSES,
    "grid_size": Int(1),
    "hidden_dim": Int(1),
    "depth": Int(0),  # 0: no transformer blocks over the grid (the decoder's documented identity)
    "num_heads": Int(1),
    "mlp_ratio": POSITIVE,
    "dropout": DROPOUT,
    "ce_weight": LOSS_WEIGHT,
    "focal_weight": LOSS_WEIGHT,
    "dice_weight": LOSS_WEIGHT,
    "focal_gamma": Float(0.0),
    "ignore_index": Int(nullable=True, null_means="the dataset's"),
}
_SEGMENTATION_RULES = [divisible("hidden_dim", "num_heads"), some_positive("ce_weight", "focal_weight", "dice_weight")]
_TEMPORAL = {
    "width": Int(1),
    "depth": Int(1),
    "heads": Int(1),
    "mlp_ratio": POSITIVE,
    "dropout": DROPOUT,
    "pool": Choice("mean", "cls"),
    "clips_per_batch": Int(1, nullable=True, null_means="data.batch_size"),
    "eval_clips_per_batch": Int(1, nullable=True, null_means="data.eval_batch_size"),
}

#: The settings of each packaged adapter class (``module.Class``), every constructor key a config may set.
ADAPTER_SETTINGS: dict[str, dict[str, Setting]] = {
    "gate.adapters.classification.LinearClassifier": {
        "num_classes": CLASSES, "dropout": DROPOUT, "label_smoothing": SMOOTHING, "top_k": TOP_K},
    "gate.adapters.multilabel.MultilabelClassifier": {
        "num_classes": CLASSES, "dropout": DROPOUT, "per_class": Bool()},
    "gate.adapters.segmentation.SegmentationAdapter": _SEGMENTATION,
    "gate.adapters.segmentation.MedicalSegmentationAdapter": {**_SEGMENTATION, "include_background": Bool()},
    "gate.adapters.few_shot.ProtoNet": {
        "projection_dim": Int(1, nullable=True, null_means="no projection"),
        "min_ways": Int(2), "max_ways": Int(2), "min_shots": Int(1), "max_shots": Int(1),
        "queries_per_class": Int(1), "train_episodes": Int(1), "val_episodes": Int(1), "test_episodes": Int(1),
        "eval_seed": Int(0),
        "max_support": Int(1, nullable=True, null_means="the dataset's options.episodes, else no cap"),
        "adaptive_queries": Bool(nullable=True, null_means="the dataset's options.episodes, else false")},
    "gate.adapters.relational.RelationalReasoner": {
        "width": Int(1), "depth": Int(1), "heads": Int(1), "mlp_ratio": POSITIVE, "dropout": DROPOUT,
        "vocab_buckets": Int(2), "max_question_tokens": Int(1)},
    "gate.adapters.temporal.TemporalClassifier": {
        **_TEMPORAL, "num_classes": CLASSES, "label_smoothing": SMOOTHING, "top_k": TOP_K},
    "gate.adapters.temporal.TemporalRegressor": {**_TEMPORAL, "standardize": Bool()},
    "gate.adapters.contrastive.ZeroShotContrastive": {
        "embed_dim": Int(1), "freeze_text_tower": Bool(), "text_tower": Setting("section"), "top_k": TOP_K,
        "retrieval_candidates": Int(2)},
}

#: Rules across the keys of an adapter's settings.
ADAPTER_RULES: dict[str, list[Rule]] = {
    "gate.adapters.segmentation.SegmentationAdapter": _SEGMENTATION_RULES,
    "gate.adapters.segmentation.MedicalSegmentationAdapter": _SEGMENTATION_RULES,
    "gate.adapters.few_shot.ProtoNet": [ordered("min_ways", "max_ways"), ordered("min_shots", "max_shots")],
    "gate.adapters.relational.RelationalReasoner": [divisible("width", "heads")],
    "gate.adapters.temporal.TemporalClassifier": [divisible("width", "heads")],
    "gate.adapters.temporal.TemporalRegressor": [divisible("width", "heads")],
}

#: gate-tier's ``launcher:`` section (conf/tier_run.yaml), shared by the launchers that read it: ``local``
#: (workers, poll_seconds) and ``slurm`` / ``submitit_local`` (the rest, and poll_seconds).
LAUNCHER_SETTINGS: dict[str, Setting] = {
    "workers": Int(1, nullable=True, null_means="one per visible GPU, 1 on the CPU"),
    "partition": Setting("str", nullable=True, null_means="the cluster's default"),
    "qos": Setting("str", nullable=True, null_means="the cluster's default"),
    "account": Setting("str", nullable=True, null_means="the cluster's default"),
    "gpus_per_node": Int(0),
    "cpus_per_task": Int(1),
    "mem_gb": Float(0.0, low_open=True, nullable=True, null_means="the cluster's default"),
    "timeout_min": Int(1),
    "array_parallelism": Int(1),
    "setup": Setting("str_list"),
    "additional_parameters": Setting("mapping"),
    "max_requeues": Int(0),
    "wait": Bool(),
    "poll_seconds": Float(0.0, low_open=True),
}

#: gate-tier's own settings (conf/tier_run.yaml's top level; ``tier``, ``paths`` and ``launcher`` are sections
#: checked by their own code: gate.tiers.spec.parse_tier, gate.engine.validate, :data:`LAUNCHER_SETTINGS`).
TIER_RUN_SETTINGS: dict[str, Setting] = {
    "tier": Setting("mapping"),
    "paths": Setting("mapping"),
    "launcher": Setting("mapping"),
    "tier_file": Setting("str", nullable=True, null_means="the tier group's choice"),
    "encoders": Setting("str_list", min_items=1, unique=True),
    "seeds": Setting("int_list", low=0, min_items=1, unique=True, nullable=True, null_means="the tier's seeds"),
    "overrides": Setting("str_list"),
    "launch": Setting("str"),  # the launcher registry (gate.tiers.launchers.get_launcher) names the valid ones
    "out": Setting("str", nullable=True, null_means="no file; only for launch=json"),
    "score": Bool(nullable=True, null_means="the tier's"),
    "report": Bool(),
    "force": Bool(),
}


def check_section(prefix: str, values: Mapping[str, Any], settings: Mapping[str, Setting],
                  rules: list[Rule] = (), *, owner: str = "", required: bool = False) -> list[str]:
    """Every problem of the config section ``values`` (named ``prefix`` in messages) against ``settings``: a key
    that is not declared, a value of the wrong type or out of range, a broken rule across keys, and with
    ``required`` a declared key that is missing (where the YAML states every default, code reads them all)."""
    problems = []
    if required:
        problems += [f"{prefix}.{key} is missing: expected {s.expected()}" for key, s in settings.items()
                     if key not in values]
    unknown = sorted(str(k) for k in values if k not in settings and k not in META_KEYS)
    for key in unknown:
        problems.append(f"{prefix}.{key} is not a setting of {owner or prefix}: it has "
                        f"{', '.join(sorted(settings)) or '(no settings)'}")
    valid = {}
    for key, setting in settings.items():
        if key not in values:
            continue
        problem = setting.problem(f"{prefix}.{key}", values[key])
        if problem:
            problems.append(problem)
        else:
            valid[key] = values[key]
    for keys, check in rules:
        if all(valid.get(k) is not None for k in keys):
            problem = check(*(valid[k] for k in keys))
            if problem:
                problems.append(f"{prefix}: {problem}")
    return problems


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def adapter_settings(cls: type) -> tuple[dict[str, Setting], list[Rule]] | None:
    """The declared settings and rules of an adapter class, or None where it declares none (a user's own
    adapter without ``settings``)."""
    path = class_path(cls)
    if path in ADAPTER_SETTINGS:
        return ADAPTER_SETTINGS[path], list(ADAPTER_RULES.get(path, ()))
    own = getattr(cls, "settings", None)
    if isinstance(own, Mapping):
        return dict(own), list(getattr(cls, "setting_rules", ()) or ())
    return None

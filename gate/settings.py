"""Every setting gate reads, declared once: a table per config section, checked by one function before any work.

A :class:`Setting` is one key's type, range, whether null is allowed (and what null means) and a one-line meaning;
a :class:`Section` is a table of them (nested sections included), with its rules across keys and what it does with
a key it does not declare (refuse it, or accept it where the section's ``_target_`` takes it as a parameter, as
Lightning's ``Trainer`` or torch's optimizers do). :func:`check` walks a config section against its table and
returns one clause per problem, each naming the key, the value and what would be valid.

The defaults are not restated here: each section names the YAML file that states them (:attr:`Section.yaml`,
read by :func:`yaml_defaults`), and ``tests/test_settings_schema.py`` checks that the YAML and the table list the
same keys. Where a section's YAML states every default, a declared key that is missing from a composed config is
an error (code reads ``cfg[key]``, never ``cfg.get(key, <a second default>)``).

Who declares what:

* gate-run (:data:`RUN`: ``data``, ``trainer``, ``recipe`` with its optimizer and scheduler, ``callbacks``,
  ``logger``), gate-score (:data:`SCORE`), gate-rank (:data:`RANK`), gate-tier (:data:`TIER_RUN` and its
  ``launcher:`` section :data:`LAUNCHER`), a tier file (:data:`TIER_FILE`) and a dataset config (:data:`DATASET`,
  with its ``splits`` and ``paper_protocol`` blocks; its ``source`` block is gate/data/hub.py's) are declared
  below;
* an adapter declares its own keys beside its code, as class attributes: ``settings = {key: Setting, ...}`` and
  optionally ``setting_rules = (Rule, ...)`` (:func:`adapter_section`); rules that read other sections (the
  dataset, ``data.*``) are its ``check_config(cfg)`` classmethod (gate.adapters.base.Adapter);
* rules that cross sections (an encoder's minimum image size, ``data.batch_size`` against the process count, the
  recipe against the encoder's architecture) live in gate/engine/validate.py; a dataset's rules that need its task
  family live with the dataset (gate.data.spec.dataset_problems).

This module is plain data and small functions: no torch, so validation stays cheap.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# Keys of a config section that describe it (records, docs) rather than configure it (gate.engine.build.META_KEYS).
META_KEYS = ("_target_", "name", "architecture")
# An encoder's facts gate-rank reads, never passed to its class: paper_name (its column in the GATE paper's table) and
# source_top1 (the ImageNet top-1 its pretrained weights publish).
ENCODER_FACTS = ("paper_name", "source_top1")
# An adapter's facts, stated in its YAML beside ``_target_`` and never passed to its class: whether its loss and metrics
# are means over examples (the class's ``loss_splits_across_devices``; gate-run refuses a YAML that says otherwise), so
# that the experiment id reads it without importing the class (gate.results: no torch).
ADAPTER_FACTS = ("loss_splits_across_devices",)
AUTO = "auto"
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
MODALITIES = ("image", "text", "audio", "video")
SPLITS = ("train", "val", "test")


def show(value: Any) -> str:
    """A value as messages quote it (strings quoted, long values cut)."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # numpy's integers too


def _is_finite(value: Any) -> bool:
    """A real number that is neither NaN nor infinite (``lr=inf`` would train on NaN)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One key: ``kind`` (``int`` | ``float`` (finite) | ``bool`` | ``str`` | ``choice`` | ``int_list`` |
    ``str_list`` | ``list`` | ``mapping`` | ``section`` (a mapping with a ``_target_``) | ``interval`` ([low, high],
    finite, low < high) | ``group`` (a config group's section, checked by its own table) | ``any``). Numbers lie
    in ``[low, high]`` (``low_open`` / ``high_open`` exclude the bound); ``nullable`` also accepts null
    (``null_means`` says what null does); ``alt`` lists other forms that are valid too (``auto``, a fraction);
    ``optional`` lets the key be absent even where its section's YAML states every default (Lightning's own keys);
    ``expect`` replaces the generated description of what is valid; ``meaning`` is one line for the docs;
    ``run_only``: it changes where or how a run is logged or computed, not the numbers it records, so it is left out
    of the experiment id (:func:`run_only_keys`, read by :func:`gate.results.identity`)."""

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
    pattern: str = ""          # str: a regular expression the whole value must match
    alt: tuple[Setting, ...] = ()
    optional: bool = False
    expect: str = ""
    meaning: str = ""
    run_only: bool = False

    def _range(self) -> str:
        if self.low is not None and self.high is not None:
            lo, hi = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {lo}{self.low}, {self.high}{hi}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high}"
        return ""

    def expected(self) -> str:
        """What a valid value looks like, in words."""
        if self.expect:
            return self.expect
        if self.kind in ("int", "float"):
            what = ("an integer" if self.kind == "int" else "a finite number") + (f" {self._range()}" if
                                                                                  self._range() else "")
        elif self.kind == "choice":
            what = f"one of {list(self.choices)}"
        elif self.kind in ("int_list", "str_list"):
            what = ("a non-empty " if self.min_items else "a ") + "list of " + (
                "integers" + (f" {self._range()}" if self._range() else "") if self.kind == "int_list"
                else "non-empty strings") + (", each once" if self.unique else "")
        else:
            what = {"bool": "true or false", "str": "a non-empty string", "list": "a list", "any": "any value",
                    "mapping": "a mapping of key: value", "section": "a config section with a _target_",
                    "interval": "[low, high] with finite low < high", "group": "a config group's section"}[self.kind]
            if self.kind == "str" and self.pattern:
                what += f" matching {self.pattern}"
        what = " or ".join([what, *(a.expected() for a in self.alt)])
        if self.nullable:
            what += " or null" + (f" ({self.null_means})" if self.null_means else "")
        return what

    def problem(self, key: str, value: Any) -> str | None:
        """None when ``value`` is valid for this setting, else one clause naming ``key``: ``must be <range>``
        where only the range is wrong, else ``expected <what is valid>``."""
        if (value is None and self.nullable) or self.valid(value):
            return None
        if not self.expect and self.kind in ("int", "float") and self._typed(value) and not self.alt:
            null = f" (or null{': ' + self.null_means if self.null_means else ''})" if self.nullable else ""
            return f"{key}={show(value)} is invalid: must be {self._range()}{null}"
        return f"{key}={show(value)} is invalid: expected {self.expected()}"

    def _typed(self, value: Any) -> bool:
        return _is_int(value) if self.kind == "int" else _is_finite(value)

    def _in_range(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))

    def valid(self, value: Any) -> bool:
        """Whether ``value`` is valid (null only where nullable)."""
        if value is None:
            return self.nullable
        return self._valid(value) or any(a.valid(value) for a in self.alt)

    def _valid(self, value: Any) -> bool:  # noqa: PLR0911 - one branch per kind
        kind = self.kind
        if kind in ("int", "float"):
            return self._typed(value) and self._in_range(value)
        if kind == "bool":
            return isinstance(value, bool)
        if kind == "str":
            return isinstance(value, str) and bool(value.strip()) and (
                not self.pattern or re.fullmatch(self.pattern, value) is not None)
        if kind == "choice":
            return isinstance(value, str) and value in self.choices
        if kind in ("int_list", "str_list", "list"):
            if not isinstance(value, (list, tuple)) or len(value) < self.min_items:
                return False
            if self.unique and len(set(map(repr, value))) != len(value):
                return False
            if kind == "int_list":
                return all(_is_int(v) and self._in_range(v) for v in value)
            return kind == "list" or all(isinstance(v, str) and v.strip() for v in value)
        if kind in ("mapping", "group"):
            return isinstance(value, Mapping)
        if kind == "section":
            return isinstance(value, Mapping) and isinstance(value.get("_target_"), str)
        if kind == "interval":
            return (isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_finite(v) for v in value)
                and value[0] < value[1])
        if kind == "any":
            return True
        raise ValueError(f"unknown setting kind {kind!r}")


def Int(low: int | None = None, high: int | None = None, **kw: Any) -> Setting:  # noqa: N802 - reads as a type
    return Setting("int", low=low, high=high, **kw)


def Float(low: float | None = None, high: float | None = None, **kw: Any) -> Setting:  # noqa: N802
    return Setting("float", low=low, high=high, **kw)


def Bool(**kw: Any) -> Setting:  # noqa: N802
    return Setting("bool", **kw)


def Str(**kw: Any) -> Setting:  # noqa: N802
    return Setting("str", **kw)


def Choice(*choices: str, **kw: Any) -> Setting:  # noqa: N802
    return Setting("choice", choices=tuple(choices), **kw)


def Group(name: str, example: str, **kw: Any) -> Setting:  # noqa: N802
    """A config group's section in a root config (checked by its own table)."""
    return Setting("group", expect=f"the {name} group ({example})", meaning=f"the {name} group", **kw)


@dataclasses.dataclass(frozen=True)
class Rule:
    """A rule across keys of one section: ``check(names, *values)`` returns a problem naming the keys (``names``:
    their full dotted names) or None. Skipped when a key is missing, null or already invalid on its own."""

    keys: tuple[str, ...]
    check: Callable[..., str | None]


def divisible(a: str, b: str) -> Rule:
    return Rule((a, b), lambda n, x, y: None if x % y == 0 else f"{n[0]}={x} must be divisible by {n[1]}={y}")


def ordered(low: str, high: str) -> Rule:
    return Rule((low, high), lambda n, x, y: None if x <= y else f"{n[0]}={x} must be <= {n[1]}={y}")


def some_positive(*keys: str) -> Rule:
    return Rule(keys, lambda n, *vs: None if any(v > 0 for v in vs) else f"{', '.join(n)} are all 0: no loss to "
                                                                          f"train on")


@dataclasses.dataclass(frozen=True)
class Section:
    """A config section's table. ``owner``: how an unknown key is refused (``a gate-run setting``, ``a setting of
    adapter segmentation``). ``required``: its YAML states every default, so a declared key (not ``optional``) that
    is missing is an error. ``others``: what a key it does not declare is: ``refuse``d, accepted where its
    ``_target_`` takes it as a parameter (``target``), or ``keep``t (a section other code reads as a whole).
    ``renamed``: old keys, refused naming their new name. ``yaml``: where its defaults are stated (``run.yaml``,
    ``run.yaml:data``: a file under conf/, then a key inside it). ``run_only``: the whole section is left out of the
    experiment id (as :attr:`Setting.run_only`)."""

    owner: str
    settings: Mapping[str, Setting | Section]
    rules: tuple[Rule, ...] = ()
    required: bool = False
    others: str = "refuse"
    meta: tuple[str, ...] = META_KEYS
    renamed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    yaml: str = ""
    nullable: bool = False
    optional: bool = False
    meaning: str = ""
    run_only: bool = False

    def expected(self) -> str:
        return (self.meaning or "a mapping of its settings") + (" or null" if self.nullable else "")


def target_of(section: Any) -> Any:
    """What a config section's ``_target_`` names (a class or a function), or None where it names nothing that
    imports here (building it reports that)."""
    target = section.get("_target_") if isinstance(section, Mapping) else None
    if not isinstance(target, str):
        return None
    try:
        from hydra.utils import get_object

        return get_object(target)
    except Exception:  # noqa: BLE001 - an unknown target is reported when it is built
        return None


def _target_parameters(section: Mapping[str, Any]) -> set[str] | None:
    """The keyword parameters of what the section's ``_target_`` names, or None where any key may be right (it
    takes ``**kwargs``, or it does not import here)."""
    try:
        signature = inspect.signature(target_of(section))
    except (TypeError, ValueError):  # nothing named, or no signature to read
        return None
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return None
    return set(signature.parameters)


def check(values: Any, section: Section, prefix: str = "", *, owner: str = "") -> list[str]:
    """Every problem of the config section ``values`` (named ``prefix`` in messages) against ``section``: a key it
    does not declare (or an old name), a value of the wrong type or out of range, a broken rule across keys, and
    where the section's YAML states every default, a declared key that is missing. Nested sections are checked
    the same way."""
    def name(key: str) -> str:
        return f"{prefix}.{key}" if prefix else str(key)

    if values is None and section.nullable:
        return []
    if not isinstance(values, Mapping):
        return [f"{prefix or 'the config'}={show(values)} is invalid: expected {section.expected()}"]
    problems = []
    if section.required:
        problems += [f"{name(key)} is missing: expected {s.expected()}" for key, s in section.settings.items()
                     if key not in values and not s.optional]
    declared = set(section.settings) | set(section.meta)
    unknown = [str(k) for k in values if k not in declared]
    problems += [f"{name(old)} was renamed: write {name(section.renamed[old])}" for old in unknown
                 if old in section.renamed]
    unknown = [k for k in unknown if k not in section.renamed]
    if unknown and section.others == "target":
        takes = _target_parameters(values)
        unknown = [] if takes is None else [k for k in unknown if k not in takes]
    if unknown and section.others != "keep":
        where = prefix or "the top level"
        hint = f" (+{name(unknown[0])}=... adds a key nothing reads)" if not prefix else ""
        has = ", ".join(sorted(section.settings)) or "(no settings)"
        target = " and the parameters of its _target_" if section.others == "target" else ""
        problems += [f"{name(k)} is not {owner or section.owner}{hint}: {where} has {has}{target}" for k in sorted(unknown)]
    valid: dict[str, Any] = {}
    for key, setting in section.settings.items():
        if key not in values:
            continue
        if isinstance(setting, Section):
            found = check(values[key], setting, name(key))
        else:
            found = [p] if (p := setting.problem(name(key), values[key])) else []
        problems += found
        if not found:
            valid[key] = values[key]
    for rule in section.rules:
        if all(valid.get(k) is not None for k in rule.keys):
            problem = rule.check(tuple(name(k) for k in rule.keys), *(valid[k] for k in rule.keys))
            if problem:
                problems.append(problem)
    return problems


# ------------------------------------------------------------------------------- parsed: checked once, then typed
class Parsed(Mapping[str, Any]):
    """Base of the typed objects :func:`parse` builds from a section (:func:`typed`): a frozen dataclass whose
    fields are the section's declared keys (a nested section parsed the same way; lists as tuples; a key absent
    where it is optional reads None), and a read-only mapping of the plain data it was parsed from (every key as
    given, the ones handed on to a ``_target_`` included), which is what an experiment id hashes and a builder
    hands to a ``_target_`` (:meth:`as_dict`)."""

    _source: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self._source[key]

    def __iter__(self):
        return iter(self._source)

    def __len__(self) -> int:
        return len(self._source)

    def as_dict(self) -> dict[str, Any]:
        """The plain data it was parsed from (a deep copy: nothing the caller changes reaches it)."""
        import copy

        return copy.deepcopy(dict(self._source))


_PY_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "choice": str, "int_list": tuple,
             "str_list": tuple, "list": tuple, "mapping": Mapping, "section": Mapping, "group": Mapping,
             "interval": tuple, "any": Any}
_TYPED: dict[int, type] = {}


def typed(section: Section, name: str) -> type:
    """The frozen dataclass of ``section`` (one per section, generated from its table: each key is declared once,
    in the table, and the dataclass is built from it)."""
    if id(section) not in _TYPED:
        fields = []
        for key, setting in section.settings.items():
            kind = (typed(setting, name + "".join(p.title() for p in key.split("_"))) if isinstance(setting, Section)
                else _PY_TYPES[setting.kind])
            fields.append((key, kind, dataclasses.field(default=None)))
        fields.append(("_source", Mapping, dataclasses.field(default_factory=dict, repr=False, compare=False)))
        cls = dataclasses.make_dataclass(name, fields, bases=(Parsed,), frozen=True, eq=True)
        cls.__doc__ = f"{section.owner[0].upper()}{section.owner[1:]}s, checked (generated from its table)."
        cls.__module__ = __name__
        globals().setdefault(name, cls)  # found by its name here, as pickle looks it up
        _TYPED[id(section)] = cls
    return _TYPED[id(section)]


def build(section: Section, values: Mapping[str, Any], name: str) -> Parsed:
    """The typed object of ``values``, which :func:`check` found valid against ``section``."""
    cls = typed(section, name)
    kwargs: dict[str, Any] = {}
    for key, setting in section.settings.items():
        if key not in values:
            continue
        value = values[key]
        if isinstance(setting, Section) and isinstance(value, Mapping):
            sub = next(f.type for f in dataclasses.fields(cls) if f.name == key)
            value = build(setting, value, sub.__name__)
        elif isinstance(value, list):
            value = tuple(value)
        elif isinstance(setting, Setting) and setting.kind == "float" and _is_finite(value):
            value = float(value)  # lr=1 is the float 1.0
        elif _is_int(value):
            value = int(value)
        kwargs[key] = value
    return cls(**kwargs, _source=values)


def parse(section: Section, values: Any, name: str, *, prefix: str = "", what: str = "config") -> Parsed:
    """``values`` (the section named ``prefix`` in messages) checked against ``section`` (one
    :class:`gate.errors.ConfigError` listing every problem, as ``what`` when there are several) and built into its
    typed object: the one parse of a section, at the edge."""
    raise_problems(check(values, section, prefix), what)
    return build(section, values, name)


def raise_problems(problems: list[str], what: str) -> None:
    """One :class:`gate.errors.ConfigError` for every problem found (none: nothing happens): the problem itself when
    there is one, ``<what>: N problems: a; b`` when there are several."""
    if problems:
        from .errors import ConfigError

        raise ConfigError((f"{what}: {len(problems)} problems: " if len(problems) > 1 else "") + "; ".join(problems))


def passed_on(values: Any, section: Section, prefix: str) -> list[str]:
    """``prefix.key=value`` for each key of ``values`` that ``section`` does not declare and hands on to its
    ``_target_`` unchecked (Lightning's Trainer, a torch optimizer): named when that target rejects one."""
    if not isinstance(values, Mapping):
        return []
    declared = set(section.settings) | set(section.meta)
    return [f"{prefix}.{k}={show(v)}" for k, v in values.items() if k not in declared]


# ------------------------------------------------------------------------------------- defaults, from the YAML
def conf_dir() -> Path:
    """The packaged config directory (conf/, shipped as gate.conf)."""
    import gate.conf

    return Path(gate.conf.__file__).resolve().parent


@functools.cache
def _yaml(where: str) -> dict[str, Any]:
    from gate.files import read_config_yaml

    file, _, key = where.partition(":")
    node: Any = read_config_yaml(conf_dir() / file)
    for part in key.split(".") if key else ():
        node = node[part]
    return {k: v for k, v in node.items() if k not in ("defaults", "hydra")}


def yaml_defaults(section: Section | str) -> dict[str, Any]:
    """The defaults a section's YAML states, as written there (interpolations unresolved; a root config's
    defaults list not followed): the one place each default lives."""
    where = section.yaml if isinstance(section, Section) else section
    if not where:
        raise ValueError(f"section {getattr(section, 'owner', section)!r} names no YAML file for its defaults")
    return dict(_yaml(where))


def default_path(key: str, root: str | Path) -> Path:
    """Where ``conf/paths/default.yaml`` puts ``key`` (``results``, ``runs``, ``data``, ...) under the output root
    ``root``: the layout read from the one file that states it (a measurement reading a store, a plan without
    experiments)."""
    from omegaconf import OmegaConf

    return Path(OmegaConf.create({"paths": {**yaml_defaults("paths/default.yaml"), "root": str(root)}}).paths[key])


def recipe_architectures() -> tuple[str, ...]:
    """What ``encoder.architecture`` may say: the recipes of conf/recipe/ whose name has no variant suffix
    (``conv``, ``hybrid``, ``vit``; ``conv_segmentation`` is a variant of ``conv``)."""
    return tuple(sorted(p.stem for p in (conf_dir() / "recipe").glob("*.yaml") if "_" not in p.stem))


def recipe_architecture(recipe: str) -> str:
    """The architecture a recipe is for: its name up to the first ``_`` (``conv_segmentation`` -> ``conv``)."""
    return str(recipe).split("_")[0]


# ------------------------------------------------------------------------------------------------- vocabulary
DROPOUT = Float(0.0, 1.0, high_open=True, meaning="dropout probability before the head")
SMOOTHING = Float(0.0, 1.0, high_open=True, meaning="label smoothing of the cross-entropy")
CLASSES = Int(2, meaning="classes of the head (equal to dataset.num_classes)")
TOP_K = Setting("int_list", low=1, min_items=1, unique=True, meaning="the k of the acc@k it records")
POSITIVE = Float(0.0, low_open=True)
LOSS_WEIGHT = Float(0.0, meaning="weight of this loss term (finite, >= 0)")
WORKERS = Int(0, alt=(Choice(AUTO),), expect=f"an integer >= 0 or {AUTO}", run_only=True,
              meaning="loader worker processes; auto: gate/data/loading.py decides from the machine")
PIN_MEMORY = Bool(alt=(Choice(AUTO),), expect=f"true, false or {AUTO}", run_only=True,
                  meaning="pinned host memory for a CUDA device; auto: on where the run uses CUDA")
SAMPLES = Int(1, nullable=True, null_means="the whole split")
#: The largest seed: numpy's generators and Lightning's seed_everything take 0 .. 2**32 - 1 (a larger one failed
#: deep in numpy, naming no key).
SEED_MAX = 2**32 - 1


# ------------------------------------------------------------------------------------------------------ gate-run
DATA = Section("a gate-run setting", {
    "batch_size": Int(1, meaning="the global training batch (shared out to every process)"),
    "eval_batch_size": Int(1, nullable=True, null_means="data.batch_size", meaning="the evaluation batch"),
    "num_workers": WORKERS,
    "pin_memory": PIN_MEMORY,
    "max_train_samples": dataclasses.replace(SAMPLES, meaning="seeded cap on the train split (run seed)"),
    "max_val_samples": dataclasses.replace(SAMPLES, meaning="seeded cap on the val split (split seed)"),
    "max_test_samples": dataclasses.replace(SAMPLES, meaning="seeded cap on the test split (split seed)"),
}, required=True, yaml="run.yaml:data", meaning="the data settings (data.batch_size, ...)")

OPTIMIZER = Section("a setting of the recipe's optimizer", {
    "lr": Float(0.0, low_open=True, meaning="learning rate (finite, > 0)"),
    "weight_decay": Float(0.0, meaning="decoupled weight decay (finite, >= 0)"),
}, others="target", meta=("_target_", "_partial_"), meaning="the optimizer (a _target_ taking the parameters)")

SCHEDULER = Section("a setting of the recipe's scheduler", {
    "mode": Choice("min", "max", meaning="whether the monitored value should fall (min) or rise (max)"),
    "factor": Float(0.0, 1.0, low_open=True, high_open=True, meaning="the factor the LR is multiplied by on a plateau"),
    "patience": Int(0, meaning="steps (or epochs) without improvement before the LR falls"),
    "threshold": Float(0.0, meaning="the least change that counts as improvement"),
}, others="target", meta=("_target_", "_partial_"), nullable=True,
    meaning="the LR scheduler (a _target_ taking the optimizer), or null for none")

RECIPE = Section("a recipe setting", {
    "name": Str(meaning="the recipe's name (recorded)"),
    "optimizer": OPTIMIZER,
    "scheduler": SCHEDULER,
    "scheduler_interval": Choice("step", "epoch", meaning="when the scheduler steps"),
    "scheduler_monitor": Str(expect="a logged metric name, e.g. 'train/loss'", meaning="what the scheduler watches"),
    "freeze_encoder": Bool(meaning="train the head alone (the encoder's weights stay as loaded)"),
}, required=True, yaml="recipe/conv.yaml", meaning="the recipe group (e.g. recipe=conv)")

#: The trainer keys gate reads or that decide a number; any other key must be a parameter of its ``_target_``
#: (Lightning's Trainer checks its value).
TRAINER = Section("a setting of the trainer", {
    "max_steps": Int(1, meaning="optimizer steps of the run"),
    "val_check_interval": Int(1, alt=(Float(0.0, 1.0, low_open=True),),
                              expect="a number of steps >= 1 (or a fraction of an epoch in (0, 1])",
                              meaning="validate (and checkpoint) every N steps"),
    "check_val_every_n_epoch": Int(1, nullable=True, null_means="count validation by steps across epochs"),
    "accelerator": Str(meaning="Lightning's accelerator: auto, cpu, gpu, cuda, ..."),
    "devices": Int(1, alt=(Choice(AUTO), Int(-1, -1), Setting("int_list", low=0, min_items=1)),
                   expect="a number of devices >= 1, 'auto', -1 or a list of device ids",
                   meaning="devices per node (several: DDP, gate/engine/training/distributed.py)"),
    "num_nodes": Int(1, optional=True, meaning="machines (several: DDP)"),
    "strategy": Choice("auto", "ddp", nullable=True, optional=True,
                       meaning="Lightning's strategy; gate shards batches for auto and ddp only"),
    "precision": Choice("64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true", "transformer-engine",
                        "64", "32", "16", "bf16", nullable=True, null_means="bf16-mixed on a bf16 GPU, 32-true on the CPU"),
    "log_every_n_steps": Int(1, meaning="steps between two logged training values", run_only=True),
    "num_sanity_val_steps": Int(-1, meaning="validation batches before training (-1: all)"),
    "enable_progress_bar": Bool(run_only=True),
    "enable_model_summary": Bool(run_only=True),
    "gradient_clip_val": Float(0.0, nullable=True, null_means="no clipping",
                               meaning="clip gradients to this norm (0 or null: none)"),
    "deterministic": Bool(alt=(Choice("warn"),), meaning="torch's deterministic algorithms (warn: warn only)"),
    "accumulate_grad_batches": Int(1, optional=True, meaning="batches whose gradients make one optimizer step "
                                                             "(Lightning divides by it: 0 failed mid-run)"),
}, rules=(Rule(("val_check_interval", "max_steps"), lambda n, every, steps: None if not _is_int(every) or every <= steps
               else f"{n[0]}={every} is invalid: it is larger than {n[1]}={steps}: no checkpoint would ever be "
                    f"validated"),),
    required=True, others="target", yaml="trainer/default.yaml", meaning="the trainer group (e.g. trainer=default)")

_EVERY = Int(1, meaning="steps (or validations) between two logs")
CALLBACKS = Section("a setting of gate-run's logging callbacks", {
    "grad_norms": Section("a setting of callbacks.grad_norms", {
        "enabled": Bool(), "every_n_steps": _EVERY, "depth_groups": Int(1, meaning="the encoder's blocks in K groups")},
        required=True),
    "hardware": Section("a setting of callbacks.hardware", {"enabled": Bool(), "every_n_steps": _EVERY}, required=True),
    "visuals": Section("a setting of callbacks.visuals", {
        "enabled": Bool(), "every_n_validations": _EVERY, "max_examples": Int(1)}, required=True),
    "count_flops": Bool(meaning="count forward GFLOPs per example once"),
}, required=True, yaml="callbacks/default.yaml", meaning="the callbacks group (callbacks=default or none)", run_only=True)

LOGGER = Section("a setting of the logger", {
    "mode": Choice("offline", "online", "disabled", meaning="W&B: offline (sync later), online, disabled"),
}, others="target", meaning="the logger group (logger=wandb or csv)", run_only=True)

# Where outputs go: other keys are kept (a user's own paths may serve interpolations); root is checked by
# gate.engine.validate.check_output_root (a writable directory).
PATHS = Section("a paths setting", {key: Setting("any") if key == "root" else Str(optional=key == "wandb")
                                    for key in ("root", "results", "runs", "wandb", "cache", "data", "reports")},
                others="keep", yaml="paths/default.yaml", meaning="the paths group (paths=default)", run_only=True)

RUN = Section("a gate-run setting", {
    "seed": Int(0, SEED_MAX, meaning="the run's randomness: initialisation, data order, the train cap"),
    "image_size": Int(1, meaning="input resolution of image encoders (they interpolate it)"),
    "force": Bool(meaning="rerun an experiment the results store already holds", run_only=True),
    "ensembles": Setting("int_list", low=1, min_items=1,
                         expect="a non-empty list of checkpoint counts >= 1, e.g. [1, 3, 5] ([1] tests the best "
                                "checkpoint alone)", meaning="test ensembles of the top-k validation checkpoints"),
    "evaluate_test": Bool(meaning="test the best checkpoint; false: record the best validation value only"),
    "keep_checkpoints": Choice("best", "all", "none", meaning="checkpoints kept once the records are stored",
                               run_only=True),
    "compile": Bool(alt=(Choice(*COMPILE_MODES),), expect=f"false, true or one of {list(COMPILE_MODES)}",
                    meaning="torch.compile the encoder's forward (speed only)", run_only=True),
    "data": DATA,
    "trainer": TRAINER,
    "recipe": RECIPE,
    "callbacks": CALLBACKS,
    "logger": LOGGER,
    "paths": PATHS,
    "adapter": Group("adapter", "e.g. adapter=linear_classifier"),
    "encoder": Group("encoder", "e.g. encoder=efficientnet_lite0"),
    "dataset": Group("dataset", "e.g. dataset=fashion_mnist"),
    "preset": Group("preset", "e.g. preset=smoke", optional=True),
}, required=True, yaml="run.yaml")
#: gate-run's config, checked and typed (what its stage reads): generated from :data:`RUN`.
RunConfig = typed(RUN, "RunConfig")

# ---------------------------------------------------------------------------------------------------- gate-score
SCORE = Section("a gate-score setting", {
    "seed": Int(0, SEED_MAX, meaning="fixes the dataset's splits and the max_samples subsample"),
    "image_size": Int(1, meaning="input resolution of image encoders"),
    "split": Choice(*SPLITS, meaning="the split whose features are scored"),
    "max_samples": Int(2, nullable=True, null_means="the whole split", meaning="seeded cap on that split"),
    "metrics": Setting("str_list", alt=(Str(),), nullable=True, null_means="every applicable score",
                       meaning="the scores to compute (gate.scoring.transferability.SCORES)", run_only=True),
    "force": Bool(meaning="recompute scores the store already holds", run_only=True),
    "cache": Bool(meaning="reuse cached features", run_only=True),
    "device": Choice("cpu", "cuda", AUTO, alt=(Str(pattern=r"cuda:\d+"),),
                     expect="one of ['cpu', 'cuda', 'auto'] or cuda:<index>", meaning="where features are computed",
                     run_only=True),
    "batch_size": Int(1, meaning="the feature pass's batch", run_only=True),
    "num_workers": WORKERS,
    "pin_memory": PIN_MEMORY,
    "progress_bar": Bool(run_only=True),
    "adapter": Group("adapter", "composed as in gate-run, not used", run_only=True),
    "recipe": Group("recipe", "composed as in gate-run, not used", run_only=True),
    "encoder": Group("encoder", "e.g. encoder=efficientnet_lite0"),
    "dataset": Group("dataset", "e.g. dataset=fashion_mnist"),
    "paths": PATHS,
}, required=True, yaml="score.yaml")
#: gate-score's config, checked and typed: generated from :data:`SCORE`.
ScoreConfig = typed(SCORE, "ScoreConfig")

# ------------------------------------------------------------------------------------------------------ gate-tier
#: gate-tier's ``launcher:`` section, shared by the launchers that read it: ``local`` (workers, threads, poll_seconds) and
#: ``slurm`` / ``submitit_local`` (the rest, and poll_seconds).
LAUNCHER = Section("a setting of gate-tier's launcher", {
    "workers": Int(1, nullable=True, null_means="one per visible GPU; on the CPU one per core, as many as memory holds"),
    "threads": Int(1, nullable=True, null_means="on the CPU the cores shared out among the workers; on GPUs torch's",
                   meaning="torch threads of each local job (its OMP_NUM_THREADS)"),
    "partition": Str(nullable=True, null_means="the cluster's default"),
    "qos": Str(nullable=True, null_means="the cluster's default"),
    "account": Str(nullable=True, null_means="the cluster's default"),
    "gpus_per_node": Int(0),
    "cpus_per_task": Int(1),
    "mem_gb": Float(0.0, low_open=True, nullable=True, null_means="the cluster's default"),
    "timeout_min": Int(1),
    "array_parallelism": Int(1),
    "setup": Setting("str_list", meaning="shell lines run before each job"),
    "additional_parameters": Setting("mapping", meaning="other sbatch options"),
    "max_requeues": Int(0),
    "wait": Bool(meaning="wait for the array, then summarise"),
    "poll_seconds": Float(0.0, low_open=True, meaning="how often job states are checked"),
}, required=True, yaml="tier_run.yaml:launcher", meaning="the launcher section")

#: gate-tier's own settings (conf/tier_run.yaml; the tier file is checked by gate.tiers.spec.parse_tier).
TIER_RUN = Section("a gate-tier setting", {
    "tier": Group("tier", "e.g. tier=demo"),
    "paths": PATHS,
    "launcher": LAUNCHER,
    "tier_file": Str(nullable=True, null_means="the tier group's choice"),
    "encoders": Setting("str_list", min_items=1, unique=True),
    "seeds": Setting("int_list", low=0, high=SEED_MAX, min_items=1, unique=True, nullable=True,
                     null_means="the tier's seeds"),
    "overrides": Setting("str_list", meaning="gate-run overrides for every experiment"),
    "launch": Str(meaning="the launcher (gate.tiers.launchers.get_launcher names the valid ones)"),
    "out": Str(nullable=True, null_means="no file; only for launch=json"),
    "score": Bool(nullable=True, null_means="the tier's"),
    "report": Bool(),
    "force": Bool(),
}, required=True, yaml="tier_run.yaml")

#: A tier file (conf/tier/<name>.yaml, or a user's): its entries are checked by gate.tiers.spec.parse_tier.
TIER_FILE = Section("a tier key", {
    "name": Str(optional=True, meaning="the tier's name (its run folder and reports; default: the file's)"),
    "seeds": Setting("int_list", low=0, high=SEED_MAX, min_items=1, alt=(Int(0, SEED_MAX),), optional=True,
                     expect=f"a non-empty list of integers in [0, {SEED_MAX}]", meaning="the seeds every entry runs (absent: [0])"),
    "score": Bool(optional=True, meaning="gate-score the tier's classification datasets afterwards (absent: no)"),
    "use_paper_protocol": Bool(optional=True, meaning="each dataset's paper_protocol first (absent: no)"),
    "overrides": Setting("any", optional=True, meaning="gate-run overrides for every entry"),
    "score_overrides": Setting("any", optional=True, meaning="gate-score overrides"),
    "benchmarks": Setting("list", min_items=1, expect="a non-empty list of dataset keys or {dataset: ..., adapter: ..., "
                                                      "overrides: {...}} entries"),
    "notes": Setting("any", optional=True),
}, required=True, meta=("use_protocol",))  # an old key, refused naming its new one by gate.tiers.spec.parse_tier

# ------------------------------------------------------------------------------------------------------ gate-rank
RANK = Section("a gate-rank setting", {
    "tier": Group("tier", "e.g. tier=demo"),
    "paths": PATHS,
    "tier_file": Str(nullable=True, null_means="the tier group's choice"),
    "encoders": Setting("str_list", min_items=1, expect="encoder names (encoder=a,b,c)"),
    "budget": Float(0.0, 1.0, low_open=True, high_open=True,
                    expect="a fraction of the full tier's compute, 0 < budget < 1 (budget=0.1)"),
    "history": Setting("str_list", min_items=1, alt=(Str(),), unique=True,
                       expect="store, paper, a list of them, or the path of a results table",
                       meaning="what the selection and the completion learn from (never the pool's rows)"),
    "proxy_benchmarks": Choice(AUTO, "first", alt=(Setting("str_list", min_items=1, unique=True),), nullable=True,
                               null_means="every benchmark the proxy can run",
                               expect="auto (chosen from the history), first (the tier file's order), null (every "
                                      "one) or a list of the tier's benchmarks"),
    "min_per_family": Int(0, expect="an integer >= 0 (benchmarks per paper group the budget can cover)"),
    "val_points": Int(2, 20, expect="an integer in [2, 20] (validations of a proxy run: its curve's points)"),
    "proxy_seeds": Setting("int_list", low=0, high=SEED_MAX, min_items=1, unique=True,
                           expect=f"a non-empty list of distinct seeds in [0, {SEED_MAX}], outside the tier's"),
    "run_fraction": Float(0.0, 1.0, low_open=True, expect="a fraction of a full run's steps, 0 < run_fraction <= 1"),
    "halving": Choice("contested", nullable=True, null_means="one run per encoder per block, no second allocation",
                      meaning="half the budget first, the rest to the encoders of the least settled pairs"),
    "prior": Setting("str_list", unique=True, meaning="zero-training scores of the prior"),
    "static": Choice(AUTO, alt=(Setting("str_list", unique=True),),
                     expect="auto (params, and source_top1 where every encoder of the pool declares it) or a list of "
                            "params, source_top1",
                     meaning="static facts of the prior"),
    "baseline_scores": Setting("str_list", unique=True, meaning="scores compared with gate-rank in a validation"),
    "overrides": Setting("str_list", meaning="gate-run overrides for every experiment"),
    "use_full_runs": Bool(meaning="a benchmark whose full runs are all stored is ranked by them"),
    "validate": Bool(),
    "n_boot": Int(0, meaning="bootstrap resamples of the intervals and the paired comparisons"),
    "report": Bool(),
}, required=True, yaml="rank.yaml")

# ----------------------------------------------------------------------------------------------------- gate-eevee
#: The search settings of gate-eevee (conf/eevee.yaml) that gate.analysis.eevee.EeveeConfig holds; the command's own
#: keys (table, out, k, importance, figures) complete them in :data:`EEVEE_COMMAND`.
EEVEE = Section("a gate-eevee setting", {
    **{key: Int(low, expect=f"an integer >= {low}") for key, low in (
        ("hidden", 1), ("epochs", 1), ("n_splits", 1), ("population", 1), ("keep", 1), ("children", 1), ("chunk", 1),
        ("generations", 0))},
    "seed": Int(0, SEED_MAX, expect=f"an integer in [0, {SEED_MAX}]"),
    **{key: Int(1, nullable=True, expect="an integer >= 1 or null") for key in ("workers", "threads")},
    "lr": Float(0.0, low_open=True, expect="a finite number > 0", meaning="the meta-model's learning rate"),
    "weight_decay": Float(0.0, expect="a finite number >= 0"),
    "val_fraction": Float(0.0, 1.0, low_open=True, high_open=True, expect="a fraction, 0 < val_fraction < 1"),
    "missing": Choice("mask", "drop_encoders", meaning="what a missing value does: masked, or its encoder dropped"),
    "progress": Bool(),
}, meta=())

#: gate-eevee's whole command (conf/eevee.yaml): the search above and the command's own keys.
EEVEE_COMMAND = Section("a gate-eevee setting", {
    **EEVEE.settings,
    "table": Str(meaning="the performance table (gate-analysis' table.csv, a wide or long CSV, JSONL records)"),
    "out": Str(nullable=True, null_means="<table dir>/eevee"),
    "k": Int(1, alt=(Setting("int_list", low=1, min_items=1), Str(pattern=r"\s*\d+\s*-\s*\d+\s*")),
             expect="a subset size >= 1, a list [1,2,3] or a range 1-8", meaning="the subset size(s) searched"),
    "importance": Bool(meaning="leave-one-out importance of the best subset's members"),
    "figures": Bool(),
    "paths": PATHS,
}, required=True, yaml="eevee.yaml", meta=())

# --------------------------------------------------------------------------------------------------- gate-analysis
ANALYSIS = Section("a gate-analysis setting", {
    "results": Str(meaning="the results: the store's JSONL, a long CSV or a wide CSV (the paper's layout)"),
    "out": Str(nullable=True, null_means="next to the results"),
    "split": Str(nullable=True, null_means="every split", meaning="the fine-tuning split analysed"),
    "score_split": Str(nullable=True, null_means="every split", meaning="the split of the scores analysed"),
    "target": Setting("any", nullable=True, null_means="each dataset's representative metric",
                      meaning="the fine-tuning metric(s) correlated with the scores"),
    "relative": Bool(meaning="correlate with relative accuracy (acc - 1/C) / (1/C)"),
    "num_classes": Setting("mapping", nullable=True, meaning="classes per dataset for relative accuracy"),
    "tier_metrics": Setting("mapping", nullable=True, meaning="representative metric overrides per dataset"),
    "partial_tiers": Bool(meaning="average a tier over the benchmarks present"),
    "benchmarks_file": Str(nullable=True, null_means="none", meaning="an extra file of benchmark metadata"),
    "ranges": Setting("mapping", nullable=True, null_means="the declared ranges",
                      meaning="the table's own range of a metric: {acc@1: [0, 100]}"),
    "dataset_config_dirs": Setting("str_list", meaning="extra directories of dataset configs"),
    "reference": Str(nullable=True, meaning="the ranking heatmap's reference benchmark"),
    "filters": Setting("mapping", nullable=True, meaning="keep only matching records"),
    "figures": Bool(),
    "paths": PATHS,
    "tiers": Setting("mapping", optional=True, meaning="the tiers summarised (tier@tiers.<name>)"),
    "benchmark_meta": Setting("mapping", optional=True, meaning="the GATE paper's benchmark metadata (its group)"),
}, required=True, yaml="analysis.yaml", meta=())

# ------------------------------------------------------------------------------------------------------ gate-data
DATA_COMMAND = Section("a gate-data setting", {
    "force": Bool(meaning="prepare: download again (online) and recompute the split manifest"),
    "adapter": Group("adapter", "composed because dataset configs name their default adapter; not used"),
    "dataset": Group("dataset", "dataset=cifar100", nullable=True, null_means="every dataset (gate-data list)"),
    "paths": PATHS,
}, required=True, yaml="data.yaml", meta=())

# -------------------------------------------------------------------------------------------------------- dataset
#: The split recipe of a dataset whose source lacks splits (gate.data.manifest); its defaults live in
#: conf/dataset_defaults/splits.yaml.
SPLIT_RECIPE = Section("a setting of dataset.splits", {
    "seed": Int(0, SEED_MAX, meaning="the seed the missing splits are carved with (never the run seed)"),
    "val_fraction": Float(0.0, 1.0, low_open=True, high_open=True, meaning="val carved from what train keeps"),
    "test_fraction": Float(0.0, 1.0, low_open=True, high_open=True, meaning="test carved from train"),
    "group_column": Str(nullable=True, null_means="rows stand alone", meaning="rows of one group on one side"),
    "roles": Setting("mapping", nullable=True, meaning="a source split's role, e.g. {validation: test}"),
    "by_class": Section("a setting of dataset.splits.by_class", {s: Int(1) for s in SPLITS}, required=True,
                        nullable=True, meaning="the number of classes of each split, {train: n, val: n, test: n}"),
}, yaml="dataset_defaults/splits.yaml:splits", nullable=True, meaning="the split recipe")

DATASET = Section("a dataset setting", {
    "name": Str(meaning="the dataset's key"),
    "modality": Choice(*MODALITIES),
    "task": Str(meaning="its task family (gate.families)"),
    "num_classes": Int(1, meaning="classes of its primary label (1 where the family has none)"),
    "metrics": Setting("str_list", min_items=1, optional=True, meaning="the metrics it reports"),
    "tier_metric": Str(optional=True, meaning="the metric that represents it in tier means (default: its family's)"),
    "paper_group": Str(nullable=True, optional=True, meaning="the GATE paper's group it is averaged in"),
    "class_names": Setting("list", nullable=True, optional=True),
    "input_column": Str(optional=True),
    "targets": Setting("mapping", nullable=True, optional=True, meaning="target column: kind"),
    "ignore_index": Int(nullable=True, optional=True),
    "heads": Setting("mapping", nullable=True, optional=True, meaning="several label columns: {column: classes}"),
    "options": Setting("mapping", nullable=True, optional=True, meaning="task-specific facts its adapter reads"),
    # how analysis puts the tier metric on 0-1 (gate.analysis.meta), not what a run computes
    "tier_range": Setting("interval", nullable=True, optional=True, run_only=True,
                          expect="[low, high] with finite low < high (the span of tier_metric mapped onto 0-1)"),
    # a note for the report on how the benchmark departs from GATE's protocol, not a setting
    "notes_vs_gate": Setting("any", optional=True, run_only=True),
    "builder": Section("a parameter of the dataset's builder", {}, others="target", meta=("_target_",), optional=True,
                       meaning="the builder (a _target_ that returns the source's splits)"),
    "data_dir": Str(optional=True, run_only=True),  # where its files are kept, not what they hold
    "splits": dataclasses.replace(SPLIT_RECIPE, optional=True),
    "source": Setting("mapping", nullable=True, optional=True,
                      meaning="where the data comes from (its block's own schema: gate/data/hub.py, source_problems)"),
    "paper_protocol": Section("a setting of dataset.paper_protocol", {
        "image_size": Int(1), "batch_size": Int(1), "batch_unit": Choice("example", "clip", "episode", "volume"),
        "mask_size": Int(1)}, optional=True, meaning="the GATE paper's image and batch size"),
    "run_defaults": Section("a setting of dataset.run_defaults", {
        "max_steps": Int(1), "val_check_interval": Int(1), "freeze_encoder": Bool()}, optional=True),
}, meta=("defaults",), renamed={
    "family": "paper_group (the GATE paper's benchmark group; the task family is dataset.task)",
    "protocol": "paper_protocol (the paper's image size and batch size for this benchmark)",
    # issue 24: one declared range per tier metric replaced a scale, bound and turn applied to any metric found
    **{key: "tier_range ([low, high] of tier_metric, mapped onto 0-1 in tier means; direction from gate/metrics.py)"
       for key in ("tier_scale", "tier_bound", "tier_turn")}}, required=True)


# -------------------------------------------------------------------------------------------------------- encoder
@functools.cache
def encoder_section() -> Section:
    """The encoder keys gate reads itself (its constructor's keys are its class's: building it checks them)."""
    return Section("an encoder setting", {
        "architecture": Choice(*recipe_architectures(), optional=True,
                               expect=f"one of {list(recipe_architectures())} (the body's kind, which names its recipe "
                                      f"in conf/recipe/); a CLIP/SigLIP tower's kind is encoder.model_type"),
        "image_size": Int(1, nullable=True, optional=True),
        "stem": Section("a setting of encoder.stem", {
            "patch_size": Int(1), "freeze_body": Bool(), "lr": Float(0.0, low_open=True, nullable=True),
            "image_size": Int(1, nullable=True)}, others="keep", optional=True, nullable=True),
        # facts about an encoder gate-rank reads, not settings of a run
        "paper_name": Str(optional=True, meaning="the encoder's column in the GATE paper's table", run_only=True),
        "source_top1": Float(0.0, 100.0, optional=True, meaning="its pretrained weights' published ImageNet top-1, %",
                             run_only=True),
    }, others="keep", required=True,
        renamed={"family": "architecture (conv, vit or hybrid: the body's kind, which picks the recipe)"})


# -------------------------------------------------------------------------------------------------------- adapter
def adapter_section(cls: type, name: str = "") -> Section | None:
    """The declared settings of an adapter class (its ``settings`` and ``setting_rules`` class attributes, next to
    its code), or None where it declares none (a user's adapter without ``settings``: its task family is still
    checked)."""
    own = getattr(cls, "settings", None)
    if not isinstance(own, Mapping):
        return None
    return Section(f"a setting of adapter {name or cls.__name__}", dict(own),
                   rules=tuple(getattr(cls, "setting_rules", ()) or ()), meta=(*META_KEYS, *ADAPTER_FACTS))


# ---------------------------------------------------------------------------------------------- experiment identity
def _group_sections() -> dict[str, Section]:
    """The sections of the root configs' groups whose keys are declared here (an adapter's are its class's; its
    facts are :data:`ADAPTER_FACTS`)."""
    return {"dataset": DATASET, "encoder": encoder_section()}


def run_only_keys(section: Section, prefix: str = "") -> tuple[str, ...]:
    """The dotted keys of ``section`` (a root config's table, its groups' tables included) marked ``run_only``:
    what :func:`gate.results.identity` leaves out of an experiment id."""
    keys: list[str] = []
    groups = _group_sections()
    for key, setting in section.settings.items():
        name = f"{prefix}{key}"
        if setting.run_only:
            keys.append(name)
        elif isinstance(setting, Section):
            keys += run_only_keys(setting, f"{name}.")
        elif setting.kind == "group" and key in groups:
            keys += run_only_keys(groups[key], f"{name}.")
    return tuple(keys)

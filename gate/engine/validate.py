"""One validation pass over a composed config, before any model or data is built.

Every problem found is collected and reported together as one :class:`~gate.errors.ConfigError` line that
names each offending key, its value and what would be valid. A bad value found after training would waste
the user's GPU-hours; a value accepted silently (``image_size=7``, ``data.batch_size=1.5``) would record a
wrong number. Checks that need the data (declared classes vs the classes present) live with the data
(:func:`gate.data.spec.check_split`), and run before the model is built.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ..errors import ConfigError

# Below this input resolution image benchmarks measure the resize, not the encoder: warn.
IMAGE_SIZE_FLOOR = 32
KEEP_CHECKPOINTS = ("best", "all", "none")
PRECISIONS = ("64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true", "transformer-engine",
              "64", "32", "16", "bf16")
DEVICES = ("cpu", "cuda", "auto")
SPLITS = ("train", "val", "test")
#: What ``encoder.architecture`` may say: the body's kind, which names the recipe that suits it (conf/recipe).
ENCODER_ARCHITECTURES = ("conv", "vit", "hybrid")
#: Keys of encoder configs written before issue 16, refused with the key that replaced them.
RENAMED_ENCODER_KEYS = {"family": "architecture (conv, vit or hybrid: the body's kind, which picks the recipe)"}
_MISSING = object()


class _Checker:
    """Collects problems; each check names the key, the value and what is valid."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.problems: list[str] = []

    def get(self, key: str, default: Any = _MISSING) -> Any:
        node: Any = self.cfg
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    def bad(self, key: str, value: Any, valid: str) -> None:
        self.problems.append(f"{key}={_show(value)} is invalid: {valid}")

    def integer(self, key: str, low: int | None = None, *, optional: bool = False, required: bool = True) -> Any:
        value = self.get(key)
        if value is _MISSING:
            if required:
                self.problems.append(f"{key} is missing: expected an integer")
            return None
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            what = "an integer" + (f" >= {low}" if low is not None else "") + (" or null" if optional else "")
            self.bad(key, value, f"expected {what}")
            return None
        if low is not None and value < low:
            self.bad(key, value, f"must be >= {low}" + (" (or null)" if optional else ""))
            return None
        return value

    def number(self, key: str, low: float | None = None, high: float | None = None, *, low_open: bool = False,
               high_open: bool = False, required: bool = False) -> Any:
        value = self.get(key)
        if value is _MISSING or (value is None and not required):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.bad(key, value, "expected a number")
            return None
        if (low is not None and (value < low or (low_open and value == low))) or \
                (high is not None and (value > high or (high_open and value == high))):
            lo = "(" if low_open else "["
            hi = ")" if high_open else "]"
            self.bad(key, value, f"must be in {lo}{low if low is not None else '-inf'}, "
                                 f"{high if high is not None else 'inf'}{hi}")
            return None
        return value

    def boolean(self, key: str) -> None:
        value = self.get(key)
        if value is not _MISSING and not isinstance(value, bool):
            self.bad(key, value, "expected true or false")

    def choice(self, key: str, options: tuple[str, ...], *, optional: bool = False) -> None:
        value = self.get(key)
        if value is _MISSING or (value is None and optional):
            return
        if value not in options:
            self.bad(key, value, f"expected one of {list(options)}" + (" or null" if optional else ""))

    def raise_if_any(self, what: str) -> None:
        if self.problems:
            n = len(self.problems)
            head = f"{what}: {n} problem{'s' if n > 1 else ''}: " if n > 1 else ""
            raise ConfigError(head + "; ".join(self.problems))


def _check_layout(c: _Checker) -> None:
    """The process layout (gate.engine.training.distributed): Lightning's own strategies gate does not shard for (FSDP,
    DeepSpeed, spawn) are refused, as is a global batch too small to give every rank an example."""
    from ..parallel import STRATEGIES, requested_world_size

    c.choice("trainer.strategy", STRATEGIES, optional=True)
    c.integer("trainer.num_nodes", 1, required=False)
    devices = c.get("trainer.devices", 1)
    ok = (devices == "auto" or devices == -1 or (isinstance(devices, int) and not isinstance(devices, bool) and devices >= 1)
          or (isinstance(devices, (list, tuple)) and devices and all(isinstance(d, int) and d >= 0 for d in devices)))
    if not ok:
        c.bad("trainer.devices", devices, "expected a number of devices >= 1, 'auto', -1 or a list of device ids")
        return
    trainer = c.get("trainer", {})
    batch = c.get("data.batch_size", None)
    if isinstance(trainer, Mapping) and isinstance(batch, int) and not isinstance(batch, bool):
        world = requested_world_size(trainer)
        if batch < world:
            c.bad("data.batch_size", batch, f"is the global batch, shared out to {world} processes "
                                            f"(trainer.devices x trainer.num_nodes): it must be >= {world}")


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _resolved(cfg: Any) -> dict[str, Any]:
    """The config as plain data; an interpolation that cannot resolve is a config error naming it."""
    if isinstance(cfg, Mapping) and not OmegaConf.is_config(cfg):
        return dict(cfg)
    try:
        plain = OmegaConf.to_container(cfg, resolve=True)
    except Exception as err:  # noqa: BLE001 - OmegaConf raises several types for broken interpolations
        raise ConfigError(f"the config does not resolve: {' '.join(str(err).split())}") from None
    plain.pop("hydra", None)
    return plain


def check_output_root(root: Any) -> Path:
    """``paths.root`` as an absolute directory that exists (created) and is writable, or a ConfigError."""
    if not isinstance(root, str) or not root.strip():
        raise ConfigError(f"paths.root={_show(root)} is invalid: expected a directory for gate's outputs "
                          f"(default gate_outputs, or set GATE_HOME)")
    path = Path(root).expanduser().resolve()
    if path == Path(path.anchor):
        raise ConfigError(f"paths.root={root!r} is the filesystem root: give a directory for gate's outputs")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".gate-write-test-"):
            pass
    except OSError as err:
        raise ConfigError(f"paths.root={root!r} is not a writable directory ({err.strerror or err}); "
                          f"give one you can write to") from None
    return path


def _check_paths(c: _Checker) -> None:
    paths = c.get("paths", None)
    if not isinstance(paths, Mapping):
        c.problems.append("paths is missing: expected the paths group (paths=default)")
        return
    try:
        check_output_root(paths.get("root"))
    except ConfigError as err:
        c.problems.append(str(err))
    for key in ("results", "runs", "cache"):
        value = paths.get(key)
        if key in paths and (not isinstance(value, str) or not value.strip()):
            c.bad(f"paths.{key}", value, "expected a path")


def _target_class(section: Any) -> type | None:
    """The class a config section's ``_target_`` names, or None (an unknown class is reported when it is built)."""
    target = section.get("_target_") if isinstance(section, Mapping) else None
    if not isinstance(target, str):
        return None
    try:
        from hydra.utils import get_class

        return get_class(target)
    except Exception:  # noqa: BLE001 - an unknown class is reported when the encoder or adapter is built
        return None


def _check_image_size(c: _Checker) -> None:
    dataset = c.get("dataset", {}) or {}
    if not isinstance(dataset, Mapping) or dataset.get("modality", "image") not in ("image", "video"):
        return
    size = c.integer("image_size", 1, required=False)
    encoder = c.get("encoder", {}) or {}
    enc_size = encoder.get("image_size") if isinstance(encoder, Mapping) else None
    if enc_size is not None and enc_size != size:
        size = c.integer("encoder.image_size", 1)
        key = "encoder.image_size"
    else:
        key = "image_size"
    if size is None:
        return
    cls = _target_class(encoder)
    minimum = int(getattr(cls, "min_image_size", 1) or 1)
    name = encoder.get("name", "the encoder") if isinstance(encoder, Mapping) else "the encoder"
    if size < minimum:
        c.bad(key, size, f"encoder {name} needs at least {minimum} px (its total stride); use >= {minimum}")
    elif size < IMAGE_SIZE_FLOOR:
        warnings.warn(f"{key}={size} is below {IMAGE_SIZE_FLOOR} px: the result measures the resize more than "
                      f"the encoder", stacklevel=3)


def _check_modality(c: _Checker) -> None:
    encoder, dataset = c.get("encoder", {}) or {}, c.get("dataset", {}) or {}
    cls = _target_class(encoder)
    modality = dataset.get("modality") if isinstance(dataset, Mapping) else None
    takes = getattr(cls, "modalities", None)
    if cls is None or not modality or not takes or modality in takes or (modality == "video" and "image" in takes):
        return  # (an image encoder takes video frame by frame)
    from ..encoders.stems import STEM_MODALITIES

    if getattr(cls, "takes_embeddings", False) and modality in STEM_MODALITIES:
        patch = c.integer("encoder.stem.patch_size", 1, required=False)  # a patch stem feeds the body images
        size = c.get("encoder.stem.image_size", None) or c.get("image_size", None)
        if isinstance(patch, int) and isinstance(size, int) and patch > size:
            c.bad("encoder.stem.patch_size", patch, f"must be <= the image size {size}")
        c.boolean("encoder.stem.freeze_body")
        c.number("encoder.stem.lr", 0.0, low_open=True)
        return
    stems = f" (a patch stem feeds {list(STEM_MODALITIES)} to text/audio bodies only)" \
        if modality in STEM_MODALITIES or getattr(cls, "takes_embeddings", False) else ""
    c.problems.append(f"encoder={encoder.get('name', '?')} takes {sorted(takes)} input, but "
                      f"dataset={dataset.get('name', '?')} is {modality}: choose an encoder that takes {modality}"
                      f"{stems}")


def _family_of(c: _Checker):
    """The registered task family of ``dataset.task`` (after importing the adapter class, whose module registers a
    family of a user's own), or None when there is none (:func:`_check_dataset` reports it)."""
    from ..families import family

    task = c.get("dataset.task", None)
    if not isinstance(task, str):
        return None
    _target_class(c.get("adapter", None))
    try:
        return family(task)
    except ValueError:
        return None


def _check_dataset(c: _Checker) -> None:
    dataset = c.get("dataset", None)
    if not isinstance(dataset, Mapping):
        c.problems.append("dataset is missing: expected the dataset group (e.g. dataset=fashion_mnist)")
        return
    from ..data.spec import RENAMED_DATASET_KEYS, renamed_key_problems
    from ..families import family_names

    c.problems.extend(renamed_key_problems(dataset, "dataset", RENAMED_DATASET_KEYS))
    fam = _family_of(c)
    if fam is None:
        c.bad("dataset.task", dataset.get("task"), f"expected a registered task family: one of {list(family_names())}")
    else:
        for key in ("dataset.metrics", "dataset.tier_metric"):
            value = c.get(key, None)
            names = [value] if isinstance(value, str) else value if isinstance(value, list) else []
            # fam.records: a metric of the family's entry that gate/metrics.py registers (so its direction is known)
            foreign = [m for m in names if not (isinstance(m, str) and fam.records(m))]
            if foreign:
                c.bad(key, value, f"dataset {dataset.get('name', '?')} names {foreign}, which a {fam.name} task never "
                                  f"records; valid: {list(fam.metrics)} (with qualifiers such as acc@1/<type>)")
    classes = c.integer("dataset.num_classes", 2 if fam is None or fam.has_classes else 1)
    names = dataset.get("class_names")
    if names is not None and not isinstance(names, list):
        c.bad("dataset.class_names", names, "expected a list of class names (or null)")
    elif names and isinstance(classes, int) and len(names) != classes:
        c.bad("dataset.num_classes", classes, f"dataset {dataset.get('name', '?')} names {len(names)} classes in "
                                              f"dataset.class_names; the two must agree")
    for key in ("dataset.splits.val_fraction", "dataset.splits.test_fraction"):
        c.number(key, 0.0, 1.0, low_open=True, high_open=True)


def _check_encoder_keys(c: _Checker) -> None:
    """An encoder config's old ``family`` key, and an ``architecture`` that names no recipe kind (an image tower's
    ``architecture: clip`` from before issue 16 is now ``model_type``; dropped as metadata, it would load CLIP)."""
    from ..data.spec import renamed_key_problems

    encoder = c.get("encoder", None)
    c.problems.extend(renamed_key_problems(encoder, "encoder", RENAMED_ENCODER_KEYS))
    arch = c.get("encoder.architecture", None)
    if arch is not None and arch not in ENCODER_ARCHITECTURES:
        c.bad("encoder.architecture", arch, f"expected one of {list(ENCODER_ARCHITECTURES)} (the body's kind); a CLIP/"
                                            f"SigLIP tower's kind is encoder.model_type")


def _adapters_for(task: str) -> list[str]:
    """The family's default adapter config, then the other packaged adapter configs (conf/adapter/<name>.yaml)
    whose class serves ``task``."""
    import yaml
    from hydra.utils import get_class

    import gate.conf

    from ..families import family

    try:
        names = [family(task).default_adapter]
    except ValueError:  # an unknown task is reported by _check_dataset
        return []
    for path in sorted((Path(gate.conf.__file__).resolve().parent / "adapter").glob("*.yaml")):
        try:
            target = (yaml.safe_load(path.read_text()) or {}).get("_target_")
            if task in getattr(get_class(target), "tasks", ()) and path.stem not in names:
                names.append(path.stem)
        except Exception:  # noqa: BLE001 - a suggestion only
            continue
    return names


def _required(c: _Checker, *keys: str) -> bool:
    """Whether every key is present; each missing one is a problem (code reads it from the config, which states
    its default once: no fallback in Python)."""
    missing = [k for k in keys if c.get(k) is _MISSING]
    c.problems.extend(f"{k} is missing from the config (its default lives in the YAML)" for k in missing)
    return not missing


def _check_recipe(c: _Checker) -> None:
    if _required(c, "recipe.scheduler_interval", "recipe.scheduler_monitor", "recipe.freeze_encoder"):
        c.choice("recipe.scheduler_interval", ("step", "epoch"))
        monitor = c.get("recipe.scheduler_monitor")
        if not isinstance(monitor, str) or not monitor:
            c.bad("recipe.scheduler_monitor", monitor, "expected a logged metric name, e.g. 'train/loss'")
        c.boolean("recipe.freeze_encoder")


def _check_adapter(c: _Checker) -> None:
    """The adapter section against its class's declared settings (gate/settings.py), and its task family against
    the dataset's, before anything is built."""
    from ..settings import adapter_settings, check_section

    adapter = c.get("adapter", None)
    if not isinstance(adapter, Mapping):
        c.problems.append("adapter is missing: expected the adapter group (e.g. adapter=linear_classifier)")
        return
    cls = _target_class(adapter)
    if cls is None:
        return
    name = adapter.get("name") or cls.__name__
    dataset = c.get("dataset", None)
    task = dataset.get("task") if isinstance(dataset, Mapping) else None
    tasks = getattr(cls, "tasks", frozenset())
    if isinstance(task, str) and tasks and task not in tasks:
        from ..families import family

        needs = sorted({k for t in tasks for k in family(t).targets})
        has = dataset.get("targets") or {}
        fits = _adapters_for(task)
        c.problems.append(f"adapter={name} serves {sorted(tasks)} tasks (targets of kind {needs}), but "
                          f"dataset={dataset.get('name', '?')} is a {task!r} task (targets {dict(has) or 'default'}): "
                          + (f"use adapter={' or adapter='.join(fits)}" if fits else "choose an adapter for it"))
    declared = adapter_settings(cls)
    if declared is not None:
        settings, rules = declared
        c.problems.extend(check_section("adapter", adapter, settings, rules, owner=f"adapter {name}"))


def _root_declares(config_name: str) -> dict[str, Any]:
    """What a packaged root config (``conf/<config_name>.yaml``) declares: its own keys (with their sub-keys)
    and its config groups (as keys mapped to None). Read from the YAML itself, so the key list is stated once."""
    import yaml

    import gate.conf

    doc = yaml.safe_load((Path(gate.conf.__file__).resolve().parent / f"{config_name}.yaml").read_text()) or {}
    declared: dict[str, Any] = {k: v for k, v in doc.items() if k not in ("defaults", "hydra")}
    for entry in doc.get("defaults") or ():
        if isinstance(entry, Mapping):
            group = str(next(iter(entry)))
            if not group.startswith("override ") and "/" not in group:
                declared.setdefault(group.split("@")[0], None)
    return declared


def _check_known_keys(c: _Checker, config_name: str, sections: tuple[str, ...] = ()) -> None:
    """A top-level key (or a key of one of ``sections``) that the root config does not declare: a ``+key=value``
    nothing reads, which would still enter the experiment id."""
    declared = _root_declares(config_name)
    for key in c.cfg:
        if key not in declared:
            c.problems.append(f"{key} is not a gate-{config_name} setting (+{key}=... adds a key nothing reads): the top "
                              f"level has {', '.join(sorted(declared))}")
    for section in sections:
        known, given = declared.get(section), c.get(section, None)
        if isinstance(known, Mapping) and isinstance(given, Mapping):
            for key in given:
                if key not in known:
                    c.problems.append(f"{section}.{key} is not a gate-{config_name} setting: {section} has "
                                      f"{', '.join(sorted(known))}")


def _check_contrastive(c: _Checker) -> None:
    """The zero-shot image-text adapter (gate.adapters.contrastive): acc@k is meaningful only with more than k
    candidates, a one-row batch has nothing to contrast (its loss is 0), and a Winoground-style example's two rows
    must share a candidate group (an even group size)."""
    target = c.get("adapter._target_", None)
    if not (isinstance(target, str) and target.endswith("contrastive.ZeroShotContrastive")):
        return
    top_k = c.get("adapter.top_k", [1, 5])
    if not isinstance(top_k, list) or not top_k or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1
                                                            for k in top_k) or 1 not in top_k:
        c.bad("adapter.top_k", top_k, "expected a list of ks >= 1 that includes 1 (val img2txt_acc@1 ranks checkpoints)")
        top_k = [1]
    candidates = c.integer("adapter.retrieval_candidates", 2, required=False)
    if candidates is not None and candidates <= max(top_k):
        c.bad("adapter.retrieval_candidates", candidates, f"acc@{max(top_k)} needs more than {max(top_k)} candidates "
                                                          f"(every query would be a hit); GATE ranks among 64")
    targets = c.get("dataset.targets", None)
    pairs = isinstance(targets, Mapping) and "contrast_pair" in targets.values()
    if pairs and isinstance(candidates, int) and candidates % 2:
        c.bad("adapter.retrieval_candidates", candidates, f"dataset {c.get('dataset.name', '?')} holds pairs of rows "
                                                          f"(a contrast_pair target): use an even number, e.g. 64")
    batch = c.get("data.batch_size", None)
    if isinstance(batch, int) and not isinstance(batch, bool) and batch == 1:
        c.bad("data.batch_size", batch, "a contrastive batch needs >= 2 image-caption pairs (one pair has no "
                                        "negative: its loss is 0 and nothing is learnt)")
    for split in ("val", "test"):
        cap = c.get(f"data.max_{split}_samples", None)
        if isinstance(cap, int) and not isinstance(cap, bool) and cap == 1:
            c.bad(f"data.max_{split}_samples", cap, "retrieval needs >= 2 rows (one candidate is always a hit)")
    eval_batch = c.get("data.eval_batch_size", None) or batch
    if isinstance(candidates, int) and isinstance(eval_batch, int) and not isinstance(eval_batch, bool) and \
            0 < eval_batch < candidates:
        warnings.warn(f"data.eval_batch_size={eval_batch} is smaller than adapter.retrieval_candidates={candidates}: "
                      f"each evaluation batch holds one whole candidate group of {candidates} rows", stacklevel=3)


def validate_run_config(cfg: Any) -> dict[str, Any]:
    """Check a composed ``run.yaml``; returns it as plain resolved data. Raises ConfigError listing every
    problem found."""
    plain = _resolved(cfg)
    c = _Checker(plain)
    c.integer("seed", 0)
    _required(c, "force", "keep_checkpoints", "evaluate_test")
    c.boolean("force")
    c.choice("keep_checkpoints", KEEP_CHECKPOINTS)
    c.boolean("evaluate_test")
    ensembles = c.get("ensembles")
    if ensembles is _MISSING:
        c.problems.append("ensembles is missing: expected a list of checkpoint counts, e.g. [1, 3, 5]")
    else:
        if not isinstance(ensembles, list) or not ensembles or not all(
                isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in ensembles):
            c.bad("ensembles", ensembles, "expected a non-empty list of checkpoint counts >= 1, e.g. [1, 3, 5] "
                                          "([1] tests the best checkpoint alone)")
    c.integer("data.batch_size", 1)
    c.integer("data.eval_batch_size", 1, optional=True)
    _check_loader(c, "data.")
    _check_compile(c)
    for split in SPLITS:
        cap = c.integer(f"data.max_{split}_samples", 1, optional=True)
        fam = _family_of(c)
        if split != "train" and isinstance(cap, int) and fam is not None and cap < fam.min_eval_examples:
            c.bad(f"data.max_{split}_samples", cap, f"a {fam.name} split needs >= {fam.min_eval_examples} examples "
                                                    f"({fam.min_eval_reason or 'its metrics are undefined on fewer'})")
    max_steps = c.integer("trainer.max_steps", 1)
    every = c.get("trainer.val_check_interval")
    if isinstance(every, bool) or not isinstance(every, (int, float)) or every <= 0 or \
            (isinstance(every, float) and every > 1):
        c.bad("trainer.val_check_interval", every, "expected a number of steps >= 1 (or a fraction of an epoch "
                                                   "in (0, 1])")
    elif isinstance(every, int) and max_steps is not None and every > max_steps:
        c.bad("trainer.val_check_interval", every, f"is larger than trainer.max_steps={max_steps}: no checkpoint "
                                                   f"would ever be validated")
    c.integer("trainer.log_every_n_steps", 1, required=False)
    c.choice("trainer.precision", PRECISIONS, optional=True)
    _check_layout(c)
    c.number("recipe.optimizer.lr", 0.0, low_open=True, required=False)
    c.number("recipe.optimizer.weight_decay", 0.0, required=False)
    _check_recipe(c)
    _check_adapter(c)
    adapter_classes = c.get("adapter.num_classes", None)
    dataset_classes = c.get("dataset.num_classes", None)
    if isinstance(adapter_classes, int) and isinstance(dataset_classes, int) and adapter_classes != dataset_classes:
        c.bad("adapter.num_classes", adapter_classes, f"must equal dataset.num_classes={dataset_classes}")
    c.choice("logger.mode", ("offline", "online", "disabled"))
    for key in ("grad_norms.every_n_steps", "grad_norms.depth_groups", "hardware.every_n_steps",
                "visuals.every_n_validations", "visuals.max_examples"):  # the logging callbacks (docs/logging.md)
        c.integer(f"callbacks.{key}", 1, required=False)
    for key in ("grad_norms.enabled", "hardware.enabled", "visuals.enabled", "count_flops"):
        c.boolean(f"callbacks.{key}")
    _check_dataset(c)
    _check_encoder_keys(c)
    _check_contrastive(c)
    _check_modality(c)
    _check_image_size(c)
    _check_paths(c)
    _check_known_keys(c, "run", sections=("data",))
    c.raise_if_any("gate-run config")
    return plain


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _check_compile(c: _Checker) -> None:
    """``compile``: false, true or a torch.compile mode, and one torch can honour here (dynamo on this Python and
    platform; on CUDA, Triton for the inductor backend)."""
    value = c.get("compile")
    if value is _MISSING:
        c.problems.append(f"compile is missing (false, true or one of {list(COMPILE_MODES)})")
        return
    if value is False:
        return
    if value is not True and value not in COMPILE_MODES:
        c.bad("compile", value, f"expected false, true or one of {list(COMPILE_MODES)}")
        return
    reason = compile_unavailable(c.get("trainer.accelerator", "auto"))
    if reason:
        c.bad("compile", value, f"torch cannot compile here: {reason}; set compile=false")


def compile_unavailable(accelerator: Any) -> str | None:
    """Why torch.compile cannot run for a run on ``accelerator`` here, or None."""
    import torch

    try:
        import torch._dynamo as dynamo
    except ImportError as err:  # pragma: no cover - a torch build without dynamo
        return f"torch._dynamo does not import ({err})"
    if not dynamo.is_dynamo_supported():
        return f"torch {torch.__version__} has no torch.compile support on this Python/platform"
    cuda = str(accelerator) in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    if cuda:
        from torch.utils._triton import has_triton

        if not has_triton():
            return "the inductor backend needs Triton on CUDA and it is not installed (pip install triton)"
    return None


def _check_loader(c: _Checker, prefix: str) -> None:
    """``num_workers`` (an integer >= 0 or auto) and ``pin_memory`` (true, false or auto) of a loader section."""
    from ..data.loading import AUTO, is_pin_memory_setting, is_workers_setting

    workers = c.get(f"{prefix}num_workers")
    if workers is _MISSING:
        c.problems.append(f"{prefix}num_workers is missing (an integer >= 0 or {AUTO})")
    elif not is_workers_setting(workers):
        c.bad(f"{prefix}num_workers", workers, f"expected an integer >= 0 or {AUTO}")
    pin = c.get(f"{prefix}pin_memory")
    if pin is _MISSING:
        c.problems.append(f"{prefix}pin_memory is missing (true, false or {AUTO})")
    elif not is_pin_memory_setting(pin):
        c.bad(f"{prefix}pin_memory", pin, f"expected true, false or {AUTO}")


def validate_score_config(cfg: Any) -> dict[str, Any]:
    """Check a composed ``score.yaml``; returns it as plain resolved data."""
    plain = _resolved(cfg)
    c = _Checker(plain)
    c.integer("seed", 0)
    _required(c, "force", "cache", "progress_bar", "split", "device")
    for key in ("force", "cache", "progress_bar"):
        c.boolean(key)
    c.choice("split", SPLITS)
    c.integer("batch_size", 1)
    _check_loader(c, "")
    device = c.get("device", None)
    if device is not None and not (isinstance(device, str) and (device in DEVICES or device.startswith("cuda:"))):
        c.bad("device", device, f"expected one of {list(DEVICES)} or cuda:<index>")
    max_samples = c.integer("max_samples", 2, optional=True)
    classes = c.get("dataset.num_classes", None)
    if isinstance(max_samples, int) and isinstance(classes, int) and max_samples < 2 * classes:
        c.bad("max_samples", max_samples, f"the scores need at least 2 samples per class: >= {2 * classes} for "
                                          f"the {classes} classes of {c.get('dataset.name', 'the dataset')} "
                                          f"(or null for the whole split)")
    metrics = c.get("metrics", None)
    if metrics is not None and not isinstance(metrics, (str, list)):
        c.bad("metrics", metrics, "expected a list of score names or null (every applicable score)")
    elif metrics is not None:
        from ..transferability import SCORES

        names = [metrics] if isinstance(metrics, str) else list(metrics)
        unknown = [m for m in names if m not in SCORES]
        if unknown:
            c.bad("metrics", metrics, f"unknown metric(s) {unknown}; known scores: {sorted(SCORES)}")
        headless = getattr(_target_class(c.get("encoder", {}) or {}), "num_source_classes", 0) is None
        need_head = [m for m in names if m in SCORES and SCORES[m].needs == "source_probs"]
        if headless and need_head:
            c.bad("metrics", metrics, f"{need_head} need the source classification head that encoder "
                                      f"{c.get('encoder.name', '?')} does not have; drop them")
    _check_dataset(c)
    _check_encoder_keys(c)
    _check_modality(c)
    _check_image_size(c)
    _check_paths(c)
    _check_known_keys(c, "score")
    c.raise_if_any("gate-score config")
    return plain


def validate_tier_config(cfg: Any) -> dict[str, Any]:
    """Check a composed ``tier_run.yaml`` (gate-tier's settings and its ``launcher:`` section, declared in
    :mod:`gate.settings`); returns it as plain resolved data. The tier file itself is checked when it is loaded
    (:func:`gate.tiers.spec.parse_tier`)."""
    from ..settings import LAUNCHER_SETTINGS, TIER_RUN_SETTINGS, check_section

    plain = _resolved(cfg)
    c = _Checker(plain)
    c.problems.extend(check_section("", plain, TIER_RUN_SETTINGS, owner="gate-tier", required=True))
    c.problems[:] = [p.removeprefix(".") for p in c.problems]  # top-level keys: no section prefix
    overrides = plain.get("overrides")
    if isinstance(overrides, list):
        bad = [o for o in overrides if isinstance(o, str) and "=" not in o]
        if bad:
            c.bad("overrides", overrides, f"every item must be a gate-run override key=value (not {bad})")
    launcher = plain.get("launcher")
    if isinstance(launcher, Mapping):
        c.problems.extend(check_section("launcher", launcher, LAUNCHER_SETTINGS, owner="gate-tier's launcher",
                                        required=True))
    c.raise_if_any("gate-tier config")
    return plain

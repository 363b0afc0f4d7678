"""One validation pass over a composed config, before any model or data is built.

Each section's own keys are declared once, in :mod:`gate.settings` (types, ranges, unknown keys: one :func:`check`
for every section); a dataset is checked by :func:`gate.data.spec.dataset_problems`; an adapter's rules that read
other sections are its ``check_config`` hook. What is left here are the rules that cross sections: the adapter
against the dataset's task, the encoder against the dataset's modality and the image size, the recipe against the
encoder's architecture, the batch against the process count, a cap against the task family's minimum, a score
against the encoder's head. Every problem is reported together in one :class:`~gate.errors.ConfigError` line.
Checks that need the data (:func:`gate.data.spec.check_split`) run before the model is built.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from .. import settings
from ..data.spec import DatasetSpec, checked_spec
from ..errors import ConfigError
from ..paths import run_folder
from ..results import experiment_id
from ..settings import Int, check, show, target_of

# Below this input resolution image benchmarks measure the resize, not the encoder: warn.
IMAGE_SIZE_FLOOR = 32


_raise_if_any = settings.raise_problems


def resolved(cfg: Any) -> dict[str, Any]:
    """The config as plain data (every command's parse reads it so); an interpolation that cannot resolve is a
    config error naming it."""
    if isinstance(cfg, Mapping) and not OmegaConf.is_config(cfg):
        return dict(cfg)
    try:
        plain = OmegaConf.to_container(cfg, resolve=True)
    except Exception as err:  # noqa: BLE001 - OmegaConf raises several types for broken interpolations
        raise ConfigError(f"the config does not resolve: {' '.join(str(err).split())}") from None
    plain.pop("hydra", None)
    return plain


def resolved_config(cfg: DictConfig) -> dict[str, Any]:
    """The config as plain resolved data, without Hydra's own node, with absolute output paths."""
    root = cfg.paths.get("root") if "paths" in cfg else None
    absolute = str(Path(root).expanduser().resolve()) if root else root
    if absolute != root:  # (a tier's expansion gives the absolute root already: no copy of each config then)
        cfg = copy.deepcopy(cfg)
        with open_dict(cfg):  # anchor every derived path (logger dirs included) at an absolute root
            cfg.paths.root = absolute
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("hydra", None)
    if isinstance(plain.get("paths"), dict):
        # absolute, but links kept as given: a message names the path the user set (records.jsonl, a link to ...)
        # (an empty path stays empty: the output-root check refuses it, where abspath would make it the cwd)
        plain["paths"] = {k: os.path.abspath(os.path.expanduser(v)) if isinstance(v, str) and v.strip() else v
                          for k, v in plain["paths"].items()}
    return plain


def _section(plain: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = plain.get(key)
    return value if isinstance(value, Mapping) else {}


def check_output_root(root: Any) -> Path:
    """``paths.root`` as an absolute directory that exists (created) and is writable, or a ConfigError."""
    if not isinstance(root, str) or not root.strip():
        raise ConfigError(f"paths.root={show(root)} is invalid: expected a directory for gate's outputs "
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


def _paths(plain: Mapping[str, Any], root: Any = None) -> list[str]:
    """The output root's problem (``root``: as the user gave it, for the message, where ``plain`` holds it made
    absolute)."""
    try:  # (a missing paths group is the schema's to report)
        if "paths" in plain:
            check_output_root(root if root is not None else _section(plain, "paths").get("root"))
    except ConfigError as err:
        return [str(err)]
    return []


def _encoder(plain: Mapping[str, Any], recipe: bool) -> list[str]:
    """The encoder's own keys, its modality against the dataset's (a patch stem for text/audio bodies), its
    minimum image size, and (gate-run) the recipe against its architecture."""
    encoder, dataset = _section(plain, "encoder"), _section(plain, "dataset")
    if "encoder" not in plain:
        return []
    problems = check(encoder, settings.encoder_section(), "encoder")
    cls, name = target_of(encoder), encoder.get("name", "?")
    modality = dataset.get("modality")
    if (cls is not None and modality and hasattr(cls, "accepts") and getattr(cls, "modalities", None)
            and not cls.accepts(modality)):
        from ..encoders.stems import STEM_MODALITIES

        stem = _section(encoder, "stem")
        if getattr(cls, "takes_embeddings", False) and modality in STEM_MODALITIES:
            patch, size = stem.get("patch_size"), stem.get("image_size") or plain.get("image_size")
            if Int(1).valid(patch) and Int(1).valid(size) and patch > size:  # a patch stem feeds the body images
                problems.append(f"encoder.stem.patch_size={patch} is invalid: must be <= the image size {size}")
        else:
            stems = (f" (a patch stem feeds {list(STEM_MODALITIES)} to text/audio bodies only)"
                     if modality in STEM_MODALITIES or getattr(cls, "takes_embeddings", False) else "")
            problems.append(f"encoder={name} takes {sorted(cls.modalities)} input, but dataset="
                            f"{dataset.get('name', '?')} is {modality}: choose an encoder that takes {modality}{stems}")
    if modality in ("image", "video"):
        problems += _image_size(plain, encoder, cls)
    arch, chosen = encoder.get("architecture"), _section(plain, "recipe").get("name")
    body = settings.recipe_architecture(chosen) if isinstance(chosen, str) else None
    if recipe and arch in settings.recipe_architectures() and body in settings.recipe_architectures() and body != arch:
        problems.append(f"encoder.architecture={arch!r} does not match recipe={chosen} (the recipe of {body} bodies; "
                        f"encoder {name} is a {arch} body): add recipe={arch}, the recipe follows the architecture, or "
                        f"set encoder.architecture={body} if the body is {body}")
    return problems


def _image_size(plain: Mapping[str, Any], encoder: Mapping[str, Any], cls: type | None) -> list[str]:
    own = encoder.get("image_size") not in (None, plain.get("image_size"))
    size, key = (encoder["image_size"], "encoder.image_size") if own else (plain.get("image_size"), "image_size")
    if not Int(1).valid(size):
        return []  # the schema reports it
    minimum = int(getattr(cls, "min_image_size", 1) or 1)
    if size < minimum:
        return [f"{key}={size} is invalid: encoder {encoder.get('name', 'the encoder')} needs at least {minimum} px "
                f"(its total stride); use >= {minimum}"]
    if size < IMAGE_SIZE_FLOOR:
        warnings.warn(f"{key}={size} is below {IMAGE_SIZE_FLOOR} px: the result measures the resize more than "
                      f"the encoder", stacklevel=4)
    return []


def _dataset(plain: Mapping[str, Any]) -> list[str]:
    from ..data.spec import dataset_problems  # the one dataset checker: schema, source block, task family

    return dataset_problems(plain["dataset"]) if isinstance(plain.get("dataset"), Mapping) else []


def _adapters_for(task: str) -> list[str]:
    """The family's default adapter config, then the other packaged ones (conf/adapter/) whose class serves ``task``."""
    import yaml
    from hydra.utils import get_class

    from ..families import family
    from ..settings import conf_dir

    try:
        names = [family(task).default_adapter]
    except ValueError:  # an unknown task is reported with the dataset
        return []
    for path in sorted((conf_dir() / "adapter").glob("*.yaml")):
        try:
            target = (yaml.safe_load(path.read_text()) or {}).get("_target_")
            if task in getattr(get_class(target), "tasks", ()) and path.stem not in names:
                names.append(path.stem)
        except Exception:  # noqa: BLE001 - a suggestion only
            continue
    return names


def _adapter(plain: Mapping[str, Any], world: int) -> list[str]:
    """The adapter section against its class's own table (gate.adapters: ``settings``), its task families against
    the dataset's, and its ``check_config`` hook (its rules on other sections)."""
    adapter, dataset = _section(plain, "adapter"), _section(plain, "dataset")
    cls = target_of(adapter)  # importing it registers a task family of the user's own
    if cls is None:
        return []
    name = adapter.get("name") or cls.__name__
    task, tasks, problems = dataset.get("task"), getattr(cls, "tasks", frozenset()), []
    if isinstance(task, str) and tasks and task not in tasks:
        from ..families import family

        needs = sorted({k for t in tasks for k in family(t).targets})
        fits = _adapters_for(task)
        problems.append(f"adapter={name} serves {sorted(tasks)} tasks (targets of kind {needs}), but "
                        f"dataset={dataset.get('name', '?')} is a {task!r} task (targets "
                        f"{dict(dataset.get('targets') or {}) or 'default'}): "
                        + (f"use adapter={' or adapter='.join(fits)}" if fits else "choose an adapter for it"))
    section = settings.adapter_section(cls, name)
    if section is not None:
        problems += check(adapter, section, "adapter")
    problems += _loss_splits_fact(adapter, cls, world)
    if callable(getattr(cls, "check_config", None)):
        problems += cls.check_config(plain)
    classes, declared = adapter.get("num_classes"), dataset.get("num_classes")
    if Int().valid(classes) and Int().valid(declared) and classes != declared:
        problems.append(f"adapter.num_classes={classes} is invalid: must equal dataset.num_classes={declared}")
    return problems


def _loss_splits_fact(adapter: Mapping[str, Any], cls: type, world: int) -> list[str]:
    """The adapter YAML's ``loss_splits_across_devices`` (what the experiment id reads, :data:`settings.ADAPTER_FACTS`)
    against its class's: a YAML that contradicts the class is refused; one that does not state it counts as false,
    refused only where it matters (several processes: ``world``) and the class says true."""
    key = "loss_splits_across_devices"
    stated, actual = adapter.get(key), bool(getattr(cls, key, False))
    if stated is not None and not isinstance(stated, bool):
        return [f"adapter.{key}={show(stated)} is invalid: expected true or false"]
    if stated is None and not (actual and world > 1):
        return []
    if bool(stated) == actual:
        return []
    given = f"adapter.{key} is missing" if stated is None else f"adapter.{key}={str(stated).lower()} is invalid"
    return [f"{given}: {cls.__name__}'s loss {'is' if actual else 'is not'} a mean "
            f"over examples (its class says {key} = {actual}): write {key}: {str(actual).lower()} in the adapter's "
            f"YAML, which the experiment id reads"]


def _family_caps(plain: Mapping[str, Any]) -> list[str]:
    """An evaluation cap below what the dataset's task family can score (multi-label AUC needs both labels)."""
    from ..families import family

    try:
        fam = family(_section(plain, "dataset").get("task"))
    except (ValueError, TypeError):
        return []
    data, problems = _section(plain, "data"), []
    for split in ("val", "test"):
        cap = data.get(f"max_{split}_samples")
        why = fam.min_eval_reason or "its metrics are undefined on fewer"
        if Int(1).valid(cap) and cap < fam.min_eval_examples:
            problems.append(f"data.max_{split}_samples={cap} is invalid: a {fam.name} split needs >= "
                            f"{fam.min_eval_examples} examples ({why})")
    return problems


def _layout(plain: Mapping[str, Any], world: int) -> list[str]:
    """A global batch too small to give every process (``world``: trainer.devices x trainer.num_nodes) an example."""
    # run after the run's own sections passed (validate_run_config): data.batch_size is valid here
    batch = _section(plain, "data")["batch_size"]
    if batch < world:
        return [f"data.batch_size={batch} is invalid: it is the global batch, shared out to {world} processes "
                f"(trainer.devices x trainer.num_nodes): it must be >= {world}"]
    return []


def _compile(plain: Mapping[str, Any]) -> list[str]:
    value = plain.get("compile")
    if not settings.RUN.settings["compile"].valid(value) or value is False:
        return []
    reason = compile_unavailable(_section(plain, "trainer").get("accelerator"))
    return [f"compile={show(value)} is invalid: torch cannot compile here: {reason}; set compile=false"] if reason else []


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


def validate_run_config(cfg: Any, root: Any = None) -> dict[str, Any]:
    """Check a composed ``run.yaml``; returns it as plain resolved data. Raises ConfigError listing every problem
    of the run's own settings, else every problem of its adapter, dataset, encoder and their rules across sections
    (``root``: the output root as the user gave it, where ``cfg`` holds it made absolute)."""
    plain = resolved(cfg)
    problems = check(plain, settings.RUN)
    _raise_if_any(problems, "gate-run config")  # at once: the checks below import torch (seconds)
    from ..parallel import requested_world_size

    world = requested_world_size(plain["trainer"])  # the processes the run asks for (valid: the run's check passed)
    problems += _adapter(plain, world)  # first: importing the adapter registers a task family of the user's own
    problems += _dataset(plain) + _encoder(plain, recipe=True) + _family_caps(plain) + _layout(plain, world)
    problems += _compile(plain) + _paths(plain, root)
    _raise_if_any(problems, "gate-run config")
    return plain


def validate_score_config(cfg: Any, root: Any = None) -> dict[str, Any]:
    """Check a composed ``score.yaml``; returns it as plain resolved data."""
    plain = resolved(cfg)
    _raise_if_any(check(plain, settings.SCORE), "gate-score config")  # at once, as gate-run's
    problems = []
    max_samples, classes = plain.get("max_samples"), _section(plain, "dataset").get("num_classes")
    of = _section(plain, "dataset").get("name", "the dataset")
    if Int(2).valid(max_samples) and Int(1).valid(classes) and max_samples < 2 * classes:
        problems.append(f"max_samples={max_samples} is invalid: the scores need at least 2 samples per class: >= {2 * classes} "
                        f"for the {classes} classes of {of} (or null for the whole split)")
    metrics = plain.get("metrics")
    if metrics is not None and settings.SCORE.settings["metrics"].valid(metrics):
        from ..transferability import SCORES

        names = [metrics] if isinstance(metrics, str) else list(metrics)
        unknown = [m for m in names if m not in SCORES]
        if unknown:
            problems.append(f"metrics={show(metrics)} is invalid: unknown metric(s) {unknown}; known scores: "
                            f"{sorted(SCORES)}")
        headless = getattr(target_of(_section(plain, "encoder")), "num_source_classes", 0) is None
        need_head = [m for m in names if m in SCORES and SCORES[m].needs == "source_probs"]
        if headless and need_head:
            problems.append(f"metrics={show(metrics)} is invalid: {need_head} need the source classification head "
                            f"that encoder {_section(plain, 'encoder').get('name', '?')} does not have; drop them")
    problems += _dataset(plain) + _encoder(plain, recipe=False) + _paths(plain, root)
    _raise_if_any(problems, "gate-score config")
    return plain


@dataclasses.dataclass(frozen=True)
class Checked:
    """A composed config checked once (its sections, and every rule across them), resolved once to plain data with
    absolute output paths, and typed: what gate-run's and gate-score's stages take, never checked again.

    run: the typed config (:data:`gate.settings.RunConfig` / :data:`~gate.settings.ScoreConfig`), which the stage
        reads; also a mapping of ``config``.
    config: the plain data it was parsed from (what the experiment id hashes and what a ``_target_`` is handed).
    spec: the dataset's :class:`~gate.data.spec.DatasetSpec`, built once.
    experiment: its experiment id (:func:`gate.results.experiment_id` of ``config``), hashed once.
    run_dir: the experiment's folder under ``paths.runs`` (its lock, checkpoints and logs)."""

    command: str                 # gate-run | gate-score
    config: dict[str, Any]
    run: settings.Parsed
    spec: DatasetSpec
    experiment: str
    run_dir: Path
    uses_lightning: bool = True  # the stage trains or extracts features: Lightning's chatter is quieted first


def _plain(cfg: Any) -> tuple[dict[str, Any], Any]:
    """A composed config resolved once (:func:`resolved_config`: absolute output paths), and its output root as the
    user gave it (what a message about it names); an interpolation that cannot resolve is a config error naming it.
    Plain data is taken as it is."""
    if not OmegaConf.is_config(cfg):
        return dict(cfg), None
    try:
        return resolved_config(cfg), OmegaConf.select(cfg, "paths.root")
    except Exception as err:  # noqa: BLE001 - OmegaConf raises several types for broken interpolations
        raise ConfigError(f"the config does not resolve: {' '.join(str(err).split())}") from None


def _checked(command: str, section: settings.Section, name: str, config: dict[str, Any]) -> Checked:
    # the dataset section passed the validation just before (the one dataset check): its spec is built, not re-checked
    run = settings.build(section, config, name)
    experiment = experiment_id(config, "finetune" if command == "gate-run" else "score")
    return Checked(command, config, run, checked_spec(config["dataset"]), experiment,
                   run_folder(run.paths.runs, experiment))


def parse_run(cfg: Any) -> Checked:
    """A composed ``run.yaml``, resolved once (:func:`_plain`), checked (:func:`validate_run_config`) and typed."""
    config, root = _plain(cfg)
    validate_run_config(config, root)
    return _checked("gate-run", settings.RUN, "RunConfig", config)


def parse_score(cfg: Any) -> Checked:
    """A composed ``score.yaml``, resolved once, checked (:func:`validate_score_config`) and typed."""
    config, root = _plain(cfg)
    validate_score_config(config, root)
    return _checked("gate-score", settings.SCORE, "ScoreConfig", config)


def validate_command_config(cfg: Any, section: settings.Section, what: str) -> dict[str, Any]:
    """Check a composed root config against its declared ``section`` (gate-analysis' ANALYSIS, gate-eevee's
    EEVEE_COMMAND, gate-data's DATA_COMMAND): a key nothing reads (``+partial_tier=true``) or a value of the wrong
    type is one line before any work; returns it as plain resolved data."""
    plain = resolved(cfg)
    _raise_if_any(check(plain, section), what)
    return plain


def validate_tier_config(cfg: Any) -> dict[str, Any]:
    """Check a composed ``tier_run.yaml`` (gate-tier's settings and its ``launcher:`` section, declared in
    :mod:`gate.settings`); returns it as plain resolved data. The tier file itself is checked when it is loaded
    (:func:`gate.tiers.spec.parse_tier`)."""
    plain = resolved(cfg)
    problems = check(plain, settings.TIER_RUN)
    overrides = plain.get("overrides")
    if settings.TIER_RUN.settings["overrides"].valid(overrides):
        bad = [o for o in overrides if "=" not in o]
        if bad:
            problems.append(f"overrides={show(overrides)} is invalid: every item must be a gate-run override "
                            f"key=value (not {bad})")
    _raise_if_any(problems, "gate-tier config")
    return plain

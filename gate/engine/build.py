"""Hydra instantiation at the edge: config sections in, engine objects out.

Config sections carry a few metadata keys (``name``, ``architecture``, ...) next to ``_target_``; they describe
the component for records and docs and are not constructor arguments, so they are dropped here.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
import hydra.errors
from omegaconf import OmegaConf

from ..data.loading import resolve_num_workers, resolve_pin_memory, uses_cuda
from ..data.manifest import checked_recipe, manifest_dir_of
from ..data.spec import DatasetSpec, spec_from_config
from ..data.splits import cap_unit, make_splits
from ..errors import GateError
from ..families import family
from ..parallel import requested_world_size
from ..settings import ADAPTER_FACTS, ENCODER_FACTS, META_KEYS

if TYPE_CHECKING:  # the training stack (Lightning, torchmetrics: seconds), imported by the builders that need it:
    # a dataset's spec and splits (gate-data, a run's data before it trains) are built without it
    from ..adapters.base import Adapter
    from ..data.datamodule import GATEDataModule
    from ..encoders.base import GATEEncoder
    from .model import GATEModel


def plain_section(section: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    """``section`` as every builder here takes it: plain data, a section of the config its command parsed once
    (:func:`gate.engine.validate.parse_run`'s ``config``). A composed DictConfig is refused in one line rather than
    resolved again at each hop: resolve it once where it is composed."""
    if OmegaConf.is_config(section):
        raise TypeError(f"{what} takes plain data (a section of a checked config), got a composed "
                        f"{type(section).__name__}: resolve the config once where it is composed "
                        f"(gate.engine.validate.parse_run(cfg).config, or OmegaConf.to_container(cfg, resolve=True))")
    return section


def instantiate_component(section: Mapping[str, Any], **extra: Any) -> Any:
    """``hydra.utils.instantiate`` of a config section (plain data) minus its metadata keys."""
    plain = {k: v for k, v in plain_section(section, "instantiate_component").items()
             if k == "_target_" or k not in (*META_KEYS, *ENCODER_FACTS, *ADAPTER_FACTS)}
    if "_target_" not in plain:
        raise ValueError(f"config section {section.get('name', '?')!r} has no _target_ to instantiate")
    return hydra.utils.instantiate(plain, **extra, _convert_="all")


def build_encoder(encoder_cfg: Mapping[str, Any], modality: str | None = None, seed: int | None = None) -> GATEEncoder:
    """The encoder of ``encoder_cfg``; for a ``modality`` it does not take but its body can (a text or audio
    body fed images), wrapped behind the patch stem of the config's ``stem:`` section (modality shifting,
    :mod:`gate.encoders.stems`).

    ``seed``: every random initialisation (a scratch encoder's weights, a new stem, a reset head) is drawn from
    ``torch.manual_seed(seed)`` inside a forked CPU generator, so the same seed builds the same encoder and the
    process-wide generator is left as it was. Fine-tuning seeds the process with ``seed_everything(seed)`` just
    before building, which draws the very same weights; gate-score passes its experiment's seed here."""
    if seed is None:
        return _build_encoder(encoder_cfg, modality)
    import torch

    with torch.random.fork_rng(devices=[]):  # encoders are built on the CPU
        torch.manual_seed(int(seed))
        return _build_encoder(encoder_cfg, modality)


def _build_encoder(encoder_cfg: Mapping[str, Any], modality: str | None) -> GATEEncoder:
    from ..encoders.base import GATEEncoder
    from ..encoders.stems import needs_stem, stem_encoder

    plain = dict(plain_section(encoder_cfg, "build_encoder"))
    stem_cfg = plain.pop("stem", None)
    try:
        encoder = instantiate_component(plain)
    except hydra.errors.InstantiationException as err:
        if isinstance(err.__cause__, GateError):  # e.g. weights not available offline: the one clear line
            raise err.__cause__ from None
        raise
    if not isinstance(encoder, GATEEncoder):
        raise TypeError(f"encoder {encoder_cfg.get('name', '?')!r} built a {type(encoder).__name__}, "
                        f"which is not a gate.encoders.GATEEncoder")
    if needs_stem(encoder, modality):
        encoder = stem_encoder(encoder, stem_cfg, plain.get("image_size"))
    return encoder


def build_spec(dataset_cfg: Mapping[str, Any]) -> DatasetSpec:
    """The spec of a ``dataset`` section (plain data; :func:`gate.data.spec.spec_from_config`, the one reader)."""
    return spec_from_config(plain_section(dataset_cfg, "build_spec"))


def build_splits(dataset_cfg: Mapping[str, Any], seed: int, max_samples: Mapping[str, int | None] | None = None,
                 manifest_dir: str | Path | None = None, force: bool = False, spec: DatasetSpec | None = None):
    """The train/val/test splits of a dataset config: its builder's source splits through the split manifest
    (computed once from ``dataset.splits.seed`` and kept in ``manifest_dir``; in memory when None), then the
    caps of ``max_samples`` (the train cap seeded by the run ``seed``; whole groups of :func:`cap_unit`'s column).
    ``spec``: the dataset's spec where the caller has it (built here when not given)."""
    cfg = plain_section(dataset_cfg, "build_splits")
    return dataset_splits(spec if spec is not None else build_spec(cfg), cfg, seed, max_samples, manifest_dir, force)


def dataset_splits(spec: DatasetSpec, dataset: Mapping[str, Any], seed: int,
                   max_samples: Mapping[str, int | None] | None = None, manifest_dir: str | Path | None = None,
                   force: bool = False):
    """:func:`build_splits` of a dataset section (plain or composed) whose ``spec`` its caller has built (a run's one
    spec)."""
    raw = hydra.utils.instantiate(dataset["builder"], _convert_="all")
    closed = family(spec.task).closed_label_set  # the train split must then hold every declared class
    # the dataset section (its splits: block with it) was checked once, by the run's validation or build_spec
    recipe = checked_recipe(dataset.get("splits"), stratify=spec.label_column)
    return make_splits(raw, seed=seed, recipe=recipe, max_samples=dict(max_samples or {}),
                       num_classes=spec.num_classes if closed else None, name=spec.name, manifest_dir=manifest_dir,
                       revision=(dataset.get("source") or {}).get("revision"), hash_columns=list(spec.targets),
                       force=force, cap_group_column=cap_unit(spec.task, spec.targets, recipe["group"],
                                                              spec.label_column))


def run_splits(run: Any, spec: DatasetSpec):
    """The train/val/test splits of a gate-run's checked config ``run`` (:data:`gate.settings.RunConfig`; a composed
    config reads the same) for ``spec``, the run's one spec of its dataset: :func:`dataset_splits` with the run's
    seed, its ``data.max_*_samples`` caps and its manifest folder."""
    data = run.data
    caps = {"train": data.max_train_samples, "val": data.max_val_samples, "test": data.max_test_samples}
    return dataset_splits(spec, run.dataset, int(run.seed), caps, manifest_dir_of(run))


def build_datamodule(run: Any, encoder: GATEEncoder, adapter: Adapter, spec: DatasetSpec,
                     splits: Mapping[str, Any] | None = None) -> GATEDataModule:
    """The DataModule of a gate-run's checked config ``run`` for ``spec``, the run's one spec of its dataset (the
    adapter's), as seen by ``encoder`` through ``adapter``, over ``splits`` (:func:`run_splits`, built here when not
    given). Every value from the config (conf/run.yaml states the defaults, once); validation has checked them."""
    from ..data.datamodule import GATEDataModule

    encoder.check_modality(spec.modality, spec.name)
    data = run.data
    splits = run_splits(run, spec) if splits is None else splits
    cuda = uses_cuda(run.trainer)
    pin_memory, note = resolve_pin_memory(data.pin_memory, cuda=cuda)
    if note:
        print(f"[gate] data.{note}")
    workers = resolve_num_workers(data.num_workers, cuda=cuda,
                                  devices=requested_world_size(run.trainer) // int(run.trainer.get("num_nodes") or 1))
    return GATEDataModule(spec, splits, encoder, adapter, batch_size=int(data.batch_size),
                          eval_batch_size=data.eval_batch_size, num_workers=workers, seed=int(run.seed),
                          pin_memory=pin_memory)


def build_adapter(adapter_cfg: Mapping[str, Any], encoder: GATEEncoder, spec: DatasetSpec) -> Adapter:
    """The adapter of ``adapter_cfg`` for this encoder and dataset. Its constructor receives, by parameter name,
    what it asks for: ``feature_dim``, ``token_dim``, ``level_dims`` (the encoder's widths), ``spec`` (the
    dataset's task spec)."""
    from ..adapters.base import Adapter

    target = plain_section(adapter_cfg, "build_adapter").get("_target_")
    params = inspect.signature(hydra.utils.get_class(target)).parameters if isinstance(target, str) else {}
    offered: dict[str, Any] = {"feature_dim": encoder.feature_dim, "spec": spec}
    if {"token_dim", "level_dims"} & set(params):
        offered.update(encoder.output_dims())
    # Partial first: the offered objects (a DatasetSpec) are handed to the constructor as they are, never
    # through Hydra's config conversion.
    factory = instantiate_component(adapter_cfg, _partial_=True)
    adapter = factory(**{k: v for k, v in offered.items() if k in params})
    if not isinstance(adapter, Adapter):
        raise TypeError(f"adapter {adapter_cfg.get('name', '?')!r} built a {type(adapter).__name__}, "
                        f"which is not a gate.adapters.Adapter")
    adapter.check_compatible(spec, encoder)
    return adapter


def build_model(recipe: Any, encoder: GATEEncoder, adapter: Adapter, compile: bool | str = False) -> GATEModel:
    """The LightningModule of a run: ``encoder`` through ``adapter``, trained by ``recipe`` (the run's typed
    recipe: its optimizer and scheduler sections become the partials the module calls), the encoder compiled when
    ``compile`` asks (true, or a torch.compile mode torch can honour here: the parse checked it)."""
    from .model import GATEModel

    model = GATEModel(encoder, adapter,
                      optimizer=hydra.utils.instantiate(recipe.optimizer.as_dict(), _convert_="all"),
                      scheduler=hydra.utils.instantiate(recipe.scheduler.as_dict(), _convert_="all")
                      if recipe.scheduler else None,
                      scheduler_interval=recipe.scheduler_interval, scheduler_monitor=recipe.scheduler_monitor,
                      freeze_encoder=recipe.freeze_encoder)
    if compile is not False:
        model.encoder.compile(**({} if compile is True else {"mode": compile}))
    return model

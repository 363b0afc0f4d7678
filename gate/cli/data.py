"""gate-data: list the datasets, prepare one (fetch when online, verify, write its split manifest), verify one.

    gate-data list
    gate-data prepare dataset=cifar100 [dataset.data_dir=/scratch/cifar100] [force=true]
    gate-data verify dataset=cifar100

A small argparse front takes the action; the rest are Hydra overrides composed with ``conf/data.yaml`` through
Hydra's compose API (the same config groups as gate-run, so ``paths.root=...`` and ``dataset.*`` work alike).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gate.cli.common import prepare_process, run_cli

CMD = "gate-data"


def compose(overrides: Sequence[str]) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    with initialize_config_module("gate.conf", version_base=None):
        return hydra_compose("data", overrides=list(overrides))


def dataset_keys() -> list[str]:
    """Every dataset config shipped in conf/dataset (read generically: new benchmarks appear by themselves)."""
    return sorted(p.name[:-5] for p in resources.files("gate.conf.dataset").iterdir() if p.name.endswith(".yaml"))


def _plain(cfg: DictConfig, key: str, default: Any = None) -> Any:
    value = OmegaConf.select(cfg, key, default=default)
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def status_of(cfg: DictConfig) -> tuple[str, dict[str, Any]]:
    """(status, facts) of a composed dataset: prepared / on disk / packaged / downloadable / needs credentials /
    unavailable offline."""
    from gate.build import build_spec, manifest_dir_of
    from gate.data import hub
    from gate.data.manifest import manifest_path, recipe_of

    ds = cfg.dataset
    source = _plain(cfg, "dataset.source") or {}
    facts = {"key": ds.name, "family": ds.get("family", ""), "adapter": cfg.adapter.get("name", "?"),
             "source": hub.source_label(source) if source else "packaged / generated offline",
             "access": source.get("access", "open"), "size": source.get("size", "small")}
    if not source:
        return "packaged (offline)", facts
    spec = build_spec(ds)
    recipe = recipe_of(_plain(cfg, "dataset.splits"), spec.label_column)
    manifest = manifest_path(manifest_dir_of(cfg), spec.name, recipe)
    data_dir = Path(str(ds.get("data_dir") or ""))
    on_disk = data_dir.is_dir() and any(data_dir.iterdir())
    if on_disk:
        return ("prepared" if manifest.is_file() else "on disk (no manifest yet)"), facts
    if source.get("access") in ("registration",) or source.get("kind") == "registration":
        return "needs registration", facts
    if not hub.has_credentials(source):
        return "needs credentials", facts
    if hub.is_offline():
        return "unavailable offline", facts
    return "downloadable", facts


def do_list(overrides: Sequence[str]) -> None:
    rows = []
    for key in dataset_keys():
        cfg = compose([*overrides, f"dataset={key}"])
        status, facts = status_of(cfg)
        rows.append({**facts, "status": status})
    cols = ("key", "family", "adapter", "access", "size", "status", "source")
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(width[c]) for c in cols))
    print(f"[gate] {len(rows)} datasets; local copies under {compose(list(overrides)).paths.data}/<key> "
          f"(or dataset.data_dir=...)")


def compose_dataset(overrides: Sequence[str], action: str) -> DictConfig:
    from gate.errors import ConfigError

    names = [o.split("=", 1)[1] for o in overrides if o.startswith("dataset=")]
    if not names:
        raise ConfigError(f"gate-data {action} needs dataset=<key>; known: {', '.join(dataset_keys())}")
    if names[-1] not in dataset_keys():
        raise ConfigError(f"dataset={names[-1]} is not a known dataset; known: {', '.join(dataset_keys())}")
    return compose(overrides)


def do_prepare(overrides: Sequence[str]) -> None:
    from gate.build import build_splits, manifest_dir_of
    from gate.data import hub
    from gate.errors import ConfigError

    cfg = compose_dataset(overrides, "prepare")
    prepare_process(cfg)
    source = _plain(cfg, "dataset.source") or {}
    problems = hub.source_problems(source) if source else []
    if problems:
        raise ConfigError(f"dataset {cfg.dataset.name!r}: its source block is invalid: {'; '.join(problems)} "
                          f"(the schema: gate/data/hub.py)")
    force = bool(cfg.get("force", False))
    data_dir = Path(str(cfg.dataset.get("data_dir") or ""))
    if source:
        present = data_dir.is_dir() and any(data_dir.iterdir())
        if not present or (force and source.get("kind") in ("hf", "url")):
            print(f"[gate] fetching {cfg.dataset.name} ({hub.source_label(source)}) into {data_dir} ...", flush=True)
            hub.fetch(cfg.dataset.name, source, data_dir)
    print(f"[gate] reading {cfg.dataset.name} and writing its split manifest ...", flush=True)
    where = manifest_dir_of(cfg)
    splits = build_splits(cfg.dataset, seed=0, manifest_dir=where, force=force)
    sizes = ", ".join(f"{n} {len(s)}" for n, s in splits.items())
    print(f"[gate] {cfg.dataset.name}: {sizes}")
    if source:
        print(f"[gate] data:      {data_dir}")
    print(f"[gate] manifests: {where}")


def do_verify(overrides: Sequence[str]) -> None:
    import hydra

    from gate.build import build_spec, manifest_dir_of, to_plain
    from gate.data.manifest import check_manifest, manifest_path, read_manifest, recipe_of, source_fingerprint
    from gate.errors import GateError

    cfg = compose_dataset(overrides, "verify")
    prepare_process(cfg)
    dataset = to_plain(cfg.dataset)
    spec = build_spec(dataset)
    splits_cfg = dataset.get("splits") or {}
    recipe = recipe_of(splits_cfg, spec.label_column)
    path = manifest_path(manifest_dir_of(cfg), spec.name, recipe)
    if not path.is_file():
        raise GateError(f"dataset {spec.name!r} has no split manifest at {path}; run `gate-data prepare "
                        f"dataset={spec.name}` first")
    raw = hydra.utils.instantiate(dataset["builder"], _convert_="all")
    columns = [c for c in (spec.label_column, recipe.get("group"), *spec.targets) if c]
    source = source_fingerprint(raw, revision=(dataset.get("source") or {}).get("revision"), columns=columns)
    manifest = read_manifest(path, spec.name)
    check_manifest(manifest, raw, spec.name, path=path, source=source)
    sizes = ", ".join(f"{n} {len(manifest[n])} (from source {manifest['from'][n]})" for n in ("train", "val", "test"))
    print(f"[gate] {spec.name}: manifest {path} matches the source (hash {source['hash']}); disjoint; {sizes}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=CMD, description="List, prepare and verify gate datasets.")
    parser.add_argument("action", choices=("list", "prepare", "verify"))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. dataset=cifar100 dataset.data_dir=DIR")
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    action = {"list": do_list, "prepare": do_prepare, "verify": do_verify}[args.action]
    run_cli(CMD, action, args.overrides)


if __name__ == "__main__":
    main()



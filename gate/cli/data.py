"""gate-data: list the datasets, prepare one (fetch when online, verify, write its split manifest), verify one.

    gate-data list [dataset=cifar100,food101]
    gate-data prepare dataset=cifar100 [dataset.data_dir=/scratch/cifar100] [force=true]
    gate-data verify dataset=cifar100

``prepare`` fetches a copy that is missing, incomplete (an interrupted fetch) or damaged (a recorded file gone or
resized), and with ``force=true`` online any hub or URL copy; offline it never downloads a copy that is on disk and
only recomputes the manifest. ``verify`` re-hashes the files prepare recorded (gate/data/hub.py: the completion
record), then checks the manifest against the data.

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
    """(status, facts) of a composed dataset: prepared / on disk (fetched by gate, or the user's own copy with no
    hashes) / incomplete download / damaged / packaged / downloadable / needs credentials / needs registration /
    unavailable offline."""
    from gate.build import build_spec, manifest_dir_of
    from gate.data import hub
    from gate.data.manifest import manifest_path, recipe_of

    ds = cfg.dataset
    source = _plain(cfg, "dataset.source") or {}
    facts = {"key": ds.name, "family": ds.get("family", ""), "adapter": cfg.adapter.get("name", "?"),
             "source": hub.source_label(source) if source else "packaged / generated offline",
             "access": source.get("access", "open"), "size": source.get("size", "small"),
             "schema": schema_status(source)}
    if not source:
        return "packaged (offline)", facts
    spec = build_spec(ds)
    recipe = recipe_of(_plain(cfg, "dataset.splits"), spec.label_column)
    manifest = manifest_path(manifest_dir_of(cfg), spec.name, recipe)
    state = hub.copy_state(ds.get("data_dir"))
    if state.state == "incomplete":
        return f"incomplete download; rerun gate-data prepare dataset={ds.name}", facts
    if state.state == "damaged":
        return f"damaged (a fetched file is missing or resized); rerun gate-data prepare dataset={ds.name}", facts
    if state.usable:
        status = "prepared" if manifest.is_file() else "on disk (no manifest yet)"
        if state.state == "user":
            return f"{status} (not fetched by gate: no hashes)", facts
        return (status if state.files else f"{status} (fetched before gate recorded hashes)"), facts
    if source.get("access") in ("registration",) or source.get("kind") == "registration":
        return "needs registration", facts
    if not hub.has_credentials(source):
        return "needs credentials", facts
    if hub.is_offline():
        return "unavailable offline", facts
    return "downloadable", facts


def schema_status(source: dict[str, Any]) -> str:
    """Whether the files and columns the loader reads rest on evidence about the real source (the source key
    ``schema_verified``; a config without it counts as unverified)."""
    if not source:
        return "-"
    return "verified" if source.get("schema_verified") is True else "unverified"


def do_list(overrides: Sequence[str]) -> None:
    wanted = dataset_names(overrides)
    overrides = [o for o in overrides if not o.startswith("dataset=")]
    rows = []
    for key in wanted or dataset_keys():
        cfg = compose([*overrides, f"dataset={key}"])
        status, facts = status_of(cfg)
        rows.append({**facts, "status": status})
    cols = ("key", "family", "adapter", "access", "size", "schema", "status", "source")
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(width[c]) for c in cols))
    print(f"[gate] {len(rows)} datasets; local copies under {compose(list(overrides)).paths.data}/<key> "
          f"(or dataset.data_dir=...)")


def dataset_names(overrides: Sequence[str]) -> list[str]:
    """The ``dataset=<key>`` overrides (comma-separated keys allowed), each checked against the known keys."""
    from gate.errors import ConfigError

    names = [n for o in overrides if o.startswith("dataset=") for n in o.split("=", 1)[1].split(",")]
    for name in names:
        if name not in dataset_keys():
            raise ConfigError(f"dataset={name} is not a known dataset; known: {', '.join(dataset_keys())}")
    return names


def compose_dataset(overrides: Sequence[str], action: str) -> DictConfig:
    from gate.errors import ConfigError

    names = dataset_names(overrides)
    if len(names) != 1:
        raise ConfigError(f"gate-data {action} needs one dataset=<key>; known: {', '.join(dataset_keys())}")
    cfg = compose(overrides)
    if not isinstance(cfg.get("force", False), bool):
        raise ConfigError(f"force={cfg.get('force')!r} must be true or false")
    return cfg


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
        fetch_or_reuse(cfg.dataset.name, source, data_dir, force)
    print(f"[gate] reading {cfg.dataset.name} and writing its split manifest ...", flush=True)
    where = manifest_dir_of(cfg)
    splits = build_splits(cfg.dataset, seed=0, manifest_dir=where, force=force)
    sizes = ", ".join(f"{n} {len(s)}" for n, s in splits.items())
    print(f"[gate] {cfg.dataset.name}: {sizes}")
    if source:
        print(f"[gate] data:      {data_dir}")
    print(f"[gate] manifests: {where}")


def fetch_or_reuse(key: str, source: dict[str, Any], data_dir: Path, force: bool) -> None:
    """Fetch the copy when it is missing, incomplete or damaged (resuming what is there), or when ``force`` asks
    for it online; offline, ``force`` rebuilds the manifest from the copy on disk without downloading."""
    from gate.data import hub

    state = hub.copy_state(data_dir)
    fetchable = source.get("kind", "hf") in ("hf", "url")
    if state.usable and not (force and fetchable):
        return
    if state.usable and hub.is_offline():
        print(f"[gate] offline (HF_HUB_OFFLINE is set): not re-downloading {key}; rebuilding its manifest from the "
              f"local copy at {data_dir}", flush=True)
        return
    what = {"incomplete": "resuming the incomplete download of", "damaged": "fetching the missing or changed files of"}
    print(f"[gate] {what.get(state.state, 'fetching')} {key} ({hub.source_label(source)}) into {data_dir} ...",
          flush=True)
    hub.fetch(key, source, data_dir)
    record = hub.copy_state(data_dir).files
    print(f"[gate] recorded the sha256 of {len(record)} files "
          f"({hub.human_size(sum(f['size'] for f in record.values()))}) in {data_dir / hub.SOURCE_FILE}", flush=True)


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
    if dataset.get("source"):
        verify_hashes(spec.name, dataset.get("data_dir"))
    raw = hydra.utils.instantiate(dataset["builder"], _convert_="all")
    columns = [c for c in (spec.label_column, recipe.get("group"), *spec.targets) if c]
    source = source_fingerprint(raw, revision=(dataset.get("source") or {}).get("revision"), columns=columns)
    manifest = read_manifest(path, spec.name)
    check_manifest(manifest, raw, spec.name, path=path, source=source)
    sizes = ", ".join(f"{n} {len(manifest[n])} (from source {manifest['from'][n]})" for n in ("train", "val", "test"))
    print(f"[gate] {spec.name}: manifest {path} matches the source (hash {source['hash']}); disjoint; {sizes}")


def verify_hashes(key: str, data_dir: str | None) -> None:
    """Re-hash every file gate-data prepare recorded (one line naming the first missing or changed file)."""
    from gate.data import hub

    state = hub.copy_state(data_dir)
    if state.state == "user":
        print(f"[gate] {key}: the local copy at {data_dir} was not fetched by gate: no hashes to check", flush=True)
        return
    if state.usable and not state.files:
        print(f"[gate] {key}: the local copy at {data_dir} was fetched before gate recorded hashes: none to check "
              f"(`gate-data prepare dataset={key} force=true` online records them)", flush=True)
        return
    total = sum(f["size"] for f in state.files.values()) if state.usable else 0
    if total:
        print(f"[gate] {key}: hashing {len(state.files)} files ({hub.human_size(total)}) ...", flush=True)
    count, size = hub.verify_copy(key, data_dir)
    print(f"[gate] {key}: {count} files ({hub.human_size(size)}) match the sha256 gate-data prepare recorded",
          flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=CMD, description="List, prepare and verify gate datasets.")
    parser.add_argument("action", choices=("list", "prepare", "verify"))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. dataset=cifar100 dataset.data_dir=DIR")
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    action = {"list": do_list, "prepare": do_prepare, "verify": do_verify}[args.action]
    run_cli(CMD, action, args.overrides)


if __name__ == "__main__":
    main()



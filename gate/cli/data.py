"""gate-data: list the datasets, prepare one (fetch when online, verify, write its split manifest), verify one.

    gate-data list [dataset=cifar100,food101]
    gate-data prepare dataset=cifar100 [dataset.data_dir=/scratch/cifar100] [force=true]
    gate-data verify dataset=cifar100

``prepare`` fetches a copy that is missing, incomplete (an interrupted fetch) or damaged (a recorded file gone or
resized), and with ``force=true`` online any hub or URL copy; offline it never downloads a copy that is on disk and
only recomputes the manifest. ``verify`` re-hashes the files prepare recorded (gate/data/hub.py: the completion
record), then checks the manifest against the data.

The work itself is gate/engine/prepare.py; this module composes, calls it and prints. A small argparse front takes
the action; the rest are Hydra overrides composed with ``conf/data.yaml`` through
Hydra's compose API (the same config groups as gate-run, so ``paths.root=...`` and ``dataset.*`` work alike).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import resources

from omegaconf import DictConfig

from gate.cli.common import prepare_process, run_cli

CMD = "gate-data"


def compose(overrides: Sequence[str]) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    from gate.engine.validate import validate_command_config
    from gate.settings import DATA_COMMAND

    with initialize_config_module("gate.conf", version_base=None):
        cfg = hydra_compose("data", overrides=list(overrides))
    validate_command_config(cfg, DATA_COMMAND, "gate-data config")  # +foo=1 (a key nothing reads), force=abc
    return cfg


def dataset_keys() -> list[str]:
    """Every dataset config shipped in conf/dataset (read generically: new benchmarks appear by themselves)."""
    return sorted(p.name[:-5] for p in resources.files("gate.conf.dataset").iterdir() if p.name.endswith(".yaml"))


def do_list(overrides: Sequence[str]) -> None:
    from gate.engine.prepare import DOWNLOADABLE, status_of

    wanted = dataset_names(overrides)
    overrides = [o for o in overrides if not o.startswith("dataset=")]
    rows = []
    for key in wanted or dataset_keys():
        cfg = compose([*overrides, f"dataset={key}"])
        status, facts = status_of(cfg)
        rows.append({**facts, "status": status})
    data = cfg.paths.data  # from a composed dataset: overrides of dataset.* keys need one
    cols = ("key", "group", "adapter", "access", "size", "schema", "status", "source")
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(width[c]) for c in cols))
    network = (f"; {DOWNLOADABLE}: not checked (list makes no network calls; without network prepare fails "
               f"saying how to get the copy; HF_HUB_OFFLINE=1 lists what is usable offline)"
               if any(r["status"] == DOWNLOADABLE for r in rows) else "")
    print(f"[gate] {len(rows)} datasets; local copies under {data}/<key> (or dataset.data_dir=...){network}")


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
    return compose(overrides)


def do_prepare(overrides: Sequence[str]) -> None:
    cfg = compose_dataset(overrides, "prepare")
    prepare_process(cfg)
    from gate.engine.prepare import prepare

    prepare(cfg)


def do_verify(overrides: Sequence[str]) -> None:
    cfg = compose_dataset(overrides, "verify")
    prepare_process(cfg)
    from gate.engine.prepare import verify

    verify(cfg)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=CMD, description="List, prepare and verify gate datasets.")
    parser.add_argument("action", choices=("list", "prepare", "verify"))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. dataset=cifar100 dataset.data_dir=DIR")
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    action = {"list": do_list, "prepare": do_prepare, "verify": do_verify}[args.action]
    run_cli(CMD, action, args.overrides)


if __name__ == "__main__":
    main()



"""The data stage as library functions: what state a dataset's local copy is in, preparing it (fetch when needed,
then its split manifest), verifying it, and whether a benchmark can run here; and gate-data's stage
(:func:`parse_data`, :func:`run_data`: the command itself only composes and prints). ``gate-tier`` asks
:func:`why_not_prepared` before it plans a benchmark.

Every function takes a composed config as gate-data's parse left it, checked and resolved once into plain data
(:func:`gate.engine.validate.validate_command_config`), or its dataset section, and reports progress through ``echo``
(print-like), so nothing here writes to a terminal on its own.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

Echo = Callable[..., None]
#: The status of a copy gate-data prepare could fetch: whether the hub or the URLs answer is not checked (listing
#: makes no network calls; HF_HUB_OFFLINE=1 turns it into "unavailable offline").
DOWNLOADABLE = "downloadable (needs network)"


def status_of(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(status, facts) of a composed dataset: prepared / on disk (fetched by gate, or the user's own copy with no
    hashes) / incomplete download / damaged / packaged / downloadable (:data:`DOWNLOADABLE`) / needs credentials /
    needs registration / unavailable offline."""
    from gate.data import hub
    from gate.data.manifest import manifest_dir_of, manifest_path, recipe_of
    from gate.data.spec import spec_from_config

    ds = config["dataset"]
    source = ds.get("source") or {}
    facts = {"key": ds["name"], "group": ds.get("paper_group") or "", "adapter": config["adapter"].get("name", "?"),
             "source": hub.source_label(source) if source else "packaged / generated offline",
             "access": source.get("access", "open"), "size": source.get("size", "small"),
             "schema": schema_status(source)}
    if not source:
        return "packaged (offline)", facts
    spec = spec_from_config(ds)  # torch-free: listing the datasets loads no model code
    recipe = recipe_of(ds.get("splits"), spec.label_column)
    manifest = manifest_path(manifest_dir_of(config), spec.name, recipe)
    state = hub.copy_state(ds.get("data_dir"))
    if state.state == "incomplete":
        return f"incomplete download; rerun gate-data prepare dataset={ds['name']}", facts
    if state.state == "damaged":
        return f"damaged (a fetched file is missing or resized); rerun gate-data prepare dataset={ds['name']}", facts
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
    return DOWNLOADABLE, facts


def schema_status(source: dict[str, Any]) -> str:
    """Whether the files and columns the loader reads rest on evidence about the real source (the source key
    ``schema_verified``; a config without it counts as unverified)."""
    if not source:
        return "-"
    return "verified" if source.get("schema_verified") is True else "unverified"


def why_not_prepared(dataset: Mapping[str, Any]) -> str | None:
    """Why a benchmark cannot run here without ``gate-data prepare``, or None: a dataset with a ``source`` whose
    local copy (``data_dir``) is missing, incomplete or damaged (:func:`gate.data.hub.copy_state`). Stand-ins and
    packaged data (no ``source``) are always ready."""
    from gate.data import hub

    source = dataset.get("source") if isinstance(dataset, Mapping) else None
    if not isinstance(source, Mapping) or not source:
        return None
    name = dataset.get("name")
    state = hub.copy_state(dataset.get("data_dir"))
    if state.usable:
        return None
    if state.state == "missing":
        return (f"dataset {name!r} is not prepared here ({dataset.get('data_dir')} is missing or empty); run "
                f"gate-data prepare dataset={name}")
    return (f"dataset {name!r}: its local copy at {dataset.get('data_dir')} is {state.state} ({state.why}); rerun "
            f"gate-data prepare dataset={name}")


def prepare(config: Mapping[str, Any], echo: Echo = print) -> dict[str, int]:
    """Fetch the dataset's copy if needed (:func:`fetch_or_reuse`), then read it and write its split manifest;
    returns the split sizes."""
    from gate.data import hub
    from gate.errors import ConfigError
    from gate.paths import path_part

    from .build import build_splits, manifest_dir_of

    dataset = config["dataset"]
    name = path_part(dataset["name"], "dataset.name")  # its local copy: paths.data/<name> (conf/dataset_defaults/pool.yaml)
    source = dataset.get("source") or {}
    problems = hub.source_problems(source) if source else []
    if problems:
        raise ConfigError(f"dataset {name!r}: its source block is invalid: {'; '.join(problems)} "
                          f"(the schema: gate/data/hub.py)")
    force = bool(config["force"])  # conf/data.yaml states it
    data_dir = Path(str(dataset.get("data_dir") or ""))
    if source:
        fetch_or_reuse(name, source, data_dir, force, echo)
    if force and source:  # force rebuilds what is derived from the copy, datasets' Arrow cache of it included
        gone = hub.discard_parquet_cache(name, source, data_dir, (dataset.get("builder") or {}).get("cache_dir"))
        if gone is not None:
            echo(f"[gate] removed datasets' Arrow cache of {name} ({gone}): converting the parquet files again",
                 flush=True)
    echo(f"[gate] reading {name} and writing its split manifest ...", flush=True)
    where = manifest_dir_of(config)
    splits = build_splits(dataset, seed=0, manifest_dir=where, force=force)
    sizes = {n: len(s) for n, s in splits.items()}
    echo(f"[gate] {name}: " + ", ".join(f"{n} {k}" for n, k in sizes.items()))
    if source:
        echo(f"[gate] data:      {data_dir}")
    echo(f"[gate] manifests: {where}")
    return sizes


def fetch_or_reuse(key: str, source: Mapping[str, Any], data_dir: Path, force: bool, echo: Echo = print) -> None:
    """Fetch the copy when it is missing, incomplete or damaged (resuming what is there), or when ``force`` asks
    for it online; offline, ``force`` rebuilds the manifest from the copy on disk without downloading."""
    from gate.data import hub

    state = hub.copy_state(data_dir)
    fetchable = source.get("kind", "hf") in ("hf", "url")
    if state.usable and not (force and fetchable):
        return
    if state.usable and hub.is_offline():
        echo(f"[gate] offline (HF_HUB_OFFLINE is set): not re-downloading {key}; rebuilding its manifest from the "
              f"local copy at {data_dir}", flush=True)
        return
    what = {"incomplete": "resuming the incomplete download of", "damaged": "fetching the missing or changed files of"}
    echo(f"[gate] {what.get(state.state, 'fetching')} {key} ({hub.source_label(source)}) into {data_dir} ...",
          flush=True)
    hub.fetch(key, source, data_dir)
    record = hub.copy_state(data_dir).files
    echo(f"[gate] recorded the sha256 of {len(record)} files "
          f"({hub.human_size(sum(f['size'] for f in record.values()))}) in {data_dir / hub.SOURCE_FILE}", flush=True)


def verify(config: Mapping[str, Any], echo: Echo = print) -> None:
    """Re-hash the files prepare recorded (:func:`verify_hashes`), then check the split manifest against the data."""
    import hydra

    from gate.data.manifest import check_manifest, manifest_path, read_manifest, recipe_of, source_fingerprint
    from gate.errors import GateError

    from .build import build_spec, manifest_dir_of

    dataset = config["dataset"]
    spec = build_spec(dataset)
    splits_cfg = dataset.get("splits") or {}
    recipe = recipe_of(splits_cfg, spec.label_column)
    path = manifest_path(manifest_dir_of(config), spec.name, recipe)
    if not path.is_file():
        raise GateError(f"dataset {spec.name!r} has no split manifest at {path}; run `gate-data prepare "
                        f"dataset={spec.name}` first")
    if dataset.get("source"):
        verify_hashes(spec.name, dataset.get("data_dir"), echo)
    raw = hydra.utils.instantiate(dataset["builder"], _convert_="all")
    columns = [c for c in (spec.label_column, recipe.get("group"), *spec.targets) if c]
    source = source_fingerprint(raw, revision=(dataset.get("source") or {}).get("revision"), columns=columns)
    manifest = read_manifest(path, spec.name)
    check_manifest(manifest, raw, spec.name, path=path, source=source)
    sizes = ", ".join(f"{n} {len(manifest[n])} (from source {manifest['from'][n]})" for n in ("train", "val", "test"))
    echo(f"[gate] {spec.name}: manifest {path} matches the source (hash {source['hash']}); disjoint; {sizes}")


def verify_hashes(key: str, data_dir: str | None, echo: Echo = print) -> None:
    """Re-hash every file gate-data prepare recorded (one line naming the first missing or changed file); the
    downloads the copy was extracted from are checked where they are still on disk."""
    from gate.data import hub

    state = hub.copy_state(data_dir)
    if state.state == "user":
        echo(f"[gate] {key}: the local copy at {data_dir} was not fetched by gate: no hashes to check", flush=True)
        return
    if state.usable and not state.files:
        echo(f"[gate] {key}: the local copy at {data_dir} was fetched before gate recorded hashes: none to check "
              f"(`gate-data prepare dataset={key} force=true` online records them)", flush=True)
        return
    gone = sorted(rel for rel in state.downloads if not (state.root / rel).is_file()) if state.usable else []
    todo = [f for rel, f in {**state.downloads, **state.files}.items() if rel not in gone] if state.usable else []
    if todo:
        echo(f"[gate] {key}: hashing {len(todo)} files ({hub.human_size(sum(f['size'] for f in todo))}) ...",
             flush=True)
    count, size = hub.verify_copy(key, data_dir)
    echo(f"[gate] {key}: {count} files ({hub.human_size(size)}) match the sha256 gate-data prepare recorded",
          flush=True)
    if gone:
        echo(f"[gate] {key}: {len(gone)} downloaded archives were deleted after extraction ({', '.join(gone[:3])}"
             f"{', ...' if len(gone) > 3 else ''}): the copy does not need them", flush=True)


# ----------------------------------------------------------------------------------------------- gate-data's stage
#: What gate-data does, the first word of its command line.
ACTIONS = ("list", "prepare", "verify")


def dataset_keys() -> list[str]:
    """Every dataset config shipped in conf/dataset (read generically: new benchmarks appear by themselves)."""
    from importlib import resources

    return sorted(p.name[:-5] for p in resources.files("gate.conf.dataset").iterdir() if p.name.endswith(".yaml"))


@dataclasses.dataclass(frozen=True)
class DataCommand:
    """A checked gate-data call: its action and, for prepare and verify, its composed config checked and resolved once
    into plain data (a dataset's); for list, the datasets to show (every one when empty) and the overrides each is
    composed with (each checked as it is composed)."""

    action: str
    config: dict[str, Any] | None
    datasets: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()


def parse_data(cfg: DictConfig, action: str, datasets: Sequence[str] = (), overrides: Sequence[str] = ()) -> DataCommand:
    """The one check of a composed ``conf/data.yaml`` (+foo=1, force=abc): one line before any work. list's config
    has no dataset (its adapter's interpolations do not resolve): each dataset it lists is composed and checked."""
    from gate.engine.validate import validate_command_config
    from gate.settings import DATA_COMMAND

    config = validate_command_config(cfg, DATA_COMMAND, "gate-data config") if action != "list" else None
    return DataCommand(action, config, tuple(datasets), tuple(overrides))


@dataclasses.dataclass(frozen=True)
class DataOutcome:
    """What gate-data prints at the end (list: its table); prepare and verify print their progress as they go."""

    lines: tuple[str, ...] = ()

    def report(self) -> int:
        for line in self.lines:
            print(line)
        return 0


def run_data(cmd: DataCommand, echo: Echo = print) -> DataOutcome:
    if cmd.action == "prepare":
        prepare(cmd.config, echo)
        return DataOutcome()
    if cmd.action == "verify":
        verify(cmd.config, echo)
        return DataOutcome()
    return DataOutcome(tuple(listing(cmd.datasets or dataset_keys(), cmd.overrides)))


def listing(keys: Sequence[str], overrides: Sequence[str]) -> list[str]:
    """``gate-data list``: a row per dataset (each composed with ``overrides``: key, group, adapter, access, size,
    schema evidence, status here, source) and a closing line. It makes no network calls."""
    from gate.engine.compose import hydra_compose_context
    from gate.forked import map_forked, raised

    with hydra_compose_context():
        # The first dataset here: an override every dataset refuses is said at once, not after composing them all;
        # the rest side by side in forked children where there are cores (gate.forked)
        listed = [_listed(overrides, key) for key in keys[:1]]
        if not listed or listed[0][2] is None:
            listed += map_forked(functools.partial(_listed, overrides), list(keys[1:]),
                                 lost="a gate-data list process ended without its datasets")
    for _, _, error in listed:  # the first dataset's error in the list's order, however the children finished
        if error is not None:
            raise raised(error)
    rows = [row for row, _, _ in listed]
    data = listed[-1][1] if listed else None  # from a composed dataset: overrides of dataset.* keys need one
    cols = ("key", "group", "adapter", "access", "size", "schema", "status", "source")
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(width[c]) for c in cols) for r in rows]
    network = (f"; {DOWNLOADABLE}: not checked (list makes no network calls; without network prepare fails "
               f"saying how to get the copy; HF_HUB_OFFLINE=1 lists what is usable offline)"
               if any(r["status"] == DOWNLOADABLE for r in rows) else "")
    lines.append(f"[gate] {len(rows)} datasets; local copies under {data}/<key> (or dataset.data_dir=...){network}")
    return lines


def _listed(overrides: Sequence[str], key: str) -> tuple[dict[str, Any] | None, str | None, Exception | None]:
    """One dataset's row of ``gate-data list`` and its data folder (inside the caller's compose context), or the
    error composing or checking it gave."""
    from hydra import compose

    from gate.engine.validate import validate_command_config
    from gate.forked import sendable
    from gate.settings import DATA_COMMAND

    try:
        config = validate_command_config(compose("data", overrides=[*overrides, f"dataset={key}"]), DATA_COMMAND,
                                         "gate-data config")
        status, facts = status_of(config)
    except Exception as err:  # noqa: BLE001 - raised by the caller, in the list's order
        return None, None, sendable(err)
    return {**facts, "status": status}, config["paths"]["data"], None

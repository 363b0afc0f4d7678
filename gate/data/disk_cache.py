"""The derived-data cache shared by the stand-ins and the benchmark loaders: a ``datasets.DatasetDict`` built
once, saved under ``<cache_dir>/<kind>/<name>-<key>`` and memory-mapped from there after.

The key covers everything the derived data depends on, so a stale copy can never be served:

* ``params``: what the caller passes (loader arguments, and a stamp of every input file it reads: name, size,
  mtime; :func:`gate.data.loaders._dense.file_stamp`);
* the **code that derives it**: a hash of the source of the module defining ``build`` and of this package's
  shared derivation helpers (:data:`DERIVATION_MODULES`). Fixing a label map or a target rule changes the
  source, hence the key, hence the cache is rebuilt; no version number has to be remembered and bumped.

A copy that cannot be read back whole (a truncated Arrow file, a file missing or of another size than when it
was written) is set aside as ``<folder>.corrupt-<time>`` with a warning and rebuilt; the sizes of the files
written are recorded in ``gate_cache.json`` next to them.

A build returns either a whole ``datasets.DatasetDict`` (saved with ``save_to_disk``) or :class:`StreamedSplits`:
rows produced one at a time and written as they come, ``batch_rows`` at a time, into one Arrow file per split
(``<split>.arrow``, memory-mapped when read back). A streamed build holds at most one batch of rows in memory,
whatever the number of rows (the video benchmarks: every clip of Kinetics-400 decoded would be ~290 GB).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import set_aside

RECORD = "gate_cache.json"
STREAMED = "arrow-splits"  # gate_cache.json "format" of a streamed build: one <split>.arrow per split
#: Modules whose functions every derivation may call (mask remapping, image encoding, ...): part of every key.
DERIVATION_MODULES = ("gate.data.loaders._dense", "gate.data.standins.canvas", "gate.data.disk_cache")


@functools.cache
def _module_source_hash(module_name: str) -> str:
    module = sys.modules.get(module_name)
    if module is None:
        import importlib

        module = importlib.import_module(module_name)
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):  # no source shipped (a frozen or compiled-only install): the package version
        from importlib.metadata import PackageNotFoundError, version

        try:
            source = f"{module_name}=={version('gate')}"
        except PackageNotFoundError:
            source = module_name
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def code_version(build: Callable[[], Any]) -> dict[str, str]:
    """Hashes of the source of the module that defines ``build`` and of the shared derivation modules."""
    modules = dict.fromkeys((getattr(build, "__module__", None) or "__main__", *DERIVATION_MODULES))
    return {name: _module_source_hash(name) for name in modules if name != "__main__"}


@dataclass(frozen=True)
class StreamedSplits:
    """A build's result as rows written while they are produced: ``splits[name]()`` yields one row (a dict of
    ``features``' columns) at a time; :func:`cached_dataset` writes ``batch_rows`` rows at a time, so memory holds
    one batch, never the split."""

    features: Any  # datasets.Features
    splits: Mapping[str, Callable[[], Iterable[Mapping[str, Any]]]]
    batch_rows: int = 64

    def __post_init__(self):
        if not self.splits:
            raise ValueError("StreamedSplits needs at least one split")
        if int(self.batch_rows) < 1:
            raise ValueError(f"StreamedSplits.batch_rows must be >= 1, got {self.batch_rows}")


def write_split(path: Path, streamed: StreamedSplits, split: str) -> int:
    """Write the rows of ``streamed.splits[split]`` to the Arrow stream file ``path`` (the format
    ``datasets.Dataset.from_file`` memory-maps), ``batch_rows`` rows per record batch; returns the row count."""
    import pyarrow as pa

    features = streamed.features
    schema = features.arrow_schema
    written, batch = 0, []
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        def flush():
            nonlocal written, batch
            if not batch:
                return
            columns = features.encode_batch({name: [row[name] for row in batch] for name in features})
            writer.write_table(pa.Table.from_pydict(columns, schema=schema))
            written += len(batch)
            batch = []  # the rows just written are dropped here: memory holds one batch at most

        for row in streamed.splits[split]():
            batch.append(row)
            if len(batch) >= streamed.batch_rows:
                flush()
        flush()
    return written


def _in_memory(streamed: StreamedSplits):
    """A streamed build without a cache folder: every row in memory (``cache_dir=None`` means no disk)."""
    import datasets

    return datasets.DatasetDict({name: datasets.Dataset.from_list(list(rows()), features=streamed.features)
                                 for name, rows in streamed.splits.items()})


def _save(data, folder: Path) -> dict[str, Any]:
    """Write a build's result into ``folder``; returns what gate_cache.json records about its format."""
    if isinstance(data, StreamedSplits):
        for name in data.splits:
            write_split(folder / f"{name}.arrow", data, name)
        return {"format": STREAMED, "splits": list(data.splits)}
    data.save_to_disk(str(folder))
    return {}


def _files_of(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != RECORD}


def _load_whole(target: Path):
    """The saved DatasetDict at ``target``, or None when it is not whole (then it has been set aside)."""
    import datasets

    record = target / RECORD
    try:
        saved = json.loads(record.read_text())
        expected = saved["files"]
        now = _files_of(target)  # later files (datasets' own map caches) may be added; none may change
        changed = sorted(f for f, size in expected.items() if now.get(f) != size)
        if changed:
            raise ValueError(f"{changed[0]} is missing or not the size it was written with (truncated?)")
        if saved.get("format") == STREAMED:  # memory-mapped, read in place
            return datasets.DatasetDict({name: datasets.Dataset.from_file(str(target / f"{name}.arrow"))
                                         for name in saved["splits"]})
        return datasets.load_from_disk(str(target))
    except Exception as err:  # noqa: BLE001 - any unreadable cache is rebuilt from the source, never trusted
        set_aside(target, f"a damaged derived-data cache ({type(err).__name__}: {err}); it is rebuilt from the source",
                  stacklevel=4)
        return None


def cached_dataset(kind: str, name: str, params: Mapping[str, Any], cache_dir: str | os.PathLike | None,
                   build: Callable[[], Any]):
    """``build()`` saved once under ``<cache_dir>/<kind>/<name>-<key>`` and loaded from there after (the key:
    ``params`` and :func:`code_version` of ``build``); ``cache_dir=None`` builds in memory every time. ``build``
    returns a DatasetDict or :class:`StreamedSplits` (written row batch by row batch as the rows come). Written to
    a temporary folder and renamed, so a killed build never leaves a half-written copy and twin runs do not collide
    (the second rename loses and uses the first)."""
    import datasets

    from ..results import stable_hash

    if cache_dir is None:
        data = build()
        return _in_memory(data) if isinstance(data, StreamedSplits) else data
    key = {"params": dict(params), "code": code_version(build)}
    target = Path(cache_dir).expanduser().resolve() / kind / f"{name}-{stable_hash(key)}"
    if target.is_dir():
        data = _load_whole(target)
        if data is not None:
            return data
    data = build()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    bars = not datasets.utils.are_progress_bars_disabled()
    try:
        if bars:  # no "Saving the dataset" bars in the middle of a run; restored below
            datasets.utils.disable_progress_bars()
        layout = _save(data, tmp)
        del data  # a streamed build's rows are on disk now; the result is read back memory-mapped below
        (tmp / RECORD).write_text(json.dumps({"key": key, **layout, "files": _files_of(tmp)}, default=str, indent=1,
                                                allow_nan=False)
                                  + "\n")
        try:
            tmp.rename(target)
        except OSError:  # a twin run finished first: use its copy
            pass
    finally:
        if bars:
            datasets.utils.enable_progress_bars()
        shutil.rmtree(tmp, ignore_errors=True)
    data = _load_whole(target)
    if data is None:  # the copy just written cannot be read back: a full or failing disk
        raise OSError(f"the derived-data cache {target} could not be read back after writing it; check the disk "
                      f"under {Path(cache_dir).expanduser()}")
    return data

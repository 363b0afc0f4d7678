"""Local-first sources: a benchmark is read from a local copy laid out exactly like its source.

A dataset config's ``source:`` block says where the data comes from, in one schema for every benchmark
(:func:`source_problems` checks it)::

    source:
      kind: hf               # hf (a Hugging Face dataset repo) | url (official archives) | kaggle | registration
      repo_id: uoft-cs/cifar100                       # hf: the dataset repo
      revision: <commit sha> # hf: pinned; a branch name (main, refs/convert/parquet) where no commit was verified
      pinned: true           # whether the revision (or sha256) fixes the content; false says it does not
      access: open           # open | gated | registration | kaggle
      licence: ...           # licence or terms of use
      homepage: https://...  # the source's own page (registration: where to register and download)
      size: 160 MB           # the download, roughly
      files: {train: [cifar100/train-*.parquet], test: [cifar100/test-*.parquet]}   # hf: paths inside the repo
      unpack: {data/archive.zip: subfolder}           # hf: repo archives to extract into <data_dir>/<subfolder>
      urls:                  # url (and extra files of an hf source): downloaded by gate-data prepare
        - {url: https://..., sha256: null, to: subfolder}   # an archive is extracted, a plain file copied, into
                                                            # <data_dir>/<to> (default: <data_dir> itself)
      slug: owner/name       # kaggle: the dataset (or competition, with competition: true)
      layout: ...            # what the local copy must hold where the source's own layout is not obvious
      verified: ...          # what was checked against the real source, and what was not
      schema_verified: true  # whether the files/columns the loader reads rest on evidence about the real source
                             # (its uploader code, dataset card, README); false: the loader's own assumption,
                             # shown as such by gate-data list

and ``dataset.data_dir`` (default ``${paths.data}/<key>``) holds the copy: for a hub source the repo's own files at
the same paths (``gate-data prepare`` downloads them there with ``huggingface_hub.snapshot_download``; a user on
a cluster prepares on a login node and runs anywhere). Loading never touches the network: a copy that is not on
disk is a :class:`~gate.errors.DatasetUnavailable` saying what to download, from where, and where to put it
(:func:`how_to_get`).

A copy that ``gate-data prepare`` fetched carries a completion record, ``<data_dir>/.gate_source.json``: written
(``complete: false``) before the first byte lands, and rewritten atomically, last, with ``complete: true`` and the
size and sha256 of every file of the copy once the whole fetch ended (:func:`copy_state` reads it). The archives a
copy was extracted from (``.downloads/``, a hub source's ``unpack`` archives) are recorded apart, as ``downloads``:
the extracted files are the copy and carry their own hashes, so deleting the archives leaves a usable, verifiable
copy. A copy without the record is the user's own (laid out by hand, e.g. from Kaggle): usable, but with no hashes
to verify.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatasetUnavailable, GateError
from ..files import atomic_write, atomic_write_text, set_aside

SOURCE_FILE = ".gate_source.json"  # the completion record of gate-data prepare (see the module docstring)
DOWNLOADS = ".downloads"  # where fetch_urls keeps the files it downloaded (archives before extraction)
HF_META = ".cache"  # huggingface_hub's bookkeeping inside a local_dir (not part of the copy)
HASH_CHUNK = 8 << 20  # bytes read at a time while hashing (a 150 GB copy never sits in memory)
LARGE_CONVERSION = 10**9  # a parquet -> Arrow conversion this big is announced with its size and place
KINDS = ("hf", "url", "kaggle", "registration")
ACCESS = ("open", "gated", "registration", "kaggle")
SOURCE_KEYS = ("kind", "repo_id", "revision", "pinned", "access", "licence", "homepage", "size", "files", "unpack",
               "urls", "slug", "competition", "layout", "verified", "schema_verified")
#: What each kind needs besides kind, access and pinned.
REQUIRED = {"hf": ("repo_id", "revision"), "url": ("urls",), "kaggle": ("slug",), "registration": ("homepage",)}


def source_problems(source: Any) -> list[str]:
    """Every way a ``source:`` block breaks the schema of this module's docstring (empty: it is valid)."""
    if not isinstance(source, Mapping):
        return [f"source must be a mapping, got {type(source).__name__}"]
    problems = []
    unknown = sorted(set(source) - set(SOURCE_KEYS))
    if unknown:
        problems.append(f"unknown key(s) {unknown}; a source has {list(SOURCE_KEYS)}")
    kind = source.get("kind")
    if kind not in KINDS:
        problems.append(f"kind={kind!r} is not one of {list(KINDS)}")
    if source.get("access") not in ACCESS:
        problems.append(f"access={source.get('access')!r} is not one of {list(ACCESS)}")
    for flag in ("pinned", "schema_verified"):
        if flag in source and not isinstance(source.get(flag), bool) or flag == "pinned" and flag not in source:
            problems.append(f"{flag}={source.get(flag)!r} must be true or false")
    for key in REQUIRED.get(kind, ()):
        if not source.get(key):
            problems.append(f"a {kind} source needs {key}")
    urls = source.get("urls")
    if urls is not None and (not isinstance(urls, Sequence) or isinstance(urls, str) or not all(
            isinstance(u, Mapping) and isinstance(u.get("url"), str) and set(u) <= {"url", "sha256", "to", "unpack"}
            for u in urls)):
        problems.append("urls must be a list of {url, sha256, to, unpack} mappings")
    for key in ("files", "unpack"):
        value = source.get(key)
        if value is not None and (not isinstance(value, Mapping) or not all(
                isinstance(v, str) or (isinstance(v, Sequence) and all(isinstance(x, str) for x in v))
                for v in value.values())):
            problems.append(f"{key} must map names to repo paths")
    return problems


def is_offline() -> bool:
    """True when the hub must not be contacted (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE, read without importing
    anything that would try the network)."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:  # pragma: no cover - huggingface_hub ships with datasets
        return True


def source_label(source: Mapping[str, Any]) -> str:
    """A short name of a source: ``repo@revision`` for the hub, the URL or Kaggle slug otherwise."""
    kind = source.get("kind", "hf")
    if kind == "hf":
        rev = str(source.get("revision") or "main")
        short = rev[:12] if len(rev) == 40 and all(c in "0123456789abcdef" for c in rev) else rev
        return f"{source.get('repo_id')}@{short}"
    if kind == "kaggle":
        return f"kaggle:{source.get('slug')}"
    return str(source.get("homepage") or (source.get("urls") or [{}])[0].get("url", "?"))


def how_to_get(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike) -> str:
    """One sentence: what to download, from where, and where to put it."""
    kind = source.get("kind", "hf")
    where = f"into {data_dir} (or pass dataset.data_dir=<your copy>)"
    layout = f"; layout: {source['layout']}" if source.get("layout") else ""
    urls = ", ".join(u["url"] for u in source.get("urls") or [])
    if kind == "hf":
        repo, rev = source.get("repo_id"), source.get("revision") or "main"
        gated = (f" (gated: accept its terms at https://huggingface.co/datasets/{repo} and `huggingface-cli login` "
                 "first)") if source.get("access") == "gated" else ""
        extra = f" and {urls}" if urls else ""
        unpack = "; then extract " + ", ".join(f"{archive} into {Path(data_dir) / folder}" for archive, folder in
                                               source["unpack"].items()) if source.get("unpack") else ""
        return (f"download the hub dataset {repo} at revision {rev}{gated}{extra} with `gate-data prepare "
                f"dataset={key}` on a machine with internet, or `huggingface-cli download --repo-type dataset {repo} "
                f"--revision {rev} --local-dir {data_dir}`; keep the repo's file layout, {where}{unpack}{layout}")
    if kind == "kaggle":
        flag = "-c" if source.get("competition") else "-d"
        cmd = "competitions download" if source.get("competition") else "datasets download"
        return (f"download it from Kaggle (account and API token needed: https://www.kaggle.com/docs/api) with "
                f"`kaggle {cmd} {flag} {source.get('slug')} -p {data_dir} --unzip`, {where}{layout}")
    if kind == "registration":
        return (f"register and download it at {source.get('homepage')} ({source.get('layout', 'keep the archive layout')}), "
                f"then unpack it {where}")
    return (f"download {urls} (checked by sha256 where given) with `gate-data prepare dataset={key}`, or unpack them "
            f"{where}{layout}")


def has_credentials(source: Mapping[str, Any]) -> bool:
    """Whether the credentials a gated or Kaggle source needs are configured here (no network)."""
    access = source.get("access", "open")
    if access == "gated":
        try:
            from huggingface_hub import get_token

            return bool(get_token())
        except ImportError:  # pragma: no cover
            return False
    if access == "kaggle":
        return (bool(os.environ.get("KAGGLE_USERNAME") and os.environ.get("KAGGLE_KEY")) or
            (Path(os.environ.get("KAGGLE_CONFIG_DIR", Path.home() / ".kaggle")) / "kaggle.json").is_file())
    return access == "open"


def split_files(root: Path, patterns: Sequence[str]) -> list[Path]:
    found: list[str] = []
    for pattern in patterns:
        found.extend(glob.glob(str(root / pattern)))
    return sorted({Path(f) for f in found if Path(f).is_file()})


def require_local(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike | None,
                  files: Mapping[str, Sequence[str]]) -> dict[str, list[Path]]:
    """The files of each split in the local copy, or a one-line DatasetUnavailable naming the dataset, the
    directory or missing split, and what to do. A copy whose download did not finish (or whose recorded files
    are gone or resized since) is refused: it would be read as if it were the whole source."""
    why = unavailable_copy(key, source, data_dir)
    if why:
        raise DatasetUnavailable(why)
    root = Path(data_dir).expanduser()
    out = {}
    for split, patterns in files.items():
        found = split_files(root, patterns)
        if not found:
            raise DatasetUnavailable(
                f"dataset {key!r}: the local copy {root} has no {split!r} split (no file matching "
                f"{', '.join(patterns)}); it must hold {source_label(source)} with the source's layout; "
                f"{how_to_get(key, source, root)}")
        out[split] = found
    return out


def unavailable_copy(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike | None) -> str | None:
    """Why the local copy at ``data_dir`` cannot be read, as the one line :func:`require_local` raises (no directory
    given, none or an empty one there, an unfinished or damaged download), or None: a copy whose split files are the
    loader's to find."""
    if not data_dir:
        return f"dataset {key!r}: no dataset.data_dir given; {how_to_get(key, source, '<dir>')}"
    root = Path(data_dir).expanduser()
    if not root.is_dir() or not any(root.iterdir()):
        return f"dataset {key!r} is not on disk (no local copy at {root}); {how_to_get(key, source, root)}"
    state = copy_state(root)
    return None if state.usable else state.message(key)


def unavailable_copy_of(dataset: Mapping[str, Any]) -> str | None:
    """:func:`unavailable_copy` for a checked, resolved dataset section whose builder reads a local copy of its source (its
    ``builder`` has ``data_dir`` and ``source``: the pool's benchmarks), read where the builder reads it; None for
    a packaged or generated dataset. A run asks before it imports the training stack, so a dataset not prepared
    here is one line in seconds, as its loader would say it after them."""
    builder = dataset.get("builder") or {}  # (a checked section: the schema read its builder and source block)
    source = builder.get("source")
    if "data_dir" not in builder or not source:
        return None
    return unavailable_copy(str(builder.get("name") or dataset.get("name")), source, builder["data_dir"])


def damaged_file(key: str, path: Path | str, err: BaseException) -> GateError:
    """One line for a file of a local copy that cannot be read: the dataset, the file, why, and what to do."""
    why = " ".join(f"{type(err).__name__}: {err}".split())
    return GateError(f"dataset {key!r}: {path} cannot be read ({why}); the local copy is damaged (a truncated or "
                     f"interrupted download?): delete that file and rerun `gate-data prepare dataset={key}` to fetch "
                     f"it again")


def require_columns(key: str, split: str, path: Path | str, have: Sequence[str], need: Sequence[str],
                    source: Mapping[str, Any]) -> None:
    missing = [c for c in need if c not in have]
    if missing:
        # The file's schema was read, so the file is intact: the config and the source disagree (no re-download).
        raise GateError(f"dataset {key!r}: {path} ({split}) has columns {list(have)}, but the dataset config reads "
                        f"{list(need)} (missing {missing}): the config's column names and {source_label(source)} "
                        f"disagree; fix the column names in the dataset config's builder")


def parquet_footers(key: str, files: Mapping[str, Sequence[Path]]) -> dict[str, tuple[list[str], int]]:
    """``{path: (column names, uncompressed bytes)}`` of every parquet file, from its footer alone (a few KB per
    file); a file whose footer cannot be read (truncated, not parquet) is a one-line GateError naming it."""
    import pyarrow.parquet as pq

    out = {}
    for paths in files.values():
        for path in paths:
            try:
                meta = pq.ParquetFile(path).metadata
            except Exception as err:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ... for a bad footer
                raise damaged_file(key, path, err) from err
            out[str(path)] = (list(meta.schema.to_arrow_schema().names),
                              sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)))
    return out


def check_cache_space(key: str, where: str | os.PathLike, needed: int) -> None:
    """Refuse (one line) to start an Arrow conversion that cannot fit; say where it goes and how big it is."""
    import warnings

    probe = Path(where)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if needed > free:
        raise GateError(f"dataset {key!r}: reading its parquet files converts them once into datasets' Arrow cache "
                        f"at {where} (about {human_size(needed)}), but only {human_size(free)} is free there; free "
                        f"space or point paths.cache at a larger disk")
    if needed >= LARGE_CONVERSION:
        warnings.warn(f"dataset {key!r}: converting its parquet files once into datasets' Arrow cache at {where} "
                      f"(about {human_size(needed)} more on disk, {human_size(free)} free); later runs reuse it",
                      stacklevel=3)


def load_parquet(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike | None,
                 columns: Sequence[str] = (), cache_dir: str | os.PathLike | None = None,
                 image_columns: Sequence[str] = ()):
    """The source's splits from the parquet files of a local copy of a hub repo (same paths and columns), as a
    ``datasets.DatasetDict``. Images stored as ``{"bytes", "path"}`` structs are decoded by datasets' Image
    feature.

    ``datasets`` serves a map-style Dataset only from Arrow files (memory-mapped), so the parquet files are
    converted once into ``<cache_dir>/datasets`` (under ``paths.cache``, never ``$HOME``) and reused by every
    later run; the conversion needs about the copy's uncompressed size on disk (ImageNet: about as much again),
    checked before it starts. Reading the parquet files into memory instead costs no disk but about five times
    their size in RAM in every run (measured: docs/datasets.md, "How data is found")."""
    import datasets

    files = require_local(key, source, data_dir, source.get("files") or {})
    footers = parquet_footers(key, files)
    for split, paths in files.items():
        require_columns(key, split, paths[0], footers[str(paths[0])][0], columns, source)
    needed = sum(size for _, size in footers.values())
    raw = None
    for attempt in range(2):  # a damaged Arrow cache is set aside and converted again, once
        builder = _parquet_builder(key, files, data_dir, cache_dir)
        try:
            if not (Path(builder.cache_dir) / datasets.config.DATASET_INFO_FILENAME).is_file():
                check_cache_space(key, builder.cache_dir, needed)
            builder.download_and_prepare()
        except GateError:
            raise
        except Exception as err:  # noqa: BLE001 - a damaged row group the footer did not show: name the dataset
            raise GateError(f"dataset {key!r}: the parquet files in {data_dir} cannot be read ({type(err).__name__}: "
                            f"{' '.join(str(err).split())}); `gate-data verify dataset={key}` names a damaged file of "
                            f"a copy gate-data prepare fetched; delete it and rerun `gate-data prepare dataset={key}`"
                            ) from err
        try:
            raw = builder.as_dataset()
            break
        except Exception as err:  # noqa: BLE001 - the parquet files were read; it is the converted copy that is not
            why = f"{type(err).__name__}: {' '.join(str(err).split())}"
            if attempt:
                raise GateError(f"dataset {key!r}: datasets' Arrow cache at {builder.cache_dir} cannot be read ({why}) "
                                f"even when converted again from the intact parquet files in {data_dir}; delete it "
                                f"and rerun `gate-data prepare dataset={key} force=true`") from err
            set_aside(builder.cache_dir, f"a damaged datasets Arrow cache of dataset {key!r} ({why}; the parquet "
                      f"files in {data_dir} are intact): converting them again", stacklevel=4)
    for column in image_columns:
        for split in raw:
            feature = raw[split].features.get(column)
            if feature is not None and not isinstance(feature, datasets.Image):
                raw[split] = raw[split].cast_column(column, datasets.Image())
    return raw


def _parquet_builder(key: str, files: Mapping[str, Sequence[Path]], data_dir: str | os.PathLike | None,
                     cache_dir: str | os.PathLike | None):
    """datasets' parquet builder of these files, its Arrow cache under ``<cache_dir>/datasets``."""
    from .parquet import parquet_builder

    try:
        # datasets.load_dataset_builder's builder, without its network call (gate/data/parquet.py)
        return parquet_builder(files, str(Path(cache_dir) / "datasets") if cache_dir else None)
    except Exception as err:  # noqa: BLE001 - name the dataset, not datasets' internals
        raise GateError(f"dataset {key!r}: the parquet files in {data_dir} cannot be read ({type(err).__name__}: "
                        f"{' '.join(str(err).split())})") from err


def discard_parquet_cache(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike | None,
                          cache_dir: str | os.PathLike | None) -> Path | None:
    """Remove datasets' Arrow cache of the copy's parquet files (``gate-data prepare force=true``: the next read
    converts them again); returns the folder removed, or None when there was none."""
    if not (source.get("files") and cache_dir):
        return None
    files = require_local(key, source, data_dir, source["files"])
    where = Path(_parquet_builder(key, files, data_dir, cache_dir).cache_dir)
    if not where.exists():
        return None
    shutil.rmtree(where)
    return where


# ------------------------------------------------------------------------------------------------------------------
# The local copy: complete, incomplete, or the user's own (the completion record of gate-data prepare)


@dataclass(frozen=True)
class CopyState:
    """What is in a ``data_dir``: ``missing`` (nothing), ``incomplete`` (a fetch that did not end), ``damaged``
    (fetched completely, but a recorded file is gone or has another size now), ``complete`` (fetched by gate-data
    prepare; ``files`` holds the recorded ``{relative path: {sha256, size}}`` of the copy, empty for a record from
    before hashes were kept, and ``downloads`` those of the archives it was extracted from, which may be deleted) or
    ``user`` (no record: laid out by hand, nothing to verify against)."""

    state: str
    root: Path | None
    why: str = ""
    record: dict = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return self.state in ("complete", "user")

    def message(self, key: str) -> str:
        """One line for a copy that is not usable: what is wrong and the command that mends it."""
        if self.state == "damaged":
            return (f"dataset {key!r}: {self.why} since gate-data prepare fetched it; rerun `gate-data prepare "
                    f"dataset={key}` to fetch it again")
        if self.state == "incomplete":
            return (f"dataset {key!r}: the local copy at {self.root} is an incomplete download ({self.why}); rerun "
                    f"`gate-data prepare dataset={key}` (it fetches what is missing)")
        return f"dataset {key!r}: no local copy at {self.root}; run `gate-data prepare dataset={key}`"

    @property
    def files(self) -> dict[str, dict]:
        return record_parts(self.record)[0]

    @property
    def downloads(self) -> dict[str, dict]:
        return record_parts(self.record)[1]


def record_parts(record: Mapping[str, Any]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(files of the copy, downloads it was extracted from) of a completion record. A record from before downloads
    were kept apart lists its ``.downloads/`` archives among the files: they are split off here (only
    ``unpack: false`` left a file the copy needs in ``.downloads/``, and no packaged config uses it)."""
    files = dict(record.get("files") or {})
    if "downloads" in record:
        return files, dict(record.get("downloads") or {})
    return ({rel: f for rel, f in files.items() if not rel.startswith(f"{DOWNLOADS}/")},
            {rel: f for rel, f in files.items() if rel.startswith(f"{DOWNLOADS}/")})


def read_record(root: str | os.PathLike) -> dict | None:
    """The completion record of a copy (None where there is none); an unreadable one reads as incomplete."""
    path = Path(root).expanduser() / SOURCE_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"complete": False, "why": f"{SOURCE_FILE} is unreadable"}
    return record if isinstance(record, dict) else {"complete": False, "why": f"{SOURCE_FILE} is not a mapping"}


def copy_state(data_dir: str | os.PathLike | None) -> CopyState:
    """The :class:`CopyState` of ``data_dir``, from its completion record and a ``stat`` of each recorded file (no
    hashing: cheap enough for ``gate-data list`` and every load)."""
    if not data_dir:
        return CopyState("missing", None)
    root = Path(data_dir).expanduser()
    if not root.is_dir() or not any(root.iterdir()):
        return CopyState("missing", root)
    record = read_record(root)
    if record is None:
        interrupted = (root / DOWNLOADS).is_dir() or any((root / HF_META / "huggingface").glob("download/**/*.incomplete"))
        if interrupted:  # an older gate wrote no record before fetching; huggingface_hub leaves *.incomplete
            return CopyState("incomplete", root, "a download was started here and no completion record was written")
        return CopyState("user", root)
    if "complete" not in record:  # a record from before completion records: it was written after the whole fetch
        return CopyState("complete", root, record=record)
    if record.get("complete") is not True:
        return CopyState("incomplete", root, record.get("why") or "the download did not finish", record)
    for rel, facts in sorted(record_parts(record)[0].items()):  # the copy; its archives may be gone
        path = root / rel
        if not path.is_file():
            return CopyState("damaged", root, f"{path} is missing", record)
        size = path.stat().st_size
        if size != facts.get("size"):
            return CopyState("damaged", root, f"{path} has {size} bytes, not the {facts.get('size')} recorded", record)
    return CopyState("complete", root, record=record)


def copy_files(root: Path) -> list[str]:
    """The files of a copy, relative and sorted: everything but the record, huggingface_hub's bookkeeping and
    partial downloads."""
    out = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        if here == root:
            dirs[:] = [d for d in dirs if d != HF_META]
        for name in names:
            if here == root and (name == SOURCE_FILE or name.startswith(f".{SOURCE_FILE}.")):
                continue
            if name.endswith((".part", ".incomplete", ".tmp")):  # partial downloads, atomic writes in flight
                continue
            out.append((here / name).relative_to(root).as_posix())
    return sorted(out)


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _progress(total: int, desc: str):
    """A byte-counting progress bar on stderr (shown on a terminal only: a log file gets no carriage returns)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr, disable=None,
                leave=False)


def _sha256(path: Path, bar) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(HASH_CHUNK):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


def hash_files(root: Path, rels: Sequence[str], desc: str, known: Mapping[str, Mapping] | None = None) -> dict[str, dict]:
    """``{relative path: {"sha256", "size", "mtime_ns"}}`` of ``rels`` under ``root``, read in chunks, with
    progress. A file whose size and mtime equal its entry in ``known`` (an earlier record) keeps that entry
    unread: a refetch that left it alone costs nothing, and its original hash stays the one verify checks."""
    stats = {rel: (root / rel).stat() for rel in rels}
    known = known or {}
    out = {rel: dict(known[rel]) for rel, st in stats.items() if rel in known and
           (known[rel].get("size"), known[rel].get("mtime_ns")) == (st.st_size, st.st_mtime_ns)}
    todo = [rel for rel in rels if rel not in out]
    with _progress(sum(stats[rel].st_size for rel in todo), desc) as bar:
        for rel in todo:
            out[rel] = {"sha256": _sha256(root / rel, bar), "size": stats[rel].st_size,
                        "mtime_ns": stats[rel].st_mtime_ns}
    return {rel: out[rel] for rel in rels}


def verify_copy(key: str, data_dir: str | os.PathLike) -> tuple[int, int]:
    """Re-hash every file of the copy the completion record lists, and the recorded downloads still on disk (a
    rerun of prepare would extract them again; deleted ones are not needed); a GateError naming the first file
    missing, resized or changed. Returns (files, bytes) checked. Sizes are compared first, so a truncated file fails
    at once."""
    state = copy_state(data_dir)
    if state.state == "missing":
        raise DatasetUnavailable(state.message(key))
    if not state.usable:
        raise GateError(state.message(key))
    kept = {rel: f for rel, f in state.downloads.items() if (state.root / rel).is_file()}
    files = {**kept, **state.files}
    if not files:
        return 0, 0
    with _progress(sum(int(f["size"]) for f in files.values()), f"[gate] verifying {key}") as bar:
        for rel, facts in sorted(files.items()):
            if _sha256(state.root / rel, bar) != facts.get("sha256"):
                fix = ("delete it: the copy extracted from it does not need it, and a later fetch would extract it "
                       "again" if rel in kept else
                       f"delete it and rerun `gate-data prepare dataset={key}` to fetch it again")
                raise GateError(f"dataset {key!r}: {state.root / rel} changed since gate-data prepare fetched it (its "
                                f"sha256 is not the recorded {facts.get('sha256')}); {fix}")
    return len(files), sum(int(f["size"]) for f in files.values())


# ------------------------------------------------------------------------------------------------------------------
# Fetching (gate-data prepare only; never called while loading)


def network_errors() -> tuple[type[BaseException], ...]:
    """What a failed download raises, for every major version of huggingface_hub. urllib's URLError, socket errors
    and the hub client's HTTP errors are OSErrors; the client's transport errors are not: requests (0.x; its errors
    are OSErrors too), httpx (1.x) and httpx2 (2.x), and ``huggingface_hub.errors.HTTPError`` is whichever of them
    the installed client uses. Its Xet, missing-entry and revision-resolution errors are not either."""
    import importlib

    errors: list[type[BaseException]] = [OSError]
    for module, name in (("huggingface_hub.errors", "HTTPError"), ("huggingface_hub.errors", "EntryNotFoundError"),
                         ("huggingface_hub.errors", "XetDownloadError"),
                         ("huggingface_hub.errors", "RevisionResolutionError"), ("httpx2", "HTTPError"),
                         ("httpx", "HTTPError"), ("requests", "RequestException")):
        try:
            found = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if isinstance(found, type) and issubclass(found, BaseException):
            errors.append(found)
    return tuple(errors)


class _Record:
    """The completion record of one fetch: :meth:`begin` marks the copy incomplete before the first byte lands
    (so an interrupted fetch is never taken for a copy), :meth:`finish` rewrites it last, atomically, complete and
    with the size and sha256 of every file."""

    def __init__(self, key: str, source: Mapping[str, Any], root: Path):
        self.key, self.root, self.started = key, root, False
        # kept through the fetch: hashes to reuse (a file whose size and mtime did not change is not read again)
        self.known_files, self.known_downloads = record_parts(read_record(root) or {})
        self.downloads: dict[str, dict] = {}  # {relative path: {url or from, into}} of the archives extracted
        self.kept: set[str] = set()  # the files of ``unpack: false`` entries: left in .downloads/, part of the copy
        self.facts: dict[str, Any] = {"dataset": key, "source": source_label(source), "kind": source.get("kind", "hf")}
        if self.facts["kind"] == "hf":
            self.facts.update(repo_id=source.get("repo_id"), revision=source.get("revision"))
        if source.get("urls"):
            self.facts["urls"] = [u["url"] for u in source["urls"]]

    def _write(self, **extra: Any) -> None:
        atomic_write_text(self.root / SOURCE_FILE, json.dumps({**self.facts, **extra}, indent=1, allow_nan=False) + "\n")

    def begin(self) -> None:
        if not self.started:
            self._write(complete=False, why="the download did not finish", started=time.strftime("%Y-%m-%dT%H:%M:%S"),
                        files=self.known_files, downloads=self.known_downloads)
            self.started = True

    def extracted(self, rel: str, origin: Mapping[str, str]) -> None:
        """``rel`` (relative to the copy) is an archive (or a file copied out) the copy was extracted from, fetched
        from ``origin`` (``{"url": ...}`` or ``{"from": "<repo>:<path>"}``, and ``into``, the folder)."""
        self.downloads[rel] = dict(origin)

    def finish(self) -> None:
        self.begin()
        rels = copy_files(self.root)
        # A file left in .downloads/ that no entry extracted this time (an entry removed from the config) is no
        # part of the copy either; an ``unpack: false`` entry's file is, and was never registered.
        archives = [r for r in rels if r in self.downloads or (r.startswith(f"{DOWNLOADS}/") and r not in
                                                                 self.kept)]
        known = {**self.known_downloads, **self.known_files}
        hashed = hash_files(self.root, rels, f"[gate] hashing {self.key}", known)
        files = {rel: facts for rel, facts in hashed.items() if rel not in archives}
        downloads = {rel: {**hashed[rel], **self.downloads.get(rel, {})} for rel in archives}
        self._write(complete=True, finished=time.strftime("%Y-%m-%dT%H:%M:%S"), files=files, downloads=downloads)


def fetch(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike) -> Path:
    """Fetch a source into ``data_dir`` where that can be automated (hub, URLs), resuming an incomplete copy, and
    write its completion record with the hash of every file; Kaggle and registration sources get their
    instructions as a DatasetUnavailable, and so does a failed download (one line: why, and how to get the copy)."""
    kind = source.get("kind", "hf")
    root = Path(data_dir).expanduser()
    if kind not in ("hf", "url"):
        raise DatasetUnavailable(f"dataset {key!r} cannot be downloaded automatically ({source.get('access')} "
                                 f"access); {how_to_get(key, source, root)}")
    if is_offline():
        state = copy_state(root)
        where = {"missing": "not on disk", "incomplete": f"the local copy at {root} is an incomplete download "
                 f"({state.why})", "damaged": f"the local copy is damaged ({state.why})"}.get(state.state, "")
        raise DatasetUnavailable(f"dataset {key!r}: offline (HF_HUB_OFFLINE is set) and {where or 'asked to fetch'}; "
                                 f"{how_to_get(key, source, root)}")
    if source.get("access") == "gated" and not has_credentials(source):
        raise DatasetUnavailable(f"dataset {key!r}: {source.get('repo_id')} is gated and no Hugging Face token is "
                                 f"configured here; accept its terms at https://huggingface.co/datasets/"
                                 f"{source.get('repo_id')}, run `huggingface-cli login`, then rerun")
    _discard_resized(copy_state(root))
    record = _Record(key, source, root)
    try:
        if kind == "hf":
            _fetch_hf(key, source, root, record)
        else:
            _fetch_urls(key, source, root, record)
    except GateError:
        raise
    except network_errors() as err:
        why = " ".join(f"{type(err).__name__}: {err}".split())
        raise DatasetUnavailable(f"dataset {key!r}: downloading {source_label(source)} failed ({why[:300]}); rerun "
                                 f"`gate-data prepare dataset={key}` when the network is back (it resumes), or "
                                 f"{how_to_get(key, source, root)}") from err
    record.finish()
    return root


def _discard_resized(state: CopyState) -> None:
    """Delete the recorded files (and downloads) that have another size now (truncated, overwritten): the fetch gets
    them again (the hub client would keep a file its own bookkeeping still trusts, and a download kept in .downloads/
    would be extracted again as it is)."""
    for rel, facts in {**state.downloads, **state.files}.items():
        path = state.root / rel
        if path.is_file() and path.stat().st_size != facts.get("size"):
            path.unlink()


def _fetch_hf(key: str, source: Mapping[str, Any], root: Path, record: _Record) -> None:
    """Download the source's files (``source.files`` patterns) at the commit its revision names now (recorded),
    extract its ``unpack`` archives, then fetch its extra ``urls``."""
    from huggingface_hub import HfApi, snapshot_download

    patterns = [p for ps in (source.get("files") or {}).values() for p in ps]
    commit = HfApi().dataset_info(source["repo_id"], revision=source.get("revision")).sha
    record.facts["commit"] = commit
    record.begin()
    snapshot_download(repo_id=source["repo_id"], repo_type="dataset", revision=commit or source.get("revision"),
                      local_dir=str(root), allow_patterns=patterns or None)
    for archive, subfolder in (source.get("unpack") or {}).items():
        unpack_into(key, root / archive, root / subfolder)
        record.extracted(archive, {"from": f"{source['repo_id']}:{archive}", "into": subfolder})
    if source.get("urls"):
        _fetch_urls(key, source, root, record)


def unpack_into(key: str, path: Path, target: Path) -> None:
    """Extract the archive ``path`` into ``target``; a file that is no archive shutil can read (a ``.mat``, a
    ``.csv``, a ``.rar``) is placed there as it is (hard-linked where the file system allows, else copied)."""
    if not path.is_file():
        raise GateError(f"dataset {key!r}: {path} was not downloaded; rerun `gate-data prepare dataset={key}`")
    target.mkdir(parents=True, exist_ok=True)
    try:
        shutil.unpack_archive(str(path), str(target))
    except shutil.ReadError:
        if not (target / path.name).is_file():
            try:
                os.link(path, target / path.name)
            except OSError:
                shutil.copy2(path, target / path.name)


def sha256_of(path: str | os.PathLike, chunk: int = HASH_CHUNK) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(key: str, path: str | os.PathLike, expected: str | None) -> None:
    if expected and sha256_of(path) != expected.lower():
        raise GateError(f"dataset {key!r}: {path} does not match its sha256 {expected}; delete it and rerun "
                        f"`gate-data prepare dataset={key}` to download it again")


def _copy_stream(stream, path: str) -> None:
    with open(path, "wb") as fh:
        shutil.copyfileobj(stream, fh, HASH_CHUNK)


def _fetch_urls(key: str, source: Mapping[str, Any], root: Path, record: _Record) -> None:
    """Download each ``source.urls`` entry (``{url, sha256, to, unpack}``) into ``<data_dir>/.downloads`` (through
    an atomic write: a file there is whole, and a rerun keeps it), check its sha256, then extract it (an archive)
    or copy it (any other file) into ``<data_dir>/<to>`` (``unpack: false`` leaves it in ``.downloads``)."""
    import urllib.request

    for entry in source.get("urls", []):
        target = root / DOWNLOADS / entry["url"].rsplit("/", 1)[-1]
        if not target.is_file():
            with urllib.request.urlopen(entry["url"], timeout=60) as response:  # noqa: S310 - the config's own URLs
                record.begin()
                atomic_write(target, lambda tmp, response=response: _copy_stream(response, tmp))
        record.begin()
        check_sha256(key, target, entry.get("sha256"))
        rel = target.relative_to(root).as_posix()
        if entry.get("unpack", True):
            unpack_into(key, target, root / str(entry.get("to") or "."))
            record.extracted(rel, {"url": entry["url"], "into": str(entry.get("to") or ".")})
        else:
            record.kept.add(rel)

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
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import DatasetUnavailable, GateError

SOURCE_FILE = ".gate_source.json"  # written by gate-data prepare: what was downloaded (repo, revision, commit)
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
        return bool(os.environ.get("KAGGLE_USERNAME") and os.environ.get("KAGGLE_KEY")) or \
            (Path(os.environ.get("KAGGLE_CONFIG_DIR", Path.home() / ".kaggle")) / "kaggle.json").is_file()
    return access == "open"


def split_files(root: Path, patterns: Sequence[str]) -> list[Path]:
    found: list[str] = []
    for pattern in patterns:
        found.extend(glob.glob(str(root / pattern)))
    return sorted({Path(f) for f in found if Path(f).is_file()})


def require_local(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike | None,
                  files: Mapping[str, Sequence[str]]) -> dict[str, list[Path]]:
    """The files of each split in the local copy, or a one-line DatasetUnavailable naming the dataset, the
    directory or missing split, and what to do."""
    if not data_dir:
        raise DatasetUnavailable(f"dataset {key!r}: no dataset.data_dir given; {how_to_get(key, source, '<dir>')}")
    root = Path(data_dir).expanduser()
    if not root.is_dir() or not any(root.iterdir()):
        raise DatasetUnavailable(f"dataset {key!r} is not on disk (no local copy at {root}); "
                                 f"{how_to_get(key, source, root)}")
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


def require_columns(key: str, split: str, path: Path | str, have: Sequence[str], need: Sequence[str],
                    source: Mapping[str, Any]) -> None:
    missing = [c for c in need if c not in have]
    if missing:
        # The file's schema was read, so the file is intact: the config and the source disagree (no re-download).
        raise GateError(f"dataset {key!r}: {path} ({split}) has columns {list(have)}, but the dataset config reads "
                        f"{list(need)} (missing {missing}): the config's column names and {source_label(source)} "
                        f"disagree; fix the column names in the dataset config's builder")


def load_parquet(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike | None,
                 columns: Sequence[str] = (), cache_dir: str | os.PathLike | None = None,
                 image_columns: Sequence[str] = ()):
    """The source's splits from the parquet files of a local copy of a hub repo (same paths and columns), as a
    ``datasets.DatasetDict``. Images stored as ``{"bytes", "path"}`` structs are decoded by datasets' Image
    feature. ``cache_dir`` keeps datasets' Arrow conversion (under ``paths.cache``, never ``$HOME``)."""
    import datasets
    import pyarrow.parquet as pq

    files = require_local(key, source, data_dir, source.get("files") or {})
    for split, paths in files.items():
        require_columns(key, split, paths[0], pq.read_schema(paths[0]).names, columns, source)
    cache = str(Path(cache_dir) / "datasets") if cache_dir else None
    try:
        raw = datasets.load_dataset("parquet", data_files={s: [str(p) for p in ps] for s, ps in files.items()},
                                    cache_dir=cache)
    except Exception as err:  # noqa: BLE001 - a corrupt or foreign file: say which dataset and directory
        raise GateError(f"dataset {key!r}: the parquet files in {data_dir} cannot be read ({type(err).__name__}: "
                        f"{err}); re-download with `gate-data prepare dataset={key} force=true`") from err
    for column in image_columns:
        for split in raw:
            feature = raw[split].features.get(column)
            if feature is not None and not isinstance(feature, datasets.Image):
                raw[split] = raw[split].cast_column(column, datasets.Image())
    return raw


# ------------------------------------------------------------------------------------------------------------------
# Fetching (gate-data prepare only; never called while loading)


def fetch_hf(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike) -> Path:
    """Download the source's files (``source.files`` patterns) at its pinned revision into ``data_dir``."""
    if is_offline():
        raise DatasetUnavailable(f"dataset {key!r}: offline (HF_HUB_OFFLINE is set) and not on disk; "
                                 f"{how_to_get(key, source, data_dir)}")
    if source.get("access") == "gated" and not has_credentials(source):
        raise DatasetUnavailable(f"dataset {key!r}: {source.get('repo_id')} is gated and no Hugging Face token is "
                                 f"configured here; accept its terms at https://huggingface.co/datasets/"
                                 f"{source.get('repo_id')}, run `huggingface-cli login`, then rerun")
    from huggingface_hub import HfApi, snapshot_download

    patterns = [p for ps in (source.get("files") or {}).values() for p in ps]
    root = Path(data_dir).expanduser()
    snapshot_download(repo_id=source["repo_id"], repo_type="dataset", revision=source.get("revision"),
                      local_dir=str(root), allow_patterns=patterns or None)
    commit = HfApi().dataset_info(source["repo_id"], revision=source.get("revision")).sha
    for archive, subfolder in (source.get("unpack") or {}).items():
        unpack_into(key, root / archive, root / subfolder)
    if source.get("urls"):
        fetch_urls(key, source, root)
    (root / SOURCE_FILE).write_text(json.dumps({"repo_id": source["repo_id"], "revision": source.get("revision"),
                                                "commit": commit}, indent=1) + "\n")
    return root


def unpack_into(key: str, path: Path, target: Path) -> None:
    """Extract the archive ``path`` into ``target``; a file that is no archive shutil can read (a ``.mat``, a
    ``.csv``, a ``.rar``) is placed there as it is (hard-linked where the file system allows, else copied)."""
    if not path.is_file():
        raise GateError(f"dataset {key!r}: {path} was not downloaded; rerun `gate-data prepare dataset={key} "
                        f"force=true`")
    target.mkdir(parents=True, exist_ok=True)
    try:
        shutil.unpack_archive(str(path), str(target))
    except shutil.ReadError:
        if not (target / path.name).is_file():
            try:
                os.link(path, target / path.name)
            except OSError:
                shutil.copy2(path, target / path.name)


def sha256_of(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(key: str, path: str | os.PathLike, expected: str | None) -> None:
    if expected and sha256_of(path) != expected.lower():
        raise GateError(f"dataset {key!r}: {path} does not match its sha256 {expected}; delete it and download "
                        f"it again (`gate-data prepare dataset={key} force=true`)")


def fetch_urls(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike) -> Path:
    """Download each ``source.urls`` entry (``{url, sha256, to, unpack}``) into ``<data_dir>/.downloads``, check
    its sha256, then extract it (an archive) or copy it (any other file) into ``<data_dir>/<to>``
    (``unpack: false`` leaves it in ``.downloads``)."""
    if is_offline():
        raise DatasetUnavailable(f"dataset {key!r}: offline and not on disk; {how_to_get(key, source, data_dir)}")
    import urllib.request

    root = Path(data_dir).expanduser()
    (root / ".downloads").mkdir(parents=True, exist_ok=True)
    for entry in source.get("urls", []):
        target = root / ".downloads" / entry["url"].rsplit("/", 1)[-1]
        if not target.is_file():
            tmp = target.with_suffix(target.suffix + ".part")
            with urllib.request.urlopen(entry["url"], timeout=60) as response, open(tmp, "wb") as fh:  # noqa: S310
                shutil.copyfileobj(response, fh)
            os.replace(tmp, target)
        check_sha256(key, target, entry.get("sha256"))
        if entry.get("unpack", True):
            unpack_into(key, target, root / str(entry.get("to") or "."))
    return root


def fetch(key: str, source: Mapping[str, Any], data_dir: str | os.PathLike) -> Path:
    """Fetch a source into ``data_dir`` where that can be automated (hub, URLs); Kaggle and registration sources
    get their instructions as a DatasetUnavailable."""
    kind = source.get("kind", "hf")
    if kind == "hf":
        return fetch_hf(key, source, data_dir)
    if kind == "url":
        return fetch_urls(key, source, data_dir)
    raise DatasetUnavailable(f"dataset {key!r} cannot be downloaded automatically ({source.get('access')} access); "
                             f"{how_to_get(key, source, data_dir)}")

"""The results store: one append-only JSONL file of records, one row per (experiment, split, metric).

Every entry point (``gate-run``, ``gate-score``) appends here and the analysis stage reads from here.
Appends are atomic at the line level: all records of one call go out in a single ``write`` on a file
opened with ``O_APPEND`` under an exclusive ``flock``, then ``fsync``. A crash mid-write can at worst
leave one truncated last line; readers skip such a line with a warning, and the next append starts on
a fresh line, so history is never rewritten and no good record is lost.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import fcntl
import hashlib
import json
import math
import os
import socket
import stat
import subprocess
import uuid
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import GateError
from .files import file_kind, open_regular, writing
from .parallel import LAYOUT_KEYS
from .settings import ADAPTER_FACTS, RUN, SCORE, run_only_keys, yaml_defaults

KINDS = ("finetune", "score")

# Keys of a resolved config that change where or how a run is logged or computed, but not the numbers it
# records: they are left out of the experiment id, so moving the output directory, switching the logger or
# asking for more scores does not make a finished experiment look new. ``a.b`` names a nested key. A declared
# key says so on its declaration (gate.settings: ``run_only=True``); here are those no table declares:
_UNDECLARED_RUN_ONLY = (
    # Hydra's own node, and keys of older configs (ids made then left them out too)
    "hydra", "launcher", "timing", "progress_bar", "num_workers", "pin_memory",
    # the process layout: where it changes the numbers, identity() adds the world size back
    *LAYOUT_KEYS,
    # where a dataset's (generated or downloaded) files are kept, not what they hold (builder parameters)
    "dataset.builder.cache_dir", "dataset.builder.data_dir",
    # a fact of the adapter's class, stated in its YAML: identity() reads it for the layout
    *(f"adapter.{key}" for key in ADAPTER_FACTS))
# (split manifests live under paths.data, already run-only: the source hash inside a manifest, checked on load,
# guards what the data is; dataset.splits and dataset.source.revision stay in the identity)
RUN_ONLY_KEYS: dict[str, tuple[str, ...]] = {
    "finetune": tuple(dict.fromkeys(run_only_keys(RUN) + _UNDECLARED_RUN_ONLY)),
    # gate-score: which scores to compute, the device, batch size and cache (speed, not features), and the adapter
    # and recipe (composed only so that encoder and dataset configs compose as in gate-run): marked in SCORE
    "score": tuple(dict.fromkeys(run_only_keys(SCORE) + _UNDECLARED_RUN_ONLY)),
}
# Keys added after stores already held experiments: at their default (read from conf/run.yaml, where it is stated
# once) they are left out of the identity, so an experiment id computed before the key existed is the one computed
# after; any other value is part of it.
DEFAULT_ONLY_IF_SET: dict[str, Any] = {key: yaml_defaults("run.yaml")[key] for key in ("evaluate_test",)}
# Keys that vary between the runs that analysis compares or averages: the seed (replicas) and the entrant
# (the encoder and the recipe that follows its encoder.architecture). What is left is the protocol.
REPLICA_KEYS = ("seed",)
ENTRANT_KEYS = ("encoder", "recipe")


# Names changed after experiments were stored under the old ones (issue 16: one word, one meaning; the loaders'
# package moved). The identity keeps the names the stores know, so a rename never changes an experiment id: a stored
# run is not re-run by gate-tier and stays one variant in gate-analysis. A later rename adds a line; none is removed.
STORED_KEY_NAMES: dict[str, dict[str, str]] = {
    "dataset": {"paper_group": "family", "paper_protocol": "protocol"},
    "encoder": {"architecture": "family", "model_type": "architecture"},
}
STORED_MODULE_NAMES: dict[str, str] = {"gate.data.loaders.": "gate.data.benchmarks."}


def _stored_names(ident: dict[str, Any]) -> dict[str, Any]:
    out = dict(ident)
    for section, renames in STORED_KEY_NAMES.items():
        if isinstance(out.get(section), Mapping):
            out[section] = {renames.get(k, k): v for k, v in out[section].items()}
    return _stored_modules(out)


def _stored_modules(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: _stored_modules(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_stored_modules(v) for v in node]
    if isinstance(node, str):
        for new, old in STORED_MODULE_NAMES.items():
            if node.startswith(new):
                return old + node[len(new):]
    return node


def identity(config: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The part of a resolved config that identifies a ``kind`` experiment (run-only keys dropped).

    This is the one rule for what identifies an experiment: ``gate-run``, ``gate-score``, the records'
    ``config`` field and the analysis stage all go through it.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    ident = _stored_names(_without(config, [key.split(".") for key in RUN_ONLY_KEYS[kind]]))
    if kind == "finetune":
        for key, default in DEFAULT_ONLY_IF_SET.items():
            if key in ident and ident[key] == default:  # absent from ids made before the key existed: keep them
                del ident[key]
        layout = _layout(config)
        if layout:  # several devices change this adapter's loss (gate.parallel): they are part of the experiment
            ident["data_parallel"] = layout
    return ident


def _layout(config: Mapping[str, Any]) -> dict[str, Any]:
    from .parallel import layout_identity  # noqa: PLC0415

    trainer, adapter = config.get("trainer"), config.get("adapter")
    if not isinstance(trainer, Mapping):
        return {}
    # the adapter's YAML states whether its loss splits across devices (gate-run checks it against the class): read as
    # data, so the id never imports the adapter (torch), and an adapter that cannot be imported here has the same id
    splits = isinstance(adapter, Mapping) and adapter.get("loss_splits_across_devices") is True
    return layout_identity(splits, trainer)


def experiment_id(config: Mapping[str, Any], kind: str) -> str:
    """A stable 16-hex-digit id of a ``kind`` experiment: the hash of its :func:`identity`."""
    return stable_hash(identity(config, kind))


def protocol(config: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """What an experiment measures apart from who is measured and with which seed: its identity without
    :data:`REPLICA_KEYS` and :data:`ENTRANT_KEYS`. Two runs with equal protocols are comparable."""
    return _without(identity(config, kind), [[k] for k in REPLICA_KEYS + ENTRANT_KEYS])


def stable_hash(data: Any) -> str:
    """A 16-hex-digit hash of plain data (dicts, lists, scalars); key order does not matter."""
    blob = json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Record:
    """One measured number. The field order is the schema of DESIGN.md.

    ``higher_is_better`` comes from the metric registry (:mod:`gate.metrics`) when not given; a value that
    contradicts the registry is refused. ``attempt`` and ``set_size`` make record sets checkable: every
    record appended by one :meth:`ResultsStore.append_set` call carries the same attempt id and the size of
    the set, so a set torn by a crash is seen as incomplete (``set_size`` 0: a legacy record, trusted).
    ``facts`` holds how the run went (wall time, throughput, peak memory, ``resumed_from_step``, ...).
    """

    experiment: str
    kind: str
    encoder: str
    dataset: str
    task: str
    adapter: str
    recipe: str
    seed: int
    split: str
    metric: str
    value: float
    higher_is_better: bool | None = None
    timestamp: str = ""
    git: str = ""
    config: Mapping[str, Any] | None = None
    attempt: str = ""
    set_size: int = 0
    facts: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        from .metrics import lookup

        if self.kind not in KINDS:
            raise ValueError(f"Record.kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("experiment", "encoder", "dataset", "split", "metric"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"Record.{name} must be a non-empty string, got {getattr(self, name)!r}")
        value = float(self.value)
        if not math.isfinite(value):
            raise ValueError(f"Record.value for metric {self.metric!r} is {value}; refusing to store a non-finite "
                             f"value")
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "set_size", int(self.set_size))
        if self.facts is not None:  # a fact that could not be measured is null, never a bare NaN in the JSONL
            object.__setattr__(self, "facts", _null_if_not_finite(dict(self.facts)))
        known = lookup(self.metric)
        if self.higher_is_better is None:
            if known is None:
                raise ValueError(f"metric {self.metric!r} is not in the metric registry (gate/metrics.py): "
                                 f"register it or give higher_is_better")
            object.__setattr__(self, "higher_is_better", known.higher_is_better)
        elif known is not None and bool(self.higher_is_better) != known.higher_is_better:
            raise ValueError(f"metric {self.metric!r} is {'higher' if known.higher_is_better else 'lower'}-is-better "
                             f"in the metric registry; the record says otherwise")
        object.__setattr__(self, "higher_is_better", bool(self.higher_is_better))
        if not self.timestamp:
            object.__setattr__(self, "timestamp", now_iso())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FIELDS = tuple(f.name for f in dataclasses.fields(Record))


def _null_if_not_finite(node: Any) -> Any:
    """``node`` with every NaN or infinite float (at any depth) replaced by None."""
    if isinstance(node, float):
        return node if math.isfinite(node) else None
    if isinstance(node, Mapping):
        return {k: _null_if_not_finite(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_null_if_not_finite(v) for v in node]
    return node


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _without(node: Mapping[str, Any], paths: list[list[str]]) -> dict[str, Any]:
    top = {p[0] for p in paths if len(p) == 1}
    out = {}
    for key, value in node.items():
        if key in top:
            continue
        nested = [p[1:] for p in paths if len(p) > 1 and p[0] == key]
        out[key] = _without(value, nested) if nested and isinstance(value, Mapping) else value
    return out


def git_describe(cwd: str | os.PathLike | None = None) -> str:
    """The commit of the code that produced a record (with ``-dirty`` when modified), or ``""``."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=cwd or Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
            # Never take the user's .git/index.lock (a `git commit` beside a running sweep must not fail).
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


#: How much of a store's first line is read to tell a store from another file (a record line is a few KB).
_FIRST_LINE_BYTES = 1 << 20


class ResultsStore:
    """An append-only JSONL file of :class:`Record` rows."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path).expanduser().resolve()
        given = Path(path).expanduser().absolute()
        # messages name the path the user gave (a link named as such), not only where it leads
        self.shown = f"{given} (a link to {self.path})" if given != self.path else str(self.path)

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.path)!r})"

    def append(self, records: Iterable[Record]) -> int:
        """Append records atomically (one locked write); returns how many were written."""
        rows = [r.to_dict() if isinstance(r, Record) else Record(**r).to_dict() for r in records]
        if not rows:
            return 0
        payload = "".join(json.dumps(row, sort_keys=False, default=str, allow_nan=False) + "\n"
                          for row in rows).encode("utf-8")
        with writing(self.path, "records"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # checked before the open (a FIFO would wait for a reader) and on the open file (nothing swapped it)
            self._refuse_unless_regular(os.stat(self.path).st_mode if self.path.exists() else stat.S_IFREG)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
            try:
                self._refuse_unless_regular(os.fstat(fd).st_mode)
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._refuse_unless_a_store(fd)
                size = os.fstat(fd).st_size
                if size > 0 and not _ends_with_newline(self.path, size):
                    payload = b"\n" + payload  # a previous writer crashed mid-line: never glue onto it
                _write_all(fd, payload)
                os.fsync(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        return len(rows)

    def _refuse_unless_regular(self, mode: int) -> None:
        if not stat.S_ISREG(mode):
            raise GateError(f"results store {self.path} is {file_kind(mode)}, not a regular file: gate appends "
                            f"records to a regular file only; set paths.results to a file path")

    def _refuse_unless_a_store(self, fd: int) -> None:
        """A file whose first line is not a record is not a results store (a link to someone's notes would be
        warned about line by line, then appended to). A torn line is a crash's trace and is allowed anywhere but
        first; a first line torn by a crash still begins a record (``{"``)."""
        head = os.pread(fd, _FIRST_LINE_BYTES, 0)
        if not head:
            return
        line, newline, _ = head.partition(b"\n")
        try:
            row = json.loads(line) if newline else None
        except ValueError:
            row = None
        if newline and not (isinstance(row, dict) and {"experiment", "metric", "value"} <= set(row)):
            raise GateError(f"{self.shown} is not a results store: its first line is not a record "
                            f"({line[:60].decode('utf-8', 'replace')!r}); gate writes nothing to it: move it away "
                            f"or set paths.results (or paths.root) elsewhere")
        if not newline and not line.lstrip().startswith(b'{"'):
            raise GateError(f"{self.shown} is not a results store: it holds no record; gate writes nothing to it: "
                            f"move it away or set paths.results (or paths.root) elsewhere")

    def check_writable(self) -> None:
        """Before any work (a run trains for hours before it appends): the store is a results store this process can
        append to, or one line saying why not and what to do. Nothing is written."""
        with writing(self.path, "records"):
            if not self.path.exists():
                folder = self.path.parent
                folder.mkdir(parents=True, exist_ok=True)
                try:
                    os.close(os.open(folder, os.O_RDONLY | os.O_DIRECTORY))
                    probe = folder / f".{self.path.name}.{uuid.uuid4().hex[:8]}.write-test"
                    os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                    os.unlink(probe)
                except OSError as err:
                    raise GateError(self._unwritable(err)) from None
                return
            self._refuse_unless_regular(os.stat(self.path).st_mode)
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as err:
                if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ETXTBSY):
                    raise GateError(self._unwritable(err)) from None
                raise
            try:
                self._refuse_unless_regular(os.fstat(fd).st_mode)
            finally:
                os.close(fd)
            with open_regular(self.path, "results store") as fh:
                self._refuse_unless_a_store(fh.fileno())

    def _unwritable(self, err: OSError) -> str:
        return (f"the results store {self.shown} cannot be written ({err.strerror or err}): make it (and its folder) "
                f"writable, or set another paths.root (or paths.results); nothing was run")

    def append_set(self, records: Iterable[Record], facts: Mapping[str, Any] | None = None) -> int:
        """Append one experiment's complete record set: each record gets the set's attempt id, its size and
        ``facts``; a reader counts the set only when all of it is there (:meth:`complete_sets`)."""
        records = list(records)
        attempt = uuid.uuid4().hex[:16]
        return self.append(dataclasses.replace(r, attempt=attempt, set_size=len(records),
                                               facts=dict(facts) if facts is not None else r.facts)
                           for r in records)

    def records(self) -> list[dict[str, Any]]:
        """All well-formed records, in the order they were written. Corrupt lines are skipped with a warning; a file
        whose first line is not a record is refused (it is not a store)."""
        if not self.path.exists():
            return []
        with open_regular(self.path, "records file") as fh:
            self._refuse_unless_a_store(fh.fileno())
        return list(read_jsonl(self.path))

    def complete_records(self, experiment: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """The records of complete sets only (a set torn by a crash is left out), optionally of one experiment."""
        rows = [r for r in self.records() if (experiment is None or r.get("experiment") == experiment)
                and (kind is None or r.get("kind") == kind)]
        seen: dict[str, int] = {}
        for r in rows:
            if r.get("attempt"):
                seen[r["attempt"]] = seen.get(r["attempt"], 0) + 1
        return [r for r in rows if not r.get("set_size") or seen.get(r.get("attempt", ""), 0) >= int(r["set_size"])]

    def has_experiment(self, experiment: str, kind: str | None = None) -> bool:
        """Whether a complete record set of ``experiment`` is stored (a torn set does not count)."""
        return bool(self.complete_records(experiment, kind))

    def to_frame(self):
        """The records as a pandas DataFrame with the schema's columns (empty if the store is empty)."""
        import pandas as pd

        rows = self.records()
        return pd.DataFrame(rows, columns=list(FIELDS)) if not rows else pd.DataFrame(rows)


def read_jsonl(path: str | os.PathLike) -> Iterable[dict[str, Any]]:
    """Yield the JSON objects of a JSONL file, warning about (and skipping) each corrupt line by number:
    torn JSON, bytes that are not UTF-8, anything but an object. Only a regular file is read (a link to /dev/zero
    would be read without end, a FIFO would block): anything else is refused in one line naming it."""
    with open_regular(path, "records file") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                warnings.warn(f"{path}:{lineno}: skipping a record line that is not UTF-8 text", stacklevel=2)
                continue
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                warnings.warn(f"{path}:{lineno}: skipping corrupt record line ({err.msg})", stacklevel=2)
                continue
            if not isinstance(row, dict):
                warnings.warn(f"{path}:{lineno}: skipping a line that is not a JSON object", stacklevel=2)
                continue
            yield row


class ExperimentLock:
    """An exclusive per-experiment lock (``flock`` on ``<run_dir>/lock``), so twin runs never share checkpoints.

    The operating system releases it when the holder dies, so a killed run never leaves a stale lock.
    """

    def __init__(self, run_dir: str | os.PathLike, experiment: str) -> None:
        self.path = Path(run_dir) / "lock"
        self.experiment = experiment
        self._fd: int | None = None

    def __enter__(self) -> ExperimentLock:
        from .errors import GateError

        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Never through a link (a planted <run>/lock -> a file outside paths.root would be truncated and written), and
        # without blocking on a FIFO: the lock must be a regular file of its own
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise GateError(f"lock {self.path} is a link (to {os.path.realpath(self.path)}): gate writes no file "
                                f"under paths.root through a link; remove it and run again") from None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            kind = file_kind(os.fstat(fd).st_mode)
            os.close(fd)
            raise GateError(f"lock {self.path} is {kind}, not a regular file: remove it and run again")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise GateError(f"experiment {self.experiment} is already running ({holder}; lock {self.path}); "
                            f"wait for it to finish (its records will land in the store) or stop it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {now_iso()}".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _ends_with_newline(path: Path, size: int) -> bool:
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1) == b"\n"


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]

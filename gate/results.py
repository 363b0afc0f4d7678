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
import fcntl
import hashlib
import json
import math
import os
import subprocess
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

KINDS = ("finetune", "score")

# Keys of the resolved run config that change where/how a run is logged but not what it computes:
# they are left out of the experiment id so that moving the output directory or switching the logger
# does not make a finished experiment look new.
RUN_ONLY_KEYS = ("paths", "logger", "force", "hydra", "launcher", "progress_bar", "num_workers", "timing",
                 "trainer.enable_progress_bar", "trainer.enable_model_summary", "trainer.log_every_n_steps",
                 "data.num_workers")


@dataclasses.dataclass(frozen=True)
class Record:
    """One measured number. The field order is the schema of DESIGN.md."""

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
    higher_is_better: bool
    timestamp: str = ""
    git: str = ""
    config: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Record.kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("experiment", "encoder", "dataset", "split", "metric"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"Record.{name} must be a non-empty string, got {getattr(self, name)!r}")
        value = float(self.value)
        if math.isnan(value):
            raise ValueError(f"Record.value for metric {self.metric!r} is NaN; refusing to store it")
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "higher_is_better", bool(self.higher_is_better))
        if not self.timestamp:
            object.__setattr__(self, "timestamp", now_iso())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FIELDS = tuple(f.name for f in dataclasses.fields(Record))


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def experiment_id(config: Mapping[str, Any], drop: Iterable[str] = RUN_ONLY_KEYS) -> str:
    """A stable 16-hex-digit hash of a resolved config, ignoring run-only keys (``a.b`` names a nested key).

    ``config`` must be plain data (dicts, lists, scalars), e.g. ``OmegaConf.to_container(cfg, resolve=True)``.
    Key order does not matter.
    """
    kept = _without(config, [key.split(".") for key in drop])
    blob = json.dumps(kept, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


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
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


class ResultsStore:
    """An append-only JSONL file of :class:`Record` rows."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path).expanduser().resolve()

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.path)!r})"

    def append(self, records: Iterable[Record]) -> int:
        """Append records atomically; returns how many were written."""
        rows = [r.to_dict() if isinstance(r, Record) else Record(**r).to_dict() for r in records]
        if not rows:
            return 0
        payload = "".join(json.dumps(row, sort_keys=False, default=str) + "\n" for row in rows).encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size > 0 and not _ends_with_newline(self.path, size):
                payload = b"\n" + payload  # a previous writer crashed mid-line: never glue onto it
            _write_all(fd, payload)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return len(rows)

    def records(self) -> list[dict[str, Any]]:
        """All well-formed records, in the order they were written. Corrupt lines are skipped with a warning."""
        return list(read_jsonl(self.path)) if self.path.exists() else []

    def has_experiment(self, experiment: str, kind: str | None = None) -> bool:
        return any(
            r.get("experiment") == experiment and (kind is None or r.get("kind") == kind) for r in self.records()
        )

    def to_frame(self):
        """The records as a pandas DataFrame with the schema's columns (empty if the store is empty)."""
        import pandas as pd

        rows = self.records()
        return pd.DataFrame(rows, columns=list(FIELDS)) if not rows else pd.DataFrame(rows)


def read_jsonl(path: str | os.PathLike) -> Iterable[dict[str, Any]]:
    """Yield the JSON objects of a JSONL file, warning about (and skipping) each corrupt line by number."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
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


def _ends_with_newline(path: Path, size: int) -> bool:
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1) == b"\n"


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]

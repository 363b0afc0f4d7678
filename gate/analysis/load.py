"""Read results into one long DataFrame, validate them, and average repeated runs over seeds.

Three inputs are accepted; the format is detected from the file:

1. **JSONL records** of the results store (``gate/results.py``): one JSON object per line with the
   fields of :class:`gate.results.Record`. A corrupt line is skipped with a warning naming the line
   (:func:`gate.results.read_jsonl`); the rest is kept.
2. **Long CSV**: one row per measured number with at least ``encoder, dataset, metric, value``;
   optional ``kind`` (``finetune`` | ``score``, default ``finetune``), ``seed`` (default 0),
   ``higher_is_better``, ``paper_group``, ``task``, ``adapter``, ``recipe``, ``split``, ``experiment``,
   ``timestamp``, ``num_classes``, ``capped`` (how the evaluated split was capped; marked ‡ in tables).
3. **Wide CSV**: the layout of the GATE paper's Table 3 (and of ``table.csv`` written by
   ``gate-analysis``): one row per metric with ``paper_group, dataset, metric, higher_is_better`` and one
   column per encoder. Rows with an empty ``dataset`` are aggregates (the paper's "Task Mean",
   "GATE Mean/Rank" rows): they are kept out of every computation and returned separately so that
   our own summaries can be checked against them.

Anything else is refused with one line naming the file: a binary or non-UTF-8 file is "not a results
file"; an empty table, missing columns, a non-number, and a value that is ``inf`` or ``-inf`` (naming
the file, row, dataset, metric and encoder) are errors, and so is a table whose values are all equal
(nothing to rank or predict).

**Metric direction** (which way is better) comes from the one registry, :mod:`gate.metrics`: a
registered metric name always gets the registry's direction. When a file's ``higher_is_better``
contradicts the registry (records written by older code), the registry wins, with a warning. Only a
name the registry does not know takes the file's ``higher_is_better``, or, when the file does not
say, a guess from the name (:func:`gate.metrics.guess_higher_is_better`), with a warning naming
every guessed metric.

**Protocols, entrants and replicas.** Records that differ only by seed are replicas and are averaged.
What else identifies an experiment splits into the *entrant* (the encoder and its recipe,
:data:`gate.results.ENTRANT_KEYS`) and the *protocol* (everything else: dataset, adapter, trainer,
data caps, image size, ...; :func:`gate.results.protocol`). A record's ``variant`` is the hash of its
protocol (``gate.results.stable_hash(protocol(config, kind))``); CSV rows, which carry no config, use
their ``task`` and ``adapter`` as protocol and their ``recipe`` as entrant.

* **One dataset, several protocols** are never averaged together. The *main* variant keeps the bare
  dataset name and is the one that enters tier and group means: the variant that covers the most
  encoders, then the one with the most records, then the earliest (:func:`choose_main_variant`). Every
  other variant is labelled by the protocol keys that differ from the main one, flattened with dots,
  e.g. ``digits[image_size=64]`` or ``digits[data.max_val_samples=null,trainer.max_steps=500]`` (at
  most 3 keys, then ``+N more``); it stays in the tables and correlations but is left out of tier and
  group means, with a warning naming it (``summary.csv``: ``main_variant``; ``tiers_benchmarks.csv``:
  ``in_means``). A CSV row whose dataset is written ``name[label]`` (as ``table.csv`` writes such a
  variant) is read back as the variant ``label`` of ``name``, never the main one.
* **One encoder name, several entrants**: when runs of one encoder name share a protocol and a seed
  but differ in their entrant config (``encoder=timm`` with ``pretrained`` true and false, or two
  recipes), they are not seeds of one experiment: the encoder is labelled by the entrant keys that
  tell them apart, e.g. ``timm_resnet50[encoder.pretrained=false]``; the entrant that covers the most
  benchmarks keeps the bare name.

Missing values: an empty cell of a wide table is a missing result; it is simply absent from the long
frame (never filled). A long table's row without a value (empty, ``nan``) is left out with a warning counting and
naming the rows; a record's ``value`` can never be missing (the store refuses NaN; a hand-edited NaN record is
skipped with a warning naming it).

Duplicates: rows of a long table that are the same result (encoder, dataset, protocol, seed, split, metric) are
named in a warning and counted once when their values agree, and refused when they disagree (which one is right
cannot be known). Records of one experiment stored more than once (a rerun with ``force=true`` appends a new set):
the latest wins, with a warning naming each replaced value.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gate import metrics as metric_registry
from gate.files import regular_file
from gate.results import ENTRANT_KEYS, FIELDS, KINDS, identity, protocol, read_jsonl, stable_hash

REQUIRED = ("encoder", "dataset", "metric", "value")
WIDE_META = ("paper_group", "dataset", "metric", "higher_is_better")
# Columns of a wide table that describe the row rather than naming an encoder.
WIDE_RESERVED = WIDE_META + ("kind", "task", "adapter", "recipe", "split", "num_classes", "n", "std")
LONG_COLUMNS = (
    "kind", "encoder", "dataset", "paper_group", "task", "adapter", "recipe", "seed", "split", "metric",
    "value", "higher_is_better", "experiment", "variant", "protocol", "entrant", "entrant_config",
    "timestamp", "num_classes", "capped", "degenerate", "order",
)
# At most this many differing keys in a variant's label, then "+N more".
LABEL_KEYS = 3
# The protocol key under which a CSV's "name[label]" dataset keeps its label.
_CSV_LABEL = "variant"
_LABELLED_DATASET = re.compile(r"^(?P<base>[^\[\]]+?)\s*\[(?P<label>.+)\]$")
_UNSET = "(unset)"
# Formats that are certainly not results, by their first bytes.
_MAGIC = ((b"\x89PNG", "a PNG image"), (b"\x1f\x8b", "gzip-compressed"), (b"PK\x03\x04", "a zip archive"),
          (b"%PDF", "a PDF document"), (b"BZh", "bzip2-compressed"), (b"\xfd7zXZ", "xz-compressed"),
          (b"\x93NUMPY", "a numpy array"), (b"PAR1", "a Parquet file"), (b"\x7fELF", "an executable"),
          (b"GIF8", "a GIF image"), (b"\xff\xd8\xff", "a JPEG image"))
NOT_RESULTS = "not a results file (expected JSONL records or a CSV, as UTF-8 text"


@dataclasses.dataclass
class Loaded:
    """Results read from one file."""

    long: pd.DataFrame  # one row per measured number, columns LONG_COLUMNS
    aggregates: pd.DataFrame | None  # wide-table rows with an empty dataset (published aggregates)
    source: Path
    format: str  # "jsonl" | "long-csv" | "wide-csv"

    @property
    def encoders(self) -> list[str]:
        return list(dict.fromkeys(self.long["encoder"]))


def load_results(path: str | Path) -> Loaded:
    """Read a results file (JSONL records, long CSV or wide CSV) into a validated long DataFrame."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"results file {str(path)!r} does not exist (run gate-run/gate-score first, "
                                f"or give results=<a .jsonl or .csv file>)")
    if path.is_dir():
        raise IsADirectoryError(f"results path {str(path)!r} is a directory; give a .jsonl or .csv file")
    regular_file(path, "results file")  # a FIFO would block, a link to /dev/zero would be read without end
    _check_text_file(path)
    if _looks_like_jsonl(path):
        long, fmt, aggregates = _read_records(path), "jsonl", None
    else:
        frame = _read_csv(path)
        if _is_wide(frame):
            long, aggregates = _from_wide(frame, path)
            fmt = "wide-csv"
        else:
            long, fmt, aggregates = _from_long_csv(frame, path), "long-csv", None
    _check_loaded(long, path)
    return Loaded(long=long, aggregates=aggregates, source=path, format=fmt)


def from_frame(frame: pd.DataFrame, source: str = "<frame>") -> Loaded:
    """Like :func:`load_results` for an in-memory DataFrame in the long or wide layout."""
    frame = frame.copy()
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.empty:
        raise ValueError(f"{source}: the table is empty: no results to analyse")
    if _is_wide(frame):
        long, aggregates = _from_wide(frame, Path(source))
        fmt = "wide-csv"
    else:
        long, aggregates, fmt = _from_long_csv(frame, Path(source)), None, "long-csv"
    _check_loaded(long, source)
    return Loaded(long=long, aggregates=aggregates, source=Path(source), format=fmt)


def _check_loaded(long: pd.DataFrame, source: Any) -> None:
    if long.empty:
        raise ValueError(f"{source}: the table is empty: it holds no results (no non-missing values)")
    values = long["value"].to_numpy(dtype=float)
    if len(values) > 1 and np.all(values == values[0]):
        raise ValueError(f"{source}: every value in the table is {values[0]:g} ({len(values)} results): a constant "
                         f"table has nothing to rank or predict")


# ------------------------------------------------------------------------------------------ direction


def resolve_directions(metrics: Iterable[str], explicit: Iterable[bool | None] | None, source: Any) -> list[bool]:
    """``higher_is_better`` per metric name: the registry's (:mod:`gate.metrics`) for a registered name, else
    the explicit value, else a guess from the name. Warns about contradictions and guesses, naming the metrics."""
    metrics = [str(m) for m in metrics]
    explicit = [None] * len(metrics) if explicit is None else list(explicit)
    out: list[bool] = []
    cache: dict[tuple[str, bool | None], bool] = {}
    contradicted: dict[str, bool] = {}
    guessed: dict[str, bool] = {}
    for m, e in zip(metrics, explicit):
        key = (m, e)
        if key not in cache:
            info = metric_registry.lookup(m)
            if info is not None:
                if e is not None and bool(e) != info.higher_is_better:
                    contradicted[m] = info.higher_is_better
                cache[key] = info.higher_is_better
            elif e is not None:
                cache[key] = bool(e)
            else:
                cache[key] = guessed[m] = metric_registry.guess_higher_is_better(m)
        out.append(cache[key])
    if contradicted:
        said = {m: not hib for m, hib in contradicted.items()}
        warnings.warn(f"{source}: higher_is_better of metric(s) {sorted(contradicted)} contradicts the registry "
                      f"(gate/metrics.py; records written by older code?): the file says {said}; using the "
                      f"registry's {contradicted}", stacklevel=3)
    if guessed:
        higher = sorted(m for m, h in guessed.items() if h)
        lower = sorted(m for m, h in guessed.items() if not h)
        warnings.warn(f"{source}: metric(s) {sorted(guessed)} are not in the registry (gate/metrics.py) and the file "
                      f"gives no higher_is_better for them: direction guessed from the names (higher is better: "
                      f"{higher or 'none'}; lower is better: {lower or 'none'}); give a higher_is_better column "
                      f"or register them", stacklevel=3)
    return out


# --------------------------------------------------------------------------------------------- readers


def _check_text_file(path: Path) -> None:
    """Refuse files that cannot be results: known binary formats, and text that is not UTF-8 or holds NUL
    bytes. A JSONL store is only checked on its first line: a later torn or garbled line (a crash can leave
    NUL bytes) is skipped with a warning by :func:`gate.results.read_jsonl`, the rest is kept."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
        at_end = not fh.read(1)
    if not head:
        raise ValueError(f"{path}: the file is empty: no results to analyse")
    what = next((name for magic, name in _MAGIC if head.startswith(magic)), None)
    sample = head
    if what is None and _looks_like_jsonl(path):
        first = head.lstrip().split(b"\n", 1)[0]
        sample, at_end = first, True
    if what is None and b"\x00" in sample:
        what = "binary (it holds NUL bytes)"
    if what is None:
        try:
            sample.decode("utf-8")
        except UnicodeDecodeError as err:
            if at_end or err.start < len(sample) - 3:  # not just a character cut at the end of the sample
                what = f"not UTF-8 text: byte 0x{sample[err.start]:02x} at offset {err.start}"
    if what is not None:
        raise ValueError(f"{path}: {NOT_RESULTS}; this file is {what})")


def _looks_like_jsonl(path: Path) -> bool:
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return True
    if path.suffix.lower() in (".csv", ".tsv", ".txt"):
        return False
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                return line.lstrip().startswith("{")
    return False


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, keep_default_na=True, na_values=["", "nan", "NaN", "NA", "-"], encoding="utf-8",
                            compression=None)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty: no results to analyse") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: {NOT_RESULTS}; this file is not UTF-8 text: {err.reason} at byte "
                         f"{err.start})") from None
    except pd.errors.ParserError as err:
        raise ValueError(f"{path}: {NOT_RESULTS}; the CSV parser says: {' '.join(str(err).split())})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def _read_records(path: Path) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    explicit: list[bool | None] = []
    cache: dict[str, tuple[str, str, str, str]] = {}
    try:
        for i, row in enumerate(read_jsonl(path), start=1):
            parsed = _record_row(row, i, path, cache)
            if parsed is not None:
                rows.append({**parsed, "order": len(rows)})
                explicit.append(_parse_bool(row.get("higher_is_better"), path, "higher_is_better"))
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: {NOT_RESULTS}; this file is not UTF-8 text: {err.reason} at byte "
                         f"{err.start})") from None
    if not rows:
        raise ValueError(f"{path}: the results store holds no readable records: nothing to analyse")
    long = pd.DataFrame(rows, columns=list(LONG_COLUMNS))
    long["higher_is_better"] = resolve_directions(long["metric"], explicit, path)
    _fill_experiment(long)
    return long


def _record_row(row: Mapping[str, Any], i: int, path: Path, cache: dict) -> dict[str, Any] | None:
    missing = [f for f in ("kind",) + REQUIRED if row.get(f) in (None, "")]
    if missing:
        warnings.warn(f"{path}: skipping record #{i} (experiment {row.get('experiment')!r}): "
                      f"missing field(s) {missing}", stacklevel=3)
        return None
    try:
        value = float(row["value"])
    except (TypeError, ValueError):
        warnings.warn(f"{path}: skipping record #{i}: value {row['value']!r} is not a number", stacklevel=3)
        return None
    if math.isnan(value):
        warnings.warn(f"{path}: skipping record #{i}: value is NaN", stacklevel=3)
        return None
    if math.isinf(value):
        raise ValueError(f"{path}: record #{i} (experiment {row.get('experiment')!r}) has value {value} for "
                         f"dataset {row['dataset']!r}, metric {row['metric']!r}, encoder {row['encoder']!r}: a "
                         f"result must be a finite number")
    if row["kind"] not in KINDS:
        raise ValueError(f"{path}: record #{i} has kind {row['kind']!r}; valid kinds are {list(KINDS)}")
    config = row.get("config") if isinstance(row.get("config"), Mapping) else None
    task, adapter, recipe = (str(row.get(k) or "") for k in ("task", "adapter", "recipe"))
    if config:
        key = json.dumps([row["kind"], config], sort_keys=True, default=str)
        if key not in cache:
            ident = identity(config, row["kind"])
            prot = protocol(config, row["kind"])
            entrant = {k: ident[k] for k in ENTRANT_KEYS if k in ident}
            cache[key] = (stable_hash(prot), _canonical(prot), stable_hash(entrant), _canonical(entrant))
        variant, prot_json, entrant_hash, entrant_json = cache[key]
    else:
        variant, prot_json, entrant_hash, entrant_json = _csv_identity(task, adapter, recipe, None)
    return {
        "kind": row["kind"],
        "encoder": str(row["encoder"]),
        "dataset": str(row["dataset"]),
        # records written before issue 16 name the paper's group dataset.family (the same fact, the old key)
        "paper_group": _config_get(config, "dataset", "paper_group") or _config_get(config, "dataset", "family") or "",
        "task": task,
        "adapter": adapter,
        "recipe": recipe,
        "seed": int(row.get("seed") or 0),
        "split": str(row.get("split") or ""),
        "metric": str(row["metric"]),
        "value": value,
        "higher_is_better": True,  # resolved for all rows at once
        "experiment": str(row.get("experiment") or ""),
        "variant": variant,
        "protocol": prot_json,
        "entrant": entrant_hash,
        "entrant_config": entrant_json,
        "timestamp": str(row.get("timestamp") or ""),
        "num_classes": _num_classes(config),
        "capped": _capped(row, config),
        # a transferability score that could not discriminate on the rows it scored (gate-score's facts)
        "degenerate": str((row.get("facts") or {}).get("degenerate") or "") if isinstance(row.get("facts"), Mapping)
        else "",
    }


def _capped(row: Mapping[str, Any], config: Mapping[str, Any] | None) -> str:
    """How a fine-tuning record's evaluation split was capped (``data.max_<split>_samples``), or "" when it was
    whole: the run's facts say the rows used and the rows the split had; a record written before they did says the
    cap alone."""
    split = str(row.get("split") or "")
    if row.get("kind") != "finetune" or split not in ("val", "test"):
        return ""
    facts = row.get("facts") if isinstance(row.get("facts"), Mapping) else {}
    rows = (facts.get("split_rows") or {}).get(split) if isinstance(facts.get("split_rows"), Mapping) else None
    if isinstance(rows, Mapping) and rows.get("of") is not None and rows.get("used") is not None:
        used, of = int(rows["used"]), int(rows["of"])
        return f"{split}: {used:,} of {of:,} rows" if used < of else ""
    cap = _config_get(config, "data", f"max_{split}_samples")
    if cap is None:
        return ""
    return f"{split}: at most {int(cap):,} rows (data.max_{split}_samples; the split's size was not recorded)"


def _old_columns_renamed(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """A table written before issue 16 (gate's own ``table.csv``, the paper table) names the paper's group
    ``family``: it is read as ``paper_group``, the same fact under its new name (left as it was, a wide table would
    take it for an encoder column). A table with both columns is ambiguous and refused."""
    if "family" not in frame.columns:
        return frame
    if "paper_group" in frame.columns:
        raise ValueError(f"{path}: columns 'family' and 'paper_group' both given: 'family' is the old name of "
                         f"'paper_group' (the GATE paper's benchmark group); keep one")
    return frame.rename(columns={"family": "paper_group"})


def _from_long_csv(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    frame = _old_columns_renamed(frame, path)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: CSV is missing required column(s) {missing}. A long CSV needs at least "
            f"{list(REQUIRED)} (optional: kind, seed, higher_is_better, paper_group, task, adapter, recipe, split); "
            f"a wide CSV needs {list(WIDE_META[1:3])} plus one column per encoder. Found columns: {list(frame.columns)}"
        )
    if frame.empty:
        raise ValueError(f"{path}: the table is empty: no results to analyse")
    long = pd.DataFrame(index=frame.index)
    for col in ("encoder", "dataset", "metric"):
        bad = frame[col].isna() | (frame[col].astype(str).str.strip() == "")
        if bad.any():
            raise ValueError(f"{path}: column {col!r} is empty in row(s) {_rows(bad)} (CSV line = row + 2)")
        long[col] = frame[col].astype(str).str.strip()
    values = pd.to_numeric(frame["value"], errors="coerce")
    bad = values.isna() & frame["value"].notna()
    if bad.any():
        raise ValueError(f"{path}: column 'value' holds non-numbers in row(s) {_rows(bad)}: "
                         f"{frame.loc[bad, 'value'].head(3).tolist()}")
    inf = np.isinf(values.to_numpy(dtype=float))
    if inf.any():
        r = int(np.flatnonzero(inf)[0])
        raise ValueError(f"{path}: row {r} (CSV line {r + 2}) has value {values.iat[r]} for dataset "
                         f"{long['dataset'].iat[r]!r}, metric {long['metric'].iat[r]!r}, encoder "
                         f"{long['encoder'].iat[r]!r}: a result must be a finite number"
                         + (f" ({int(inf.sum())} such rows)" if inf.sum() > 1 else ""))
    long["value"] = values
    kind = frame["kind"].fillna("finetune").astype(str).str.strip() if "kind" in frame else "finetune"
    long["kind"] = kind
    bad_kind = ~long["kind"].isin(KINDS)
    if bad_kind.any():
        raise ValueError(f"{path}: column 'kind' must be one of {list(KINDS)}; "
                         f"got {sorted(set(long.loc[bad_kind, 'kind']))} in row(s) {_rows(bad_kind)}")
    for col in ("paper_group", "task", "adapter", "recipe", "split", "experiment", "timestamp", "capped",
                "degenerate"):
        long[col] = frame[col].fillna("").astype(str) if col in frame else ""
    long["seed"] = pd.to_numeric(frame["seed"], errors="coerce").fillna(0).astype(int) if "seed" in frame else 0
    explicit = ([_parse_bool(v, path, "higher_is_better") for v in frame["higher_is_better"]]
                if "higher_is_better" in frame else None)
    long["num_classes"] = (pd.to_numeric(frame["num_classes"], errors="coerce") if "num_classes" in frame
                           else np.nan)
    keep = long["value"].notna().to_numpy()
    if not keep.all():  # a long table lists results: a row without one is said, never dropped silently
        gone = [f"{_label(long, r)} (CSV line {r + 2})" for r in np.flatnonzero(~keep)]
        warnings.warn(f"{path}: {len(gone)} row(s) have no value and are left out: {', '.join(gone[:5])}"
                      + (f" and {len(gone) - 5} more" if len(gone) > 5 else ""), stacklevel=3)
    long = long[keep].copy()
    long["higher_is_better"] = resolve_directions(
        long["metric"], None if explicit is None else [e for e, k in zip(explicit, keep) if k], path)
    _set_csv_identity(long)
    long["order"] = np.arange(len(long))
    long = long[list(LONG_COLUMNS)].reset_index(drop=True)
    long["higher_is_better"] = long["higher_is_better"].astype(bool)
    _fill_experiment(long)
    return _one_row_per_result(long, path, np.flatnonzero(keep))


def _label(frame: pd.DataFrame, i: int) -> str:
    return f"{frame['encoder'].iat[i]} × {frame['dataset'].iat[i]} {frame['metric'].iat[i]}"


def _one_row_per_result(long: pd.DataFrame, path: Path, rows: np.ndarray) -> pd.DataFrame:
    """A long table's rows that are the same result (experiment, seed, split, metric): with one value they are
    named and kept once; with several, which is right cannot be known, so the table is refused. ``rows``: each
    row's position in the file (CSV line = position + 2)."""
    key = ["kind", "experiment", "seed", "split", "metric"]
    dup = long.duplicated(key, keep=False).to_numpy()
    if not dup.any():
        return long
    same, differ = [], []
    for _, group in long[dup].groupby(key, sort=False):
        at = [int(i) for i in group.index]
        lines = ", ".join(str(rows[i] + 2) for i in at)
        values = group["value"].tolist()
        if len(set(values)) == 1:
            same.append(f"{_label(long, at[0])} (CSV lines {lines})")
        else:
            differ.append(f"{_label(long, at[0])} (CSV lines {lines}: {', '.join(f'{v:g}' for v in values)})")
    if differ:
        raise ValueError(f"{path}: a result is listed twice with different values: {'; '.join(differ[:5])}"
                         + (f" and {len(differ) - 5} more" if len(differ) > 5 else "")
                         + " (give each run its own seed, or keep one row)")
    warnings.warn(f"{path}: {int(dup.sum())} rows hold the same result ({len(same)} result(s) listed more than "
                  f"once): {'; '.join(same[:5])}{' ...' if len(same) > 5 else ''}; counted once", stacklevel=3)
    return long.drop_duplicates(key).reset_index(drop=True).assign(order=lambda f: np.arange(len(f)))


def _is_wide(frame: pd.DataFrame) -> bool:
    cols = set(frame.columns)
    return {"dataset", "metric"} <= cols and "value" not in cols and "encoder" not in cols


def _from_wide(frame: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    frame = _old_columns_renamed(frame, path)
    encoders = [c for c in frame.columns if c not in WIDE_RESERVED and not str(c).startswith("Unnamed")]
    if not encoders:
        raise ValueError(f"{path}: wide table has no encoder columns (columns other than {list(WIDE_RESERVED)}); "
                         f"found columns {list(frame.columns)}")
    if frame.empty:
        raise ValueError(f"{path}: the table is empty: no results to analyse")
    frame = frame.copy()
    frame["dataset"] = frame["dataset"].fillna("").astype(str).str.strip()
    frame["metric"] = frame["metric"].fillna("").astype(str).str.strip()
    frame["paper_group"] = frame["paper_group"].fillna("").astype(str).str.strip() if "paper_group" in frame else ""
    if (frame["metric"] == "").any():
        raise ValueError(f"{path}: column 'metric' is empty in row(s) {_rows(frame['metric'] == '')}")
    explicit = ([_parse_bool(v, path, "higher_is_better") for v in frame["higher_is_better"]]
                if "higher_is_better" in frame else None)
    frame["higher_is_better"] = resolve_directions(frame["metric"], explicit, path)
    values = frame[encoders].apply(pd.to_numeric, errors="coerce")
    bad = values.isna() & frame[encoders].notna()
    if bad.to_numpy().any():
        r, c = np.argwhere(bad.to_numpy())[0]
        raise ValueError(f"{path}: non-numeric value {frame[encoders].iat[r, c]!r} in row {r} "
                         f"(metric {frame['metric'].iat[r]!r}), encoder column {encoders[c]!r}")
    inf = np.isinf(values.to_numpy(dtype=float))
    if inf.any():
        r, c = np.argwhere(inf)[0]
        raise ValueError(f"{path}: row {r} (CSV line {r + 2}) has value {values.iat[r, c]} for dataset "
                         f"{frame['dataset'].iat[r]!r}, metric {frame['metric'].iat[r]!r}, encoder "
                         f"{encoders[c]!r}: a result must be a finite number"
                         + (f" ({int(inf.sum())} such cells)" if inf.sum() > 1 else ""))
    is_agg = frame["dataset"] == ""
    aggregates = None
    if is_agg.any():
        aggregates = pd.concat([frame.loc[is_agg, ["paper_group", "metric", "higher_is_better"]],
                                values.loc[is_agg]], axis=1).reset_index(drop=True)
    rows = frame.loc[~is_agg]
    empty_rows = values.loc[~is_agg].isna().all(axis=1)
    if empty_rows.any():
        gone = rows.loc[empty_rows, ["dataset", "metric"]].values.tolist()
        warnings.warn(f"{path}: {len(gone)} row(s) have no value for any encoder and are left out: {gone[:5]}",
                      stacklevel=3)
    dup = rows.duplicated(["dataset", "metric"], keep=False)
    if dup.any():
        raise ValueError(f"{path}: (dataset, metric) rows repeat: "
                         f"{rows.loc[dup, ['dataset', 'metric']].drop_duplicates().values.tolist()[:5]}")
    meta = {c: rows[c] if c in rows else "" for c in ("kind", "task", "adapter", "recipe", "split")}
    long = values.loc[~is_agg].copy()
    long[["dataset", "metric", "paper_group", "higher_is_better"]] = rows[["dataset", "metric", "paper_group",
                                                                            "higher_is_better"]]
    for c, v in meta.items():
        long[c] = v.fillna("").astype(str) if isinstance(v, pd.Series) else v
    long["num_classes"] = pd.to_numeric(rows["num_classes"], errors="coerce") if "num_classes" in rows else np.nan
    long = long.melt(id_vars=["dataset", "metric", "paper_group", "higher_is_better", "kind", "task", "adapter",
                              "recipe", "split", "num_classes"],
                     value_vars=encoders, var_name="encoder", value_name="value")
    long = long[long["value"].notna()].copy()
    long["kind"] = long["kind"].replace("", "finetune")
    bad_kind = ~long["kind"].isin(KINDS)
    if bad_kind.any():
        raise ValueError(f"{path}: column 'kind' must be one of {list(KINDS)}, got {sorted(set(long.loc[bad_kind, 'kind']))}")
    long["seed"] = 0
    long["experiment"] = ""
    long["timestamp"] = ""
    long["capped"] = ""
    long["degenerate"] = ""
    _set_csv_identity(long)
    long["order"] = np.arange(len(long))
    long["encoder"] = long["encoder"].astype(str)
    long["higher_is_better"] = long["higher_is_better"].astype(bool)
    long = long[list(LONG_COLUMNS)].reset_index(drop=True)
    _fill_experiment(long)
    return long, aggregates


# ------------------------------------------------------------------------------------------ summarising


def summarize(long: pd.DataFrame, split: str | None = "test", score_split: str | None = None,
              filters: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Average repeated runs over seeds: one row per (kind, encoder, benchmark, metric).

    * Fine-tuning rows are restricted to ``split`` (records without a split, e.g. from a CSV, are
      always kept); score rows to ``score_split`` when given.
    * ``filters`` keeps only rows whose column equals the value (or is in the list), e.g.
      ``{"recipe": "conv"}``; an unknown column is an error.
    * Duplicated (experiment, seed, split, metric): the latest record (timestamp, then file order) wins, with a
      warning naming what it replaced.
    * The mean and the sample standard deviation (``ddof=1``; missing for a single seed) over seeds.
    * Runs of one encoder name with different entrant configs on the same protocol and seed become
      separate encoders, ``name[key=value]``; runs of one dataset with different protocols become
      separate benchmarks: the main variant keeps the dataset's name, the others are ``dataset[key=value]``
      and have ``main_variant = False`` (left out of tier/group means). See the module docstring.
    * When a metric exists on several splits the metric label becomes ``metric (split)``.

    Returns columns ``kind, encoder, dataset, benchmark, paper_group, metric, metric_name, split,
    higher_is_better, mean, std, n, num_classes, main_variant, capped`` (``capped``: how the evaluated split was
    capped, e.g. ``test: 1,000 of 10,000 rows``; empty when whole or unknown; ``degenerate``: why a score could not
    discriminate on its rows, from gate-score's facts): ``dataset``/``metric_name`` are the raw
    names, ``benchmark``/``metric`` the (possibly qualified) labels used in tables, ``encoder`` the
    (possibly qualified) encoder label.
    """
    df = long.copy()
    for col in ("protocol", "entrant", "entrant_config", "capped", "degenerate"):  # frames built by hand may lack them
        if col not in df.columns:
            df[col] = "{}" if col in ("protocol", "entrant_config") else ""
    for col, want in (filters or {}).items():
        if col not in df.columns:
            shown = [c for c in LONG_COLUMNS if c not in ("value", "protocol", "entrant_config", "order")]
            raise ValueError(f"filter on unknown column {col!r}; valid columns: {shown}")
        wanted = [str(w) for w in (want if isinstance(want, (list, tuple)) else [want])]
        df = df[df[col].astype(str).isin(wanted)]
        if df.empty:
            raise ValueError(f"filter {col}={want!r} leaves no results")
    keep = pd.Series(True, index=df.index)
    if split:
        ft = df["kind"] == "finetune"
        keep &= ~ft | (df["split"] == "") | (df["split"] == split)
    if score_split:
        sc = df["kind"] == "score"
        keep &= ~sc | (df["split"] == "") | (df["split"] == score_split)
    dropped = df.loc[~keep & (df["kind"] == "finetune")]
    df = df[keep]
    if split and not dropped.empty and df[df["kind"] == "finetune"].empty:
        raise ValueError(f"no fine-tuning results on split {split!r}; splits present: "
                         f"{sorted(set(dropped['split']))} (set split=<one of them>)")
    if df.empty:
        raise ValueError("no results left after filtering by split/filters")
    # Latest record wins for a duplicated (experiment, seed, split, metric): a rerun (force=true) appends a new set.
    df = df.sort_values(["timestamp", "order"], kind="stable")
    key = ["kind", "experiment", "seed", "split", "metric"]
    _say_replaced(df, key)
    df = df.drop_duplicates(key, keep="last")

    _check_direction(df)
    df = df.assign(benchmark=df["dataset"], metric_name=df["metric"], main_variant=True)
    df["encoder"] = _entrant_labels(df)
    # Qualify variants of one dataset (per kind) and metrics present on several splits.
    for kind, sub in df.groupby("kind"):
        for ds, rows in sub.groupby("dataset"):
            if rows["variant"].nunique() < 2:
                continue
            stats = rows.groupby("variant", sort=False).agg(
                n_encoders=("encoder", "nunique"), n_records=("value", "size"), first=("order", "min"),
                protocol=("protocol", "first")).reset_index()
            protocols = {v: json.loads(p) for v, p in zip(stats["variant"], stats["protocol"])}
            stats["labelled"] = [_CSV_LABEL in protocols[v] for v in stats["variant"]]
            main = choose_main_variant(stats)
            labels = variant_labels(protocols, main)
            df.loc[rows.index, "benchmark"] = [ds if v == main else f"{ds}[{labels[v]}]" for v in rows["variant"]]
            df.loc[rows.index, "main_variant"] = (rows["variant"] == main).to_numpy()
            others = sorted(set(df.loc[rows.index[rows["variant"] != main], "benchmark"]))
            n_main = int(stats.loc[stats["variant"] == main, "n_encoders"].iloc[0])
            means = "; they are left out of tier and group means" if kind == "finetune" else ""
            warnings.warn(f"{kind} results for dataset {ds!r} come from {len(protocols)} different protocols "
                          f"(configurations): the main one ({n_main} encoder(s)) keeps the name {ds!r}; the others "
                          f"are kept apart as {others}{means} (keep only some records with "
                          f"+filters.<column>=<value>)",
                          stacklevel=2)
        multi = sub.groupby(["dataset", "metric"])["split"].nunique()
        for (ds, m) in multi[multi > 1].index:
            idx = sub.index[(sub["dataset"] == ds) & (sub["metric"] == m)]
            df.loc[idx, "metric"] = [f"{m} ({s})" for s in df.loc[idx, "split"]]
    keys = ["kind", "encoder", "benchmark", "metric"]
    agg = df.groupby(keys, sort=False).agg(
        dataset=("dataset", "first"), paper_group=("paper_group", first_nonempty), metric_name=("metric_name", "first"),
        split=("split", "first"), higher_is_better=("higher_is_better", "first"),
        mean=("value", "mean"), std=("value", lambda v: v.std(ddof=1) if len(v) > 1 else np.nan),
        n=("value", "size"), num_classes=("num_classes", "max"), main_variant=("main_variant", "all"),
        capped=("capped", first_nonempty), degenerate=("degenerate", first_nonempty),
    ).reset_index()
    cols = ["kind", "encoder", "dataset", "benchmark", "paper_group", "metric", "metric_name", "split",
            "higher_is_better", "mean", "std", "n", "num_classes", "main_variant", "capped", "degenerate"]
    return agg[cols]


def choose_main_variant(candidates: pd.DataFrame) -> str:
    """The variant of a dataset whose results keep the bare dataset name and enter tier/group means.

    ``candidates`` has one row per variant with the columns ``variant``, ``n_encoders``, ``n_records``,
    ``first`` (file position of its first record) and ``labelled`` (a CSV row written ``name[label]``).
    Rule: not labelled, then the most encoders, then the most records, then the earliest.
    (A tier's own protocol, when tiers define one, is meant to come first in this rule.)
    """
    ranked = candidates.sort_values(["labelled", "n_encoders", "n_records", "first"],
                                    ascending=[True, False, False, True], kind="stable")
    return str(ranked["variant"].iloc[0])


def variant_labels(protocols: Mapping[str, Mapping[str, Any]], main: str, max_keys: int = LABEL_KEYS) -> dict[str, str]:
    """Variant → label: the flattened protocol keys whose values differ from the main variant's,
    ``key=value`` joined by commas (at most ``max_keys``, then ``+N more``); unique among the variants."""
    flat = {v: _flatten(p) for v, p in protocols.items()}
    labels = {v: _diff_label(flat[main], flat[v], max_keys) for v in protocols if v != main}
    return _unique_labels(labels)


def _diff_label(main: Mapping[str, Any], other: Mapping[str, Any], max_keys: int) -> str:
    keys = sorted(k for k in set(main) | set(other) if main.get(k, _UNSET) != other.get(k, _UNSET))
    items = [str(other[k]) if k == _CSV_LABEL and k in other else f"{k}={_fmt_value(other.get(k, _UNSET))}"
             for k in keys]
    return _items_label(items, max_keys) or "same protocol"


def _items_label(items: list[str], max_keys: int) -> str:
    if len(items) > max_keys:
        items = items[:max_keys] + [f"+{len(items) - max_keys} more"]
    return ",".join(items)


def _unique_labels(labels: dict[str, str]) -> dict[str, str]:
    """Append a short hash where truncation made two labels equal (they are never merged)."""
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    return {h: (",".join(filter(None, [label, f"#{h[:6]}"])) if counts[label] > 1 else label)
            for h, label in labels.items()}


def _entrant_labels(df: pd.DataFrame) -> pd.Series:
    """Encoder labels: the encoder name, qualified by entrant keys where one name covers several entrants
    on the same (protocol, seed) (see the module docstring)."""
    labels = df["encoder"].astype(str).copy()
    clashes = df.groupby(["kind", "encoder", "variant", "seed"], sort=False)["entrant"].nunique()
    for enc in dict.fromkeys(e for (_, e, _, _), n in clashes.items() if n > 1):
        rows = df[df["encoder"] == enc]
        by_hash = _label_entrants(enc, rows)
        labels.loc[rows.index] = rows["entrant"].map(by_hash).to_numpy()
        warnings.warn(f"encoder {enc!r} was run with different entrant configurations (encoder/recipe) on the same "
                      f"protocol and seed: they are not seeds of one experiment and are kept apart as "
                      f"{list(dict.fromkeys(by_hash[h] for h in rows['entrant']))}", stacklevel=3)
    return labels


def _label_entrants(enc: str, rows: pd.DataFrame) -> dict[str, str]:
    """Entrant hash → label for the rows of one encoder name."""
    configs = {h: _flatten(json.loads(c)) for h, c in zip(rows["entrant"], rows["entrant_config"])}
    keys: set[str] = set()  # the keys that tell clashing entrants apart
    for _, sub in rows.groupby(["kind", "variant", "seed"], sort=False):
        hashes = list(dict.fromkeys(sub["entrant"]))
        if len(hashes) > 1:
            every = set().union(*(configs[h] for h in hashes))
            keys |= {k for k in every if len({_fmt_value(configs[h].get(k, _UNSET)) for h in hashes}) > 1}
    # A key counts only for entrants of a kind whose configs have that node at all (score configs have no
    # recipe): absent there means "not applicable", not "different".
    tops: dict[str, set] = {}
    for _, sub in rows.groupby("kind", sort=False):
        hashes = list(dict.fromkeys(sub["entrant"]))
        kind_tops = {k.split(".")[0] for h in hashes for k in configs[h]}
        for h in hashes:
            tops.setdefault(h, set()).update(kind_tops)
    sigs = {h: tuple(sorted((k, _fmt_value(configs[h].get(k, _UNSET))) for k in keys if k.split(".")[0] in tops[h]))
            for h in configs}
    sig_key = {h: stable_hash(list(sig)) for h, sig in sigs.items()}
    sig_of = {sig_key[h]: sig for h, sig in sigs.items()}
    stats = pd.DataFrame({"sig": rows["entrant"].map(sig_key),
                          "bench": [f"{k} {v}" for k, v in zip(rows["kind"], rows["variant"])],
                          "order": rows["order"]})
    per = stats.groupby("sig", sort=False).agg(n_bench=("bench", "nunique"), n_records=("order", "size"),
                                               first=("order", "min"))
    # The entrant that covers the most benchmarks (then records, then the earliest) keeps the bare name.
    ranked = per.sort_values(["n_bench", "n_records", "first"], ascending=[False, False, True], kind="stable")
    main: dict[str, str] = {}  # per key, the value of the best-ranked entrant that has the key
    for key in ranked.index:
        for k, v in sig_of[key]:
            main.setdefault(k, v)
    inner = {key: _items_label([f"{k}={v}" for k, v in sig_of[key] if main.get(k, _UNSET) != v], LABEL_KEYS)
             for key in per.index}
    for _, sub in stats.groupby(rows["kind"].to_numpy(), sort=False):  # never two entrants under one label
        inner.update(_unique_labels({key: inner[key] for key in dict.fromkeys(sub["sig"])}))
    return {h: f"{enc}[{inner[sig_key[h]]}]" if inner[sig_key[h]] else enc for h in sigs}


def _say_replaced(df: pd.DataFrame, key: list[str]) -> None:
    """A warning naming each result recorded more than once (``df`` sorted oldest first) and what replaced what."""
    dup = df.duplicated(key, keep=False)
    if not dup.any():
        return
    said = []
    for _, group in df[dup].groupby(key, sort=False):
        last = group.iloc[-1]
        earlier = ", ".join(f"{v:g}" for v in dict.fromkeys(group["value"].iloc[:-1]))
        said.append(f"{last['encoder']} × {last['dataset']} {last['metric']} (seed {last['seed']}, experiment "
                    f"{last['experiment']}: {last['value']:g} replaces {earlier})")
    warnings.warn(f"{len(said)} result(s) recorded more than once; the latest record is used: {'; '.join(said[:5])}"
                  + (f" and {len(said) - 5} more" if len(said) > 5 else ""), stacklevel=3)


def _check_direction(df: pd.DataFrame) -> None:
    """A metric must have one direction: never mix higher- and lower-is-better silently."""
    conflicts = df.groupby(["kind", "dataset", "metric"])["higher_is_better"].nunique()
    conflicts = conflicts[conflicts > 1]
    if not conflicts.empty:
        raise ValueError("metric(s) recorded both as higher- and as lower-is-better: "
                         f"{[list(k) for k in conflicts.index[:5]]}; fix the records' higher_is_better")


# ------------------------------------------------------------------------------------------- helpers


def first_nonempty(values: pd.Series) -> str:
    """The first non-empty string of ``values`` (empty when none is)."""
    for v in values:
        if isinstance(v, str) and v:
            return v
    return ""


def _rows(mask: pd.Series) -> list[int]:
    return [int(i) for i in np.flatnonzero(np.asarray(mask))[:5]]


def _parse_bool(v: Any, path: Path, col: str) -> bool | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    s = str(v).strip().lower()
    if s in ("true", "1", "yes", "y", "t", "1.0"):
        return True
    if s in ("false", "0", "no", "n", "f", "0.0"):
        return False
    raise ValueError(f"{path}: column {col!r} must be true/false, got {v!r}")


def _config_get(config: Mapping[str, Any] | None, *keys: str) -> Any:
    node: Any = config
    for k in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(k)
    return node


def _num_classes(config: Mapping[str, Any] | None) -> float:
    for keys in (("dataset", "num_classes"), ("num_classes",), ("task", "num_classes")):
        v = _config_get(config, *keys)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return float(v)
    return float("nan")


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf keys of nested mappings joined with dots (lists and empty mappings are leaves)."""
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: node} if prefix else {}


def _fmt_value(v: Any) -> str:
    if v is _UNSET or (isinstance(v, str) and v == _UNSET):
        return _UNSET
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, default=str, separators=(",", ":"))


def _csv_identity(task: str, adapter: str, recipe: str, label: str | None) -> tuple[str, str, str, str]:
    """(variant, protocol, entrant, entrant_config) of a row without a config."""
    prot: dict[str, Any] = {"task": task, "adapter": adapter}
    if label:
        prot[_CSV_LABEL] = label
    entrant = {"recipe": recipe} if recipe else {}
    return stable_hash(prot), _canonical(prot), stable_hash(entrant), _canonical(entrant)


def _set_csv_identity(long: pd.DataFrame) -> None:
    """Protocol and entrant columns of CSV rows; a dataset written ``name[label]`` is the variant ``label``
    of ``name``."""
    datasets, labels = [], []
    for ds in long["dataset"]:
        m = _LABELLED_DATASET.match(ds)
        datasets.append(m.group("base") if m else ds)
        labels.append(m.group("label") if m else None)
    long["dataset"] = datasets
    ids = [_csv_identity(t, a, r, lab) for t, a, r, lab in zip(long["task"], long["adapter"], long["recipe"], labels)]
    for i, col in enumerate(("variant", "protocol", "entrant", "entrant_config")):
        long[col] = [x[i] for x in ids]


def _fill_experiment(long: pd.DataFrame) -> None:
    """Rows without an experiment id (CSV input) get one from what identifies an experiment."""
    empty = long["experiment"] == ""
    if empty.any():
        sub = long.loc[empty]
        long.loc[empty, "experiment"] = [
            json.dumps([k, e, d, v, en]) for k, e, d, v, en in
            zip(sub["kind"], sub["encoder"], sub["dataset"], sub["variant"], sub["entrant"])
        ]


__all__ = ["Loaded", "load_results", "from_frame", "summarize", "resolve_directions", "choose_main_variant",
           "variant_labels", "FIELDS", "LONG_COLUMNS"]

"""Read results into one long DataFrame, validate them, and average repeated runs over seeds.

Three inputs are accepted; the format is detected from the file:

1. **JSONL records** of the results store (``gate/results.py``): one JSON object per line with the
   fields of :class:`gate.results.Record`. A corrupt line is skipped with a warning naming the line
   (:func:`gate.results.read_jsonl`); the rest is kept.
2. **Long CSV**: one row per measured number with at least ``encoder, dataset, metric, value``;
   optional ``kind`` (``finetune`` | ``score``, default ``finetune``), ``seed`` (default 0),
   ``higher_is_better`` (inferred from the metric name when absent, with a warning), ``family``,
   ``task``, ``adapter``, ``recipe``, ``split``, ``experiment``, ``timestamp``, ``num_classes``.
3. **Wide CSV**: the layout of the GATE paper's Table 3 (and of ``table.csv`` written by
   ``gate-analysis``): one row per metric with ``family, dataset, metric, higher_is_better`` and one
   column per encoder. Rows with an empty ``dataset`` are aggregates (the paper's "Task Mean",
   "GATE Mean/Rank" rows): they are kept out of every computation and returned separately so that
   our own summaries can be checked against them.

Missing values: an empty cell of a wide table is a missing result; it is simply absent from the long
frame (never filled). A record's ``value`` can never be missing (the store refuses NaN).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gate.results import FIELDS, KINDS, RUN_ONLY_KEYS, experiment_id, read_jsonl

REQUIRED = ("encoder", "dataset", "metric", "value")
WIDE_META = ("family", "dataset", "metric", "higher_is_better")
# Columns of a wide table that describe the row rather than naming an encoder.
WIDE_RESERVED = WIDE_META + ("kind", "task", "adapter", "recipe", "split", "num_classes", "n", "std")
LONG_COLUMNS = (
    "kind", "encoder", "dataset", "family", "task", "adapter", "recipe", "seed", "split", "metric",
    "value", "higher_is_better", "experiment", "variant", "timestamp", "num_classes", "order",
)

# Metric names that are lower-is-better when a CSV does not say (losses, errors, Brier scores, ranks,
# and the unsupervised discrepancies of gate-score).
_LOWER_IS_BETTER = re.compile(
    r"(loss|\bmae\b|mae[ _]|\bmse\b|rmse|error|\berr\b|brier|(^|[\s_/])bs($|[\s_/])|rank|\bnll\b|perplexity"
    r"|\bece\b|coral|mmd|wasserstein|discrepancy|distance)",
    re.IGNORECASE,
)


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


def infer_higher_is_better(metric: str) -> bool:
    """``False`` for names that look like losses, errors, Brier scores, ranks or discrepancies."""
    return not bool(_LOWER_IS_BETTER.search(str(metric)))


def load_results(path: str | Path) -> Loaded:
    """Read a results file (JSONL records, long CSV or wide CSV) into a validated long DataFrame."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"results file {str(path)!r} does not exist (run gate-run/gate-score first, "
                                f"or give results=<a .jsonl or .csv file>)")
    if path.is_dir():
        raise IsADirectoryError(f"results path {str(path)!r} is a directory; give a .jsonl or .csv file")
    if _looks_like_jsonl(path):
        long, fmt, aggregates = _read_records(path), "jsonl", None
    else:
        try:
            frame = pd.read_csv(path, keep_default_na=True, na_values=["", "nan", "NaN", "NA", "-"])
        except pd.errors.EmptyDataError:
            raise ValueError(f"{path}: the file is empty: no results to analyse") from None
        frame.columns = [str(c).strip() for c in frame.columns]
        if _is_wide(frame):
            long, aggregates = _from_wide(frame, path)
            fmt = "wide-csv"
        else:
            long, fmt, aggregates = _from_long_csv(frame, path), "long-csv", None
    if long.empty:
        raise ValueError(f"{path}: the table is empty: it holds no results (no non-missing values)")
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
    if long.empty:
        raise ValueError(f"{source}: the table is empty: it holds no results (no non-missing values)")
    return Loaded(long=long, aggregates=aggregates, source=Path(source), format=fmt)


# --------------------------------------------------------------------------------------------- readers


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


def _read_records(path: Path) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for i, row in enumerate(read_jsonl(path), start=1):
        missing = [f for f in ("kind",) + REQUIRED if row.get(f) in (None, "")]
        if missing:
            warnings.warn(f"{path}: skipping record #{i} (experiment {row.get('experiment')!r}): "
                          f"missing field(s) {missing}", stacklevel=2)
            continue
        try:
            value = float(row["value"])
        except (TypeError, ValueError):
            warnings.warn(f"{path}: skipping record #{i}: value {row['value']!r} is not a number", stacklevel=2)
            continue
        if math.isnan(value):
            warnings.warn(f"{path}: skipping record #{i}: value is NaN", stacklevel=2)
            continue
        if row["kind"] not in KINDS:
            raise ValueError(f"{path}: record #{i} has kind {row['kind']!r}; valid kinds are {list(KINDS)}")
        config = row.get("config") if isinstance(row.get("config"), Mapping) else None
        hib = row.get("higher_is_better")
        rows.append({
            "kind": row["kind"],
            "encoder": str(row["encoder"]),
            "dataset": str(row["dataset"]),
            "family": _config_get(config, "dataset", "family") or "",
            "task": str(row.get("task") or ""),
            "adapter": str(row.get("adapter") or ""),
            "recipe": str(row.get("recipe") or ""),
            "seed": int(row.get("seed") or 0),
            "split": str(row.get("split") or ""),
            "metric": str(row["metric"]),
            "value": value,
            "higher_is_better": infer_higher_is_better(row["metric"]) if hib is None else bool(hib),
            "experiment": str(row.get("experiment") or ""),
            "variant": _variant_of(config, row),
            "timestamp": str(row.get("timestamp") or ""),
            "num_classes": _num_classes(config),
            "order": len(rows),
        })
    if not rows:
        raise ValueError(f"{path}: the results store holds no readable records: nothing to analyse")
    long = pd.DataFrame(rows, columns=list(LONG_COLUMNS))
    _fill_experiment(long)
    return long


def _from_long_csv(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: CSV is missing required column(s) {missing}. A long CSV needs at least "
            f"{list(REQUIRED)} (optional: kind, seed, higher_is_better, family, task, adapter, recipe, split); "
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
    long["value"] = values
    kind = frame["kind"].fillna("finetune").astype(str).str.strip() if "kind" in frame else "finetune"
    long["kind"] = kind
    bad_kind = ~long["kind"].isin(KINDS)
    if bad_kind.any():
        raise ValueError(f"{path}: column 'kind' must be one of {list(KINDS)}; "
                         f"got {sorted(set(long.loc[bad_kind, 'kind']))} in row(s) {_rows(bad_kind)}")
    for col in ("family", "task", "adapter", "recipe", "split", "experiment", "timestamp"):
        long[col] = frame[col].fillna("").astype(str) if col in frame else ""
    long["seed"] = pd.to_numeric(frame["seed"], errors="coerce").fillna(0).astype(int) if "seed" in frame else 0
    if "higher_is_better" in frame:
        long["higher_is_better"] = [_parse_bool(v, path, "higher_is_better") for v in frame["higher_is_better"]]
        unknown = frame["higher_is_better"].isna()
        if unknown.any():
            long.loc[unknown, "higher_is_better"] = long.loc[unknown, "metric"].map(infer_higher_is_better)
    else:
        long["higher_is_better"] = long["metric"].map(infer_higher_is_better)
        lower = sorted(set(long.loc[~long["higher_is_better"].astype(bool), "metric"]))
        warnings.warn(f"{path}: no 'higher_is_better' column; inferred from metric names "
                      f"(lower is better: {lower or 'none'})", stacklevel=3)
    long["num_classes"] = (pd.to_numeric(frame["num_classes"], errors="coerce") if "num_classes" in frame
                           else np.nan)
    long = long[long["value"].notna()].copy()
    long["variant"] = [_hash_variant(t, a, r) for t, a, r in zip(long["task"], long["adapter"], long["recipe"])]
    long["order"] = np.arange(len(long))
    long = long[list(LONG_COLUMNS)].reset_index(drop=True)
    long["higher_is_better"] = long["higher_is_better"].astype(bool)
    _fill_experiment(long)
    return long


def _is_wide(frame: pd.DataFrame) -> bool:
    cols = set(frame.columns)
    return {"dataset", "metric"} <= cols and "value" not in cols and "encoder" not in cols


def _from_wide(frame: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    encoders = [c for c in frame.columns if c not in WIDE_RESERVED and not str(c).startswith("Unnamed")]
    if not encoders:
        raise ValueError(f"{path}: wide table has no encoder columns (columns other than {list(WIDE_RESERVED)})")
    if frame.empty:
        raise ValueError(f"{path}: the table is empty: no results to analyse")
    frame = frame.copy()
    frame["dataset"] = frame["dataset"].fillna("").astype(str).str.strip()
    frame["metric"] = frame["metric"].fillna("").astype(str).str.strip()
    frame["family"] = frame["family"].fillna("").astype(str).str.strip() if "family" in frame else ""
    if (frame["metric"] == "").any():
        raise ValueError(f"{path}: column 'metric' is empty in row(s) {_rows(frame['metric'] == '')}")
    if "higher_is_better" in frame:
        hib = [_parse_bool(v, path, "higher_is_better") for v in frame["higher_is_better"]]
        frame["higher_is_better"] = [infer_higher_is_better(m) if h is None else h for h, m in zip(hib, frame["metric"])]
    else:
        frame["higher_is_better"] = frame["metric"].map(infer_higher_is_better)
        warnings.warn(f"{path}: no 'higher_is_better' column; inferred from metric names", stacklevel=3)
    values = frame[encoders].apply(pd.to_numeric, errors="coerce")
    bad = values.isna() & frame[encoders].notna()
    if bad.to_numpy().any():
        r, c = np.argwhere(bad.to_numpy())[0]
        raise ValueError(f"{path}: non-numeric value {frame[encoders].iat[r, c]!r} in row {r} "
                         f"(metric {frame['metric'].iat[r]!r}), encoder column {encoders[c]!r}")
    is_agg = frame["dataset"] == ""
    aggregates = None
    if is_agg.any():
        aggregates = pd.concat([frame.loc[is_agg, ["family", "metric", "higher_is_better"]],
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
    long[["dataset", "metric", "family", "higher_is_better"]] = rows[["dataset", "metric", "family", "higher_is_better"]]
    for c, v in meta.items():
        long[c] = v.fillna("").astype(str) if isinstance(v, pd.Series) else v
    long["num_classes"] = pd.to_numeric(rows["num_classes"], errors="coerce") if "num_classes" in rows else np.nan
    long = long.melt(id_vars=["dataset", "metric", "family", "higher_is_better", "kind", "task", "adapter",
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
    long["variant"] = [_hash_variant(t, a, r) for t, a, r in zip(long["task"], long["adapter"], long["recipe"])]
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
    * Duplicated (experiment, seed, split, metric): the latest record (timestamp, then file order) wins.
    * The mean and the sample standard deviation (``ddof=1``; missing for a single seed) over seeds.
    * When one dataset was run in several variants (different task/adapter/recipe or other config),
      the benchmark label becomes ``dataset[variant]`` so they are never averaged together; when a
      metric exists on several splits the metric label becomes ``metric (split)``.

    Returns columns ``kind, encoder, dataset, benchmark, family, metric, metric_name, split,
    higher_is_better, mean, std, n, num_classes``: ``dataset``/``metric_name`` are the raw names,
    ``benchmark``/``metric`` the (possibly qualified) labels used in tables.
    """
    df = long.copy()
    for col, want in (filters or {}).items():
        if col not in df.columns:
            raise ValueError(f"filter on unknown column {col!r}; valid columns: {list(LONG_COLUMNS)}")
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
    # Latest record wins for a duplicated (experiment, seed, split, metric).
    df = df.sort_values(["timestamp", "order"], kind="stable")
    df = df.drop_duplicates(["kind", "experiment", "seed", "split", "metric"], keep="last")

    _check_direction(df)
    df = df.assign(benchmark=df["dataset"], metric_name=df["metric"])
    # Qualify variants of one dataset (per kind) and metrics present on several splits.
    for kind, sub in df.groupby("kind"):
        for ds, rows in sub.groupby("dataset"):
            variants = list(dict.fromkeys(rows.sort_values("order")["variant"]))
            if len(variants) > 1:
                labels = _variant_labels(rows, variants)
                idx = rows.index
                df.loc[idx, "benchmark"] = [f"{ds}[{labels[v]}]" for v in rows["variant"]]
                warnings.warn(f"{kind} results for dataset {ds!r} come from {len(variants)} different "
                              f"configurations; kept apart as {sorted(set(df.loc[idx, 'benchmark']))} "
                              f"(select one with filters.<column>=<value>)", stacklevel=2)
        multi = sub.groupby(["dataset", "metric"])["split"].nunique()
        for (ds, m) in multi[multi > 1].index:
            idx = sub.index[(sub["dataset"] == ds) & (sub["metric"] == m)]
            df.loc[idx, "metric"] = [f"{m} ({s})" for s in df.loc[idx, "split"]]
    keys = ["kind", "encoder", "benchmark", "metric"]
    agg = df.groupby(keys, sort=False).agg(
        dataset=("dataset", "first"), family=("family", _first_nonempty), metric_name=("metric_name", "first"),
        split=("split", "first"), higher_is_better=("higher_is_better", "first"),
        mean=("value", "mean"), std=("value", lambda v: v.std(ddof=1) if len(v) > 1 else np.nan),
        n=("value", "size"), num_classes=("num_classes", "max"),
    ).reset_index()
    cols = ["kind", "encoder", "dataset", "benchmark", "family", "metric", "metric_name", "split",
            "higher_is_better", "mean", "std", "n", "num_classes"]
    return agg[cols]


def _check_direction(df: pd.DataFrame) -> None:
    """A metric must have one direction: never mix higher- and lower-is-better silently."""
    conflicts = df.groupby(["kind", "dataset", "metric"])["higher_is_better"].nunique()
    conflicts = conflicts[conflicts > 1]
    if not conflicts.empty:
        raise ValueError("metric(s) recorded both as higher- and as lower-is-better: "
                         f"{[list(k) for k in conflicts.index[:5]]}; fix the records' higher_is_better")


def _variant_labels(rows: pd.DataFrame, variants: list[str]) -> dict[str, str]:
    first = rows.drop_duplicates("variant").set_index("variant")
    labels = {}
    for field in ("task", "adapter", "recipe"):
        vals = first.loc[variants, field]
        if vals.nunique() == len(variants) and (vals != "").all():
            labels = {v: f"{field}={vals[v]}" for v in variants}
            break
    if not labels:
        labels = {v: f"cfg {v[:6]}" for v in variants}
    return labels


# ------------------------------------------------------------------------------------------- helpers


def _first_nonempty(values: pd.Series) -> str:
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


def _variant_of(config: Mapping[str, Any] | None, row: Mapping[str, Any]) -> str:
    """What makes two runs of one dataset different experiments, apart from the encoder and the seed."""
    if config:
        return experiment_id(config, drop=tuple(RUN_ONLY_KEYS) + ("seed", "encoder"))
    return _hash_variant(row.get("task") or "", row.get("adapter") or "", row.get("recipe") or "")


def _hash_variant(task: str, adapter: str, recipe: str) -> str:
    return experiment_id({"task": task, "adapter": adapter, "recipe": recipe})


def _fill_experiment(long: pd.DataFrame) -> None:
    """Rows without an experiment id (CSV input) get one from what identifies an experiment."""
    empty = long["experiment"] == ""
    if empty.any():
        long.loc[empty, "experiment"] = [
            json.dumps([k, e, d, v]) for k, e, d, v in
            zip(long.loc[empty, "kind"], long.loc[empty, "encoder"], long.loc[empty, "dataset"], long.loc[empty, "variant"])
        ]


__all__ = ["Loaded", "load_results", "from_frame", "summarize", "infer_higher_is_better", "FIELDS"]

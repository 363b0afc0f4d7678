"""Tier and paper-group summaries: per encoder, the mean of each benchmark's representative metric
over a tier's benchmarks (and over each GATE paper group's), and the encoder's rank within each.

Rules (documented in the README and in ``tiers_benchmarks.csv``, which lists every benchmark used):

* A benchmark is represented by one metric (:mod:`gate.analysis.meta` says which and why), put on one scale,
  0–1 with higher better, by the range declared for that metric (:func:`gate.analysis.meta.tier_scale`: the
  command line's ``ranges``, its source's declaration, else the metric registry's); that value is what is
  averaged, and ``tiers_benchmarks.csv`` says how each entered (``range``, ``range_from``, ``entered_as``).
* A benchmark with a value outside its metric's declared range (a published table in percent, where the registry
  says [0, 1]) enters no mean: every tier and group mean that needs it is skipped, with one warning naming the
  first such value and the setting that declares the table's range (``ranges={acc@1:[0,100]}``); its row of
  ``tiers_benchmarks.csv`` says ``not entered``. A scale is never guessed from the values.
* Missing values are not filled: an encoder that lacks any benchmark of a tier (or group) gets no
  mean (empty cell) for it — a mean over fewer benchmarks is not comparable. ``partial=True``
  averages over the benchmarks it has instead, and the number used is reported.
* A tier none of whose benchmarks' metrics are present at all — or, when not partial, for which no
  encoder has every benchmark — is skipped with a warning naming the missing benchmarks.
* Ranks: 1 = best (highest mean); ties share the best rank (``method="min"``); no mean, no rank.
* Only a dataset's main protocol variant enters the means (:func:`gate.analysis.load.summarize`: the
  bare dataset name); other variants (``dataset[key=value]``) are listed with ``in_means = False``
  and left out of every tier and group mean.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import pandas as pd

from gate.analysis.load import first_nonempty
from gate.analysis.meta import BenchmarkMeta, OutsideRange, choose_tier_metric, note_of, range_fix, tier_scale
from gate.analysis.ranks import kendall, spearman

#: ``tiers_benchmarks.csv``'s ``entered_as`` for a benchmark whose values fall outside its metric's range.
NOT_ENTERED = "not entered: a value outside the metric's range"


def tier_benchmarks(tiers: Mapping[str, Any]) -> dict[str, list[str]]:
    """Tier name → benchmark keys, from tier configs (``{name: {benchmarks: [...]}}`` or ``{name: [...]}``).

    A benchmark entry is a key or a mapping with a ``dataset`` (or ``name``) key.
    """
    out: dict[str, list[str]] = {}
    for name, spec in (tiers or {}).items():
        if spec is None:
            continue
        items = spec.get("benchmarks") if isinstance(spec, Mapping) else spec
        if items is None or isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
            raise ValueError(f"tier {name!r} must list its benchmarks (a 'benchmarks:' list), got {spec!r}")
        keys = []
        for item in items:
            if isinstance(item, Mapping):
                key = item.get("dataset") or item.get("name")
                if not key:
                    raise ValueError(f"tier {name!r}: entry {dict(item)!r} has no 'dataset' key")
                keys.append(str(key))
            else:
                keys.append(str(item))
        if not keys:
            raise ValueError(f"tier {name!r} lists no benchmarks")
        out[str(spec.get("name", name) if isinstance(spec, Mapping) else name)] = list(dict.fromkeys(keys))
    return out


def representative_values(summary: pd.DataFrame, meta: Mapping[str, BenchmarkMeta],
                          ranges: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Encoders × benchmarks of representative values on the tier scale (0–1, higher is better), and one info row
    per benchmark saying how it entered (a benchmark outside its range: no column, ``entered_as`` :data:`NOT_ENTERED`).

    ``summary`` is the output of :func:`gate.analysis.load.summarize` (only fine-tuning rows are used).
    """
    ft = summary[summary["kind"] == "finetune"]
    columns, info, undeclared, outside = {}, [], [], []
    notes = {k: v.notes_vs_gate for k, v in meta.items() if v.notes_vs_gate}
    for bench, rows in ft.groupby("benchmark", sort=False):
        dataset = rows["dataset"].iloc[0]
        rep = choose_tier_metric(bench, dataset, list(dict.fromkeys(rows["metric"])), meta)
        m = meta.get(bench) or meta.get(dataset)
        if rep.metric is None:
            warnings.warn(rep.why, stacklevel=2)
            continue
        sel = rows[rows["metric"] == rep.metric]
        hib = bool(sel["higher_is_better"].iloc[0])
        scale = tier_scale(rep, hib, ranges)
        try:
            columns[bench], entered = scale.apply(sel.set_index("encoder")["mean"],
                                                  f"benchmark {bench!r}, metric {rep.metric!r}", rep.metric)
        except OutsideRange as err:
            outside.append(err)
            entered = NOT_ENTERED
        if scale.range is None:
            undeclared.append(f"{bench} ({rep.metric})")
        group = first_nonempty(rows["paper_group"]) or (m.paper_group if m is not None else "") or ""
        info.append({"benchmark": bench, "dataset": dataset, "paper_group": group, "metric": rep.metric,
                     "higher_is_better": hib, "range": _range_text(scale.range), "range_from": scale.declared_by,
                     "entered_as": entered, "n_encoders": int(sel["mean"].notna().sum()), "chosen_by": rep.why,
                     "in_means": bool(rows["main_variant"].all()) if "main_variant" in rows else True,
                     "vs_gate": note_of(bench, notes), "capped": first_nonempty(sel["capped"]) if "capped" in sel else ""})
    if undeclared:
        warnings.warn(f"no declared range for {undeclared}: entered on their own scale (negated when lower is "
                      f"better), so the tier and group means mix scales; declare tier_range in the dataset config or "
                      f"range in a benchmarks file (docs/tiers.md)", stacklevel=2)
    if outside:
        more = f" (and {len(outside) - 1} more benchmark(s))" if len(outside) > 1 else ""
        warnings.warn(f"tier and group means skipped where they need a benchmark whose values are outside their "
                      f"metric's range: {outside[0]}{more}. A table in percent? Declare its range on the command "
                      f"line: {range_fix(e.metric for e in outside)} (tables, correlations and figures need no scale "
                      f"and are computed)", stacklevel=2)
    values = pd.DataFrame(columns)
    return values, pd.DataFrame(info, columns=INFO_COLUMNS)


def _range_text(value_range) -> str:
    if value_range is None:
        return "undeclared"
    if isinstance(value_range, str):
        return value_range
    return f"[{value_range[0]:g}, {value_range[1]:g}]"


INFO_COLUMNS = ["benchmark", "dataset", "paper_group", "metric", "higher_is_better", "range", "range_from",
                "entered_as", "n_encoders", "chosen_by", "in_means", "vs_gate", "capped"]
"""``range``: the metric's declared range (``pool``: the encoders' best and worst; ``undeclared``), ``range_from``:
who declared it, ``entered_as``: the formula that put it on 0–1, higher is better. ``vs_gate``: how the benchmark's
numbers depart from the GATE paper's protocol (its ``notes_vs_gate``; empty when they do not), so that the CSV a
reader opens says it too; ``capped``: how its evaluation split was capped (empty: the whole split), marked ‡ where
it is shown."""


def tier_summary(summary: pd.DataFrame, tiers: Mapping[str, Any], meta: Mapping[str, BenchmarkMeta],
                 partial: bool = False, ranges: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tiers table, benchmark info).

    The tiers table has one row per encoder and, per tier then per GATE paper group, the columns
    ``tier:<name>``, ``tier:<name>:rank`` and ``group:<paper_group>``, ``group:<paper_group>:rank``
    (plus ``...:n`` with the number of benchmarks averaged when ``partial``).
    """
    values, info = representative_values(summary, meta, ranges)
    unscaled = set(info.loc[info["entered_as"] == NOT_ENTERED, "benchmark"])  # warned about once, above
    encoders = list(dict.fromkeys(summary.loc[summary["kind"] == "finetune", "encoder"]))
    # Non-main protocol variants of a dataset are shown in the tables but never averaged.
    values = values.reindex(index=encoders, columns=info.loc[info["in_means"].astype(bool) & ~info["benchmark"].isin(
        unscaled), "benchmark"].tolist())
    out = pd.DataFrame(index=pd.Index(encoders, name="encoder"))
    info = info.copy()
    info["tiers"] = ""
    for name, keys in tier_benchmarks(tiers).items():
        if unscaled.intersection(keys):
            continue
        present = [k for k in keys if k in values.columns]
        missing = [k for k in keys if k not in values.columns]
        if not present:
            warnings.warn(f"tier {name!r} skipped: none of its {len(keys)} benchmarks is in the results "
                          f"(missing: {missing})", stacklevel=2)
            continue
        if missing and not partial:
            warnings.warn(f"tier {name!r} skipped: {len(missing)} of its {len(keys)} benchmarks are not in "
                          f"the results ({missing}); partial_tiers=true averages over those present", stacklevel=2)
            continue
        if missing:
            warnings.warn(f"tier {name!r}: partial mean over {len(present)} of {len(keys)} benchmarks "
                          f"(missing: {missing})", stacklevel=2)
        mean, n = _mean(values[present], partial)
        if mean.isna().all():
            warnings.warn(f"tier {name!r} skipped: no encoder has results on all of its benchmarks", stacklevel=2)
            continue
        _add(out, f"tier:{name}", mean, n if partial else None)
        info.loc[info["benchmark"].isin(present), "tiers"] = [
            ",".join(filter(None, [t, name])) for t in info.loc[info["benchmark"].isin(present), "tiers"]]
    groups = info[info["in_means"].astype(bool)].groupby("paper_group", sort=False)["benchmark"].apply(list)
    for group, benches in groups.items():
        if not group or unscaled.intersection(benches):
            continue
        mean, n = _mean(values[benches], partial)
        _add(out, f"group:{group}", mean, n if partial else None)
    unassigned = info.loc[(info["paper_group"] == "") & info["in_means"].astype(bool), "benchmark"].tolist()
    if unassigned:
        warnings.warn(f"no paper group known for {unassigned}: left out of the group means "
                      f"(set paper_group in the dataset config or in a benchmarks file)", stacklevel=2)
    mean_cols = [c for c in out.columns if not c.endswith((":rank", ":n"))]
    if mean_cols:
        order = out[[c + ":rank" for c in mean_cols]].mean(axis=1).sort_values(kind="stable").index
        out = out.loc[order]
    return out.reset_index(), info


def _mean(frame: pd.DataFrame, partial: bool) -> tuple[pd.Series, pd.Series]:
    n = frame.notna().sum(axis=1)
    mean = frame.mean(axis=1, skipna=True)
    if not partial:
        mean = mean.where(n == frame.shape[1])
    return mean.where(n > 0), n


def _add(out: pd.DataFrame, name: str, mean: pd.Series, n: pd.Series | None) -> None:
    out[name] = mean
    out[name + ":rank"] = mean.rank(ascending=False, method="min")
    if n is not None:
        out[name + ":n"] = n


def compare_with_published(tiers_table: pd.DataFrame, aggregates: pd.DataFrame | None) -> pd.DataFrame:
    """Rank agreement of our tier means with a published table's "<Tier> GATE Mean" rows.

    Returns one row per tier found in both: Spearman and Kendall correlation between our means and
    the published ones across encoders, and the largest absolute rank difference. Our means are not
    expected to equal the paper's (its aggregation is not fully specified); the ranks should agree.
    """
    rows = []
    if aggregates is None or tiers_table.empty:
        return pd.DataFrame(columns=["tier", "n", "spearman", "kendall", "max_rank_diff"])
    ours = tiers_table.set_index("encoder")
    enc_cols = [c for c in aggregates.columns if c not in ("paper_group", "metric", "higher_is_better")]
    for col in ours.columns:
        if not col.startswith("tier:") or col.endswith((":rank", ":n")):
            continue
        tier = col.split(":", 1)[1]
        hit = aggregates[aggregates["metric"].str.lower() == f"{tier} gate mean".lower()]
        if hit.empty:
            continue
        theirs = hit[enc_cols].iloc[0].astype(float)
        both = pd.concat([ours[col], theirs], axis=1, join="inner").dropna()
        if len(both) < 3:
            continue
        a, b = both.iloc[:, 0], both.iloc[:, 1]
        rank_diff = (a.rank(ascending=False) - b.rank(ascending=False)).abs().max()
        rows.append({"tier": tier, "n": len(both), "spearman": spearman(a, b), "kendall": kendall(a, b),
                     "max_rank_diff": float(rank_diff)})
    return pd.DataFrame(rows, columns=["tier", "n", "spearman", "kendall", "max_rank_diff"])

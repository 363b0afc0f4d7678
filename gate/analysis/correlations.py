"""How well do transferability scores predict fine-tuned results? One row per (dataset, score_metric,
target_metric) where a score and a fine-tuned target exist for at least 3 encoders.

Columns of ``correlations.csv``: ``dataset, score_metric, target_metric, n, pearson, pearson_p,
spearman, spearman_p, kendall, kendall_p, weighted_tau, top1, top3, rel_top1, degenerate`` (``degenerate``: on how
many of the row's encoders the score could not discriminate, and why, from gate-score's facts: e.g. SFDA where the
features' rank reaches the rows minus the classes; empty when on none).

* Scores where lower is better (the discrepancies) are negated first, and so are lower-is-better
  targets, so every correlation reads "higher score ↔ better fine-tuning".
* ``pearson``/``spearman``/``kendall`` (τ-b, which handles ties) with their two-sided p-values from
  ``scipy.stats``; ``weighted_tau`` is ``scipy.stats.weightedtau`` with its defaults (hyperbolic
  weigher, ranks from both variables: the τ_w of the LogME paper). Undefined values (a constant
  score or target) are left empty.
* ``top1``/``top3``: whether the best fine-tuned encoder is among the score's top 1/3 (encoders tied
  with the k-th best score count as in the top k; any encoder tied for the best target counts).
* ``rel_top1``: target of the score's top pick ÷ best target (the mean target when several encoders
  tie for the top score); for a lower-is-better target, best ÷ pick, so 1 is always perfect.
* ``relative=True``: accuracy targets become relative accuracy ``(acc - 1/C) / (1/C)`` with ``C``
  classes, the accuracy read as a fraction of its declared range (:func:`gate.analysis.meta.metric_scale`: a
  percentage row declares ``range: [0, 100]``, or the command line ``ranges={acc@1:[0,100]}``). A target whose
  range is undeclared, or holds a value outside it, is never guessed: its rows correlate the accuracy itself and
  stay out of the pooled rows, with one warning naming them and the fix.
  This leaves the per-dataset correlations unchanged (an increasing affine map) but changes ``rel_top1`` and
  makes targets of datasets with different class counts comparable: extra rows with ``dataset = "ALL"`` pool the (encoder, dataset)
  points of every dataset (their top1/top3/rel_top1 are left empty: those are per-dataset notions).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from gate.analysis.meta import BenchmarkMeta, choose_tier_metric, metric_scale, range_fix

COLUMNS = ["dataset", "score_metric", "target_metric", "n", "pearson", "pearson_p", "spearman", "spearman_p",
           "kendall", "kendall_p", "weighted_tau", "top1", "top3", "rel_top1", "degenerate"]
PAIR_COLUMNS = ["dataset", "score_metric", "target_metric", "encoder", "score", "target", "score_higher_is_better",
                "degenerate"]
MIN_ENCODERS = 3


def correlation_row(score: Iterable[float], target: Iterable[float]) -> dict[str, float]:
    """All statistics for one score vector against one target vector (both: higher is better)."""
    from scipy import stats  # here, not at the top: a report without scores never needs it (0.5 s of imports)

    x = np.asarray(list(score), dtype=float)
    y = np.asarray(list(target), dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"score and target must have the same length, got {x.shape} and {y.shape}")
    n = int(x.size)
    row: dict[str, float] = {"n": n}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, fn in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
            if n < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
                row[name], row[name + "_p"] = np.nan, np.nan
                continue
            res = fn(x, y)
            row[name], row[name + "_p"] = float(res[0]), float(res[1])
        row["weighted_tau"] = (float(stats.weightedtau(x, y)[0])
                               if n >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0 else np.nan)
    row["top1"] = top_k_hit(x, y, 1)
    row["top3"] = top_k_hit(x, y, 3)
    row["rel_top1"] = rel_top1(x, y)
    return row


def top_k_hit(score: np.ndarray, target: np.ndarray, k: int) -> bool:
    """Is (one of) the best-target encoder(s) among the top-k by score (ties at the cut included)?"""
    score, target = np.asarray(score, float), np.asarray(target, float)
    if score.size == 0:
        return False
    k = min(k, score.size)
    cut = np.sort(score)[::-1][k - 1]
    top = score >= cut
    best = target == target.max()
    return bool(np.any(top & best))


def rel_top1(score: np.ndarray, target: np.ndarray, target_higher_is_better: bool = True,
             original_target: np.ndarray | None = None) -> float:
    """Target of the score's top pick ÷ best target (pick = mean over encoders tied for the top score).

    ``target`` is in "higher is better" orientation; ``original_target`` (default ``target``) holds the
    values the ratio is taken on. For a lower-is-better target the ratio is best ÷ pick.
    """
    score, target = np.asarray(score, float), np.asarray(target, float)
    orig = target if original_target is None else np.asarray(original_target, float)
    if score.size == 0:
        return float("nan")
    pick = float(orig[score == score.max()].mean())
    best = float(orig[target == target.max()][0])
    if target_higher_is_better:
        return pick / best if best > 0 else float("nan")
    return best / pick if pick > 0 else float("nan")


def score_target_correlations(summary: pd.DataFrame, target: str | Iterable[str] | None = None,
                              meta: Mapping[str, BenchmarkMeta] | None = None, relative: bool = False,
                              num_classes: Mapping[str, float] | None = None,
                              min_encoders: int = MIN_ENCODERS,
                              ranges: Mapping[str, tuple[float, float] | str] | None = None,
                              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(correlations, pairs): the table above and the (score, target) points behind each row.

    ``target``: a fine-tuning metric name or list of names (``"all"``: every fine-tuning metric of
    each dataset); ``None``: each dataset's representative (tier) metric.
    """
    scores = summary[summary["kind"] == "score"]
    ft = summary[summary["kind"] == "finetune"]
    if isinstance(target, str) and target != "all":
        target = [target]
    if target is not None and target != "all":
        target = [str(t) for t in target]
        known = sorted(set(ft["metric"]) | set(ft["metric_name"]))
        unknown = [t for t in target if t not in known]
        if unknown:
            raise ValueError(f"unknown target metric(s) {unknown}: the fine-tuning results have {known}")
    rows, pairs, unscaled = [], [], {}
    for bench, ft_rows in ft.groupby("benchmark", sort=False):
        dataset = ft_rows["dataset"].iloc[0]
        sc_rows = scores[scores["dataset"] == dataset]
        if sc_rows.empty:
            continue
        targets = _targets_for(bench, dataset, ft_rows, target, meta or {})
        for tmetric in targets:
            trows = ft_rows[(ft_rows["metric"] == tmetric) | (ft_rows["metric_name"] == tmetric)]
            if trows.empty:
                continue
            thib = bool(trows["higher_is_better"].iloc[0])
            tvals = trows.set_index("encoder")["mean"].astype(float)
            if relative:
                scaled = _relative(tvals, bench, dataset, tmetric, thib, trows, num_classes or {}, meta or {}, ranges)
                if isinstance(scaled, str):
                    unscaled[(bench, tmetric)] = scaled
                else:
                    tvals = scaled
            for (sbench, smetric), srows in sc_rows.groupby(["benchmark", "metric"], sort=False):
                slabel = smetric if sbench == dataset else f"{smetric} [{sbench[len(dataset):].strip('[]')}]"
                shib = bool(srows["higher_is_better"].iloc[0])
                svals = srows.set_index("encoder")["mean"].astype(float)
                both = pd.concat([svals.rename("score"), tvals.rename("target")], axis=1, join="inner").dropna()
                if len(both) < min_encoders:
                    continue
                x = both["score"].to_numpy() * (1 if shib else -1)
                y = both["target"].to_numpy() * (1 if thib else -1)
                row = correlation_row(x, y)
                row["rel_top1"] = rel_top1(x, y, thib, both["target"].to_numpy())
                row["degenerate"] = _degenerate(srows, both.index)
                if np.ptp(x) == 0 or np.ptp(y) == 0:
                    warnings.warn(f"{bench}: {'score ' + slabel if np.ptp(x) == 0 else 'target ' + tmetric} is "
                                  f"constant over the {len(both)} encoders; correlations are undefined (left empty)",
                                  stacklevel=2)
                rows.append({"dataset": bench, "score_metric": slabel, "target_metric": tmetric, **row})
                why = srows.set_index("encoder")["degenerate"] if "degenerate" in srows else pd.Series(dtype=str)
                for enc, r in both.iterrows():
                    pairs.append({"dataset": bench, "score_metric": slabel, "target_metric": tmetric,
                                  "encoder": enc, "score": r["score"], "target": r["target"],
                                  "score_higher_is_better": shib, "degenerate": str(why.get(enc, "") or "")})
    corr = pd.DataFrame(rows, columns=COLUMNS)
    pairs_df = pd.DataFrame(pairs, columns=PAIR_COLUMNS)
    if unscaled:
        first = next(iter(unscaled.values()))
        more = f" (and {len(unscaled) - 1} more)" if len(unscaled) > 1 else ""
        warnings.warn(f"relative accuracy skipped for {sorted({b for b, _ in unscaled})}: {first}{more}; their "
                      f"correlations use the accuracy itself and they are left out of the pooled ALL rows. A table in "
                      f"percent? Declare its range: {range_fix(m for _, m in unscaled)}", stacklevel=2)
    if relative and corr["dataset"].nunique() > 1:
        keep = ~pd.Series([(d, t) in unscaled for d, t in zip(pairs_df["dataset"], pairs_df["target_metric"])],
                          index=pairs_df.index, dtype=bool)
        corr = pd.concat([corr, _pooled(pairs_df[keep], min_encoders)], ignore_index=True)
    for col in ("top1", "top3"):
        corr[col] = corr[col].astype("boolean")
    corr["n"] = corr["n"].astype(int)
    return corr[COLUMNS], pairs_df


def _degenerate(srows: pd.DataFrame, encoders) -> str:
    """How many of ``encoders``' score values were marked degenerate by gate-score, and the first reason."""
    if "degenerate" not in srows.columns:
        return ""
    why = srows.set_index("encoder")["degenerate"].reindex(list(encoders)).fillna("").astype(str)
    marked = why[why != ""]
    return f"on {len(marked)} of {len(why)} encoders: {marked.iloc[0]}" if len(marked) else ""


def _targets_for(bench: str, dataset: str, ft_rows: pd.DataFrame, target, meta) -> list[str]:
    metrics = list(dict.fromkeys(ft_rows["metric"]))
    if target == "all":
        return metrics
    if target is None:
        rep = choose_tier_metric(bench, dataset, metrics, meta)
        if rep.metric is None:
            warnings.warn(f"{rep.why}; no correlations for {bench!r} (give target=<metric>)", stacklevel=3)
            return []
        return [rep.metric]
    return list(target)


def _relative(tvals: pd.Series, bench: str, dataset: str, tmetric: str, thib: bool, trows: pd.DataFrame,
              num_classes: Mapping[str, float], meta: Mapping[str, BenchmarkMeta],
              ranges: Mapping[str, tuple[float, float] | str] | None = None) -> pd.Series | str:
    """Relative accuracies, or why the target's scale does not allow them (a str)."""
    if not thib:
        raise ValueError(f"relative=true turns accuracies into relative accuracies; target {tmetric!r} of "
                         f"{bench!r} is lower-is-better")
    c = num_classes.get(bench, num_classes.get(dataset))
    if c is None:
        known = trows["num_classes"].dropna()
        c = float(known.max()) if not known.empty else None
    if c is None or not c or c < 2:
        raise ValueError(f"relative=true needs the number of classes of {dataset!r}: not in its records' config; "
                         f"give num_classes.{dataset}=<C>")
    scale = metric_scale(bench, dataset, str(trows["metric_name"].iloc[0]), thib, meta, ranges)
    declared = scale.range
    if not isinstance(declared, tuple):
        return f"{tmetric!r} of {bench!r} has no declared range"
    outside = tvals[(tvals < declared[0]) | (tvals > declared[1])]
    if len(outside):
        return (f"{tmetric!r} of {bench!r}: {outside.index[0]} has {outside.iloc[0]:g}, outside the metric's range "
                f"[{declared[0]:g}, {declared[1]:g}] ({scale.declared_by})")
    fraction = (tvals - declared[0]) / (declared[1] - declared[0])
    chance = 1.0 / float(c)
    return (fraction - chance) / chance


def _pooled(pairs: pd.DataFrame, min_encoders: int) -> pd.DataFrame:
    rows = []
    for (smetric, tmetric), grp in pairs.groupby(["score_metric", "target_metric"], sort=False):
        if grp["dataset"].nunique() < 2 or len(grp) < min_encoders:
            continue
        sign = np.where(grp["score_higher_is_better"], 1.0, -1.0)
        row = correlation_row(grp["score"].to_numpy() * sign, grp["target"].to_numpy())
        # top-k and rel_top1 are per-dataset notions: left empty for the pooled rows.
        marked = grp["degenerate"].fillna("").astype(str)
        row.update(top1=pd.NA, top3=pd.NA, rel_top1=np.nan,
                   degenerate=f"on {int((marked != '').sum())} of {len(grp)} points: {marked[marked != ''].iloc[0]}"
                   if (marked != "").any() else "")
        rows.append({"dataset": "ALL", "score_metric": smetric, "target_metric": tmetric, **row})
    return pd.DataFrame(rows, columns=COLUMNS)

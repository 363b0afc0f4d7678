"""Figures of the analysis stage (matplotlib, no display needed).

Every figure is drawn on its own :class:`matplotlib.figure.Figure` and written with ``savefig``; pyplot
and its global state are never used, and importing this module does not change matplotlib's backend.

* :func:`ranking_heatmap` — encoders × metrics, brighter = better rank; columns ordered by Spearman
  similarity (across encoders) to a reference benchmark's column, rows by mean rank.
* :func:`score_scatter` — per dataset, transferability score vs fine-tuned target, one marker per
  encoder, τ_w in each panel's title.
* :func:`tier_bars` — per tier (and GATE paper group), the encoders' means.
* :func:`importance_bar`, :func:`k_sweep_box` — EEVEE's leave-one-out importance and k sweep.

:func:`draw_all` draws a report's figures, in forked children where it is safe (:mod:`gate.forked`; matplotlib draws
in Python: the paper table's four figures took 7.2 and 8.5 s one after the other on this project's 2-core machine in a
busy minute, 3.8 s twice on two children).
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gate.analysis.ranks import spearman
from gate.forked import children_for, map_forked, raised, sendable

DPI = 110


def new_figure(figsize: tuple[float, float]) -> Figure:
    """A figure of its own with an Agg canvas: no pyplot, no global figure manager, no backend switch."""
    fig = Figure(figsize=figsize, dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: Path, rect: tuple[float, float, float, float] = (0, 0, 1, 1)) -> None:
    """Lay ``fig`` out tightly once and write it. The layout engine ``tight_layout`` leaves on the figure is removed
    first: with one, ``savefig`` renders the whole figure once more (to a throwaway PNG) before the real one; the
    written file is byte-identical, ≈ 0.2 s sooner for the paper table's heatmaps."""
    fig.tight_layout(rect=rect)
    fig.set_layout_engine(None)
    fig.savefig(path, dpi=DPI)


@dataclasses.dataclass(frozen=True)
class FigureJob:
    """One figure of a report: ``draw(*args, **kwargs)`` writes it and returns its path (None: nothing to draw), shown
    in the report's ``section`` with ``caption``."""

    draw: Callable[..., Path | None]
    args: tuple
    section: str
    caption: str
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def draw_all(jobs: Sequence[FigureJob]) -> list[tuple[Path, str, str]]:
    """Each job's figure as ``(path, section, caption)``, in the jobs' order, those that drew nothing left out.

    The figures are independent, so they are drawn by processes forked from this one where that is safe and there are
    cores for them (:func:`gate.forked.map_forked`: each child takes the next job not yet taken, so give the dearest
    first), otherwise here one after the other. A fixed share (job i in child i mod n, before 2026-11-30) put the paper
    table's first and third figures in one child (3.6 + 2.6 s drawn one after the other, against the second's 2.7 s);
    on this 2-core machine the two ways measured alike within its noise (medians 4.7 s, six alternating rounds), but
    a report with many score figures no longer depends on their order. A warning a child's figure gives is given again
    here, in the jobs' order, so a caller that records warnings (the report lists them) sees the same ones either way;
    the first figure's error is raised here."""
    if not children_for(len(jobs)):
        drawn = [job.draw(*job.args, **job.kwargs) for job in jobs]
    else:
        drawn = []
        for path, seen, error in map_forked(_draw_one, jobs,
                                            lost="a figure process ended without its figures"):
            for text, category in seen:
                warnings.warn(text, category, stacklevel=2)
            if error is not None:
                raise raised(error)
            drawn.append(path)
    return [(path, job.section, job.caption) for path, job in zip(drawn, jobs) if path]


def _draw_one(job: FigureJob) -> tuple[Path | None, list[tuple[str, type]], BaseException | None]:
    """In a child: one job's figure, the warnings it gave and its error (raised in the parent, in the jobs' order)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            path, error = job.draw(*job.args, **job.kwargs), None
        except Exception as err:  # noqa: BLE001 - raised in the parent
            path, error = None, err
    return path, [(str(w.message), w.category) for w in seen], None if error is None else sendable(error)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=@-]+", "_", str(text)).strip("_") or "x"


def rank_matrix(table: pd.DataFrame) -> pd.DataFrame:
    """Encoders × columns of ranks (1 = best) from a wide table (``table.csv`` layout)."""
    encoders = [c for c in table.columns if c not in ("paper_group", "dataset", "metric", "higher_is_better")]
    ranks = {}
    for _, row in table.iterrows():
        vals = row[encoders].astype(float)
        if vals.notna().sum() < 2:
            continue
        label = f"{row['dataset']} | {row['metric']}"
        ranks[label] = vals.rank(ascending=not bool(row["higher_is_better"]), method="average")
    return pd.DataFrame(ranks, index=encoders)


def order_columns(ranks: pd.DataFrame, reference: str) -> list[str]:
    """Columns by descending Spearman similarity to ``reference`` (= Pearson correlation of the ranks)."""
    ref = ranks[reference]
    with warnings.catch_warnings():  # constant columns: similarity undefined, they go last
        warnings.simplefilter("ignore")
        sim = ranks.apply(lambda col: spearman(col, ref))
    sim = sim.fillna(-2.0)
    sim[reference] = 2.0
    return list(sim.sort_values(ascending=False, kind="stable").index)


def reference_column(table: pd.DataFrame, ranks: pd.DataFrame, reference: str | None,
                     tier_metrics: Mapping[str, str] | None = None) -> str:
    """The heatmap's reference column: the reference benchmark's tier metric (else its first metric)
    when the benchmark is present, else the first column."""
    if reference:
        candidates = [c for c in ranks.columns if c.split(" | ")[0] == reference]
        metric = (tier_metrics or {}).get(reference)
        if metric and f"{reference} | {metric}" in ranks.columns:
            return f"{reference} | {metric}"
        if candidates:
            return candidates[0]
    return ranks.columns[0]


def ranking_heatmap(table: pd.DataFrame, path: Path, reference: str | None = "imagenet1k",
                    tier_metrics: Mapping[str, str] | None = None) -> Path | None:
    ranks = rank_matrix(table)
    if ranks.empty:
        return None
    ref = reference_column(table, ranks, reference, tier_metrics)
    ranks = ranks[order_columns(ranks, ref)]
    ranks = ranks.loc[ranks.mean(axis=1).sort_values(kind="stable").index]
    n_enc, n_col = ranks.shape
    brightness = 1.0 - (ranks - 1) / max(n_enc - 1, 1)  # rank 1 → 1.0 (brightest)
    width = min(max(6.0, 0.16 * n_col + 3.0), 40.0)
    height = max(3.0, 0.32 * n_enc + 2.5)
    fig = new_figure((width, height))
    ax = fig.subplots()
    im = ax.imshow(brightness.to_numpy(dtype=float), aspect="auto", cmap="magma", vmin=0, vmax=1,
                   interpolation="nearest")
    ax.set_yticks(range(n_enc), ranks.index, fontsize=8)
    fs = 8 if n_col <= 40 else max(3, int(320 / n_col))
    ax.set_xticks(range(n_col), ranks.columns, rotation=90, fontsize=fs)
    ax.set_title(f"Ranking heatmap (brighter = better rank)\ncolumns by Spearman similarity to {ref!r}; "
                 f"rows by mean rank", fontsize=8)
    cbar = fig.colorbar(im, ax=ax, fraction=0.02, pad=0.01)
    cbar.set_ticks([0, 1], labels=[f"rank {n_enc}", "rank 1"])
    save(fig, path)
    return path


def score_scatter(pairs: pd.DataFrame, corr: pd.DataFrame, dataset: str, target: str, path: Path) -> Path | None:
    sub = pairs[(pairs["dataset"] == dataset) & (pairs["target_metric"] == target)]
    scores = list(dict.fromkeys(sub["score_metric"]))
    if not scores:
        return None
    ncol = min(3, len(scores))
    nrow = int(np.ceil(len(scores) / ncol))
    fig = new_figure((4.2 * ncol, 3.6 * nrow))
    axes = fig.subplots(nrow, ncol, squeeze=False)
    encoders = list(dict.fromkeys(pairs["encoder"]))
    markers = "osD^v<>pPXh*"
    cmap = matplotlib.colormaps["tab20"]
    for ax, smetric in zip(axes.flat, scores):
        pts = sub[sub["score_metric"] == smetric]
        for _, r in pts.iterrows():
            e = encoders.index(r["encoder"])
            ax.scatter(r["score"], r["target"], marker=markers[e % len(markers)], color=cmap(e % 20), s=40,
                       label=r["encoder"], edgecolor="black", linewidth=0.4)
        row = corr[(corr["dataset"] == dataset) & (corr["score_metric"] == smetric) & (corr["target_metric"] == target)]
        tau = float(row["weighted_tau"].iloc[0]) if not row.empty else float("nan")
        ax.set_title(f"{smetric}: τ_w = {tau:.2f}" if np.isfinite(tau) else f"{smetric}: τ_w undefined", fontsize=9)
        lower = not bool(pts["score_higher_is_better"].iloc[0])
        ax.set_xlabel(smetric + (" (lower is better)" if lower else ""), fontsize=8)
        ax.set_ylabel(target, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(scores):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    fig.legend(uniq.values(), uniq.keys(), loc="center right", fontsize=7, frameon=False)
    fig.suptitle(f"{dataset}: transferability score vs fine-tuned {target}", fontsize=10)
    save(fig, path, rect=(0, 0, 0.84, 1))
    return path


def tier_bars(tiers: pd.DataFrame, path: Path, prefix: str = "tier:") -> Path | None:
    cols = [c for c in tiers.columns if c.startswith(prefix) and not c.endswith((":rank", ":n"))]
    cols = [c for c in cols if tiers[c].notna().any()]
    if not cols:
        return None
    n = len(cols)
    ncol = min(2, n)
    nrow = int(np.ceil(n / ncol))
    n_enc = len(tiers)
    fig = new_figure((6.0 * ncol, max(2.5, 0.28 * n_enc + 1.2) * nrow))
    axes = fig.subplots(nrow, ncol, squeeze=False)
    for ax, col in zip(axes.flat, cols):
        data = tiers[["encoder", col]].dropna().sort_values(col, kind="stable")
        ax.barh(data["encoder"], data[col], color="#4c72b0")
        ax.set_title(f"{col.split(':', 1)[1]} — mean of turned representative metrics", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    save(fig, path)
    return path


def importance_bar(imp: pd.DataFrame, k: int, path: Path) -> Path:
    fig = new_figure((6.5, max(2.2, 0.4 * len(imp) + 1.2)))
    ax = fig.subplots()
    data = imp.iloc[::-1]
    ax.barh(data["benchmark"], data["increase"], color="#dd8452")
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_xlabel("increase of validation MSE when left out")
    base = float(imp["fitness_with"].iloc[0]) if len(imp) else float("nan")
    ax.set_title(f"EEVEE leave-one-out importance, best k={k} subset (MSE {base:.4f})", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    save(fig, path)
    return path


def k_sweep_box(top_fitness: Mapping[int, np.ndarray], path: Path) -> Path:
    ks = sorted(top_fitness)
    fig = new_figure((max(4.0, 0.7 * len(ks) + 2.5), 3.6))
    ax = fig.subplots()
    ax.boxplot([np.asarray(top_fitness[k], dtype=float) for k in ks], tick_labels=[str(k) for k in ks])
    ax.set_xlabel("k (benchmarks in the subset)")
    ax.set_ylabel("validation MSE of the final population")
    ax.set_title("EEVEE: fitness of the top subsets per k (lower is better)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    save(fig, path)
    return path


def representative_heatmap(mean: pd.DataFrame, path: Path, *, halfwidth: pd.DataFrame | None = None,
                           higher_is_better: Mapping[str, bool] | None = None, metrics: Mapping[str, str] | None = None,
                           title: str = "") -> Path | None:
    """Encoders × benchmarks, one column per benchmark on its representative metric (its ``tier_metric``).

    Each cell shows the value (± ``halfwidth``, e.g. a 95 % interval over seeds, where given) and is coloured by
    the encoder's rank within the column (brighter = better; the metric's direction from ``higher_is_better``).
    Rows are sorted by mean rank."""
    if mean.empty or mean.shape[1] == 0:
        return None
    hib = higher_is_better or {}
    ranks = pd.DataFrame({b: mean[b].rank(ascending=not hib.get(b, True), method="min") for b in mean.columns})
    order = ranks.mean(axis=1).sort_values(kind="stable").index
    mean, ranks = mean.loc[order], ranks.loc[order]
    n_enc, n_col = mean.shape
    brightness = 1.0 - (ranks - 1) / max(n_enc - 1, 1)
    fig = new_figure((max(6.0, 1.25 * n_col + 3.0), max(3.0, 0.42 * n_enc + 2.2)))
    ax = fig.subplots()
    im = ax.imshow(brightness.to_numpy(dtype=float), aspect="auto", cmap="viridis", vmin=0, vmax=1,
                   interpolation="nearest")
    for i, enc in enumerate(mean.index):
        for j, bench in enumerate(mean.columns):
            v = mean.loc[enc, bench]
            if not np.isfinite(v):
                ax.text(j, i, "—", ha="center", va="center", fontsize=7, color="grey")
                continue
            text = f"{v:.3g}"
            if (halfwidth is not None and bench in halfwidth.columns and enc in halfwidth.index
                    and np.isfinite(halfwidth.loc[enc, bench])):
                text += f"\n±{halfwidth.loc[enc, bench]:.2g}"
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="black" if brightness.loc[enc, bench] > 0.55 else "white")
    ax.set_yticks(range(n_enc), mean.index, fontsize=8)
    labels = [f"{b}\n{(metrics or {}).get(b, '')}{'' if hib.get(b, True) else ' ↓'}" for b in mean.columns]
    ax.set_xticks(range(n_col), labels, rotation=35, ha="right", fontsize=7)
    import textwrap

    ax.set_title(textwrap.fill(title or "Encoders × benchmarks on each benchmark's representative metric "
                                        "(colour: rank in the column, brighter = better; ↓ lower is better)",
                               width=int(14 * n_col + 40)), fontsize=8)
    cbar = fig.colorbar(im, ax=ax, fraction=0.025, pad=0.01)
    cbar.set_ticks([0, 1], labels=[f"rank {n_enc}", "rank 1"])
    save(fig, path)
    return path



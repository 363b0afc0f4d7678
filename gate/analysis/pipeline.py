"""``gate-analysis`` as one function: results file in, report directory out.

Files written under ``out`` (a contract other tools rely on):

* ``table.csv`` (+ ``table_std.csv``, ``table_n.csv``), ``table.md``, ``table.tex`` — fine-tuning results;
* ``summary.csv`` — the long, seed-averaged results (kind, encoder, dataset, benchmark, metric, mean, std, n, …);
* ``tiers.csv`` and ``tiers_benchmarks.csv`` — tier/paper-group means and ranks, and the metric used per benchmark
  (``in_means`` = False for a dataset's non-main protocol variants, which are left out of the means);
* ``published_check.csv`` — only for a wide table with published aggregate rows;
* ``correlations.csv`` (+ ``correlation_points.csv``, the points behind each row);
* ``figures/*.png`` and ``report.html``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from gate.analysis.load import load_results, summarize
from gate.files import output_folder


@dataclasses.dataclass
class AnalysisResult:
    out: Path
    files: dict[str, Path]
    summary: pd.DataFrame
    tiers: pd.DataFrame
    correlations: pd.DataFrame
    warnings: list[str]


def default_out(results: str | Path) -> Path:
    """Next to the results: ``<root>/reports/latest`` for a store at ``<root>/results/<file>``, else
    ``<dir>/<stem>_report``."""
    results = Path(results)
    if results.parent.name == "results":
        return results.parent.parent / "reports" / "latest"
    return results.parent / f"{results.stem}_report"


def run_analysis(results: str | Path, out: str | Path | None = None, *, split: str | None = "test",
                 score_split: str | None = None, target: str | Iterable[str] | None = None,
                 relative: bool = False, num_classes: Mapping[str, float] | None = None,
                 tiers: Mapping[str, Any] | None = None, tier_metrics: Mapping[str, str] | None = None,
                 partial_tiers: bool = False, benchmark_meta: Mapping[str, Any] | None = None,
                 benchmarks_file: str | Path | None = None,
                 dataset_config_dirs: Iterable[str | Path] | None = None, reference: str | None = "imagenet1k",
                 filters: Mapping[str, Any] | None = None, figures: bool = True,
                 extra_sections: Iterable[tuple[str, str]] = (),
                 ranges: Mapping[str, Any] | None = None) -> AnalysisResult:
    """``extra_sections``: (title, HTML) sections a caller adds to report.html after the tier summary. ``ranges``:
    metric -> [low, high], the table's own scale for metrics it holds in other units (``{"acc@1": [0, 100]}``)."""
    from gate.analysis.meta import parse_ranges

    ranges = parse_ranges(ranges)  # a bad value is one line before the results are read
    out = output_folder(out, "out") if out else default_out(results)
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = load_results(results)
            summary = summarize(loaded.long, split=split, score_split=score_split, filters=filters)
            return _analyse(loaded, summary, out, target=target, relative=relative, num_classes=num_classes,
                            tiers=tiers, tier_metrics=tier_metrics, partial_tiers=partial_tiers,
                            benchmark_meta=benchmark_meta, benchmarks_file=benchmarks_file, dataset_config_dirs=dataset_config_dirs,
                            reference=reference, figures=figures, caught=caught,
                            extra_sections=list(extra_sections), ranges=ranges,
                            options=dict(split=split, score_split=score_split, target=target, relative=relative,
                                         partial_tiers=partial_tiers, reference=reference,
                                         filters=dict(filters or {}),
                                         ranges={k: list(v) if isinstance(v, tuple) else v for k, v in ranges.items()}))
    finally:
        for w in caught:  # hand the warnings on to the caller (after the report has listed them), also on errors
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _analyse(loaded, summary: pd.DataFrame, out: Path, *, target, relative, num_classes, tiers, tier_metrics,
             partial_tiers, benchmark_meta, benchmarks_file, dataset_config_dirs, reference, figures, caught,
             options, extra_sections=(), ranges=None) -> AnalysisResult:
    # Imported once the input has been read and validated: a bad input is reported without waiting for them.
    from gate.analysis import figures as figs
    from gate.analysis.correlations import COLUMNS as CORR_COLUMNS
    from gate.analysis.correlations import score_target_correlations
    from gate.analysis.meta import load_benchmark_meta
    from gate.analysis.report import write_report
    from gate.analysis.table import wide_table, write_tables
    from gate.analysis.tiers import compare_with_published, tier_summary

    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    if summary[summary["kind"] == "finetune"].empty:
        warnings.warn("no fine-tuning results: table.csv and tiers.csv are empty", stacklevel=3)
    summary.to_csv(out / "summary.csv", index=False)
    files["summary.csv"] = out / "summary.csv"
    meta = load_benchmark_meta(benchmarks_file, dataset_config_dirs, tier_metrics, benchmark_meta)
    notes_vs_gate = {k: m.notes_vs_gate for k, m in meta.items() if m.notes_vs_gate}
    files.update(write_tables(summary, out, notes_vs_gate))
    tiers_table, bench_info = tier_summary(summary, tiers or {}, meta, partial=partial_tiers, ranges=ranges)
    tiers_table.to_csv(out / "tiers.csv", index=False)
    bench_info.to_csv(out / "tiers_benchmarks.csv", index=False)
    files["tiers.csv"], files["tiers_benchmarks.csv"] = out / "tiers.csv", out / "tiers_benchmarks.csv"
    published = compare_with_published(tiers_table, loaded.aggregates)
    if loaded.aggregates is not None:
        published.to_csv(out / "published_check.csv", index=False)
        files["published_check.csv"] = out / "published_check.csv"
    if (summary["kind"] == "score").any():
        corr, pairs = score_target_correlations(summary, target=target, meta=meta, relative=relative,
                                                num_classes=num_classes, ranges=ranges)
        if corr.empty:
            warnings.warn("no (dataset, score, target) with results for at least 3 encoders: "
                          "correlations.csv is empty", stacklevel=3)
    else:
        if target is not None:  # still validate the target name against the fine-tuning metrics
            score_target_correlations(summary, target=target, meta=meta)
        corr, pairs = pd.DataFrame(columns=CORR_COLUMNS), pd.DataFrame()
    corr.to_csv(out / "correlations.csv", index=False)
    files["correlations.csv"] = out / "correlations.csv"
    if not pairs.empty:
        pairs.to_csv(out / "correlation_points.csv", index=False)
        files["correlation_points.csv"] = out / "correlation_points.csv"

    fig_list: list[tuple[Path, str, str]] = []
    mean = wide_table(summary, value="mean")
    if figures:
        fig_dir = out / "figures"
        fig_dir.mkdir(exist_ok=True)
        rep = dict(zip(bench_info["benchmark"], bench_info["metric"]))
        jobs = [  # the dearest first: the workers take them in this order
            # the overview: one column per benchmark on its representative metric, ± a 95 % interval over seeds
            figs.FigureJob(representative_figure, (summary, bench_info, fig_dir / "benchmarks_heatmap.png"), "overview",
                           "Encoders × benchmarks on each benchmark's representative metric (± 95 % interval over "
                           "seeds; colour: rank in the column)"),
            figs.FigureJob(figs.ranking_heatmap, (mean, fig_dir / "ranking_heatmap.png"), "overview",
                           "Ranking heatmap: encoders × every recorded metric (brighter = better rank)",
                           dict(reference=reference, tier_metrics=rep)),
            figs.FigureJob(figs.tier_bars, (tiers_table, fig_dir / "groups.png"), "tiers",
                           "GATE paper-group means per encoder", dict(prefix="group:")),
            figs.FigureJob(figs.tier_bars, (tiers_table, fig_dir / "tiers.png"), "tiers", "Tier means per encoder",
                           dict(prefix="tier:")),
        ]
        for (ds, tgt) in corr.loc[corr["dataset"] != "ALL", ["dataset", "target_metric"]].drop_duplicates().itertuples(index=False):
            jobs.append(figs.FigureJob(
                figs.score_scatter, (pairs, corr, ds, tgt, fig_dir / f"scores_{figs.safe_name(ds)}_{figs.safe_name(tgt)}.png"),
                "correlations", f"{ds}: scores vs fine-tuned {tgt}"))
        # in the report: the overview, the tier means, the paper groups, the correlations
        order = ["benchmarks_heatmap.png", "ranking_heatmap.png", "tiers.png", "groups.png"]
        fig_list = sorted(figs.draw_all(jobs), key=lambda f: order.index(f[0].name) if f[0].name in order else len(order))
        for p, _, _ in fig_list:
            files[f"figures/{p.name}"] = p
    seen = list(dict.fromkeys(str(w.message) for w in caught))
    report = write_report(
        out / "report.html", source=str(loaded.source), fmt_name=loaded.format, summary=summary,
        tables={"mean": mean, "std": wide_table(summary, value="std"), "n": wide_table(summary, value="n")},
        tiers=tiers_table, tier_info=bench_info, published=published if loaded.aggregates is not None else None,
        correlations=corr, figures=fig_list, warnings_seen=seen, options=options, extra_sections=extra_sections,
        notes_vs_gate=notes_vs_gate)
    files["report.html"] = report
    return AnalysisResult(out=out, files=files, summary=summary, tiers=tiers_table, correlations=corr, warnings=seen)


def representative_values_with_intervals(summary: pd.DataFrame, bench_info: pd.DataFrame):
    """Encoders × benchmarks of each benchmark's representative metric (``tiers_benchmarks.csv``'s choice), in the
    metric's own units: (means over seeds, half-widths of a 95 % t interval over seeds — NaN for one seed,
    higher_is_better per benchmark, metric per benchmark)."""
    from scipy.special import stdtrit  # scipy.stats.t.ppf's own function, without scipy.stats' 0.5 s of imports

    ft = summary[summary["kind"] == "finetune"]
    means, halves, hib, metrics = {}, {}, {}, {}
    for row in bench_info.itertuples(index=False):
        rows = ft[(ft["benchmark"] == row.benchmark) & (ft["metric"] == row.metric)].set_index("encoder")
        if rows.empty:
            continue
        n = rows["n"].astype(float)
        t = n.map(lambda k: stdtrit(k - 1, 0.975) if k > 1 else float("nan"))
        means[row.benchmark] = rows["mean"].astype(float)
        halves[row.benchmark] = rows["std"].astype(float) / n.pow(0.5) * t
        hib[row.benchmark], metrics[row.benchmark] = bool(row.higher_is_better), str(row.metric)
    return pd.DataFrame(means), pd.DataFrame(halves), hib, metrics


def representative_figure(summary: pd.DataFrame, bench_info: pd.DataFrame, path: Path) -> Path | None:
    """The overview heatmap: :func:`representative_values_with_intervals` drawn by
    :func:`gate.analysis.figures.representative_heatmap`."""
    from gate.analysis import figures as figs

    means, halves, hib, metrics = representative_values_with_intervals(summary, bench_info)
    if means.empty:
        return None
    return figs.representative_heatmap(means, path, halfwidth=halves, higher_is_better=hib, metrics=metrics)

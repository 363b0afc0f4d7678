"""gate-rank's page: the predicted ranking, its cost, and predicted vs full where full results exist."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gate.analysis import figures as figs
from gate.ranking import stats
from gate.ranking.budget import minutes, shown
from gate.ranking.pipeline import RankResult, summary_table

CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:13px;margin:.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}img{max-width:100%;border:1px solid #eee}
.note{color:#555;font-size:13px}"""


def _fmt(v: Any, spec: str = ".3f") -> str:
    if isinstance(v, (float, np.floating)):
        return "—" if not math.isfinite(float(v)) else format(float(v), spec)
    return html.escape(str(v))


def _table(frame: pd.DataFrame, spec: str = ".3f") -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(v, spec)}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<table><tr>{head}</tr>{body}</table>"


def full_halfwidth(result: RankResult) -> pd.DataFrame | None:
    """Half-width of a 95 % t interval over the full runs' seeds per encoder × benchmark (NaN for one seed)."""
    from scipy import stats as st

    full = result.full
    if full is None or not full.per_seed:
        return None
    out = {}
    for bench, seeds in full.per_seed.items():
        frame = pd.concat(list(seeds.values()), axis=1)
        n = frame.notna().sum(axis=1)
        sem = frame.std(axis=1, ddof=1) / np.sqrt(n)
        t = n.map(lambda k: st.t.ppf(0.975, k - 1) if k > 1 else math.nan)
        out[bench] = sem * t
    return pd.DataFrame(out)


def write_report(result: RankResult, plan: Any, request: Any, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)
    parts = [f"<h1>gate-rank: tier {html.escape(plan.tier.name)}, {len(plan.encoders)} encoders, budget "
             f"{request.budget}</h1>"]
    led = result.ledger
    parts.append(f"<p>Compute spent: <b>{minutes(led.spent_seconds)}</b>; the full tier would take "
                 f"~{minutes(led.full_seconds)} (its stored runs where they exist, else estimated from the proxy's own "
                 f"step times, a lower bound) → <b>{shown(led.fraction)}</b> of it ({shown(led.estimated_fraction)} of "
                 f"the estimate alone)"
                 f"{'; not measured: ' + html.escape(', '.join(led.unmeasured)) if led.unmeasured else ''}. "
                 f"{'<b>' + html.escape(led.overrun(request.budget)) + '.</b> ' if led.overrun(request.budget) else ''}"
                 f"{'One run per encoder' if request.max_rungs == 1 else f'Successive halving (eta={request.eta})'} on "
                 f"each benchmark's validation monitor"
                 f"{'; rung 0 seeded by ' + ', '.join(request.seed_scores) if request.seed_scores else ''}"
                 f"{'; not run on ' + html.escape(', '.join(result.not_run)) + ' (proxy_benchmarks)' if result.not_run else ''}."
                 "</p>")
    tr = result.tier_ranking.reset_index().rename(columns={"index": "encoder"})
    parts.append("<h2>Predicted ranking on the tier</h2><p class=note>Mean rank over the benchmarks (1 = best); the "
                 "interval is a 95 % bootstrap over benchmarks.</p>" + _table(tr, ".2f"))
    pred_rows = pd.DataFrame({b: {e: i + 1 for i, e in enumerate(r.order)} for b, r in result.rankings.items()})
    pred_rows = pred_rows.reindex(tr["encoder"]).reset_index().rename(columns={"index": "encoder"})
    parts.append("<h2>Predicted rank per benchmark</h2>" + _table(pred_rows, ".0f"))
    full = result.full
    if full is not None and not full.values.dropna(how="all", axis=1).empty:
        raw = full.values.copy()
        for b in raw.columns:  # back to the metric's own sign for display
            if not full.metric.get(b, ("", True))[1]:
                raw[b] = -raw[b]
        hw = full_halfwidth(result)
        p = figs.representative_heatmap(raw.dropna(how="all", axis=1), fig_dir / "full_heatmap.png", halfwidth=hw,
                                        higher_is_better={b: m[1] for b, m in full.metric.items()},
                                        metrics={b: m[0] for b, m in full.metric.items()},
                                        title="Full fine-tuning: encoders × benchmarks on each tier_metric "
                                              "(± 95 % interval over seeds; colour: rank, brighter = better)")
        if p:
            parts.append(f"<h2>Full results</h2><img src='figures/{p.name}' alt='full results heatmap'>")
    if result.validation is not None:
        table = summary_table(result.validation, result.ceiling)
        parts.append("<h2>Predicted vs full</h2><p class=note>Kendall τ, weighted τ<sub>w</sub> (scipy weightedtau) "
                     "and top-1 regret (mean-rank units on the tier, metric units per benchmark) with 95 % bootstrap "
                     f"intervals. Seed-to-seed ceiling τ of the ground truth: tier {shown(table.attrs['ceiling_tier'])}, "
                     f"mean per benchmark {shown(table.attrs['ceiling_mean_bench'])}.</p>" + _table(table))
        proxy = result.validation[result.validation["method"] == "proxy"]
        taus = dict(zip(proxy["scope"], proxy["tau"]))
        benches = [b for b in proxy["scope"] if b != "tier"]
        pred = result.predicted()
        panels = {"tier": (-stats.mean_rank(pred[benches]), -stats.mean_rank(full.values[benches]))}
        panels.update({b: (pred[b], full.values[b]) for b in benches})
        p = figs.predicted_vs_full(panels, fig_dir / "predicted_vs_full.png", taus)
        if p:
            parts.append(f"<img src='figures/{p.name}' alt='predicted vs full ranks'>")
        parts.append("<h3>Per benchmark</h3>" + _table(result.validation))
    if result.dropped:
        parts.append("<p class=note>Left out: " + html.escape("; ".join(result.dropped)) + "</p>")
    path = out / "report.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>gate-rank {html.escape(plan.tier.name)}"
                    f"</title><style>{CSS}</style></head><body>{''.join(parts)}</body></html>")
    return path

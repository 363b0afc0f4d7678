"""gate-rank's page: the ranking and whose it is, what was chosen and why, observed vs completed values, the proxy
seeds' agreement, planned vs spent, and — with a validation — τ, τ_w, regret, top-3 recall, the ceiling and the
paired comparisons."""

from __future__ import annotations

import dataclasses
import html
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gate.ranking import prior as priors
from gate.ranking.budget import minutes, shown
from gate.ranking.pipeline import RankResult, halving_line, predicted_footnote, selection_rows

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


def write_report(result: RankResult, plan: Any, request: Any, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    led = result.ledger
    parts = [f"<h1>gate-rank: tier {html.escape(plan.tier.name)}, {len(plan.encoders)} encoders, budget "
             f"{request.budget}</h1>",
             f"<p><b>The ranking is the {html.escape(result.source)}'s</b>: {html.escape(result.why)}.</p>"]
    tr = result.tier_ranking.reset_index().rename(columns={"index": "encoder"})
    parts.append("<h2>Predicted ranking on the tier</h2>" + _table(tr.rename(columns={"mean_rank": "mean_rank†"}), ".2f")
                 + f"<p>{html.escape(predicted_footnote(result))}</p>")
    parts.append(f"<h2>Plan and cost</h2><p>{html.escape(result.plan.why)}. Spent <b>{minutes(led.spent_seconds)}</b> "
                 f"of {minutes(led.planned_total)} planned (cost model, item by item: spent/predicted "
                 f"{shown(led.planned_vs_spent, '.2f')}); the full "
                 f"tier {minutes(led.full_seconds)} → <b>{shown(led.fraction)}</b> of it (planned "
                 f"{shown(led.planned_fraction)}).{' <b>' + html.escape(led.overrun()) + '</b>' if led.overrun() else ''}"
                 "</p>")
    sel = result.selection
    if sel is not None:
        rows = pd.DataFrame([{**row, "stability": sel.stability.get(row["benchmark"], math.nan)}
                             for row in selection_rows(sel, result.benchmarks_run, unlearnt=result.unlearnt)])
        parts.append(f"<h2>Benchmarks chosen and run ({html.escape(sel.method)})</h2><p class=note>History: "
                     f"{sel.history_encoders} encoders, fingerprint {html.escape(sel.fingerprint)}; held-out τ "
                     f"{shown(sel.tau)} (completed {shown(sel.tau_completed)}, plain {shown(sel.tau_plain)}; completion "
                     f"{'used' if sel.use_completion else 'not used'}).</p>" + _table(rows))
    if not result.seeds.empty:
        cols = [result.seeds[c] for c in result.seeds.columns]
        parts.append(f"<h2>Proxy seeds</h2><p class=note>Pairwise τ {shown(priors.agreement(cols), '.2f')}, Kendall's W "
                     f"{shown(priors.kendalls_w(cols), '.2f')}.</p>"
                     + _table(result.seeds.reset_index().rename(columns={"index": "encoder"}), ".2f"))
    if result.contests:
        parts.append(f"<h2>Halving (contested)</h2><p class=note>{html.escape(halving_line(result) or '')}: a pair's "
                     "certainty is the net share of blocks in which one encoder's interval lies wholly above the "
                     "other's.</p>" + _table(pd.DataFrame([dataclasses.asdict(c) for c in result.contests]), ".2f"))
    if not result.predictions.empty:
        parts.append("<h2>Values behind it</h2><p class=note>source: observed (a proxy run, its curve extrapolated to "
                     "the full steps), completed (predicted from the run benchmarks by the history), fallback (outside "
                     "the history's range), full (stored full runs), prior, no skill (a benchmark no encoder learnt: "
                     "listed, not ranked), stopped (a block the budget stopped before its last run: listed, not "
                     "ranked), superseded (a shorter run a contested encoder's longer run replaced).</p>" + _table(result.predictions))
    if result.validation is not None:
        c = result.ceiling
        parts.append(f"<h2>Predicted vs full</h2><p class=note>Ceiling (each truth seed alone vs the mean of the "
                     f"others, {c.get('n_seeds')} seeds): {shown(c.get('one_seed_vs_rest'))}; v2 against the same truths "
                     f"{shown(c.get('v2_vs_rest'))}; ratio {shown(c.get('ratio'))}.</p>" + _table(result.validation))
        if result.paired is not None and not result.paired.empty:
            parts.append("<h3>Paired (v2 − baseline, 95 % bootstrap over encoders and benchmarks)</h3>"
                         + _table(result.paired))
    if result.dropped:
        parts.append("<p class=note>Left out: " + html.escape("; ".join(result.dropped)) + "</p>")
    path = out / "report.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>gate-rank {html.escape(plan.tier.name)}"
                    f"</title><style>{CSS}</style></head><body>{''.join(parts)}</body></html>")
    return path

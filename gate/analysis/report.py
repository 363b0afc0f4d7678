"""``report.html``: one self-contained page (figures embedded as base64 PNG data URIs, no external
resources) with the tier summary, the correlations, the figures and the full results table."""

from __future__ import annotations

import base64
import datetime as _dt
import html
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from gate.analysis.meta import CAPPED_FOOTNOTE, CAPPED_MARK, DEPARTS_FOOTNOTE, DEPARTS_MARK, capped_benchmarks
from gate.analysis.table import cells, fmt, marked

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1400px;
     color:#222;padding:0 1rem}
h1{font-size:1.6rem} h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.8rem;margin:.6rem 0}
th,td{border:1px solid #ddd;padding:.2rem .45rem;text-align:right;white-space:nowrap}
th{background:#f4f4f4} td.l,th.l{text-align:left}
.scroll{overflow-x:auto;max-width:100%} .best{font-weight:700;background:#eef6ee}
figure{margin:1rem 0} figcaption{font-size:.8rem;color:#555}
img{max-width:100%;height:auto;border:1px solid #eee}
.warn{background:#fff8e1;border-left:4px solid #f0b400;padding:.4rem .8rem;font-size:.85rem}
.meta{color:#555;font-size:.9rem}
"""

# Marks the page when every image has decoded (checked by the headless-browser test).
SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute('data-images-total', String(imgs.length));
  document.body.setAttribute('data-images-ok', String(ok));
});
"""


def img_tag(path: Path, caption: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def frame_html(df: pd.DataFrame, left: Sequence[str] = (), digits: bool = True, max_rows: int | None = None) -> str:
    if df is None or df.empty:
        return "<p class='meta'>(none)</p>"
    if max_rows is not None and len(df) > max_rows:
        df = df.head(max_rows)
    head = "".join(f"<th class='{'l' if c in left else ''}'>{html.escape(str(c))}</th>" for c in df.columns)
    body = []
    for _, row in df.iterrows():
        tds = []
        for c in df.columns:
            v = row[c]
            if isinstance(v, (float, np.floating)) and digits:
                text = fmt(float(v))
            elif v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
                text = ""
            else:
                text = str(v)
            tds.append(f"<td class='{'l' if c in left else ''}'>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def results_table_html(mean: pd.DataFrame, std: pd.DataFrame, n: pd.DataFrame,
                       notes: Mapping[str, str] | None = None, capped: Mapping[str, str] | None = None) -> str:
    """The fine-tuning table; a benchmark whose numbers depart from GATE's protocol is marked † and one measured on a
    capped evaluation split ‡ (the note in its tooltip), and the notes are printed under the table."""
    if mean.empty:
        return "<p class='meta'>(no fine-tuning results)</p>"
    encoders, text, best = cells(mean, std, n)
    labels, noted, caps = marked(mean, notes, capped)
    head = "".join(f"<th class='l'>{h}</th>" for h in ("group", "dataset", "metric", "")) + "".join(
        f"<th>{html.escape(e)}</th>" for e in encoders)
    rows = []
    for i in range(len(mean)):
        arrow = "↑" if mean.loc[i, "higher_is_better"] else "↓"
        tds = [f"<td class='l'>{html.escape(str(mean.loc[i, c]))}</td>" for c in ("paper_group", "dataset", "metric")]
        dataset = str(mean.loc[i, "dataset"])
        tip = "; ".join(t for t in (noted.get(dataset), caps.get(dataset)) if t)
        if tip:
            tds[1] = f"<td class='l' title='{html.escape(tip, quote=True)}'>{html.escape(labels[i])}</td>"
        tds.append(f"<td class='l'>{arrow}</td>")
        tds += [f"<td class='{'best' if b and c else ''}'>{html.escape(c)}</td>" for c, b in zip(text[i], best[i])]
        rows.append("<tr>" + "".join(tds) + "</tr>")
    table = f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    for mark, footnote, items in ((DEPARTS_MARK, DEPARTS_FOOTNOTE, noted), (CAPPED_MARK, CAPPED_FOOTNOTE, caps)):
        if items:
            lis = "".join(f"<li><b>{html.escape(b)}</b>: {html.escape(t)}</li>" for b, t in items.items())
            table += f"<div class='meta'>{mark} {html.escape(footnote)}:<ul>{lis}</ul></div>"
    return table


def write_report(path: Path, *, source: str, fmt_name: str, summary: pd.DataFrame, tables: dict[str, pd.DataFrame],
                 tiers: pd.DataFrame, tier_info: pd.DataFrame, published: pd.DataFrame | None,
                 correlations: pd.DataFrame, figures: Sequence[tuple[Path, str, str]], warnings_seen: Sequence[str],
                 options: dict, extra_sections: Sequence[tuple[str, str]] = (),
                 notes_vs_gate: Mapping[str, str] | None = None) -> Path:
    """``figures``: (png path, section, caption) with section in {"overview", "tiers", "correlations"};
    ``extra_sections``: (title, HTML body) placed after the tier summary (gate-tier's comparison and cost);
    ``notes_vs_gate``: benchmark -> where its numbers depart from GATE's protocol (the dataset configs'
    ``notes_vs_gate``), printed beside the benchmark in the benchmark and results tables."""
    ft = summary[summary["kind"] == "finetune"]
    sc = summary[summary["kind"] == "score"]
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        "<title>gate-analysis report</title>", f"<style>{CSS}</style>", f"<script>{SCRIPT}</script>",
        "</head><body>",
        "<h1>gate-analysis report</h1>",
        f"<p class='meta'>Source: <code>{html.escape(source)}</code> ({html.escape(fmt_name)}) · generated {now}<br>"
        f"{ft['encoder'].nunique()} encoder(s), {ft['benchmark'].nunique()} fine-tuned benchmark(s), "
        f"{len(ft)} fine-tuning (encoder, benchmark, metric) results; "
        f"{sc['dataset'].nunique()} dataset(s) with transferability scores ({sc['metric'].nunique()} score metric(s)).<br>"
        f"Options: {html.escape(', '.join(f'{k}={v}' for k, v in options.items()))}</p>",
    ]
    if warnings_seen:
        items = "".join(f"<li>{html.escape(w)}</li>" for w in warnings_seen)
        parts.append(f"<div class='warn'><b>Warnings</b><ul>{items}</ul></div>")
    parts.append("<h2>Tier and paper-group summary</h2>")
    parts.append("<p class='meta'>Mean over each tier's (GATE paper group's) benchmarks of one representative metric per "
                 "benchmark, each put on one scale, 0–1 with higher better, by the range declared for that metric "
                 "(<code>entered_as</code> in the benchmark table below: x / 100 for a percentage, 1 − x for a "
                 "lower-is-better 0–1 metric, r2 clipped to [0, 1] for a regression); rank 1 = best. An encoder "
                 "missing a benchmark of a tier gets no mean for it.</p>")
    parts.append("<p class='meta'>When one dataset was run under several protocols (configurations), only its "
                 "main variant enters these means: the one covering the most encoders (then the most records, then "
                 "the earliest), which keeps the bare dataset name. The others are labelled by the protocol keys "
                 "that differ, e.g. <code>digits[image_size=64]</code>; they appear in the results table but not in "
                 "the means (<code>in_means</code> = False below). An encoder run with different encoder/recipe "
                 "settings on the same protocol and seed is split likewise, e.g. "
                 "<code>timm_resnet50[encoder.pretrained=false]</code>.</p>")
    parts.append(frame_html(tiers, left=("encoder",)))
    for title, body in extra_sections:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(body)
    if published is not None and not published.empty:
        parts.append("<h3>Check against the published aggregates</h3>")
        parts.append("<p class='meta'>Rank agreement between these tier means and the table's own "
                     "&quot;GATE Mean&quot; rows.</p>")
        parts.append(frame_html(published, left=("tier",)))
    parts.append("<h3>Benchmarks and their representative metrics</h3>")
    if "vs_gate" in tier_info.columns and not tier_info["vs_gate"].astype(bool).any():
        tier_info = tier_info.drop(columns="vs_gate")
    tier_info = tier_info.rename(columns={"paper_group": "group"})  # the GATE paper's group, as the tables label it
    parts.append(frame_html(tier_info, left=("benchmark", "dataset", "group", "metric", "range", "range_from",
                                             "entered_as", "chosen_by", "tiers", "vs_gate")))
    for section, title in (("overview", "Rankings"), ("tiers", "Tier means"), ("correlations", "Scores vs fine-tuning")):
        figs = [f for f in figures if f[1] == section]
        if section == "correlations":
            parts.append("<h2>Transferability scores vs fine-tuned results</h2>")
            parts.append("<p class='meta'>Lower-is-better scores are negated before correlating; "
                         "τ_w = scipy.stats.weightedtau (hyperbolic weigher).</p>")
            parts.append(frame_html(correlations, left=("dataset", "score_metric", "target_metric")))
        else:
            parts.append(f"<h2>{title}</h2>")
        for p, _, caption in figs:
            parts.append(img_tag(p, caption))
    parts.append("<h2>Fine-tuning results</h2>")
    parts.append("<p class='meta'>Mean over seeds (± sample std when more than one seed); best per row "
                 "highlighted; ↑ higher is better, ↓ lower is better.</p>")
    parts.append(results_table_html(tables["mean"], tables["std"], tables["n"], notes_vs_gate,
                                    capped_benchmarks(summary)))
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path

"""The fine-tuning results table: encoders × (dataset, metric), mean over seeds (± std).

``table.csv`` uses the layout of the GATE paper's Table 3 so that a table written here can be read
back by ``gate-analysis`` and ``gate-eevee`` exactly like the paper's: one row per (dataset, metric)
with the columns ``paper_group, dataset, metric, higher_is_better`` and then one column per encoder
holding the mean over seeds (empty = no result). ``table_std.csv`` and ``table_n.csv`` hold the
standard deviation over seeds and the number of seeds in the same layout. ``table.md`` and
``table.tex`` render ``mean ± std`` (std shown when more than one seed), best encoder per row in bold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

META = ["paper_group", "dataset", "metric", "higher_is_better"]


def wide_table(summary: pd.DataFrame, kind: str = "finetune", value: str = "mean") -> pd.DataFrame:
    """One row per (benchmark, metric), one column per encoder (``value`` = mean | std | n)."""
    sub = summary[summary["kind"] == kind]
    if sub.empty:
        return pd.DataFrame(columns=META)
    encoders = list(dict.fromkeys(sub["encoder"]))
    rows = sub.drop_duplicates(["benchmark", "metric"])[["paper_group", "benchmark", "metric", "higher_is_better"]]
    # Keep paper groups together in order of first appearance, then benchmarks, then metrics.
    group_order = {g: i for i, g in enumerate(dict.fromkeys(rows["paper_group"]))}
    rows = rows.assign(_f=rows["paper_group"].map(group_order)).sort_values("_f", kind="stable").drop(columns="_f")
    pivot = sub.set_index(["benchmark", "metric", "encoder"])[value].astype(float).unstack("encoder")
    pivot = pivot.reindex(columns=encoders)
    idx = pd.MultiIndex.from_frame(rows[["benchmark", "metric"]])
    body = pivot.reindex(idx).reset_index(drop=True)
    head = rows.rename(columns={"benchmark": "dataset"}).reset_index(drop=True)[META]
    out = pd.concat([head, body], axis=1)
    out.columns.name = None
    return out


def write_tables(summary: pd.DataFrame, out_dir: str | Path, notes: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Write table.csv, table_std.csv, table_n.csv, table.md and table.tex; returns their paths. ``notes``:
    benchmark -> how its numbers depart from GATE's protocol; such a dataset is marked † in table.md and table.tex,
    the notes listed under the table. A benchmark measured on a capped evaluation split (``summary``'s ``capped``)
    is marked ‡ there, with how it was capped."""
    from gate.analysis.meta import capped_benchmarks

    out_dir = Path(out_dir)
    capped = capped_benchmarks(summary)
    mean = wide_table(summary, value="mean")
    std = wide_table(summary, value="std")
    n = wide_table(summary, value="n")
    paths = {
        "table.csv": out_dir / "table.csv",
        "table_std.csv": out_dir / "table_std.csv",
        "table_n.csv": out_dir / "table_n.csv",
        "table.md": out_dir / "table.md",
        "table.tex": out_dir / "table.tex",
    }
    mean.to_csv(paths["table.csv"], index=False)
    std.to_csv(paths["table_std.csv"], index=False)
    n.to_csv(paths["table_n.csv"], index=False)
    paths["table.md"].write_text(to_markdown(mean, std, n, notes, capped))
    paths["table.tex"].write_text(to_latex(mean, std, n, notes, capped))
    return paths


def fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    av = abs(v)
    if av >= 1000 or (0 < av < 0.001):
        return f"{v:.3g}"
    if av >= 10:
        return f"{v:.1f}"
    return f"{v:.3f}" if av < 1 else f"{v:.2f}"


def cells(mean: pd.DataFrame, std: pd.DataFrame, n: pd.DataFrame) -> tuple[list[str], list[list[str]], list[list[bool]]]:
    """Encoder names, cell strings and best-in-row flags of a wide table."""
    encoders = [c for c in mean.columns if c not in META]
    m = mean[encoders].to_numpy(dtype=float)
    s = std.reindex(columns=encoders).to_numpy(dtype=float) if len(std) == len(mean) else np.full_like(m, np.nan)
    k = n.reindex(columns=encoders).to_numpy(dtype=float) if len(n) == len(mean) else np.full_like(m, np.nan)
    hib = mean["higher_is_better"].astype(bool).to_numpy()
    text, best = [], []
    for i in range(len(mean)):
        row = m[i]
        finite = row[~np.isnan(row)]
        target = (finite.max() if hib[i] else finite.min()) if finite.size > 1 else np.nan
        rs = []
        for j in range(len(encoders)):
            cell = fmt(float(row[j]))
            if cell and not np.isnan(s[i, j]) and k[i, j] > 1:
                cell += f" ± {fmt(float(s[i, j]))}"
            rs.append(cell)
        text.append(rs)
        best.append([bool(v == target) for v in row])
    return encoders, text, best


def marked(mean: pd.DataFrame, notes: Mapping[str, str] | None, capped: Mapping[str, str] | None = None
           ) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """The dataset label of each row (marked † when its numbers depart from GATE's protocol, ‡ when they were measured
    on a capped split), and the notes and caps of the marked ones, in row order."""
    from gate.analysis.meta import marks, note_of

    labels, noted, caps = [], {}, {}
    for dataset in mean["dataset"].astype(str):
        mark = marks(dataset, notes, capped)
        labels.append(f"{dataset} {mark}" if mark else dataset)
        if note_of(dataset, notes):
            noted[dataset] = note_of(dataset, notes)
        if (capped or {}).get(dataset):
            caps[dataset] = capped[dataset]
    return labels, noted, caps


def to_markdown(mean: pd.DataFrame, std: pd.DataFrame, n: pd.DataFrame, notes: Mapping[str, str] | None = None,
                capped: Mapping[str, str] | None = None) -> str:
    from gate.analysis.meta import CAPPED_FOOTNOTE, CAPPED_MARK, DEPARTS_FOOTNOTE, DEPARTS_MARK

    encoders, text, best = cells(mean, std, n)
    labels, noted, caps = marked(mean, notes, capped)
    head = ["group", "dataset", "metric", ""] + encoders
    lines = ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
    for i in range(len(mean)):
        arrow = "↑" if mean.loc[i, "higher_is_better"] else "↓"
        row = [mean.loc[i, "paper_group"], labels[i], mean.loc[i, "metric"], arrow]
        row += [f"**{c}**" if b and c else (c or "–") for c, b in zip(text[i], best[i])]
        lines.append("| " + " | ".join(_md(str(c)) for c in row) + " |")
    note = ("\nMean over seeds (± sample std when more than one seed); best per row in bold; "
            "↑ higher is better, ↓ lower is better; – no result.\n")
    if noted:
        note += f"\n{DEPARTS_MARK} {DEPARTS_FOOTNOTE}:\n\n" + "".join(f"- **{_md(b)}**: {_md(t)}\n"
                                                                    for b, t in noted.items())
    if caps:
        note += f"\n{CAPPED_MARK} {CAPPED_FOOTNOTE}:\n\n" + "".join(f"- **{_md(b)}**: {_md(t)}\n"
                                                                  for b, t in caps.items())
    return "\n".join(lines) + "\n" + note


def to_latex(mean: pd.DataFrame, std: pd.DataFrame, n: pd.DataFrame, notes: Mapping[str, str] | None = None,
             capped: Mapping[str, str] | None = None) -> str:
    from gate.analysis.meta import CAPPED_FOOTNOTE

    encoders, text, best = cells(mean, std, n)
    labels, noted, caps = marked(mean, notes, capped)
    cols = "lll" + "r" * len(encoders)
    out = [r"% gate-analysis: fine-tuning results, mean over seeds (\pm sample std), best per row in bold.",
           r"% Needs \usepackage{booktabs}.",
           r"\begin{tabular}{" + cols + "}", r"\toprule",
           " & ".join(["Group", "Dataset", "Metric"] + [_tex(e) for e in encoders]) + r" \\", r"\midrule"]
    for i in range(len(mean)):
        arrow = r"$\uparrow$" if mean.loc[i, "higher_is_better"] else r"$\downarrow$"
        row = [_tex(str(mean.loc[i, "paper_group"])),
               _tex(labels[i]).replace("†", r"$^\dagger$").replace("‡", r"$^\ddagger$"),
               _tex(str(mean.loc[i, "metric"])) + " " + arrow]
        for c, b in zip(text[i], best[i]):
            c = c.replace(" ± ", r" $\pm$ ") if c else "--"
            row.append(r"\textbf{" + c + "}" if b and c != "--" else c)
        out.append(" & ".join(row) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    if noted:  # printed under the table, so the compiled table says it too
        out.append(r"\par\smallskip{\footnotesize $^\dagger$ Departs from the GATE paper's protocol: "
                   + "; ".join(r"\textbf{" + _tex(b) + "}: " + _tex(t) for b, t in noted.items()) + "}")
    if caps:
        out.append(r"\par\smallskip{\footnotesize $^\ddagger$ " + _tex(CAPPED_FOOTNOTE) + ": "
                   + "; ".join(r"\textbf{" + _tex(b) + "}: " + _tex(t) for b, t in caps.items()) + "}")
    out.append("")
    return "\n".join(out)


def _md(s: str) -> str:
    return s.replace("|", r"\|")


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _tex(s: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in s)

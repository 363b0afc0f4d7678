"""The analysis stage: results in, tables, tier summaries, score-vs-accuracy correlations, EEVEE
benchmark-subset search, figures and an HTML report out.

* :mod:`gate.analysis.load` — read JSONL records / long CSV / the paper's wide CSV; average seeds.
* :mod:`gate.analysis.table` — ``table.csv`` (paper layout), ``table.md``, ``table.tex``.
* :mod:`gate.analysis.meta` — which metric represents a benchmark, and how lower-is-better turns.
* :mod:`gate.analysis.tiers` — tier and paper-group means and ranks.
* :mod:`gate.analysis.correlations` — transferability score vs fine-tuned target.
* :mod:`gate.analysis.ranks` — Kendall τ-b and Spearman ρ of short vectors in numpy (gate-rank uses them too).
* :mod:`gate.analysis.eevee` — EEVEE with a batched meta-model scorer.
* :mod:`gate.analysis.figures`, :mod:`gate.analysis.report` — PNG figures, self-contained HTML.
* :mod:`gate.analysis.pipeline` — ``gate-analysis`` as one function (:func:`run_analysis`).

Importing this package is cheap: torch, scipy and matplotlib are imported by the modules that use them.
"""

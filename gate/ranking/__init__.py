"""gate-rank: rank a pool of encoders on a tier at a fraction of the full tier's compute (docs/ranking.md).

:mod:`~gate.ranking.history` (what earlier full runs say), :mod:`~gate.ranking.select` (which benchmarks to run),
:mod:`~gate.ranking.cost` and :mod:`~gate.ranking.plan` (what a run costs, what the budget buys),
:mod:`~gate.ranking.proxy` and :mod:`~gate.ranking.curves` (short runs, ranked on their extrapolated end),
:mod:`~gate.ranking.complete` (the benchmarks not run, predicted), :mod:`~gate.ranking.prior` (the zero-training
fallback), :mod:`~gate.ranking.budget` (planned against spent), :mod:`~gate.ranking.stats` (τ, τ_w, regret),
:mod:`~gate.ranking.pipeline` (the stage's work), :mod:`~gate.ranking.stage` (parse, run, report) and
:mod:`~gate.ranking.report` (the page).
"""

"""gate-rank: rank a pool of encoders on a tier at a fraction of the full tier's compute (docs/ranking.md).

:mod:`~gate.ranking.proxy` (successive halving with short runs of the real protocol), :mod:`~gate.ranking.budget`
(schedules and compute accounting), :mod:`~gate.ranking.stats` (τ, τ_w, regret, bootstrap intervals),
:mod:`~gate.ranking.pipeline` (the stage: scores, proxy, validation against full results) and
:mod:`~gate.ranking.report` (the figures and the page).
"""

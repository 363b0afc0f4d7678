"""Transferability scores: pure functions of arrays (numpy or torch, CPU or GPU), float out.

Supervised scores of features ``F (n×d)`` and integer labels ``y`` (``0..C-1``):
:func:`logme`, :func:`h_score`, :func:`shrinkage_h_score`, :func:`nleep`, :func:`n_nleep`, :func:`transrate`,
:func:`lfc`, :func:`sfda`, the per-model NCTI terms :func:`ncti_terms` (a pool's NCTI: :func:`ncti`), the probe
accuracies :func:`knn_acc` and :func:`linear_probe_acc`, and of the labels' fit to a source head (probabilities
``θ (n×Z)``): :func:`leep`, :func:`n_leep`, :func:`nce`, :func:`n_nce`. Label-free: :func:`rankme`,
:func:`etran_energy`. Source–target discrepancies: :func:`coral`, :func:`mmd`,
:func:`cmd`, :func:`ot`, :func:`kld`, :func:`wd`. Task Priors: :func:`task_prior_moments`, :func:`sample_tasks`.

``SCORES`` and ``DISCREPANCIES`` map names to :class:`Metric` entries (function, needed input; direction and
citation read from :mod:`gate.metrics`). Every function validates its inputs the same way (``ValueError`` naming
the argument) and computes in float64 with torch on the inputs' device. No function trains a network, and none
changes a process-wide setting: where one thread is faster (small factorisations, element-wise passes) the
limit is scoped with ``threadpoolctl`` (see :mod:`gate.transferability._linalg`).
"""

from .collapse import NCTITerms, ncti, ncti_collapse, ncti_ncc, ncti_seli, ncti_terms
from .discrepancy import cmd, coral, kld, mmd, ot, standardise, wd
from .energy import etran_energy
from .evidence import logme, logme_per_target
from .fisher import sfda
from .geometry import coding_rate, lfc, rankme, transrate
from .hscore import h_score, ledoit_wolf_shrinkage, shrinkage_h_score
from .mixture import n_nleep, nleep
from .probes import knn_acc, linear_probe_acc
from .registry import DISCREPANCIES, SCORES, Metric, applicable_scores, feature_rank
from .source import leep, n_leep, n_nce, nce
from .task_priors import LowRankKernel, TaskPriorMoments, cosine_kernel, sample_tasks, task_prior_moments

__all__ = [
    "logme", "logme_per_target", "leep", "nce", "n_leep", "n_nce", "n_nleep", "h_score", "shrinkage_h_score",
    "ledoit_wolf_shrinkage", "nleep", "transrate", "coding_rate", "lfc", "rankme",
    "sfda", "ncti", "ncti_terms", "NCTITerms", "ncti_seli", "ncti_ncc", "ncti_collapse", "etran_energy",
    "knn_acc", "linear_probe_acc",
    "coral", "mmd", "cmd", "ot", "kld", "wd", "standardise",
    "task_prior_moments", "sample_tasks", "cosine_kernel", "LowRankKernel", "TaskPriorMoments",
    "SCORES", "DISCREPANCIES", "Metric", "applicable_scores", "feature_rank",
]

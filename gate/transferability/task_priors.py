"""Task Priors: a model's expected score, and its spread, over a whole distribution of downstream tasks.

Patel & Balestriero, "Task Priors: Enhancing Model Evaluation by Considering the Entire Space of Downstream
Tasks", 2025 (https://arxiv.org/abs/2507.09871; reference code https://github.com/niketp03/taskpriors).

A downstream task is a label graph ``G`` on the ``n`` evaluation points (``G_ij = 1`` when ``i`` and ``j`` share
a label). Tasks are drawn from a Gibbs measure built on a *prior* kernel ``K_prior`` (what "similar" means to the
task designer), and a model is judged by how well its own kernel ``K_eval`` aligns with them, ``tr(K_eval G)``.

Kernels are the centred cosine-similarity kernels ``K = H F̂ F̂ᵀ H / ‖H F̂ F̂ᵀ H‖_F`` (``F̂`` the rows of ``F``
scaled to unit norm, ``H = I − 11ᵀ/n``), built by :func:`cosine_kernel`; several prior kernels (e.g. of several
reference models) combine by summing. :class:`LowRankKernel` keeps ``K = A Aᵀ`` as its factor ``A`` (n×r) so that
nothing n×n is ever stored: the moments are accumulated in row blocks, and the sampler costs ``O(n·r·q)`` per task.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import torch

from . import _linalg
from ._validation import DTYPE, as_tensor, check_features, check_positive

__all__ = ["LowRankKernel", "TaskPriorMoments", "cosine_kernel", "task_prior_moments", "sample_tasks"]


@dataclasses.dataclass(frozen=True)
class LowRankKernel:
    """A PSD kernel ``K = factor @ factor.T`` held by its ``(n, r)`` factor."""

    factor: torch.Tensor

    @property
    def n(self) -> int:
        return int(self.factor.shape[0])

    def rows(self, start: int, stop: int) -> torch.Tensor:
        return self.factor[start:stop] @ self.factor.T

    def dense(self) -> torch.Tensor:
        return self.factor @ self.factor.T


class TaskPriorMoments(NamedTuple):
    """``E[tr(K_eval G)]`` and ``Var[tr(K_eval G)]`` under the Task Prior."""

    mean: float
    var: float

    @property
    def std(self) -> float:
        return self.var**0.5


def cosine_kernel(features: Any, *, low_rank: bool = False) -> torch.Tensor | LowRankKernel:
    """The centred, Frobenius-normalised cosine-similarity kernel of ``features`` (n×d).

    ``K = H F̂ F̂ᵀ H / ‖H F̂ F̂ᵀ H‖_F``. With ``low_rank=True`` returns a :class:`LowRankKernel` whose factor is
    ``H F̂ / ‖F̂ᵀ H F̂‖_F^{1/2}`` (rank ≤ d), without forming the n×n matrix; otherwise the dense n×n tensor.
    """
    f = check_features(features)
    norms = torch.linalg.vector_norm(f, dim=1, keepdim=True)
    fhat = f / torch.where(norms > 0, norms, torch.ones_like(norms))
    a = fhat - fhat.mean(0, keepdim=True)
    fro = torch.linalg.matrix_norm(_linalg.gram(a))  # = ‖H F̂ F̂ᵀ H‖_F
    if float(fro) == 0.0:
        raise ValueError("features give a zero centred cosine kernel (all rows point the same way)")
    kernel = LowRankKernel(a / fro.sqrt())
    return kernel if low_rank else kernel.dense()


def _as_kernel(k: Any, name: str, n: int | None = None) -> LowRankKernel | torch.Tensor:
    if isinstance(k, LowRankKernel):
        kk: LowRankKernel | torch.Tensor = LowRankKernel(k.factor.to(DTYPE))
        size = k.n
    else:
        t = as_tensor(k, name).to(DTYPE)
        if t.ndim != 2 or t.shape[0] != t.shape[1]:
            raise ValueError(f"{name} must be a square (n, n) kernel matrix or a LowRankKernel "
                             f"(see cosine_kernel), got shape {tuple(t.shape)}")
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or infinite values")
        if not torch.allclose(t, t.T, rtol=1e-6, atol=1e-9 * float(t.abs().max())):
            raise ValueError(f"{name} must be symmetric")
        kk, size = t, int(t.shape[0])
    if n is not None and size != n:
        raise ValueError(f"{name} is a kernel on {size} points but K_eval has {n}; all kernels must share the points")
    return kk


def _rows(k: LowRankKernel | torch.Tensor, start: int, stop: int, device: torch.device) -> torch.Tensor:
    block = k.rows(start, stop) if isinstance(k, LowRankKernel) else k[start:stop]
    return block.to(device)


def task_prior_moments(K_eval: Any, K_prior: Any = None, temperature: float = 1.0, *,
                       chunk_size: int = 2048) -> TaskPriorMoments:
    r"""Mean and variance of a model's alignment ``tr(K_eval G)`` over Task-Prior tasks (Patel & Balestriero).

    The prior is the Gibbs measure ``P(G) ∝ exp(tr(K_prior G) / T)`` over binary label graphs ``G ∈ {0,1}^{n×n}``.
    Its energy is linear in the entries of ``G``, so the measure factorises: **every edge is an independent
    Bernoulli with probability** ``σ_ij = sigmoid(K_prior,ij / T)`` — the *prior* kernel (divided by the
    temperature) sits inside the sigmoid — and the *evaluated* kernel weighs the edges:

    .. math::
        E[\mathrm{tr}(K_{eval} G)] = Σ_{ij} K_{eval,ij} σ_{ij}, \qquad
        Var[\mathrm{tr}(K_{eval} G)] = Σ_{ij} K_{eval,ij}^2 σ_{ij} (1 − σ_{ij}).

    Args:
        K_eval: the evaluated model's kernel, an (n, n) symmetric matrix or a :class:`LowRankKernel`; build it
            with :func:`cosine_kernel` (centred cosine similarity, Frobenius-normalised).
        K_prior: the prior kernel, or a list of them (summed); ``None`` uses ``K_eval`` itself.
        temperature: ``T > 0``.
        chunk_size: rows per block; memory is ``O(chunk_size · n)`` (n = 20 000 runs in well under 24 GiB).

    Returns:
        :class:`TaskPriorMoments` ``(mean, var)`` (``.std`` too).
    """
    ke = _as_kernel(K_eval, "K_eval")
    n = ke.n if isinstance(ke, LowRankKernel) else int(ke.shape[0])
    if K_prior is None:
        priors = [ke]
    elif isinstance(K_prior, (list, tuple)):
        if not K_prior:
            raise ValueError("K_prior must be a kernel, a non-empty list of kernels, or None")
        priors = [_as_kernel(k, f"K_prior[{i}]", n) for i, k in enumerate(K_prior)]
    else:
        priors = [_as_kernel(K_prior, "K_prior", n)]
    temperature = check_positive(temperature, "temperature")
    chunk = max(1, int(chunk_size))
    device = ke.factor.device if isinstance(ke, LowRankKernel) else ke.device
    mean = torch.zeros((), dtype=DTYPE, device=device)
    var = torch.zeros((), dtype=DTYPE, device=device)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        e = _rows(ke, start, stop, device).reshape(-1)
        s = _rows(priors[0], start, stop, device).reshape(-1).clone()
        for k in priors[1:]:
            s += _rows(k, start, stop, device).reshape(-1)
        s.div_(temperature).sigmoid_()  # σ_ij, in place: one block-sized buffer per kernel
        mean += torch.dot(e, s)
        s.addcmul_(s, s, value=-1.0)  # σ(1 − σ)
        var += torch.dot(e.square(), s)  # not in place: e may be a view of the caller's kernel
    return TaskPriorMoments(float(mean), float(var))


def sample_tasks(features_or_factor: Any, num_classes: int, num_tasks: int = 1, temperature: float = 1.0,
                 seed: int = 0, *, rank: int | None = None, chunk_steps: int = 1024) -> torch.Tensor:
    r"""Draw ``num_tasks`` labelings of the n points into ``num_classes`` classes from the Task Prior.

    The sequential ("prefix") sampler of Patel & Balestriero: visit the points in a random order and give
    point ``i`` class ``c`` with probability ``∝ exp(β Σ_{j labelled, y_j = c} K_ij)``, ``β = 1/temperature``.
    With ``K = A Aᵀ`` the sum is ``A_i · S_c``, ``S_c`` the running sum of the factors of class ``c``, so a task
    costs ``O(n·r·q)``. All tasks advance together as a batch (each with its own visiting order) and each
    categorical draw is a Gumbel-max over the batch, so there is no Python loop over tasks.

    Args:
        features_or_factor: ``(n, d)`` features (their :func:`cosine_kernel` factor is used) or a
            :class:`LowRankKernel`.
        num_classes: ``q >= 2``.
        num_tasks: how many labelings to draw.
        temperature: ``T > 0``; low temperatures follow the kernel's clusters, high ones are near-uniform.
        seed: the draws are a deterministic function of ``seed`` (on a given device).
        rank: keep only the top-``rank`` principal directions of the factor (``None``: all).

    Returns:
        int64 tensor ``(num_tasks, n)`` of labels in ``0..num_classes-1``.
    """
    if isinstance(features_or_factor, LowRankKernel):
        a = features_or_factor.factor.to(DTYPE)
        if a.ndim != 2 or not bool(torch.isfinite(a).all()):
            raise ValueError("features_or_factor.factor must be a finite (n, r) matrix")
    else:
        a = cosine_kernel(features_or_factor, low_rank=True).factor
    if int(num_classes) != num_classes or int(num_classes) < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    if int(num_tasks) != num_tasks or int(num_tasks) < 1:
        raise ValueError(f"num_tasks must be an integer >= 1, got {num_tasks!r}")
    beta = 1.0 / check_positive(temperature, "temperature")
    q, t_count = int(num_classes), int(num_tasks)
    if rank is not None:
        if int(rank) < 1:
            raise ValueError(f"rank must be a positive integer or None, got {rank!r}")
        if int(rank) < a.shape[1]:
            u, s, _ = _linalg.svd(a)
            a = u[:, : int(rank)] * s[: int(rank)]
    n, r = a.shape
    device = a.device
    gen = torch.Generator(device=device).manual_seed(int(seed))
    order = torch.argsort(torch.rand(t_count, n, generator=gen, device=device, dtype=DTYPE), dim=1)
    sums = torch.zeros(t_count, q, r, dtype=DTYPE, device=device)
    labels = torch.empty(t_count, n, dtype=torch.int64, device=device)
    tasks = torch.arange(t_count, device=device)
    tiny = torch.finfo(DTYPE).tiny
    for block in range(0, n, max(1, int(chunk_steps))):
        steps = min(n, block + int(chunk_steps)) - block
        uniform = torch.rand(steps, t_count, q, generator=gen, device=device, dtype=DTYPE)
        gumbel = -torch.log((-torch.log(uniform.clamp_min(tiny))).clamp_min(tiny))
        for step in range(steps):
            idx = order[:, block + step]
            rows = a[idx]  # (T, r)
            logits = beta * torch.bmm(sums, rows[:, :, None])[:, :, 0]  # (T, q)
            cls = torch.argmax(logits + gumbel[step], dim=1)
            labels[tasks, idx] = cls
            sums[tasks, cls] += rows
    return labels

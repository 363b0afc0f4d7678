"""EEVEE: choose k benchmarks whose results best predict every benchmark's results for unseen encoders.

From the GATE/EEVEE paper. The input is a performance table, encoders × benchmark metrics (the
paper's Table 3, or ``table.csv`` of ``gate-analysis``); a *benchmark* is a dataset, and its metric
columns go in or out of a subset together.

**Meta-model and fitness.** Columns are z-scored over the encoders (mean and population std of the
observed values). For a subset of benchmarks, an MLP (input: the subset's columns; one hidden layer
of ``hidden`` = 100 ReLU units; output: every column) is trained with AdamW (lr 0.01, weight decay
0.01) for ``epochs`` = 20 full-batch epochs on the mean squared error, on the training encoders of
repeated random train/validation splits of the **encoders** (sklearn's ``ShuffleSplit``). The
fitness of the subset is the mean validation MSE over the splits; lower is better. Every candidate
is trained on the same splits from the same initial weights (per split: one uniform draw per table
column for the first layer, scaled by ``1/sqrt(fan_in)`` like ``nn.Linear``'s default, and one for
the second layer), so differences between candidates are not initialisation noise, and a subset's
fitness depends only on the subset and the seed.

**Batched scorer.** Candidates are scored as a batch: the (candidate × split) MLPs of a chunk are
stacked tensors trained together with batched matmuls, a hand-written backward pass and one fused
AdamW step over the stacked parameters; chunks train in parallel on ``workers`` threads with
single-threaded kernels (tiny matmuls scale across cores better that way; the limit is scoped to the call
with ``threadpoolctl``, torch's process-wide thread setting is never changed). Subsets with fewer input
columns are padded with zero inputs (their weights receive exactly zero gradient and stay zero).
:func:`score_looped` scores the same candidates one ``nn.Module`` at a time with autograd and
``torch.optim.AdamW``; the two agree to float rounding (tested to 1e-5).

**Search.** ``population`` (1000) random initial k-subsets (all of them when there are fewer); keep the
best ``keep`` (50); each winner makes ``children`` (10) children by swapping one member for a random
non-member; parents survive; ``generations`` (10) rounds; seeded and deterministic. Every distinct
subset is trained once (results are cached).

**Missing values** are never filled in (they are 0 placeholders that never enter a loss, a gradient
or a validation error). ``missing="mask"`` (default): the z-scoring uses
the observed values of each column; a missing *target* entry is left out of the loss and of the
validation MSE (which averages only observed entries); an encoder that lacks any *input* column of a
candidate is left out of that candidate's training and validation rows (a split where no validation
encoder remains contributes no value; a candidate with no value at all gets fitness ``inf``).
``missing="drop_encoders"``: encoders with any missing value are removed before the search.
Columns that are constant over the encoders carry no information and cannot be z-scored: they are
dropped with a warning. A benchmark whose values are all missing, a table whose every column is constant
and an ``inf``/``-inf`` value (naming the encoder and column) are errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..files import output_folder
from ..settings import EEVEE, check, yaml_defaults

MISSING_POLICIES = EEVEE.settings["missing"].choices  # mask | drop_encoders


#: The search's defaults, stated once: conf/eevee.yaml (gate-eevee's command reads the same file).
_DEFAULTS = yaml_defaults("eevee.yaml")


@dataclasses.dataclass
class EeveeConfig:
    """The search's settings (:data:`gate.settings.EEVEE`, one field per setting), defaults from conf/eevee.yaml."""

    hidden: int = _DEFAULTS["hidden"]
    epochs: int = _DEFAULTS["epochs"]
    lr: float = _DEFAULTS["lr"]
    weight_decay: float = _DEFAULTS["weight_decay"]
    n_splits: int = _DEFAULTS["n_splits"]
    val_fraction: float = _DEFAULTS["val_fraction"]
    seed: int = _DEFAULTS["seed"]
    population: int = _DEFAULTS["population"]
    keep: int = _DEFAULTS["keep"]
    children: int = _DEFAULTS["children"]
    generations: int = _DEFAULTS["generations"]
    chunk: int = _DEFAULTS["chunk"]  # (candidate × split) models trained at once by one worker
    workers: int | None = _DEFAULTS["workers"]  # tasks trained in parallel (None: threads, else torch's)
    threads: int | None = _DEFAULTS["threads"]  # CPU threads of the run, scoped to it (None: torch's current setting)
    missing: str = _DEFAULTS["missing"]
    progress: bool = _DEFAULTS["progress"]

    @classmethod
    def from_settings(cls, values: dict[str, Any]) -> EeveeConfig:
        """The search's part of a checked gate-eevee config (its other keys left out)."""
        return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values})

    def __post_init__(self) -> None:
        if self.missing not in MISSING_POLICIES:
            raise ValueError(f"missing must be one of {MISSING_POLICIES}, got {self.missing!r}")
        # Every number checked for type, finiteness and range (gate.settings.EEVEE), all problems in one line: lr=nan
        # once trained every meta-model on NaN and still named a "best subset".
        problems = check({f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, EEVEE)
        if problems:
            raise ValueError("; ".join(problems))


# ------------------------------------------------------------------------------------ the input table


@dataclasses.dataclass
class PerformanceTable:
    """Encoders × columns, each column one (benchmark, metric); NaN = missing."""

    encoders: list[str]
    columns: list[tuple[str, str]]
    values: np.ndarray

    @property
    def benchmarks(self) -> list[str]:
        return list(dict.fromkeys(b for b, _ in self.columns))


def performance_table(source: Any, split: str | None = "test") -> PerformanceTable:
    """Read a performance table from a path (wide CSV, long CSV or JSONL records) or a wide DataFrame.

    Only fine-tuning results are used; repeated seeds are averaged (:func:`gate.analysis.load.summarize`).
    """
    from gate.analysis.load import from_frame, load_results, summarize

    if not isinstance(source, pd.DataFrame) and not Path(source).exists():
        raise FileNotFoundError(f"performance table {str(source)!r} does not exist: give table=<a table.csv of "
                                f"gate-analysis, the paper's table, a long CSV or JSONL records>")
    loaded = from_frame(source) if isinstance(source, pd.DataFrame) else load_results(source)
    summary = summarize(loaded.long, split=split)
    ft = summary[summary["kind"] == "finetune"]
    if ft.empty:
        raise ValueError(f"{loaded.source}: the table is empty: it holds no fine-tuning results")
    encoders = list(dict.fromkeys(ft["encoder"]))
    columns = list(dict.fromkeys(zip(ft["benchmark"], ft["metric"])))
    pivot = ft.set_index(["benchmark", "metric", "encoder"])["mean"].unstack("encoder")
    pivot = pivot.reindex(index=pd.MultiIndex.from_tuples(columns), columns=encoders)
    return PerformanceTable(encoders, columns, pivot.to_numpy(dtype=float).T.copy())


# ------------------------------------------------------------------------------- the prepared problem


class Problem:
    """The z-scored table, the encoder splits and the shared initial weights of the meta-models."""

    def __init__(self, table: PerformanceTable, cfg: EeveeConfig | None = None) -> None:
        import torch
        from sklearn.model_selection import ShuffleSplit

        cfg = cfg or EeveeConfig()
        self.cfg = cfg
        values = np.asarray(table.values, dtype=float)
        encoders = list(table.encoders)
        columns = list(table.columns)
        if values.size == 0 or not encoders or not columns:
            raise ValueError("the performance table is empty: no encoders or no benchmark columns")
        if np.isnan(values).all():
            raise ValueError("the performance table is empty: every value is missing")
        inf = np.isinf(values)
        if inf.any():
            r, c = np.argwhere(inf)[0]
            raise ValueError(f"the performance table has value {values[r, c]} for encoder {encoders[r]!r}, benchmark "
                             f"{columns[c][0]!r}, metric {columns[c][1]!r}: every result must be a finite number"
                             + (f" ({int(inf.sum())} such values)" if inf.sum() > 1 else ""))
        bench_of = np.array([b for b, _ in columns], dtype=object)
        for b in dict.fromkeys(bench_of):
            if np.isnan(values[:, bench_of == b]).all():
                raise ValueError(f"benchmark {b!r} has all values missing: remove it from the table")
        if cfg.missing == "drop_encoders":
            complete = ~np.isnan(values).any(axis=1)
            dropped = [e for e, ok in zip(encoders, complete) if not ok]
            if dropped:
                warnings.warn(f"missing=drop_encoders: dropping {len(dropped)} encoder(s) with missing values: "
                              f"{dropped}", stacklevel=2)
            values, encoders = values[complete], [e for e, ok in zip(encoders, complete) if ok]
            if not encoders:
                raise ValueError("missing=drop_encoders leaves no encoder: every encoder lacks some value "
                                 "(use missing=mask)")
        # Constant (or single-valued) columns cannot be z-scored and carry no information.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(values, axis=0)
            std = np.nanstd(values, axis=0)
        nobs = (~np.isnan(values)).sum(axis=0)
        keep = (std > 1e-12 * np.maximum(1.0, np.abs(mean))) & (nobs >= 2)
        if not keep.any():
            raise ValueError(f"every column of the performance table is constant over the encoders ({len(columns)} "
                             f"column(s), {len(encoders)} encoder(s)): nothing to rank or predict")
        if not keep.all():
            gone = [f"{b}/{m}" for (b, m), k in zip(columns, keep) if not k]
            warnings.warn(f"dropping {len(gone)} column(s) constant over the encoders (nothing to predict "
                          f"or learn from): {gone}", stacklevel=2)
        lost = [b for b in dict.fromkeys(bench_of) if not keep[bench_of == b].any()]
        if lost:
            warnings.warn(f"benchmark(s) {lost} have only constant columns and leave the search", stacklevel=2)
        values, columns, mean, std = values[:, keep], [c for c, k in zip(columns, keep) if k], mean[keep], std[keep]
        self.encoders = encoders
        self.columns = columns
        self.benchmarks = list(dict.fromkeys(b for b, _ in columns))
        self.bench_columns = [np.array([j for j, (b, _) in enumerate(columns) if b == name]) for name in self.benchmarks]
        self.raw = values
        z = (values - mean) / std
        self.observed = ~np.isnan(z)
        self.complete = bool(self.observed.all())
        n = len(encoders)
        n_val = math.ceil(cfg.val_fraction * n)
        if n - n_val < 2 or n_val < 1:
            raise ValueError(f"too few encoders for a train/validation split: {n} encoder(s) "
                             f"(val_fraction={cfg.val_fraction} leaves {n - n_val} for training, {n_val} for "
                             f"validation); EEVEE needs at least 2 training and 1 validation encoder")
        self.splits = [(np.sort(tr), np.sort(va)) for tr, va in
                       ShuffleSplit(n_splits=cfg.n_splits, test_size=n_val, random_state=cfg.seed).split(np.arange(n))]
        dt = torch.float32
        self.z = torch.as_tensor(np.nan_to_num(z, nan=0.0), dtype=dt)
        self.obs = torch.as_tensor(self.observed, dtype=dt)
        # Shared initial weights, per split (drawn once, reused by every candidate).
        gen = torch.Generator().manual_seed(int(cfg.seed))
        S, D, H = len(self.splits), len(columns), cfg.hidden
        self.u1 = torch.rand(S, D, H, generator=gen, dtype=dt) * 2 - 1  # first layer, one row per column
        self.ub1 = torch.rand(S, H, generator=gen, dtype=dt) * 2 - 1
        bound2 = 1.0 / math.sqrt(H)
        self.w2 = (torch.rand(S, H, D, generator=gen, dtype=dt) * 2 - 1) * bound2
        self.b2 = (torch.rand(S, D, generator=gen, dtype=dt) * 2 - 1) * bound2
        # Padded/stacked forms used by every chunk of the batched scorer (column D: padding).
        self._zpad = torch.cat([self.z, torch.zeros(n, 1)], dim=1)
        self._opad = torch.cat([self.obs, torch.ones(n, 1)], dim=1) > 0
        self._u1pad = torch.cat([self.u1, torch.zeros(S, 1, H)], dim=1)
        self._w2b = torch.cat([self.w2, self.b2[:, None, :]], dim=1)  # (S, H + 1, D)
        self._tr = torch.as_tensor(np.stack([t for t, _ in self.splits]), dtype=torch.long)  # (S, n_tr)
        self._va = torch.as_tensor(np.stack([v for _, v in self.splits]), dtype=torch.long)
        self._ztr, self._zva = self._zpad[self._tr], self._zpad[self._va]  # (S, n, D + 1)
        self._ytr = self.z[self._tr]  # (S, n_tr, D)
        self._neg_sy = -2.0 / (self._tr.shape[1] * D) * self._ytr  # the constant part of dLoss/dOutput

    @property
    def n_benchmarks(self) -> int:
        return len(self.benchmarks)

    def columns_of(self, subset: Sequence[int]) -> np.ndarray:
        if len(subset) == 0:
            return np.zeros(0, dtype=int)
        return np.concatenate([self.bench_columns[b] for b in sorted(subset)])

    def init_first_layer(self, split: int, cols: np.ndarray):
        """(weight (d_in, H), bias (H,)) of a candidate's first layer on one split."""
        d = len(cols)
        scale = 1.0 / math.sqrt(d) if d else 0.0
        return self.u1[split, cols] * scale, self.ub1[split] * scale

    def names(self, subset: Iterable[int]) -> tuple[str, ...]:
        return tuple(self.benchmarks[b] for b in sorted(subset))

    def indices(self, names: Iterable[str]) -> tuple[int, ...]:
        idx = []
        for name in names:
            if name not in self.benchmarks:
                raise ValueError(f"unknown benchmark {name!r}; the table has {self.benchmarks}")
            idx.append(self.benchmarks.index(name))
        return tuple(sorted(idx))


# ----------------------------------------------------------------------------------------- scorers


def score_batched(problem: Problem, subsets: Sequence[Sequence[int]], chunk: int | None = None,
                  workers: int | None = None) -> np.ndarray:
    """Validation MSE of every (subset, split): array (len(subsets), n_splits). Trained as a batch.

    The candidates are cut into tasks of about ``chunk`` (candidate × split) models, each trained as
    one batch of stacked tensors; ``workers`` tasks run at once on their own threads, each with
    single-threaded torch ops (small batches of tiny matmuls scale better across cores this way than
    with intra-op threads, and stay in cache). Results do not depend on ``workers``.
    """
    import torch

    chunk = int(chunk or problem.cfg.chunk)
    workers = int(workers or problem.cfg.workers or problem.cfg.threads or torch.get_num_threads())
    S = len(problem.splits)
    out = np.full((len(subsets), S), np.nan)
    if not subsets:
        return out
    widths = np.array([len(problem.columns_of(s)) for s in subsets])
    order = np.argsort(widths, kind="stable")  # similar widths share a task: less padding
    per = max(1, chunk // S)  # candidates per task; below one candidate, its splits are divided
    groups = np.array_split(np.arange(S), max(1, math.ceil(S / chunk)))
    tasks = [(order[i:i + per], g) for i in range(0, len(order), per) for g in groups]

    def run(task) -> None:
        idx, splits = task
        out[np.ix_(idx, splits)] = _train_chunk(problem, [problem.columns_of(subsets[i]) for i in idx], splits)

    with _single_threaded(), torch.no_grad():
        if workers <= 1 or len(tasks) == 1:
            for idx in tasks:
                run(idx)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=workers, initializer=_single_threaded_worker) as pool:
                for _ in pool.map(run, tasks):
                    pass
    return out


@contextlib.contextmanager
def cpu_threads(n: int | None):
    """Scoped CPU threads: torch's intra-op (OpenMP) and the BLAS threads limited to ``n`` for the calling
    thread while the block runs, restored afterwards (``threadpoolctl``; no process-wide setter such as
    ``torch.set_num_threads``). ``None``: leave them as they are."""
    if not n:
        yield
        return
    import torch
    from threadpoolctl import threadpool_limits

    torch.get_num_threads()  # torch sets a thread's OpenMP threads lazily on first use: do it before limiting
    with threadpool_limits(limits=int(n)):
        yield


def _single_threaded():
    """One thread for torch's kernels (OpenMP) and numpy's BLAS while the workers run (restored afterwards)."""
    return cpu_threads(1)


def _single_threaded_worker() -> None:
    """A scorer thread's initializer: its own OpenMP threads set to one (OpenMP's setting is per thread, and the
    worker thread ends with the pool, so nothing outlives the call)."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.get_num_threads()  # initialise torch's per-thread setting first, or its lazy initialisation undoes ours
    threadpool_limits(limits=1, user_api="openmp")


def _train_chunk(problem: Problem, cols_list: list[np.ndarray], splits: np.ndarray) -> np.ndarray:
    """Train the candidates (given by their input columns) on the given splits; their validation MSEs."""
    import torch

    cfg = problem.cfg
    z, obs = problem.z, problem.obs
    n_enc, D = z.shape
    H, S, C = cfg.hidden, len(splits), len(cols_list)
    sp = torch.as_tensor(splits, dtype=torch.long)
    M = C * S
    dmax = max(len(c) for c in cols_list)
    pad = D  # index of an all-zero (and "observed") column appended to the table
    col_idx = torch.full((C, dmax), pad, dtype=torch.long)
    widths = torch.zeros(C)
    for c, cols in enumerate(cols_list):
        col_idx[c, :len(cols)] = torch.as_tensor(cols, dtype=torch.long)
        widths[c] = len(cols)
    opad, tr, va = problem._opad, problem._tr[sp], problem._va[sp]
    ws = _workspace()  # per-thread buffers reused across chunks: no fresh pages to fault in each time

    def inputs(rows_z: torch.Tensor, name: str) -> torch.Tensor:
        """(S, n, D + 1) table rows → (M, n, 1 + dmax) inputs of the candidates, a leading ones column."""
        n = rows_z.shape[1]
        x = ws.get(name, (C, S, n, 1 + dmax))
        x[..., 0] = 1.0
        x[..., 1:] = rows_z[:, :, col_idx].permute(2, 0, 1, 3)  # (C, S, n, dmax)
        return x.view(M, n, 1 + dmax)

    def row_ok(rows: torch.Tensor) -> torch.Tensor:  # (M, n): the encoder has every input column
        ok = opad[:, col_idx].all(dim=2).to(z.dtype)  # (n_enc, C)
        return ok[rows].permute(2, 0, 1).reshape(M, rows.shape[1])

    n_tr = tr.shape[1]
    x_tr = inputs(problem._ztr[sp], "x_tr")
    x_trT = ws.get("x_trT", (M, 1 + dmax, n_tr)).copy_(x_tr.transpose(1, 2))
    y_tr = problem._ytr[sp]  # (S, n_tr, D), shared by the candidates
    # Parameters, stacked: the first layer transposed, (H, 1 + dmax) = [bias, weights, zero padding], so
    # that every matmul below has plain row-major operands (the BLAS fast path); the second layer
    # (H + 1, D) = [weights; bias]. Initial weights: the problem's draws for these splits and columns.
    scale = torch.where(widths > 0, widths.clamp(min=1).rsqrt(), torch.zeros(()))  # 1/sqrt(fan_in)
    w1 = ws.get("w1", (M, H, 1 + dmax)).view(C, S, H, 1 + dmax)
    w1[..., 0] = problem.ub1[sp][None] * scale[:, None, None]
    u = problem._u1pad[sp[:, None, None], col_idx[None]]  # (S, C, dmax, H)
    torch.mul(u.permute(1, 0, 3, 2), scale[:, None, None, None], out=w1[..., 1:])
    w1 = w1.view(M, H, 1 + dmax)
    w2 = ws.get("w2", (M, H + 1, D)).view(C, S, H + 1, D).copy_(problem._w2b[sp][None].expand(C, S, H + 1, D))
    w2 = w2.view(M, H + 1, D)
    g1, g2 = ws.get("g1", w1.shape), ws.get("g2", w2.shape)  # fully overwritten by every backward pass
    opt = _AdamW([w1, w2], [g1, g2], [ws.get("m1", w1.shape, zero=True), ws.get("m2", w2.shape, zero=True)],
                 [ws.get("v1", w1.shape, zero=True), ws.get("v2", w2.shape, zero=True)], cfg)
    # d(mean squared error)/d(output) = 2 (out - y) * mask / count; without missing values this is
    # one fused pass: s * out + (-s * y).
    if problem.complete:
        s = 2.0 / (n_tr * D)
        neg_sy = problem._neg_sy[sp]
    else:
        mask = row_ok(tr)[:, :, None] * obs[tr].repeat(C, 1, 1)  # (M, n_tr, D)
        count = mask.sum(dim=(1, 2), keepdim=True).clamp(min=1.0)
        dscale = (2.0 * mask / count).contiguous()
    preT = ws.get("preT", (M, H, n_tr))
    haT = ws.get("haT", (M, H + 1, n_tr))  # hidden activations, transposed, with a ones row for the output bias
    haT[:, H, :] = 1.0
    hT = haT[:, :H, :]
    ha = ws.get("ha", (M, n_tr, H + 1))
    out = ws.get("out", (M, n_tr, D))
    outT = ws.get("outT", (M, D, n_tr))
    dhT = ws.get("dhT", (M, H, n_tr))
    out4 = out.view(C, S, n_tr, D)
    # The matmuls go through numpy (OpenBLAS: faster than torch's CPU bmm for these small stacked
    # matrices); they read and write the torch tensors' memory in place.
    n_x, n_xT, n_w1, n_w2, n_g1, n_g2 = (t.numpy() for t in (x_tr, x_trT, w1, w2, g1, g2))
    n_preT, n_ha, n_haT, n_out, n_outT, n_dhT = (t.numpy() for t in (preT, ha, haT, out, outT, dhT))
    n_w2h = n_w2[:, :H, :]
    relu_grad = torch.ops.aten.threshold_backward.grad_input
    for _ in range(cfg.epochs):
        np.matmul(n_w1, n_xT, out=n_preT)  # (H, 1+d) @ (1+d, n)
        torch.clamp(preT, min=0, out=hT)
        ha.copy_(haT.transpose(1, 2))
        np.matmul(n_ha, n_w2, out=n_out)  # (n, H+1) @ (H+1, D)
        if problem.complete:
            torch.add(neg_sy, out4, alpha=s, out=out4)  # out now holds dLoss/dOutput
        else:
            out4.sub_(y_tr)
            out.mul_(dscale)
        np.matmul(n_haT, n_out, out=n_g2)  # (H+1, n) @ (n, D)
        outT.copy_(out.transpose(1, 2))
        np.matmul(n_w2h, n_outT, out=n_dhT)  # (H, D) @ (D, n)
        relu_grad(dhT, preT, 0, grad_input=dhT)  # ReLU': zero where pre <= 0
        np.matmul(n_dhT, n_x, out=n_g1)  # (H, n) @ (n, 1+d)
        opt.step()
    # Validation MSE over the observed entries of the validation encoders.
    x_va = inputs(problem._zva[sp], "x_va")
    pred = torch.baddbmm(w2[:, H:, :], torch.relu(torch.bmm(x_va, w1.transpose(1, 2))), w2[:, :H, :])
    err = (pred.view(C, S, -1, D) - z[va]).square_()
    if problem.complete:
        mse = err.mean(dim=(2, 3))
    else:
        vmask = (row_ok(va)[:, :, None] * obs[va].repeat(C, 1, 1)).view(C, S, -1, D)
        cnt = vmask.sum(dim=(2, 3))
        mse = (err * vmask).sum(dim=(2, 3)) / cnt  # 0/0 → NaN: no observed validation entry
    return mse.double().numpy()


class _Workspace:
    """Named flat float32 buffers, grown on demand; ``get`` returns a view of the requested shape."""

    def __init__(self) -> None:
        self.buffers: dict = {}

    def get(self, name: str, shape, zero: bool = False):
        import torch

        numel = math.prod(shape)
        buf = self.buffers.get(name)
        if buf is None or buf.numel() < numel:
            buf = self.buffers[name] = torch.empty(numel)
        view = buf[:numel].view(*shape)
        return view.zero_() if zero else view


_LOCAL = threading.local()


def _workspace() -> _Workspace:
    if not hasattr(_LOCAL, "workspace"):
        _LOCAL.workspace = _Workspace()
    return _LOCAL.workspace


class _AdamW:
    """``torch.optim.AdamW`` (default betas and eps) on stacked tensors without the per-step Python
    overhead of ``torch.optim``: the same fused kernel, called directly on the given parameter,
    gradient and state buffers. Falls back to the public optimizer where that kernel is missing."""

    def __init__(self, params, grads, exp_avgs, exp_avg_sqs, cfg: EeveeConfig) -> None:
        import torch

        self.params, self.grads, self.m, self.v = list(params), list(grads), list(exp_avgs), list(exp_avg_sqs)
        self.lr, self.wd = float(cfg.lr), float(cfg.weight_decay)
        self.fused = getattr(torch, "_fused_adamw_", None)
        self.steps = [torch.zeros((), dtype=torch.float32) for _ in self.params]
        if self.fused is None:  # pragma: no cover - every torch this project supports has the fused CPU kernel
            for p, g in zip(self.params, self.grads):
                p.grad = g
            self.opt = torch.optim.AdamW(self.params, lr=self.lr, weight_decay=self.wd)

    def step(self) -> None:
        import torch

        if self.fused is None:  # pragma: no cover
            self.opt.step()
            return
        torch._foreach_add_(self.steps, 1)
        self.fused(self.params, self.grads, self.m, self.v, [], self.steps, lr=self.lr, beta1=0.9, beta2=0.999,
                   weight_decay=self.wd, eps=1e-8, amsgrad=False, maximize=False)


def score_looped(problem: Problem, subsets: Sequence[Sequence[int]]) -> np.ndarray:
    """The reference scorer: one ordinary ``nn.Module`` per (subset, split), trained with autograd.

    Same data, same initial weights, same optimiser as :func:`score_batched`; used to check it and to
    measure its speed-up (``measurements/bench_eevee.py``).
    """
    import torch
    from torch import nn

    cfg = problem.cfg
    z, obs = problem.z, problem.obs
    D, H = z.shape[1], cfg.hidden
    out = np.full((len(subsets), len(problem.splits)), np.nan)
    for c, subset in enumerate(subsets):
        cols = torch.as_tensor(problem.columns_of(subset), dtype=torch.long)
        ok = obs[:, cols].all(dim=1) if len(cols) else torch.ones(z.shape[0], dtype=torch.bool)
        for s, (tr, va) in enumerate(problem.splits):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # nn.Linear(0, H) warns about empty init
                model = nn.Sequential(nn.Linear(len(cols), H), nn.ReLU(), nn.Linear(H, D))
            w1, b1 = problem.init_first_layer(s, cols.numpy())
            with torch.no_grad():
                model[0].weight.copy_(w1.T)
                model[0].bias.copy_(b1)
                model[2].weight.copy_(problem.w2[s].T)
                model[2].bias.copy_(problem.b2[s])
            opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
            tr_t, va_t = torch.as_tensor(tr), torch.as_tensor(va)
            x, y = z[tr_t][:, cols], z[tr_t]
            mask = ok[tr_t, None].float() * obs[tr_t]
            count = mask.sum().clamp(min=1.0)
            for _ in range(cfg.epochs):
                opt.zero_grad()
                if problem.complete:  # what an ordinary loop writes (the masked form below is equal)
                    loss = nn.functional.mse_loss(model(x), y)
                else:
                    loss = (((model(x) - y) ** 2) * mask).sum() / count
                loss.backward()
                opt.step()
            with torch.no_grad():
                vmask = ok[va_t, None].float() * obs[va_t]
                err = ((model(z[va_t][:, cols]) - z[va_t]) ** 2) * vmask
                out[c, s] = float(err.sum() / vmask.sum()) if vmask.sum() > 0 else np.nan
    return out


def fitness_stats(per_split: np.ndarray) -> pd.DataFrame:
    """mean (the fitness), std (ddof=1), min and max of the validation MSE over the splits."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(per_split, axis=1)
        std = np.nanstd(per_split, axis=1, ddof=1) if per_split.shape[1] > 1 else np.zeros(len(per_split))
        lo, hi = np.nanmin(per_split, axis=1), np.nanmax(per_split, axis=1)
    mean = np.where(np.isnan(mean), np.inf, mean)
    return pd.DataFrame({"mean": mean, "std": std, "min": lo, "max": hi})


# ------------------------------------------------------------------------------------------ search


@dataclasses.dataclass
class SearchResult:
    k: int
    ranked: pd.DataFrame  # every evaluated subset, best first
    population: list[tuple[int, ...]]  # the final population, best first
    best: tuple[str, ...]
    best_fitness: float
    history: list[float]  # best fitness after the initial population and after each generation
    n_evaluated: int
    seconds: float


class Evaluator:
    """Scores subsets in batches and remembers every result (a subset is trained once)."""

    def __init__(self, problem: Problem, scorer=score_batched) -> None:
        self.problem = problem
        self.scorer = scorer
        self.cache: dict[tuple[int, ...], np.ndarray] = {}

    def __call__(self, subsets: Iterable[tuple[int, ...]]) -> None:
        todo = list(dict.fromkeys(s for s in subsets if s not in self.cache))
        if todo:
            for s, res in zip(todo, self.scorer(self.problem, todo)):
                self.cache[s] = res

    def fitness(self, subset: tuple[int, ...]) -> float:
        per = self.cache[subset]
        return float(np.nanmean(per)) if not np.isnan(per).all() else float("inf")

    def rank(self, subsets: Iterable[tuple[int, ...]]) -> list[tuple[int, ...]]:
        names = self.problem.names
        return sorted(set(subsets), key=lambda s: (self.fitness(s), names(s)))


def search(problem: Problem, k: int, evaluator: Evaluator | None = None) -> SearchResult:
    """The evolutionary search for the best k-subset of benchmarks (see the module docstring)."""
    from tqdm.auto import tqdm

    cfg = problem.cfg
    nb = problem.n_benchmarks
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if k >= nb:
        raise ValueError(f"k={k} must be smaller than the number of benchmarks ({nb}: {problem.benchmarks}); "
                         f"there would be nothing left to predict")
    evaluator = evaluator or Evaluator(problem)
    rng = np.random.default_rng([int(cfg.seed), int(k)])
    t0 = time.perf_counter()
    total = math.comb(nb, k)
    if total <= cfg.population:
        initial = [tuple(c) for c in combinations(range(nb), k)]
    else:
        seen: dict[tuple[int, ...], None] = {}
        while len(seen) < cfg.population:
            seen[tuple(sorted(int(i) for i in rng.choice(nb, size=k, replace=False)))] = None
        initial = list(seen)
    bar = tqdm(total=cfg.generations + 1, desc=f"EEVEE k={k}", disable=not cfg.progress, unit="gen")
    evaluator(initial)
    evaluated = set(initial)
    population = evaluator.rank(initial)[:cfg.keep]
    history = [evaluator.fitness(population[0])]
    bar.update(1)
    bar.set_postfix(best=f"{history[-1]:.4f}")
    for _ in range(cfg.generations):
        children = []
        for parent in population:
            members = list(parent)
            others = [b for b in range(nb) if b not in parent]
            for _ in range(cfg.children):
                i = int(rng.integers(k))
                j = int(others[int(rng.integers(len(others)))])
                children.append(tuple(sorted(members[:i] + [j] + members[i + 1:])))
        evaluator(children)
        evaluated.update(children)
        population = evaluator.rank(list(population) + children)[:cfg.keep]
        history.append(evaluator.fitness(population[0]))
        bar.update(1)
        bar.set_postfix(best=f"{history[-1]:.4f}")
    bar.close()
    ranked = evaluator.rank(evaluated)
    stats = fitness_stats(np.stack([evaluator.cache[s] for s in ranked]))
    table = pd.DataFrame({
        "rank": np.arange(1, len(ranked) + 1),
        "k": k,
        "subset": [";".join(problem.names(s)) for s in ranked],
        "n_inputs": [len(problem.columns_of(s)) for s in ranked],
    })
    table = pd.concat([table, stats], axis=1)
    table["in_final_population"] = [s in set(population) for s in ranked]
    best = population[0]
    if not math.isfinite(evaluator.fitness(best)):
        raise ValueError(f"EEVEE k={k}: no subset could be scored: every meta-model's validation error is NaN "
                         f"(a training that diverged, or no encoder with the subset's results in a validation split); "
                         f"check lr and weight_decay, and the table's missing values")
    return SearchResult(k=k, ranked=table, population=population, best=problem.names(best),
                        best_fitness=evaluator.fitness(best), history=history, n_evaluated=len(evaluated),
                        seconds=time.perf_counter() - t0)


def importance(problem: Problem, subset: Sequence[str] | Sequence[int], evaluator: Evaluator | None = None
               ) -> pd.DataFrame:
    """Leave-one-out importance: refit without each member; the increase of the validation MSE."""
    evaluator = evaluator or Evaluator(problem)
    idx = problem.indices(subset) if subset and isinstance(next(iter(subset)), str) else tuple(sorted(subset))
    without = [tuple(b for b in idx if b != m) for m in idx]
    evaluator([idx] + without)
    base = evaluator.fitness(idx)
    rows = []
    for m, sub in zip(idx, without):
        f = evaluator.fitness(sub)
        rows.append({"benchmark": problem.benchmarks[m], "fitness_with": base, "fitness_without": f,
                     "increase": f - base, "increase_pct": 100.0 * (f - base) / base if base else np.nan})
    return pd.DataFrame(rows).sort_values("increase", ascending=False, kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------------------------------- runner


@dataclasses.dataclass
class EeveeRun:
    results: dict[int, SearchResult]
    importances: dict[int, pd.DataFrame]
    files: dict[str, Path]
    summary: pd.DataFrame


def run_eevee(table: PerformanceTable | str | Path | pd.DataFrame, ks: int | Sequence[int], out: str | Path,
              cfg: EeveeConfig | None = None, with_importance: bool = True, figures: bool = True) -> EeveeRun:
    """Search for every k, compute importances, write ``k=<k>.csv``, ``importance_k=<k>.csv``,
    ``summary.csv`` and the figures under ``out``. ``cfg.threads`` limits the CPU threads for the duration
    of the call only (:func:`cpu_threads`)."""
    cfg = cfg or EeveeConfig()
    out = output_folder(out, "out")  # out=/dev/null: one line naming the key, before the search
    with cpu_threads(cfg.threads):
        return _run_eevee(table, ks, out, cfg, with_importance, figures)


def _run_eevee(table, ks, out, cfg: EeveeConfig, with_importance: bool, figures: bool) -> EeveeRun:
    if not isinstance(table, PerformanceTable):
        table = performance_table(table)
    ks = [int(ks)] if isinstance(ks, (int, np.integer)) else [int(k) for k in ks]
    if not ks:
        raise ValueError("k: give at least one subset size")
    problem = Problem(table, cfg)
    bad = [k for k in ks if k < 1 or k >= problem.n_benchmarks]
    if bad:
        raise ValueError(f"k={bad}: every k must satisfy 1 <= k < number of benchmarks ({problem.n_benchmarks})")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    evaluator = Evaluator(problem)
    results, importances, files, rows = {}, {}, {}, []
    for k in ks:
        res = search(problem, k, evaluator)
        results[k] = res
        path = out / f"k={k}.csv"
        res.ranked.to_csv(path, index=False)
        files[path.name] = path
        if with_importance:
            imp = importance(problem, res.best, evaluator)
            importances[k] = imp
            path = out / f"importance_k={k}.csv"
            imp.to_csv(path, index=False)
            files[path.name] = path
        top = res.ranked[res.ranked["in_final_population"]]
        rows.append({"k": k, "best_subset": ";".join(res.best), "best_fitness": res.best_fitness,
                     "top_mean": float(top["mean"].mean()), "n_evaluated": res.n_evaluated,
                     "seconds": round(res.seconds, 2)})
    summary = pd.DataFrame(rows)
    summary.to_csv(out / "summary.csv", index=False)
    files["summary.csv"] = out / "summary.csv"
    if figures:
        from gate.analysis import figures as figs

        fig_dir = out / "figures"
        fig_dir.mkdir(exist_ok=True)
        for k, imp in importances.items():
            p = figs.importance_bar(imp, k, fig_dir / f"importance_k={k}.png")
            files[f"figures/{p.name}"] = p
        p = figs.k_sweep_box({k: r.ranked.loc[r.ranked["in_final_population"], "mean"].to_numpy()
                              for k, r in results.items()}, fig_dir / "k_sweep.png")
        files[f"figures/{p.name}"] = p
    return EeveeRun(results, importances, files, summary)

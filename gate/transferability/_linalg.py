"""Linear-algebra helpers shared by the metrics: Gram matrices by ``syrk``, eigendecompositions single-threaded.

Gram matrices ``XᵀX`` / ``XXᵀ`` are symmetric, so on the CPU (float64) they are formed by BLAS ``dsyrk``, which
computes one triangle: half the flops of a general matrix product (measured 0.25 s vs 0.55 s for 5000×1024).
Other devices and dtypes use ``torch.mm``.

LAPACK's symmetric eigensolvers (``syevd`` and friends) synchronise their threads many times per call. On a
small or shared machine, where another process can hold one of the cores, a two-thread ``eigh`` of a
1024×1024 matrix was measured at 12–23 s against 0.6 s single-threaded (MKL via torch; OpenBLAS via numpy is
similarly affected). The matrix products around them keep all threads.

Thread limits are **scoped**, never set globally: :func:`single_threaded` is ``threadpoolctl.threadpool_limits(
limits=1)`` around the call, which lowers, for its duration only, the OpenMP pool (``omp_set_num_threads`` of
the ``libgomp`` that torch's intra-op parallelism and its statically linked MKL both follow) and the BLAS pools
threadpoolctl finds (numpy's / scipy's OpenBLAS), and restores them on exit. ``torch.set_num_threads`` is never
called. Measured on this project's 2-core machine (torch 2.x, MKL + OpenMP build): inside the scope a 3000×3000
float64 ``torch`` matmul, ``torch.linalg.eigh`` and ``cholesky`` run at 1.0 CPU-seconds per wall-second against
1.7–2.0 outside it, ``torch.get_num_threads()`` reads 1 inside and its old value after, and a second thread
running a torch matmul *at the same time* keeps both cores (1.96 CPU-s/s) and reads ``get_num_threads() == 2``:
the OpenMP/MKL limit is per thread. ``threadpool_limits(user_api="blas")`` alone does **not** govern torch (its
MKL is invisible to threadpoolctl): it left the torch matmul at 2.0 CPU-s/s. The one limit that is not per
thread is OpenBLAS's (a process-wide count): numpy/scipy BLAS calls made by *other* threads while a scope is
open also run single-threaded until it closes — slower, never different results — and concurrent scopes
share that one limit, so the count is restored exactly when the last of them closes. GPU tensors are
untouched.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["eigh", "eigvalsh", "svd", "single_threaded", "xtx", "xxt", "gram"]


def _syrk(x: torch.Tensor, transpose: bool) -> torch.Tensor | None:
    """``xᵀx`` (transpose=True) or ``xxᵀ`` by BLAS dsyrk on CPU float64 tensors; None where not applicable."""
    if x.device.type != "cpu" or x.dtype != torch.float64 or x.requires_grad or min(x.shape) == 0:
        return None
    from scipy.linalg.blas import dsyrk

    a = x.contiguous().numpy().T  # a Fortran-ordered (d, n) view of the C-ordered (n, d) data: no copy
    c = dsyrk(1.0, a, trans=0 if transpose else 1)  # a aᵀ = xᵀx, or aᵀa = x xᵀ; upper triangle only
    upper = torch.from_numpy(c).triu()
    return upper + upper.triu(1).T


def xtx(x: torch.Tensor) -> torch.Tensor:
    """``xᵀ x`` (d×d)."""
    out = _syrk(x, True)
    return x.T @ x if out is None else out


def xxt(x: torch.Tensor) -> torch.Tensor:
    """``x xᵀ`` (n×n)."""
    out = _syrk(x, False)
    return x @ x.T if out is None else out


def gram(x: torch.Tensor) -> torch.Tensor:
    """The smaller of ``x xᵀ`` and ``xᵀ x`` (their non-zero eigenvalues coincide)."""
    return xxt(x) if x.shape[0] <= x.shape[1] else xtx(x)


_controller: tuple[int, Any] | None = None  # (len(sys.modules) when built, threadpoolctl.ThreadpoolController)


def _thread_pools() -> Any:
    """A ``threadpoolctl.ThreadpoolController`` of the loaded libraries, built once (~10 ms) and rebuilt only
    after new modules were imported (imports are what load new thread pools, e.g. scikit-learn's OpenMP):
    entering a scope then costs ~20 µs instead of ~2 ms."""
    global _controller
    import scipy.linalg  # noqa: F401  - load scipy's BLAS first, so that the controller finds and covers it
    from threadpoolctl import ThreadpoolController

    if _controller is None or _controller[0] != len(sys.modules):
        _controller = (len(sys.modules), ThreadpoolController())
    return _controller[1]


_lock = threading.Lock()
_blas_scopes = 0  # scopes open in any thread
_blas_limiter: Any = None  # the one BLAS limit they share


@contextlib.contextmanager
def single_threaded(device: torch.device | str = "cpu") -> Iterator[None]:
    """Run the body with one CPU thread (OpenMP, MKL, OpenBLAS), restoring every pool on exit; a no-op for
    non-CPU devices. Scoped by ``threadpoolctl`` limits: no global setter is called (see the module docstring
    for what was measured).

    The OpenMP limit (torch's intra-op pool and its MKL) is per thread, so each scope sets and restores its own.
    The BLAS limit (OpenBLAS's count) is process-wide, so concurrent scopes share one: the first to open sets
    it and the last to close restores it. Independent nested ``threadpool_limits`` from several threads would
    race instead — a thread restoring a count that another thread's scope had already lowered left OpenBLAS at
    one thread for good (measured: 4 threads × 30 overlapping scopes).
    """
    global _blas_scopes, _blas_limiter
    if torch.device(device).type != "cpu":
        yield
        return
    pools = _thread_pools()
    with _lock:
        if _blas_scopes == 0:
            _blas_limiter = pools.select(user_api="blas").limit(limits=1)
        _blas_scopes += 1
    try:
        with pools.select(user_api="openmp").limit(limits=1):
            yield
    finally:
        with _lock:
            _blas_scopes -= 1
            if _blas_scopes == 0:
                _blas_limiter.restore_original_limits()
                _blas_limiter = None


def eigh(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix. On the CPU in float64 this is LAPACK's
    divide-and-conquer ``dsyevd`` through scipy, single-threaded (measured 0.37 s vs 0.56 s for torch's at
    d = 1024); elsewhere ``torch.linalg.eigh``."""
    if a.device.type == "cpu" and a.dtype == torch.float64 and not a.requires_grad:
        import scipy.linalg

        with single_threaded(a.device):
            w, v = scipy.linalg.eigh(a.numpy(), driver="evd", check_finite=False)
        return torch.from_numpy(w), torch.from_numpy(v)
    with single_threaded(a.device):
        return torch.linalg.eigh(a)


def eigvalsh(a: torch.Tensor) -> torch.Tensor:
    with single_threaded(a.device):
        return torch.linalg.eigvalsh(a)


def svd(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with single_threaded(a.device):
        return torch.linalg.svd(a, full_matrices=False)

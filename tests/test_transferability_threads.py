"""No process-wide side effects: the metrics limit threads only inside scoped ``threadpoolctl`` limits.

Every score and discrepancy leaves ``torch.get_num_threads()`` and every thread pool threadpoolctl sees as it
found them, never calls a global thread setter, and its one-thread scope does not leak into other threads.
"""

import os
import pathlib
import random
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

import gate.transferability
from gate import transferability as T
from gate.transferability import _linalg

SOURCE = pathlib.Path(gate.transferability.__file__).parent
FAST_KW = {"nleep": dict(components_per_class=1), "n_nleep": dict(components_per_class=1)}


def pools():
    return {(p["internal_api"], p["filepath"]): p["num_threads"] for p in threadpool_info()}


def unchanged(before):
    """Every pool that existed before has its old size (a call may load new libraries, e.g. scikit-learn's)."""
    after = pools()
    return {k: after.get(k) for k in before} == before


@pytest.fixture
def no_global_setters(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a global thread setter was called")

    for name in ("set_num_threads", "set_num_interop_threads"):
        monkeypatch.setattr(torch, name, refuse)


def test_no_code_under_gate_transferability_calls_a_global_thread_setter():
    pattern = re.compile(r"(set_num_(interop_)?threads|omp_set_num_threads|mkl_set_num_threads"
                         r"|openblas_set_num\w*)\s*\(")
    offenders = [f"{p.name}:{i}" for p in sorted(SOURCE.rglob("*.py"))
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert offenders == []


def data(n, d, c=4, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % c
    f = rng.normal(size=(n, d)) + rng.normal(size=(c, d))[y]
    return f, y, rng.dirichlet(np.ones(6), n)


@pytest.mark.parametrize("shape", [(80, 12), (20, 40)], ids=["n>d", "n<d"])
@pytest.mark.parametrize("name", sorted(T.SCORES))
def test_scores_leave_thread_settings_unchanged(name, shape, no_global_setters):
    f, y, p = data(*shape)
    threads, before = torch.get_num_threads(), pools()
    T.SCORES[name](features=f, labels=y, source_probs=p, **FAST_KW.get(name, {}))
    assert torch.get_num_threads() == threads
    assert unchanged(before)


@pytest.mark.parametrize("name", sorted(T.DISCREPANCIES))
def test_discrepancies_leave_thread_settings_unchanged(name, no_global_setters):
    g, _, _ = data(40, 6, seed=1)
    f, _, _ = data(30, 6, seed=2)
    threads, before = torch.get_num_threads(), pools()
    T.DISCREPANCIES[name].fn(g, f)
    T.DISCREPANCIES[name].fn(g, f, reduce="pca", q=3)
    assert torch.get_num_threads() == threads
    assert unchanged(before)


def test_other_functions_leave_thread_settings_unchanged(no_global_setters):
    f, y, _ = data(30, 8)
    threads, before = torch.get_num_threads(), pools()
    with pytest.warns(RuntimeWarning):
        T.logme(f, y, regression=False, max_iter=1)
    T.logme(f, np.eye(4)[y], regression=True)
    T.shrinkage_h_score(f, y, fast=True)
    T.shrinkage_h_score(f, y, fast=False)
    T.ledoit_wolf_shrinkage(f)
    T.task_prior_moments(T.cosine_kernel(f), T.cosine_kernel(f[:, ::-1].copy()))
    T.sample_tasks(f, 3, num_tasks=2, rank=3)
    assert torch.get_num_threads() == threads
    assert unchanged(before)


def scope_limits_torch_and_only_the_calling_thread() -> None:
    threads = torch.get_num_threads()
    assert threads >= 2, "with one thread there is nothing to limit"
    inside, other = [], []
    entered, release = threading.Event(), threading.Event()

    def holder():
        with _linalg.single_threaded("cpu"):
            inside.append(torch.get_num_threads())
            entered.set()
            release.wait(10)

    def bystander():
        entered.wait(10)
        other.append(torch.get_num_threads())  # read while the holder is inside its scope
        release.set()

    workers = [threading.Thread(target=holder), threading.Thread(target=bystander)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(20)
    assert inside == [1]  # the scope governs torch's intra-op (OpenMP/MKL) pool...
    assert other == [threads]  # ...for the calling thread only
    assert torch.get_num_threads() == threads


def test_single_threaded_scope_limits_torch_and_only_the_calling_thread():
    if torch.get_num_threads() >= 2:
        scope_limits_torch_and_only_the_calling_thread()
        return
    # A test worker of one thread (pytest -n gives each its share of the cores): the same check in a process of two
    # torch threads (set through the environment: an explicit torch.set_num_threads would stop torch from
    # following the scope's per-thread OpenMP limit).
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    code = f"import sys; sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r}); " \
           "import test_transferability_threads as t; t.scope_limits_torch_and_only_the_calling_thread()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_single_threaded_is_a_no_op_off_the_cpu():
    with _linalg.single_threaded("meta"):
        assert torch.get_num_threads() >= 1


def test_overlapping_scopes_in_several_threads_restore_every_pool():
    """Scopes that open and close interleaved across threads (the race of save-and-restore thread setters)."""
    f, y, _ = data(60, 12)
    T.logme(f, y)  # load every library first
    threads, before = torch.get_num_threads(), pools()

    def work(seed):
        rng = random.Random(seed)
        for _ in range(25):
            with _linalg.single_threaded("cpu"):
                time.sleep(rng.random() * 0.002)
        T.logme(f, y)
        T.transrate(f, y)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert torch.get_num_threads() == threads
    assert unchanged(before)

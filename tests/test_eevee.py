"""EEVEE: the batched scorer, the search on a planted low-rank table, importance, bad input, the CLI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from gate.analysis.eevee import (
    EeveeConfig,
    Evaluator,
    PerformanceTable,
    Problem,
    cpu_threads,
    importance,
    performance_table,
    run_eevee,
    score_batched,
    score_looped,
    search,
)
from gate.analysis.meta import default_paper_table

from helpers import call_cli

SMALL = dict(population=24, keep=6, children=4, generations=3, n_splits=3, progress=False)


def planted_table(n_enc=24, n_other=8, seed=0, missing=0.0):
    """Two planted benchmarks are the latent factors; every other benchmark is a noisy function of them."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(-1, 1, size=(n_enc, 2))
    cols, vals = [("planted_a", "m"), ("planted_b", "m")], [z[:, 0], z[:, 1]]
    for b in range(n_other):
        w = rng.normal(size=(2, 2))
        for j in range(2):
            cols.append((f"bench{b}", f"m{j}"))
            vals.append(np.tanh(z @ w[:, j]) + 0.3 * rng.normal(size=n_enc))
    values = np.stack(vals, 1)
    if missing:
        holes = rng.random(values.shape) < missing
        holes[:, :2] = False
        values[holes] = np.nan
    return PerformanceTable([f"enc{i}" for i in range(n_enc)], cols, values)


def test_search_recovers_a_subset_at_least_as_good_as_the_planted_one():
    problem = Problem(planted_table(), EeveeConfig(**SMALL))
    ev = Evaluator(problem)
    res = search(problem, 2, ev)
    planted = problem.indices(["planted_a", "planted_b"])
    ev([planted])
    assert res.best_fitness <= ev.fitness(planted) + 1e-9
    assert res.ranked["mean"].is_monotonic_increasing
    assert res.ranked.iloc[0]["subset"] == ";".join(res.best)
    assert len(res.history) == SMALL["generations"] + 1
    assert all(a >= b for a, b in zip(res.history, res.history[1:]))  # parents survive: never worse
    imp = importance(problem, res.best, ev)
    assert set(imp["benchmark"]) == set(res.best)
    assert (imp["increase"] > 0).all()  # both planted factors matter


@pytest.mark.parametrize("missing", [0.0, 0.15])
def test_batched_and_looped_scorers_agree(missing):
    problem = Problem(planted_table(n_enc=15, n_other=5, missing=missing), EeveeConfig(**SMALL))
    rng = np.random.default_rng(1)
    subsets = [tuple(sorted(rng.choice(problem.n_benchmarks, size=k, replace=False))) for k in (1, 3, 4)]
    subsets.append(())  # no input at all: the meta-model can only learn the means
    batched = score_batched(problem, subsets, chunk=7, workers=2)  # several chunks of mixed widths
    with cpu_threads(1):  # tiny ops: one thread is fastest, and immune to a busy machine's other processes
        looped = score_looped(problem, subsets)
    # (With missing values a split can be left without a complete validation encoder: NaN in both.)
    assert np.isfinite(batched).mean() > 0.8
    np.testing.assert_allclose(batched, looped, atol=1e-5, rtol=0, equal_nan=True)
    # Chunks are independent single-threaded computations: the worker count changes nothing. (A tolerance, not
    # bit equality: a BLAS build may pick another kernel for the same shapes on another CPU.)
    np.testing.assert_allclose(batched, score_batched(problem, subsets, chunk=7, workers=1), rtol=1e-12, atol=1e-12,
                               equal_nan=True)
    # Tasks smaller than one candidate divide its splits.
    np.testing.assert_allclose(batched, score_batched(problem, subsets, chunk=2), atol=1e-6, equal_nan=True)


def test_same_seed_same_result_and_another_seed_differs():
    table = planted_table()
    a = search(Problem(table, EeveeConfig(**SMALL, seed=3)), 2)
    b = search(Problem(table, EeveeConfig(**SMALL, seed=3)), 2)
    pd.testing.assert_frame_equal(a.ranked, b.ranked)
    c = search(Problem(table, EeveeConfig(**SMALL, seed=4)), 2)
    assert not a.ranked[["subset", "mean"]].equals(c.ranked[["subset", "mean"]])


def test_missing_values_are_masked_or_dropped():
    table = planted_table(missing=0.1)
    masked = Problem(table, EeveeConfig(**SMALL))
    assert not masked.complete and len(masked.encoders) == 24
    with pytest.warns(UserWarning, match="dropping .* encoder"):
        dropped = Problem(table, EeveeConfig(**SMALL, missing="drop_encoders"))
    assert dropped.complete and len(dropped.encoders) < 24


def test_bad_input_is_a_clear_error():
    cfg = EeveeConfig(**SMALL)
    with pytest.raises(ValueError, match="empty"):
        Problem(PerformanceTable([], [], np.zeros((0, 0))), cfg)
    t = planted_table()
    t.values[:, t.columns.index(("bench0", "m0"))] = np.nan
    t.values[:, t.columns.index(("bench0", "m1"))] = np.nan
    with pytest.raises(ValueError, match="benchmark 'bench0' has all values missing"):
        Problem(t, cfg)
    problem = Problem(planted_table(n_other=2), cfg)
    with pytest.raises(ValueError, match=r"k=4 must be smaller than the number of benchmarks \(4"):
        search(problem, 4)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        search(problem, 0)
    with pytest.raises(ValueError, match="too few encoders for a train/validation split: 2 encoder"):
        Problem(planted_table(n_enc=2), cfg)
    with pytest.raises(ValueError, match="missing must be one of"):
        EeveeConfig(missing="zero")
    with pytest.warns(UserWarning, match="constant over the encoders"):
        t = planted_table()
        t.values[:, 3] = 1.0
        Problem(t, cfg)


def test_the_paper_table_loads_as_a_performance_table():
    table = performance_table(default_paper_table())
    assert len(table.encoders) == 21 and len(table.benchmarks) == 31 and len(table.columns) == 175
    with pytest.warns(UserWarning, match="Winoground Img2Txt Loss"):  # constant in the paper: dropped
        problem = Problem(table, EeveeConfig(**SMALL))
    assert problem.n_benchmarks == 31 and len(problem.columns) == 173


def test_run_eevee_writes_every_output(tmp_path):
    run = run_eevee(planted_table(), [1, 2], tmp_path, EeveeConfig(**SMALL))
    for name in ("k=1.csv", "k=2.csv", "importance_k=1.csv", "importance_k=2.csv", "summary.csv",
                 "figures/k_sweep.png", "figures/importance_k=2.png"):
        assert (tmp_path / name).exists(), name
    k2 = pd.read_csv(tmp_path / "k=2.csv")
    assert list(k2.columns[:4]) == ["rank", "k", "subset", "n_inputs"]
    assert {"mean", "std", "min", "max"} <= set(k2.columns)
    assert (k2["min"] <= k2["mean"]).all() and (k2["mean"] <= k2["max"]).all()
    assert list(run.summary["k"]) == [1, 2]


def test_k_argument_forms():
    from gate.analysis.stage import k_values

    assert k_values(8) == [8] and k_values([1, 2]) == [1, 2] and k_values("1-4") == [1, 2, 3, 4]
    assert k_values("1,2,3") == [1, 2, 3]  # a quoted k='1,2,3'
    for bad in ("many", "4-1", True):
        with pytest.raises(ValueError, match="k "):
            k_values(bad)


def test_bad_values_in_a_table_are_clear_errors():
    cfg = EeveeConfig(**SMALL)
    t = planted_table()
    t.values[3, t.columns.index(("bench1", "m0"))] = np.inf
    with pytest.raises(ValueError, match=r"value inf for encoder 'enc3', benchmark 'bench1', metric 'm0'"):
        Problem(t, cfg)
    t = planted_table()
    t.values[:] = 0.5
    with pytest.raises(ValueError, match="every column of the performance table is constant"):
        Problem(t, cfg)
    t = planted_table(missing=0.3)
    with pytest.raises(ValueError, match="drop_encoders leaves no encoder"), pytest.warns(UserWarning):
        Problem(t, EeveeConfig(**SMALL, missing="drop_encoders"))


def test_run_eevee_leaves_torch_threads_as_they_were(tmp_path, monkeypatch):
    """Threads are limited only for the call (threadpoolctl): no process-wide setter, nothing changed after."""
    before = torch.get_num_threads()

    def refuse(*args, **kwargs):
        raise AssertionError("torch.set_num_threads changes the whole process")

    monkeypatch.setattr(torch, "set_num_threads", refuse)
    seen = {}

    def spy(problem, subsets, **kw):
        seen.setdefault("threads", torch.get_num_threads())
        return score_batched(problem, subsets, **kw)

    monkeypatch.setattr(Evaluator.__init__, "__defaults__", (spy,))
    run_eevee(planted_table(), [1], tmp_path / "a", EeveeConfig(**SMALL, threads=1), figures=False)
    assert seen["threads"] == 1  # limited inside the call
    assert torch.get_num_threads() == before
    run_eevee(planted_table(), [1], tmp_path / "b", EeveeConfig(**SMALL), figures=False, with_importance=False)
    assert torch.get_num_threads() == before
    problem = Problem(planted_table(n_enc=10, n_other=2), EeveeConfig(**SMALL))
    score_batched(problem, [(0,), (1,), (0, 1)], chunk=2, workers=2)  # worker threads
    assert torch.get_num_threads() == before


@pytest.mark.slow
def test_gate_eevee_cli_on_the_paper_table(tmp_path, capsys):
    # in process (gate-eevee's main() with this command line); its own process is tests/test_bad_inputs.py's
    from gate.cli import eevee as eevee_cli

    out = tmp_path / "eevee"
    proc = call_cli(eevee_cli.main, [f"table={default_paper_table()}", "k=[1,2]", f"out={out}", "population=12",
                                     "keep=3", "children=2", "generations=1", "n_splits=2", "progress=false"],
                    capsys, prog="gate-eevee")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "best subset" in proc.stdout
    for name in ("k=1.csv", "k=2.csv", "importance_k=1.csv", "importance_k=2.csv", "figures/k_sweep.png"):
        assert (out / name).exists(), name
    best = pd.read_csv(out / "k=2.csv").iloc[0]
    assert len(best["subset"].split(";")) == 2
    with pytest.raises(ValueError, match=r"must satisfy 1 <= k < number of benchmarks \(31\)"), pytest.warns(UserWarning):
        run_eevee(default_paper_table(), [2, 31], tmp_path / "bad", EeveeConfig(**SMALL))

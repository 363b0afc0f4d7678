"""EEVEE speed benchmark: the batched meta-model scorer vs one nn.Module at a time, and a full search.

    python measurements/bench_eevee.py                       # the paper's table, k=8, 32 candidates
    python measurements/bench_eevee.py --quick               # a minute: fewer looped candidates, a short search
    python measurements/bench_eevee.py --no-search --threads 1 --workers 2   # the loop on one thread

Prints (1) seconds per candidate for the batched scorer (gate.analysis.eevee.score_batched) and for
the ordinary loop (score_looped: an nn.Module + autograd + torch.optim.AdamW per candidate and
split) on the same random k-subsets, the speed ratio, and the largest difference of their fitness
values (same seed, same splits, same initial weights); (2) the wall time of a full search with the
default settings (1000 initial subsets, keep 50, 10 children, 10 generations) and its best subset.
The two scorers are timed in interleaved rounds; the minimum (least disturbed by other processes)
and the median are printed. ``--threads`` limits torch's threads for the loop (scoped, with
threadpoolctl; default: torch's default), ``--workers`` the batched scorer's parallel chunks (default: the
same number). ``--quick`` scores the loop on 4 candidates only and runs a short search (population 200,
3 generations) instead of the full one.
Not a timed test: run it by hand on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def main() -> None:
    from gate.analysis.meta import default_paper_table

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", default=str(default_paper_table()))
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--candidates", type=int, default=32)
    ap.add_argument("--looped-candidates", type=int, default=None,
                    help="score only the first N candidates with the loop (its time is per candidate)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (the loop's intra-op threads)")
    ap.add_argument("--workers", type=int, default=None, help="batched scorer: parallel chunks (default: threads)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3,
                    help="timing rounds; the minimum (least disturbed by other processes) and median are shown")
    ap.add_argument("--no-search", action="store_true")
    ap.add_argument("--quick", action="store_true", help="4 looped candidates and a short search")
    args = ap.parse_args()
    if args.quick:
        args.looped_candidates = args.looped_candidates or 4
    if args.threads:
        from gate.analysis.eevee import cpu_threads

        with cpu_threads(args.threads):
            run(args)
    else:
        run(args)


def run(args) -> None:
    import torch

    from gate.analysis.eevee import EeveeConfig, Problem, performance_table, score_batched, score_looped, search

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    table = performance_table(args.table)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem = Problem(table, EeveeConfig(seed=args.seed, progress=False, workers=args.workers))
    cfg = problem.cfg
    print(f"table: {len(problem.encoders)} encoders x {len(problem.columns)} columns ({problem.n_benchmarks} "
          f"benchmarks); meta-model {cfg.hidden} hidden, {cfg.epochs} epochs, {cfg.n_splits} splits")
    rng = np.random.default_rng(args.seed)
    subsets = [tuple(sorted(int(i) for i in rng.choice(problem.n_benchmarks, args.k, replace=False)))
               for _ in range(args.candidates)]
    score_batched(problem, subsets[:2])  # warm-up (first-call allocations, BLAS initialisation)
    n_loop = args.looped_candidates or len(subsets)
    tb, tl, cb, cl = [], [], [], []
    for _ in range(args.repeat):  # interleaved, so that both see the same background load
        t0, c0 = time.perf_counter(), time.process_time()
        batched = score_batched(problem, subsets)
        tb.append((time.perf_counter() - t0) / len(subsets))
        cb.append((time.process_time() - c0) / len(subsets))
        t0, c0 = time.perf_counter(), time.process_time()
        looped = score_looped(problem, subsets[:n_loop])
        tl.append((time.perf_counter() - t0) / n_loop)
        cl.append((time.process_time() - c0) / n_loop)
    tb, tl, cb, cl = (np.array(v) for v in (tb, tl, cb, cl))
    diff = np.abs(batched[:n_loop] - looped).max()
    fit_diff = np.abs(batched[:n_loop].mean(1) - looped.mean(1)).max()
    print(f"batched: {tb.min() * 1e3:8.2f} ms per candidate wall (median {np.median(tb) * 1e3:.2f}), "
          f"{cb.min() * 1e3:.2f} ms CPU ({len(subsets)} candidates x {cfg.n_splits} splits, "
          f"{cfg.workers or torch.get_num_threads()} worker(s))")
    print(f"looped:  {tl.min() * 1e3:8.2f} ms per candidate wall (median {np.median(tl) * 1e3:.2f}), "
          f"{cl.min() * 1e3:.2f} ms CPU ({n_loop} candidates)")
    print(f"speed ratio looped/batched: {tl.min() / tb.min():.1f}x (min over {args.repeat} rounds; "
          f"median {np.median(tl) / np.median(tb):.1f}x)")
    print(f"largest |fitness difference|: {fit_diff:.2e} (per split: {diff:.2e})")
    if args.no_search:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        short = dict(population=200, generations=3) if args.quick else {}
        problem = Problem(table, EeveeConfig(seed=args.seed, progress=not args.quick, workers=args.workers, **short))
    t0 = time.perf_counter()
    res = search(problem, args.k)
    wall = time.perf_counter() - t0
    print(f"{'short' if args.quick else 'full'} k={args.k} search: {wall:.1f} s wall, {res.n_evaluated} subsets "
          f"evaluated")
    print(f"best subset: {', '.join(res.best)} (validation MSE {res.best_fitness:.4f})")


if __name__ == "__main__":
    main()

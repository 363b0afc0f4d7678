"""Which transferability scores stop discriminating as the features' rank approaches the rows n (issue 24, item 3).

gate-rank's validation scores ``max_samples=500`` rows of 192–2048-wide features (efficientnet_lite0: 1280). A
score fitted on the very rows it scores (a within-class scatter, a pseudo-inverse, a coding rate) can then fit
anything, noise included. Two measurements:

1. Synthetic (default). For every feature score of ``gate.transferability.SCORES``, on n rows and C = 10
   balanced random classes, at each width d, over ``--seeds`` draws, three feature sets:

   - ``noise``: ``N(0, I_d)`` (rank min(d, n − 1)), labels independent of the features — a score that discriminates
     is at its chance value;
   - ``weak`` / ``strong``: the same noise plus class means ``μ_c ~ N(0, s² I_16)`` in the first 16 coordinates
     (``s`` = 0.5 / 1.2: linear-probe accuracy ≈ 0.52 / 0.96 at d = 32, on 5 folds), so the class signal is the
     same at every width and only the noise dimensions grow, as with a wider encoder.

   Printed per score and width: the mean of each (± the standard deviation over seeds for noise) and ``order``, the
   number of seeds where ``noise < weak < strong`` strictly. A score that gives the same number for all three
   (SFDA's 1.000, H-score's C − 1) cannot tell an informative encoder from noise. ``--rank k`` draws the noise in k
   dimensions and lifts it to width d (rank k at every width).

2. Real features (``--features GLOB``): gate-score's cached features (``<root>/cache/features/<encoder>/<dataset>/
   *.pt``), their first n rows for each ``--rows``: width, rank (:func:`gate.transferability.feature_rank`),
   n − C, the mark (:meth:`Metric.degenerate`), and SFDA and H-score on the true labels and on one shuffle of them.

Not a unit test. Run from the repository root:

    .venv/bin/python measurements/score_degeneracy.py                      # n = 500, 3 seeds (~3 min on 2 cores)
    .venv/bin/python measurements/score_degeneracy.py --n 1000 --scores sfda h_score --seeds 2 \\
        --widths 256 512 700 800 900 950 990 1024 2048
    .venv/bin/python measurements/score_degeneracy.py --rank 128 --scores sfda h_score --widths 256 512 2048
    .venv/bin/python measurements/score_degeneracy.py --features "/tmp/store/cache/features/*/*/*.pt" --rows 150 300 500
"""

from __future__ import annotations

import argparse
import glob

import numpy as np
import torch

from gate.transferability import SCORES, feature_rank

SIGNAL_DIMS = 16
STRENGTHS = {"weak": 0.5, "strong": 1.2}
KINDS = ("noise", *STRENGTHS)


def draw(n: int, d: int, classes: int, kind: str, rng: np.random.Generator,
         rank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    labels = np.arange(n) % classes
    rng.shuffle(labels)
    k = d if rank is None else min(rank, d)
    x = rng.standard_normal((n, k))
    if kind != "noise":
        means = rng.standard_normal((classes, SIGNAL_DIMS)) * STRENGTHS[kind]
        x[:, :min(SIGNAL_DIMS, k)] += means[labels, :min(SIGNAL_DIMS, k)]
    if k < d:  # rank k at width d: lifted by a random orthonormal map, which keeps every distance
        x = x @ np.linalg.qr(rng.standard_normal((d, k)))[0].T
    return x, labels


def synthetic(args) -> None:
    values = {s: {d: {k: [] for k in KINDS} for d in args.widths} for s in args.scores}
    ranks = {}
    for d in args.widths:
        for seed in range(args.seeds):
            for i, kind in enumerate(KINDS):
                x, y = draw(args.n, d, args.classes, kind, np.random.default_rng([seed, d, i]), args.rank)
                f, lab = torch.from_numpy(x), torch.from_numpy(y)
                if seed == 0 and kind == "noise":
                    ranks[d] = feature_rank(f)
                for s in args.scores:
                    values[s][d][kind].append(SCORES[s](features=f, labels=lab))
        print(f"d={d} done", flush=True)

    print(f"\nn = {args.n} rows, C = {args.classes} classes (n − C = {args.n - args.classes}), {args.seeds} seeds"
          f"{f', noise of rank {args.rank}' if args.rank else ''}; mean over seeds; order = seeds with "
          f"noise < weak < strong\n")
    print("| score | d | rank | noise (± sd) | weak | strong | order | marked |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for s in args.scores:
        for d in args.widths:
            v = {k: np.asarray(values[s][d][k]) for k in KINDS}
            order = int(np.sum((v["noise"] < v["weak"]) & (v["weak"] < v["strong"])))
            mark = SCORES[s].degenerate(args.n, args.classes, feature_rank=ranks[d]) or ""
            print(f"| {s} | {d} | {ranks[d]} | {v['noise'].mean():.4g} ± {v['noise'].std():.2g} | {v['weak'].mean():.4g} | "
                  f"{v['strong'].mean():.4g} | {order}/{args.seeds} | {mark} |")


def real(args) -> None:
    print("| features | rows | width | rank | n − C | marked | sfda | sfda shuffled | h_score | h_score shuffled |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for path in sorted(glob.glob(args.features)):
        cached = torch.load(path, map_location="cpu", weights_only=True)  # data only, as gate-score reads it
        name = "/".join(path.split("/")[-3:-1])
        for n in args.rows:
            f, y = cached["features"][:n].double(), cached["labels"][:n]
            if f.shape[0] < n:
                continue
            classes, rank = int(torch.unique(y).numel()), feature_rank(f)
            shuffled = y[torch.randperm(n, generator=torch.Generator().manual_seed(0))]
            vals = [SCORES[s](features=f, labels=lab) for s in ("sfda", "h_score") for lab in (y, shuffled)]
            mark = SCORES["sfda"].degenerate(n, classes, feature_rank=rank) or ""
            print(f"| {name} | {n} | {f.shape[1]} | {rank} | {n - classes} | {mark} | "
                  + " | ".join(f"{v:.4f}" for v in vals) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--widths", type=int, nargs="+", default=[32, 128, 256, 480, 490, 512, 1024, 2048])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rank", type=int, default=None, help="draw the noise in this many dimensions, lifted to d")
    ap.add_argument("--scores", nargs="+", default=[k for k, m in SCORES.items() if m.needs == "features"])
    ap.add_argument("--features", default=None, help="glob of gate-score feature caches: the real-feature table")
    ap.add_argument("--rows", type=int, nargs="+", default=[150, 300, 500])
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: no spinning on a shared CPU)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.features:
        real(args)
    else:
        synthetic(args)


if __name__ == "__main__":
    main()

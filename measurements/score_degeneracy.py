"""Which transferability scores stop discriminating as the feature width d approaches the rows n (issue 24, item 3).

gate-rank's validation scores ``max_samples=500`` rows of 512–2048-wide features (efficientnet_lite0: 1280). A
score fitted on the very rows it scores (a within-class scatter, a pseudo-inverse, a coding rate) can then fit
anything, noise included. For every feature score of ``gate.scoring.transferability.SCORES``, on n rows and
C = 10 balanced random classes, at each width d, over ``--seeds`` draws, three feature sets:

- ``noise``: ``N(0, I_d)``, labels independent of the features — a score that discriminates is at its chance value;
- ``weak`` / ``strong``: the same noise plus class means ``μ_c ~ N(0, s² I_16)`` in the first 16 coordinates
  (``s`` = 0.5 / 1.2: linear-probe accuracy ≈ 0.52 / 0.98 at d = 32, on 5 folds), so the class signal is the same
  at every width and only the noise dimensions grow, as with a wider encoder.

Printed per score and width: the mean of each (± the standard deviation over seeds for noise) and ``order``, the
number of seeds where ``noise < weak < strong`` strictly. A score that gives the same number for all three (SFDA's
1.000, H-score's C − 1) cannot tell an informative encoder from noise. Not a unit test. Run from the repository root:

    .venv/bin/python measurements/score_degeneracy.py                      # n = 500, 3 seeds (~2 min on 2 cores)
    .venv/bin/python measurements/score_degeneracy.py --n 1000 --widths 128 512 960 990 1024 2048
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from gate.scoring.transferability import SCORES

SIGNAL_DIMS = 16
STRENGTHS = {"weak": 0.5, "strong": 1.2}
KINDS = ("noise", *STRENGTHS)


def draw(n: int, d: int, classes: int, kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = np.arange(n) % classes
    rng.shuffle(labels)
    x = rng.standard_normal((n, d))
    if kind != "noise":
        means = rng.standard_normal((classes, SIGNAL_DIMS)) * STRENGTHS[kind]
        k = min(SIGNAL_DIMS, d)
        x[:, :k] += means[labels, :k]
    return x, labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--widths", type=int, nargs="+", default=[32, 128, 256, 480, 490, 512, 1024, 2048])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--scores", nargs="+", default=[k for k, m in SCORES.items() if m.needs == "features"])
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: no spinning on a shared CPU)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    values = {s: {d: {k: [] for k in KINDS} for d in args.widths} for s in args.scores}
    for d in args.widths:
        for seed in range(args.seeds):
            for i, kind in enumerate(KINDS):
                x, y = draw(args.n, d, args.classes, kind, np.random.default_rng([seed, d, i]))
                f, lab = torch.from_numpy(x), torch.from_numpy(y)
                for s in args.scores:
                    values[s][d][kind].append(SCORES[s](features=f, labels=lab))
        print(f"d={d} done", flush=True)

    print(f"\nn = {args.n} rows, C = {args.classes} classes (n − C = {args.n - args.classes}), {args.seeds} seeds; "
          f"mean over seeds; order = seeds with noise < weak < strong\n")
    print("| score | d | noise (± sd) | weak | strong | order |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in args.scores:
        for d in args.widths:
            v = {k: np.asarray(values[s][d][k]) for k in KINDS}
            order = int(np.sum((v["noise"] < v["weak"]) & (v["weak"] < v["strong"])))
            print(f"| {s} | {d} | {v['noise'].mean():.4g} ± {v['noise'].std():.2g} | {v['weak'].mean():.4g} | "
                  f"{v['strong'].mean():.4g} | {order}/{args.seeds} |")


if __name__ == "__main__":
    main()

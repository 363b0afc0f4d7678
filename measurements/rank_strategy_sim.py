"""How should a fixed budget be spread over a tier? Simulated exactly from a rank_validation store (no training).

A ground-truth run of ``measurements/rank_validation.py`` validates every ``V`` steps (csv logs); a proxy run of
the same seed with the same validation interval that stops at a multiple ``k`` of ``V`` *is* that run's first
``k`` steps (same data order, same random stream: validation draws from it at the same steps; the GATE
recipes' ReduceLROnPlateau does not see the run length). So the validation value at step ``k`` of a full run is
what a ``k``-step proxy run of that seed would have recorded, and every strategy below is evaluated without
training anything:

* ``spread@k`` — every benchmark of the tier, every encoder ``k`` steps;
* ``subset(m)@k`` — ``m`` of the tier's benchmarks (every subset of that size, averaged: a random pick), every
  encoder ``k`` steps; the tier ranking is the mean rank over those ``m``;
* ``seeded(m)@k`` — ``subset(m)@k`` whose ranking on a benchmark a zero-training score covers is the mean of
  the run's rank and the score's rank (gate-rank's ``scores=[...]`` with one rung; ``--seed-score``, default
  ``logme``; classification benchmarks only);
* ``halving(m)@k`` — successive halving on ``m`` benchmarks: every encoder ``k`` steps, the better half
  continues to ``2k``, the better two to ``4k`` (capped at the full run), ordered as gate-rank orders.

Fair to the proxy's noise: the proxy's seed ``s`` is left out of the truth it is compared with (the truth is the
mean over the other seeds), so a strategy never grades itself; every seed takes a turn as the proxy's. The
ceiling is the seed-to-seed τ of single seeds (as gate-rank reports). Compute: training steps of the strategy over
the full tier's (every encoder × benchmark × seed × full steps).

    .venv/bin/python measurements/rank_strategy_sim.py --root /tmp/rank_validation3
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from gate.settings import default_path


def load(root: Path, full_steps: int) -> tuple[dict, dict]:
    """truth[bench][seed] = Series(encoder -> test tier metric, higher is better) and
    curve[bench][seed][encoder] = {step: validation value}."""
    from gate.metrics import lookup

    records = [json.loads(x) for x in default_path("results", root).read_text().splitlines() if x.strip()]
    truth: dict = {}
    curve: dict = {}
    for r in records:
        if r["kind"] != "finetune" or r["split"] != "test" or r["config"]["trainer"]["max_steps"] != full_steps:
            continue
        metric = r["config"]["dataset"].get("tier_metric") or "acc@1"
        if r["metric"] != metric:
            continue
        sign = 1.0 if lookup(metric) is None or lookup(metric).higher_is_better else -1.0
        b, s, e = r["dataset"], r["seed"], r["encoder"]
        truth.setdefault(b, {}).setdefault(s, {})[e] = sign * r["value"]
        points: dict[int, float] = {}
        for f in sorted((root / "csv_logs" / r["experiment"]).glob("version_*/metrics.csv")):
            for row in csv.DictReader(f.open()):
                if row.get(f"val/{metric}"):
                    points[int(row["step"]) + 1] = sign * float(row[f"val/{metric}"])
        curve.setdefault(b, {}).setdefault(s, {})[e] = points
    truth = {b: {s: pd.Series(v) for s, v in seeds.items()} for b, seeds in truth.items()}
    return truth, curve


def load_score(root: Path, score: str) -> dict[str, pd.Series]:
    """score[bench] = Series(encoder -> value, higher is better) from the store's score records."""
    out: dict = {}
    for line in default_path("results", root).read_text().splitlines():
        r = json.loads(line) if line.strip() else {}
        if r.get("kind") == "score" and r["metric"] == score:
            out.setdefault(r["dataset"], {})[r["encoder"]] = r["value"] if r.get("higher_is_better", True) else -r["value"]
    return {b: pd.Series(v) for b, v in out.items()}


def tau(pred: pd.Series, truth: pd.Series) -> float:
    encs = list(truth.index)
    return float(kendalltau(pred[encs].to_numpy(), truth[encs].to_numpy()).statistic)


def mean_rank(cols: dict[str, pd.Series]) -> pd.Series:
    """Higher is better: minus the mean rank (1 = best) over the benchmarks given."""
    return -pd.concat([c.rank(ascending=False) for c in cols.values()], axis=1).mean(axis=1)


def at(curve: dict, bench: str, seed: int, steps: int) -> pd.Series:
    return pd.Series({e: pts.get(steps, np.nan) for e, pts in curve[bench][seed].items()})


def halving(curve: dict, bench: str, seed: int, k: int, full: int) -> tuple[pd.Series, int]:
    """gate-rank's order (later rung first, then by value) and the steps it trains."""
    encs = list(curve[bench][seed])
    alive, groups, prev, cost, steps = encs, [], 0, 0, k
    while True:
        v = at(curve, bench, seed, steps)[alive]
        cost += len(alive) * (steps - prev)
        ranked = list(v.sort_values(ascending=False).index)
        last = len(alive) <= 2 or steps >= full
        keep = len(ranked) if last else max(2, -(-len(ranked) // 2))
        groups.append(ranked[keep:])
        if last:
            groups.append(ranked)
            break
        alive, prev, steps = ranked[:keep], steps, min(full, steps * 2)
    order = [e for g in reversed(groups) for e in g]
    return pd.Series({e: -float(i) for i, e in enumerate(order)}), cost


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/rank_validation3")
    ap.add_argument("--full-steps", type=int, default=96)
    ap.add_argument("--seed-score", default="logme")
    args = ap.parse_args()
    truth, curve = load(Path(args.root), args.full_steps)
    score = load_score(Path(args.root), args.seed_score)
    encs = sorted({e for b in truth for s in truth[b] for e in truth[b][s].index})
    seeds = sorted({s for b in truth for s in truth[b]})
    benches = sorted(b for b in truth if all(s in truth[b] and len(truth[b][s]) == len(encs) for s in seeds))
    if len(benches) < len(truth):
        print(f"left out (not every encoder × seed stored yet): {sorted(set(truth) - set(benches))}")
    n_full = len(benches) * len(seeds) * len(encs) * args.full_steps
    grid = sorted({k for b in benches for s in seeds for e in encs for k in curve[b][s][e]})
    print(f"{len(encs)} encoders × {len(benches)} benchmarks ({', '.join(benches)}) × {len(seeds)} seeds; "
          f"validation at steps {grid}; full tier {n_full} steps")

    def truth_without(seed: int) -> dict[str, pd.Series]:
        return {b: pd.concat([truth[b][s] for s in seeds if s != seed], axis=1).mean(axis=1) for b in benches}

    ceiling = [tau(mean_rank({b: truth[b][a] for b in benches}), mean_rank({b: truth[b][c] for b in benches}))
               for a, c in itertools.combinations(seeds, 2)]
    ceiling_b = {b: np.mean([tau(truth[b][a], truth[b][c]) for a, c in itertools.combinations(seeds, 2)])
                 for b in benches}
    print(f"ceiling (seed-to-seed τ): tier {np.mean(ceiling):+.3f}; "
          + ", ".join(f"{b} {v:+.3f}" for b, v in ceiling_b.items()))
    rows = []
    for m in range(1, len(benches) + 1):
        for k in grid:
            for name in ("subset", "seeded", "halving"):
                if name == "seeded" and not score:
                    continue
                taus, costs = [], []
                for seed in seeds:
                    t = truth_without(seed)
                    t_tier = mean_rank(t)
                    for subset in itertools.combinations(benches, m):
                        cols, cost = {}, 0
                        for b in subset:
                            if name in ("subset", "seeded"):
                                cols[b], c = at(curve, b, seed, k), len(encs) * k
                                if name == "seeded" and b in score:
                                    cols[b] = mean_rank({"run": cols[b], "score": score[b][cols[b].index]})
                            else:
                                cols[b], c = halving(curve, b, seed, k, args.full_steps)
                            cost += c
                        taus.append(tau(mean_rank(cols), t_tier))
                        costs.append(cost)
                rows.append({"strategy": f"{'spread' if m == len(benches) and name == 'subset' else name}({m})@{k}",
                             "benchmarks": m, "steps": k, "fraction": np.mean(costs) / n_full,
                             "tier_tau": np.mean(taus), "tau_sd": np.std(taus), "cases": len(taus)})
    table = pd.DataFrame(rows).sort_values(["fraction", "tier_tau"])
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()

"""gate-rank v2's benchmark selection and completion, measured on a performance table alone (no training).

The encoders of the table are split into a *pool* (held out: ranked) and a *history* (the rest: what the selection
and the completion may learn from, as gate-rank's history never holds a row of the pool). For each split, each tier
and each k, every method picks k of the tier's benchmarks, "runs" them (reads the pool's values there from the
table, as a full run would give them) and predicts the pool's tier ranking; the truth is the pool's mean rank over
every benchmark of the tier. Methods: the tier file's first k (v1's ``first``), k random benchmarks (mean of 10
draws), one benchmark per paper group (random within a group, mean of 10 draws), and v2's selection
(:func:`gate.ranking.select.choose`) without completion (the mean rank over what ran) and with it (the unrun
benchmarks predicted: :mod:`gate.ranking.complete`), and v2 as gate-rank uses it (completion only where the
history's held-out comparison says it wins).

    python measurements/rank_table_retro.py                                  # every tier, k = 2..6, 100 halvings
    python measurements/rank_table_retro.py --tier base --k 5 --holdout clip,dino,sflex
    python measurements/rank_table_retro.py --splits 20 --split-seed 3 --json   # one JSON object per split
    python measurements/rank_table_retro.py --groups                         # leave-group-out splits

Per split (``--json``): the chosen benchmarks and, per method, each held-out encoder's predicted tier score (the
mean value over the tier's benchmarks, 0–1) beside the truth's, the τ of the held-out encoders' tier ranking, the
tier-score error in points (×100) and the 80 % intervals' coverage (v2's; the others have none).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gate.analysis.ranks import kendall  # noqa: E402
from gate.ranking import complete, select  # noqa: E402
from gate.ranking.history import History, from_table  # noqa: E402

TIERS = ("small", "base", "big", "full")
METHODS = ("file", "random", "one_per_group", "v2_plain", "v2_completed", "v2")
#: Leave-group-out splits of the GATE paper's encoders (its column names): what kind of encoder is held out.
PAPER_GROUPS = {
    "scratch": ["seffv2", "sflex", "svit", "sr50a1"],
    "text_audio": ["whspr", "bert", "bart", "mpnet"],
    "clip_like": ["siglip", "clip", "laion"],
    "convnets": ["cvnxtv2", "rnx50", "effv2", "r50a1"],
    "vits": ["flex", "deit", "vit", "dino", "smvit"],
}


def tier_benchmarks(name: str) -> list[str]:
    import yaml

    doc = yaml.safe_load((ROOT / "conf" / "tier" / f"{name}.yaml").read_text())
    return [b["dataset"] if isinstance(b, dict) else str(b) for b in doc["benchmarks"]]


def one_split(history_all: History, pool: list[str], bench: list[str], k: int, rng: np.random.Generator,
              n_draws: int = 10, n_splits: int = 20) -> dict:
    """Every method on one split: the pool's values on the chosen benchmarks, its predicted tier ranking and score."""
    hist = history_all.without(pool).restrict(bench)
    values = history_all.values.loc[pool, bench]
    truth_rank = complete.mean_rank(values.to_numpy())
    truth_score = values.mean(axis=1)
    groups = history_all.groups

    def plain(chosen: list[str]) -> tuple[np.ndarray, pd.Series]:
        return complete.mean_rank(values[chosen].to_numpy()), values[chosen].mean(axis=1)

    def graded(rank: np.ndarray, score: pd.Series, lo: pd.Series | None = None, hi: pd.Series | None = None) -> dict:
        out = {"tau": kendall(-rank, -truth_rank),
               "error_points": float((score - truth_score).abs().mean() * 100),
               "predicted": {e: round(float(score[e]), 4) for e in pool},
               "truth": {e: round(float(truth_score[e]), 4) for e in pool}}
        if lo is not None and hi is not None and lo.notna().all():
            out["coverage"] = float(((truth_score >= lo) & (truth_score <= hi)).mean())
        return out

    res: dict[str, dict] = {}
    res["file"] = graded(*plain(bench[:k]))
    draws = [graded(*plain(list(rng.choice(bench, k, replace=False)))) for _ in range(n_draws)]
    res["random"] = {"tau": float(np.nanmean([d["tau"] for d in draws])),
                     "error_points": float(np.mean([d["error_points"] for d in draws]))}
    by_group: dict[str, list[str]] = {}
    for b in bench:
        by_group.setdefault(groups.get(b, b), []).append(b)
    opg = []
    for _ in range(n_draws):
        order = list(by_group)
        rng.shuffle(order)
        picked: list[str] = []
        while len(picked) < k:
            for g in order:
                rest = [b for b in by_group[g] if b not in picked]
                if rest and len(picked) < k:
                    picked.append(str(rng.choice(rest)))
        opg.append(graded(*plain(picked)))
    res["one_per_group"] = {"tau": float(np.nanmean([d["tau"] for d in opg])),
                            "error_points": float(np.mean([d["error_points"] for d in opg]))}
    sel = select.choose(hist, bench, cost=dict.fromkeys(bench, 1.0), affordable=k, max_k=k, n_splits=n_splits,
                        seed=int(rng.integers(1 << 30)))
    chosen = list(sel.chosen)
    # v2 without completion: the tier score predicted by the mean over what ran plus the history's median difference,
    # its 80 % interval the conformal bounds of the history's differences (complete.predict_tier)
    plain_v2 = complete.predict_tier(values[chosen], bench, None, history=hist)
    res["v2_plain"] = graded(plain_v2.mean_rank.to_numpy(), plain_v2.tier_value, plain_v2.tier_lo, plain_v2.tier_hi)
    others = [b for b in bench if b not in chosen]
    if others:
        comp = complete.fit(hist, chosen, others)
        pred = complete.predict_tier(values[chosen], bench, comp)
        res["v2_completed"] = graded(pred.mean_rank.to_numpy(), pred.tier_value, pred.tier_lo, pred.tier_hi)
        res["v2_completed"]["flagged"] = pred.flagged
    else:
        res["v2_completed"] = res["v2_plain"]
    res["v2"] = res["v2_completed"] if sel.use_completion else res["v2_plain"]
    res["v2"] = {**res["v2"], "completion_used": bool(sel.use_completion),
                 "held_out_tau_history": {"completed": sel.tau_completed, "plain": sel.tau_plain}}
    return {"chosen": chosen, "methods": res}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", default=None, help="a performance table (default: the GATE paper's, packaged)")
    parser.add_argument("--tier", choices=TIERS, action="append", help="default: every tier")
    parser.add_argument("--k", type=int, action="append", help="benchmarks chosen (default: 2..6)")
    parser.add_argument("--holdout", default=None, help="comma-separated encoders held out (one split)")
    parser.add_argument("--splits", type=int, default=100, help="random halvings of the encoders")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--groups", action="store_true", help="leave-group-out splits (the paper's encoder kinds)")
    parser.add_argument("--json", action="store_true", help="one JSON object per split on stdout")
    parser.add_argument("--inner-splits", type=int, default=20,
                        help="hold-outs of the history's encoders deciding whether completion is used (gate-rank: 20)")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if args.table:
            table = from_table(args.table)
        else:
            from gate.analysis.meta import default_paper_table

            table = from_table(default_paper_table(), source="paper")  # the paper's own column names
    encoders = list(table.values.index)
    if args.holdout:
        held = [e.strip() for e in args.holdout.split(",") if e.strip()]
        unknown = [e for e in held if e not in encoders]
        if unknown:
            print(f"rank_table_retro: unknown encoder(s) {unknown}; the table has {encoders}", file=sys.stderr)
            return 2
        pools = [held]
    elif args.groups:
        pools = [[e for e in members if e in encoders] for members in PAPER_GROUPS.values()]
    else:
        rng = np.random.default_rng(args.split_seed)
        pools = [list(rng.permutation(encoders)[: len(encoders) // 2]) for _ in range(args.splits)]
    tiers, ks = args.tier or list(TIERS), args.k or [2, 3, 4, 5, 6]
    summary: dict[tuple[str, int, str], list[float]] = {}
    rng = np.random.default_rng(args.split_seed + 1)
    started = time.monotonic()
    for t in tiers:
        bench = tier_benchmarks(t)
        for k in ks:
            for i, pool in enumerate(pools):
                out = one_split(table, pool, bench, k, rng, n_splits=args.inner_splits)
                for m in METHODS:
                    summary.setdefault((t, k, m), []).append(out["methods"][m]["tau"])
                    for extra in ("error_points", "coverage"):
                        if extra in out["methods"][m]:
                            summary.setdefault((t, k, f"{m}:{extra}"), []).append(out["methods"][m][extra])
                summary.setdefault((t, k, "completion_used"), []).append(float(out["methods"]["v2"]["completion_used"]))
                if args.json:
                    print(json.dumps({"tier": t, "k": k, "split": i, "pool": pool, **out}, default=_plain))
    if args.json:
        return 0
    print(f"held-out τ of the pool's tier ranking (mean over {len(pools)} split(s); {time.monotonic() - started:.0f} s)")
    print(f"{'tier':<6} {'k':>2} " + " ".join(f"{m:>13}" for m in METHODS) + "  completion used  v2 error (pts)  "
          "v2 80% coverage")
    for t in tiers:
        for k in ks:
            row = [float(np.nanmean(summary[(t, k, m)])) for m in METHODS]
            used = float(np.mean(summary[(t, k, "completion_used")]))
            err = float(np.mean(summary.get((t, k, "v2:error_points"), [math.nan])))
            cov = float(np.mean(summary.get((t, k, "v2:coverage"), [math.nan])))
            print(f"{t:<6} {k:>2} " + " ".join(f"{v:>13.3f}" for v in row) + f"  {used:>15.2f}  {err:>14.1f}  {cov:>15.2f}")
    for k in ks:
        row = [float(np.mean([np.nanmean(summary[(t, k, m)]) for t in tiers])) for m in METHODS]
        print(f"{'mean':<6} {k:>2} " + " ".join(f"{v:>13.3f}" for v in row))
    return 0


def _plain(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(type(value))


if __name__ == "__main__":
    sys.exit(main())

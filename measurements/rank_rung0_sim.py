"""Which first rung would have ranked better? A simulation on a rank_validation store (no training).

The ground-truth runs of ``measurements/rank_validation.py`` validate every 32 steps (csv logs); the trajectory of
a seed's full run up to step 32 is the trajectory of a 32-step rung of that seed (same data order, same schedule:
ReduceLROnPlateau does not see the run length). So the validation value at step 32 of a full run is what a 32-step
rung would have seen. Compared, per benchmark and seed, by Kendall τ-b against the full ranking (test ``acc@1``,
mean over seeds):

* ``rung0@9`` — every encoder's stored 9-step rung-0 value (what gate-rank's first rung saw; digits only);
* ``score`` — the zero-training score alone (feature pass);
* ``all@32`` — every encoder 32 steps (8 × 32 = 256 steps = 0.17 of the full 1 536: over a 0.1 budget);
* ``score-top-half@32`` — the score keeps the better half, which trains 32 steps (4 × 32 = 128 steps = 0.083);
  order: those four by their 32-step value, then the rest by the score.

    .venv/bin/python measurements/rank_rung0_sim.py --root /tmp/rank_validation2 --score knn_acc
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from gate.settings import default_path


def val_curve(root: Path, exp: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for f in sorted((root / "csv_logs" / exp).glob("version_*/metrics.csv")):
        for row in csv.DictReader(f.open()):
            if row.get("val/acc@1"):
                out[int(row["step"]) + 1] = float(row["val/acc@1"])
    return out


def tau(pred: dict[str, float], truth: dict[str, float]) -> float:
    encs = sorted(truth)
    return float(kendalltau([pred[e] for e in encs], [truth[e] for e in encs]).statistic)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/rank_validation2")
    ap.add_argument("--full-steps", type=int, default=96)
    ap.add_argument("--rung", type=int, default=32)
    ap.add_argument("--score", default="knn_acc")
    args = ap.parse_args()
    root = Path(args.root)
    records = [json.loads(x) for x in default_path("results", root).read_text().splitlines() if x.strip()]
    ft = [r for r in records if r["kind"] == "finetune" and r["metric"] == "acc@1"]
    benches = sorted({r["dataset"] for r in ft if r["config"]["trainer"]["max_steps"] == args.full_steps})
    for bench in benches:
        full = [r for r in ft if r["dataset"] == bench and r["split"] == "test"
                and r["config"]["trainer"]["max_steps"] == args.full_steps]
        truth: dict[str, list[float]] = {}
        for r in full:
            truth.setdefault(r["encoder"], []).append(r["value"])
        truth_mean = {e: float(np.mean(v)) for e, v in truth.items()}
        score = {r["encoder"]: r["value"] for r in records if r["kind"] == "score" and r["dataset"] == bench
                 and r["metric"] == args.score}
        rows = {"score": [tau(score, truth_mean)]} if len(score) == len(truth_mean) else {}
        rung0 = {r["encoder"]: r["value"] for r in ft if r["dataset"] == bench and r["split"] == "val"
                 and r["config"]["trainer"]["max_steps"] == 9 and not (r.get("facts") or {}).get("resumed_from_step")}
        if len(rung0) == len(truth_mean):
            rows["rung0@9"] = [tau(rung0, truth_mean)]
        for seed in sorted({r["seed"] for r in full}):
            at = {r["encoder"]: val_curve(root, r["experiment"]).get(args.rung) for r in full if r["seed"] == seed}
            if any(v is None for v in at.values()):
                continue
            rows.setdefault(f"all@{args.rung}", []).append(tau(at, truth_mean))
            if score:
                keep = sorted(score, key=lambda e: -score[e])[:len(score) // 2]
                pred = {e: 10 + at[e] if e in keep else score[e] for e in score}  # the kept four first (acc <= 1)
                rows.setdefault(f"score-top-half@{args.rung}", []).append(tau(pred, truth_mean))
        print(f"{bench}: full order {' > '.join(sorted(truth_mean, key=lambda e: -truth_mean[e]))}")
        for name, taus in rows.items():
            print(f"  {name:<22} τ {np.mean(taus):+.3f}  (per seed {', '.join(f'{t:+.3f}' for t in taus)})")


if __name__ == "__main__":
    main()

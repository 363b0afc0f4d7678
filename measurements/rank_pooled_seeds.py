"""What a gate-rank call that bought several proxy seeds would rank, from single-seed calls already made: the mean
of their tier rankings (each call's ``tier_ranking.csv``), graded against the stored truth as gate-rank grades a call
(Kendall τ of the tier mean rank over the validated benchmarks; the leave-one-seed-out ceiling), beside each call's own
τ and the calls' pairwise agreement. The calls must share the pool, the tier and the plan (docs/ranking.md: pools C
and E, seeds 100-102); pooling their rankings is what ``proxy_seeds`` with a budget for all of them would do up to the
no-skill guard's reading of every seed at once.

    .venv/bin/python measurements/rank_pooled_seeds.py --root ROOT --pool C REPORT_DIR REPORT_DIR REPORT_DIR
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rank_validation import POOLS  # noqa: E402 - the pools docs/ranking.md measures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="the truth's root (rankval.yaml and results/records.jsonl)")
    ap.add_argument("--pool", choices=sorted(POOLS), required=True)
    ap.add_argument("reports", nargs="+", help="single-seed gate-rank report folders (rank-rankval-*)")
    args = ap.parse_args()
    from gate.analysis.ranks import kendall
    from gate.ranking import complete
    from gate.ranking.grading import leave_one_seed_out
    from gate.ranking.history import from_store
    from gate.tiers.expand import expand_tier, load_tier

    encoders, benchmarks = POOLS[args.pool]
    root = Path(args.root)
    plan = expand_tier(load_tier(str(root / "rankval.yaml")), encoders, root)
    records = [json.loads(line) for line in (root / "results" / "records.jsonl").read_text().splitlines() if line]
    truth = from_store(plan, records, benchmarks, seeds=list(plan.tier.seeds))
    truth_rank = pd.Series(complete.mean_rank(truth.values.loc[encoders, benchmarks].to_numpy(float)), index=encoders)

    def tau(ranking: pd.Series) -> float:
        return kendall(-ranking.reindex(encoders).to_numpy(float), -truth_rank.to_numpy(float))

    rankings = {Path(r).name: pd.read_csv(Path(r) / "tier_ranking.csv").set_index("encoder")["mean_rank"]
                for r in args.reports}
    for name, ranking in rankings.items():
        print(f"{name}: τ {tau(ranking):+.3f}")
    pooled = pd.concat(rankings.values(), axis=1).mean(axis=1)
    pairs = [kendall(-a.reindex(encoders).to_numpy(float), -b.reindex(encoders).to_numpy(float))
             for a, b in itertools.combinations(rankings.values(), 2)]
    ceiling = leave_one_seed_out(truth.seeds, benchmarks, encoders, pooled)
    print(f"mean of the {len(rankings)} rankings: τ {tau(pooled):+.3f}; against each truth seed's leave-one-out "
          f"{ceiling['v2_vs_rest']:.3f}, ceiling {ceiling['one_seed_vs_rest']:.3f}, ratio {ceiling['ratio']:.2f}; "
          f"single calls' mean τ {np.mean([tau(r) for r in rankings.values()]):+.3f}; pairwise agreement "
          f"{np.mean(pairs):.2f}")


if __name__ == "__main__":
    main()

"""gate-rank's cost model, measured leave-one-run-out on a results store: for every stored fine-tuning run, the model
fitted on every *other* run predicts its wall seconds from what is known before it runs (steps, validations,
parameters, pixels, batch, family), beside what it took. Two settings: ``same pair allowed`` (the model may use other
runs of the same encoder × benchmark, e.g. other seeds — what a rerun or a later seed sees), ``new pair`` (every
run of that encoder × benchmark left out too — what gate-rank sees before it has run a pair) and ``new family`` (every
run of its task family left out — what gate-rank sees before it has run a benchmark of that family). Prints the median
and 90th percentile of |predicted/actual − 1| and the sum of predicted over the sum of actual, per basis, and the
margins a warm plan on this store would fit its blocks at (gate.ranking.cost.CostModel.margin).

    .venv/bin/python measurements/rank_cost_model.py --root /tmp/rv/a
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gate.ranking.cost import CostModel, observation, test_passes  # noqa: E402
from gate.ranking.pricing import features_of  # noqa: E402
from gate.settings import default_path  # noqa: E402


def runs(records_path: Path) -> list[tuple]:
    """(features, facts, observation) of every stored fine-tuning run with timed steps."""
    seen, out = set(), []
    for line in records_path.read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") != "finetune" or r.get("experiment") in seen:
            continue
        seen.add(r["experiment"])
        facts = r.get("facts") or {}
        if not isinstance(facts.get("params"), (int, float)) or not isinstance(facts.get("wall_seconds"), (int, float)):
            continue
        feats = features_of(r.get("config") or {}, str(r["encoder"]), str(r["dataset"]), float(facts["params"]))
        tests = test_passes(r.get("config") or {}, facts.get("split_rows"))
        obs = observation(feats, facts, tests) if feats is not None else None
        if obs is not None and isinstance(facts.get("global_step"), (int, float)):
            out.append((feats, {**facts, "test_passes": tests}, obs))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="an output root (its results/records.jsonl)")
    args = ap.parse_args()
    path = default_path("results", args.root)
    if not path.is_file():
        print(f"rank_cost_model: {path}: no such file", file=sys.stderr)
        return 2
    data = runs(path)
    if len(data) < 4:
        print(f"rank_cost_model: {path} holds {len(data)} timed fine-tuning run(s); at least 4 are needed", file=sys.stderr)
        return 2
    print(f"{len(data)} runs from {path}")
    for setting in ("same pair allowed", "new pair", "new family"):
        rows: dict[str, list[tuple[float, float]]] = {}
        for i, (feats, facts, _) in enumerate(data):
            others = [o for j, (f, _, o) in enumerate(data) if j != i and (
                setting == "same pair allowed"
                or (setting == "new pair" and (f.encoder, f.benchmark) != (feats.encoder, feats.benchmark))
                or (setting == "new family" and f.family != feats.family))]
            costs = CostModel(others).predict(feats)
            steps = float(facts["global_step"]) - float(facts.get("resumed_from_step") or 0)
            predicted = costs.seconds(steps, float(facts.get("validations") or 0), facts["test_passes"])
            rows.setdefault(costs.basis, []).append((predicted, float(facts["wall_seconds"])))
        for basis, pairs in sorted(rows.items()):
            p, a = np.array(pairs).T
            err = np.abs(p / a - 1)
            print(f"  {setting:<18} basis {basis:<10} runs {len(pairs):>4}  |pred/actual − 1| median "
                  f"{np.median(err):.3f}, p90 {np.quantile(err, 0.9):.3f}; Σpred/Σactual {p.sum() / a.sum():.3f}")
        everything = [x for pairs in rows.values() for x in pairs]
        p, a = np.array(everything).T
        print(f"  {setting:<18} all              runs {len(everything):>4}  Σpred/Σactual {p.sum() / a.sum():.3f}"
              f"{'' if math.isfinite(p.sum()) else ' (some predictions not finite)'}")
    print("  " + CostModel([o for _, _, o in data]).margin_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())

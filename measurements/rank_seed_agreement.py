"""How far apart two seeds' tier rankings are, measured on a stored ground truth: for each training seed, the tier
ranking (mean rank over the benchmarks, as gate-rank's ``seeds.csv`` ranks each proxy seed) from (a) the full runs'
final test values and (b) their validation curves at each point a run validated; then the mean pairwise Kendall τ
between the seeds and Kendall's W (:func:`gate.ranking.prior.agreement`, :func:`~gate.ranking.prior.kendalls_w`).

gate-rank v2's goal "proxy seeds agree ≥ 0.90" is bounded by (a): seeds of full runs that agree less cannot be
expected to agree more at a fraction of the steps. (b) stands in for proxy runs of that length — the loaders are
seeded, so a run's first steps are a shorter run's, but a proxy run's learning-rate schedule spans its own steps, so
(b) approximates a proxy run rather than reproducing one.

    .venv/bin/python measurements/rank_seed_agreement.py --root /tmp/rv/a
    .venv/bin/python measurements/rank_seed_agreement.py --root /tmp/rv/a --benchmarks fashion_mnist,fmnist_multilabel
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "measurements"))

from rank_extrapolation import curve_runs  # noqa: E402

from gate.metrics import monitor_mode  # noqa: E402
from gate.ranking import prior  # noqa: E402
from gate.settings import default_path  # noqa: E402


def groups(path: Path) -> dict[tuple[str, int], dict[str, dict]]:
    """(benchmark, seed) → encoder → {"curve", "final", "hib"} of the full runs only: a store that also holds
    shorter runs of the same seeds (a proxy's, a v1 call's) keeps, per benchmark, the runs of its longest length."""
    val, test = curve_runs(path)
    longest: dict[str, int] = {}
    for r in val.values():
        longest[r["dataset"]] = max(longest.get(r["dataset"], 0), int(r["facts"].get("global_step") or 0))
    out: dict[tuple[str, int], dict[str, dict]] = {}
    for exp, r in val.items():
        final = (test.get(exp) or {}).get(str(r["metric"]))
        if final is None or int(r["facts"].get("global_step") or 0) != longest[r["dataset"]]:
            continue
        out.setdefault((str(r["dataset"]), int(r["seed"])), {})[str(r["encoder"])] = {
            "curve": [(float(s), float(v)) for s, v in r["facts"]["val_curve"]], "final": final,
            "hib": monitor_mode(str(r["metric"])) == "max"}
    return out


def tier_ranking(values: dict[str, dict[str, float]], encoders: list[str]) -> pd.Series | None:
    """benchmark → encoder → value (higher is better) as the mean rank over the benchmarks (None: a cell missing)."""
    if any(e not in values[b] for b in values for e in encoders):
        return None
    return prior.combine({b: prior.ranks(values[b], encoders) for b in values})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--benchmarks", default=None, help="comma-separated (default: every benchmark of the store)")
    args = ap.parse_args()
    path = default_path("results", args.root)
    if not path.is_file():
        print(f"rank_seed_agreement: {path}: no such file", file=sys.stderr)
        return 2
    data = groups(path)
    benches = args.benchmarks.split(",") if args.benchmarks else sorted({b for b, _ in data})
    seeds = sorted({s for b, s in data if b in benches})
    encoders = sorted(set.intersection(*(set(data[(b, s)]) for b in benches for s in seeds if (b, s) in data)))
    if len(seeds) < 2 or len(encoders) < 3:
        print(f"rank_seed_agreement: {path} has {len(seeds)} seed(s) and {len(encoders)} encoder(s) in common on "
              f"{benches}: need 2 and 3", file=sys.stderr)
        return 2
    print(f"{path}: {len(encoders)} encoders × {benches} × seeds {seeds}")
    print(f"{'from':<28} {'pairwise τ':>10} {'Kendall W':>10}")

    def line(label: str, pick) -> None:
        rankings = [tier_ranking({b: {e: pick(data[(b, s)][e]) for e in data.get((b, s), {})} for b in benches},
                                 encoders) for s in seeds]
        if any(r is None for r in rankings):
            print(f"{label:<28} {'—':>10} {'—':>10}  (a run lacks it)")
            return
        print(f"{label:<28} {prior.agreement(rankings):>10.3f} {prior.kendalls_w(rankings):>10.3f}")

    def sign(run) -> float:
        return 1.0 if run["hib"] else -1.0

    line("full runs' test values", lambda run: sign(run) * run["final"])
    steps = sorted({s for g in data.values() for run in g.values() for s, _ in run["curve"]})
    for step in steps:
        line(f"validation at step {step:g}",
             lambda run, step=step: next((sign(run) * v for s, v in run["curve"] if s == step), float("nan")))
    return 0


if __name__ == "__main__":
    sys.exit(main())

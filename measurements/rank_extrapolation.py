"""gate-rank's curve extrapolation, measured on stored full runs: for every (benchmark, seed) of a results store
whose encoders' full runs recorded their validation curve (``facts.val_curve``), the encoders are ranked at
r = 1/4, 1/3, 2/3 of the run's steps by (a) the raw value of the curve's last point at or before r × steps and
(b) the curve up to there extrapolated to the run's last step (:func:`gate.ranking.curves.extrapolate`, as
gate-rank reads a proxy run), each against the ranking by the runs' final test value of the same metric. Prints
the mean Kendall τ over the (benchmark, seed) groups per r, and how often (b) fell back to the last value (fewer
than 3 points).

    .venv/bin/python measurements/rank_extrapolation.py --root /tmp/rv/x

A store whose runs validate every few steps is needed (``rank_validation.py --truth-only --val-every 8``).
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

from gate.analysis.ranks import kendall  # noqa: E402
from gate.metrics import lookup, monitor_mode  # noqa: E402
from gate.ranking.curves import extrapolate  # noqa: E402
from gate.settings import default_path  # noqa: E402

FRACTIONS = (1 / 4, 1 / 3, 2 / 3)


def curve_runs(path: Path) -> tuple[dict[str, dict], dict[str, dict[str, float]]]:
    """A store's fine-tuning runs that recorded a validation curve: experiment → its val record, and experiment →
    metric → test value."""
    val, test = {}, {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") != "finetune":
            continue
        if r.get("split") == "val" and (r.get("facts") or {}).get("val_curve"):
            val[r["experiment"]] = r
        elif r.get("split") == "test":
            test.setdefault(r["experiment"], {})[str(r["metric"])] = float(r["value"])
    return val, test


def groups(path: Path) -> dict[tuple[str, int], dict[str, dict]]:
    """(benchmark, seed) → encoder → {"curve", "steps", "final", "hib", "low", "high"}: each run's val curve and its
    final test value of the monitored metric."""
    val, test = curve_runs(path)
    out: dict[tuple[str, int], dict[str, dict]] = {}
    for exp, r in val.items():
        metric = str(r["metric"]).split("/", 1)[-1]
        final = (test.get(exp) or {}).get(metric)
        if final is None or not math.isfinite(final):
            continue
        known = lookup(metric)
        steps = int((r.get("facts") or {}).get("global_step") or max(s for s, _ in r["facts"]["val_curve"]))
        out.setdefault((str(r["dataset"]), int(r["seed"])), {})[str(r["encoder"])] = {
            "curve": [(float(s), float(v)) for s, v in r["facts"]["val_curve"]], "steps": steps, "final": final,
            "hib": monitor_mode(str(r["metric"])) == "max",
            "low": known.low if known else -math.inf, "high": known.high if known else math.inf}
    return {k: v for k, v in out.items() if len(v) >= 3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    path = default_path("results", args.root)
    if not path.is_file():
        print(f"rank_extrapolation: {path}: no such file", file=sys.stderr)
        return 2
    data = groups(path)
    if not data:
        print(f"rank_extrapolation: {path} holds no (benchmark, seed) with 3+ encoders' curves and test values",
              file=sys.stderr)
        return 2
    points = sorted({len(run["curve"]) for g in data.values() for run in g.values()})
    print(f"{len(data)} (benchmark, seed) group(s) from {path}; curve points per run: {points}")
    print(f"{'r':>6} {'raw τ':>8} {'extrapolated τ':>15} {'fell back':>10}  groups")
    for r in FRACTIONS:
        raw_t, ext_t, fell, n = [], [], 0, 0
        for _, runs in sorted(data.items()):
            encs = sorted(runs)
            raw, ext, final = [], [], []
            for e in encs:
                run = runs[e]
                cut = [(s, v) for s, v in run["curve"] if s <= r * run["steps"] + 1e-9]
                sign = 1.0 if run["hib"] else -1.0
                if not cut:
                    raw.append(math.nan)
                    ext.append(math.nan)
                else:
                    raw.append(sign * cut[-1][1])
                    x = extrapolate(cut, run["steps"], higher_is_better=run["hib"], low=run["low"], high=run["high"])
                    fell += x.method != "ensemble"
                    n += 1
                    ext.append(sign * x.value)
                final.append(sign * run["final"])
            if all(math.isfinite(v) for v in raw + ext):
                raw_t.append(kendall(np.array(raw), np.array(final)))
                ext_t.append(kendall(np.array(ext), np.array(final)))
        shown = [f"{np.mean(t):.3f}" if t else "—" for t in (raw_t, ext_t)]  # — : no curve point by r × steps
        print(f"{r:6.3f} {shown[0]:>8} {shown[1]:>15} {fell:>4}/{n:<5}  {len(raw_t)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

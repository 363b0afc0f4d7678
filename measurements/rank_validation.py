"""gate-rank measured offline: a pool of 8 encoders on demo stand-ins, a ground truth of full runs (``--seeds``
of them), then gate-rank at a budget of 0.1 beside the baselines, and the table (docs/ranking.md).

    .venv/bin/python measurements/rank_validation.py --root /tmp/rank_validation3 --seeds 3 \
        --benchmarks digits fashion_mnist fmnist_multilabel fmnist_pairs fmnist_relational \
        --variant "seed=3" --variant "seed=3 max_rungs=null proxy_benchmarks=null" --variant "seed=3 proxy_benchmarks=null"

Each ``--variant`` is one gate-rank call with those overrides (``seed=3``: a proxy seed outside the truth's).

Every stage goes through the results store under ``--root``: rerunning the script after a kill trains only what
is missing. Sizes are set for a 2-core CPU (quiet: one benchmark's ground truth, 8 encoders × 3 seeds, ~8 min
wall with two workers; each gate-rank pass ~5 min); raise ``--steps``, ``--benchmarks`` and the data caps on a
bigger machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

POOL = ["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2", "resnet18_scratch", "resnet50_scratch",
        "vit_tiny_scratch", "minilm", "resemblyzer"]
DEMO_ENTRIES = {e["dataset"]: e for e in (x if isinstance(x, dict) else {"dataset": x} for x in yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "conf" / "tier" / "demo.yaml").read_text())["benchmarks"])}
BASELINES = ["knn_acc", "linear_probe_acc", "sfda", "etran_energy", "logme", "ncti"]


def tier_yaml(args) -> str:
    lines = ["name: rankval", f"seeds: [{', '.join(str(s) for s in range(args.seeds))}]", "score: false",
             "overrides:", "  logger: csv", "  image_size: 32", "  ensembles: [1]", f"  trainer.max_steps: {args.steps}",
             f"  trainer.val_check_interval: {args.val_every}", f"  data.batch_size: {args.batch}",
             f"  data.max_train_samples: {args.train}", f"  data.max_val_samples: {args.val}",
             f"  data.max_test_samples: {args.test}", "  callbacks.count_flops: false", "  callbacks.visuals.enabled: false",
             "  callbacks.grad_norms.enabled: false", "score_overrides:",
             f"  max_samples: {args.score_samples}", "benchmarks:"]
    for b in args.benchmarks:  # a demo-tier benchmark keeps that tier's own entry overrides (few-shot episode sizes)
        own = DEMO_ENTRIES.get(b, {}).get("overrides")
        lines.append(f"  - {{dataset: {b}, overrides: {json.dumps(own)}}}" if own else f"  - {b}")
    return "\n".join(lines) + "\n"


def run(cmd: list[str]) -> None:
    print("$", " ".join(cmd), flush=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, check=False)
    print(f"[{time.monotonic() - started:.0f}s, exit {proc.returncode}]", flush=True)
    if proc.returncode not in (0,):
        sys.exit(proc.returncode)


def ground_truth_in_process(tier: Path, encoders: list[str], root: Path, shard: int = 0, of: int = 1) -> None:
    import warnings

    from gate.cli.common import quiet_lightning
    from gate.engine.training.finetune import run_finetune
    from gate.tiers.expand import expand_tier, hydra_compose_context, load_tier

    quiet_lightning()
    plan = expand_tier(load_tier(str(tier)), encoders, root)
    plan.mark_done(plan.store())
    print(f"ground truth: {len(plan.experiments)} experiments, {len(plan.done)} already stored", flush=True)
    pending = plan.pending[shard::of]
    for i, exp in enumerate(pending, 1):
        started = time.monotonic()
        with hydra_compose_context(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from hydra import compose

            cfg = compose("run", overrides=[*exp.overrides, "trainer.enable_progress_bar=false"])
        result = run_finetune(cfg)
        print(f"  [{shard}:{i}/{len(pending)}] {exp.label}: {time.monotonic() - started:.0f}s "
              f"{ {k: round(v, 3) for k, v in result.metrics.items()} }", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/rank_validation")
    ap.add_argument("--encoders", nargs="+", default=POOL)
    ap.add_argument("--benchmarks", nargs="+", default=["digits", "fashion_mnist"])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=96)
    ap.add_argument("--val-every", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--train", type=int, default=1000)
    ap.add_argument("--val", type=int, default=200)
    ap.add_argument("--test", type=int, default=400)
    ap.add_argument("--score-samples", type=int, default=500)
    ap.add_argument("--truth-only", action="store_true", help="train the ground truth and stop (no gate-rank)")
    ap.add_argument("--budgets", nargs="+", type=float, default=[0.1])
    ap.add_argument("--in-process", action=argparse.BooleanOptionalAction, default=True,
                    help="run the ground truth in this process (default) instead of through gate-tier launch=local")
    ap.add_argument("--workers", type=int, default=2, help="ground-truth processes in parallel")
    ap.add_argument("--shard", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads (1: no spinning on a shared CPU)")
    ap.add_argument("--scores", nargs="*", default=[], help="scores seeding the proxy's first rung (a second run)")
    ap.add_argument("--variant", action="append", default=None,
                    help="gate-rank overrides of one proxy variant, e.g. 'seed=3 max_rungs=1' (repeatable; "
                         "default: one variant with none)")
    args = ap.parse_args()
    import os

    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # this script's own processes only (gate-rank inherits it)
    import torch

    torch.set_num_threads(args.threads)
    root = Path(args.root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    tier = root / "rankval.yaml"
    tier.write_text(tier_yaml(args))
    bin_dir = Path(sys.executable).parent
    started = time.monotonic()
    # 1. the ground truth: the full tier (every encoder × benchmark × seed) — the very experiments gate-tier runs
    #    (same expansion, same ids), here in this one process: on a starved CPU the per-run start-up counts
    if args.shard is not None:
        ground_truth_in_process(tier, args.encoders, root, args.shard, args.workers)
        return
    if args.in_process and args.workers > 1:  # one process per worker, each a slice of the pending experiments
        procs = [subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--shard", str(k)]) for k in range(args.workers)]
        if any(p.wait() for p in procs):
            sys.exit("a ground-truth worker failed")
        ground_truth_in_process(tier, args.encoders, root)  # anything a worker left (nothing, normally)
    elif args.in_process:
        ground_truth_in_process(tier, args.encoders, root)
    else:
        run([str(bin_dir / "gate-tier"), f"tier={tier}", f"encoder={','.join(args.encoders)}", f"paths.root={root}",
             "launch=local", "score=false", "report=false"])
    truth_minutes = (time.monotonic() - started) / 60
    if args.truth_only:
        print(f"ground truth stored under {root} ({truth_minutes:.1f} min wall)")
        return
    # 2. gate-rank at each budget, never looking at the full runs (use_full_runs=false), then validated
    results = {}
    for budget in args.budgets:
        for variant in (args.variant or [""]):
            for seeds in ([[]] + ([args.scores] if args.scores else [])):
                cmd = [str(bin_dir / "gate-rank"), f"tier={tier}", f"encoder={','.join(args.encoders)}",
                       f"paths.root={root}", f"budget={budget}", "use_full_runs=false",
                       f"baseline_scores=[{','.join(BASELINES)}]", f"scores=[{','.join(seeds)}]", *variant.split()]
                run(cmd)
                label = ", ".join(x for x in (variant, "seeded by " + ",".join(seeds) if seeds else "") if x)
                results[(budget, label)] = sorted((root / "reports").glob("rank-rankval-*"),
                                                  key=lambda p: (p / "ledger.json").stat().st_mtime)[-1]
    print(f"\nground truth: {len(args.encoders)} encoders × {len(args.benchmarks)} benchmarks × {args.seeds} seeds, "
          f"{args.steps} steps of batch {args.batch} ({truth_minutes:.1f} min wall incl. anything already stored)")
    from gate.ranking.budget import minutes, shown
    from gate.ranking.pipeline import summary_table

    for (budget, seeds), out in results.items():
        validation = pd.read_csv(out / "validation.csv")
        cost = pd.read_csv(out / "cost.csv")
        ceiling = json.loads((out / "ceiling.json").read_text()) if (out / "ceiling.json").exists() else {}
        table = summary_table(validation, ceiling)
        meta = json.loads((out / "ledger.json").read_text()) if (out / "ledger.json").exists() else {}
        print(f"\n## budget {budget}{' (' + seeds + ')' if seeds else ''}: proxy spent "
              f"{cost['seconds'].sum() / 60:.1f} min = {shown(meta.get('fraction'))} of the full tier's "
              f"{minutes(meta.get('full_seconds'))} ({shown(meta.get('estimated_fraction'))} "
              f"of its estimate from the proxy's step times); seed-to-seed ceiling τ: tier "
              f"{shown(table.attrs['ceiling_tier'])}, mean per benchmark {shown(table.attrs['ceiling_mean_bench'])}\n")
        print("| method | scope | Kendall τ [95% CI] | weighted τ_w [95% CI] | top-1 regret [95% CI] | degenerate |")
        print("|---|---|---|---|---|---|")
        for r in validation.itertuples(index=False):
            if r.scope == "tier" and validation["scope"].nunique() == 2:
                continue  # one benchmark: the tier row repeats it (without an interval over benchmarks)
            note = getattr(r, "degenerate", "")  # gate-rank's mark on a baseline score (empty: NaN in the csv)
            print(f"| {r.method} | {r.scope} | {r.tau:+.3f} [{r.tau_lo:+.2f}, {r.tau_hi:+.2f}] | "
                  f"{r.tau_w:+.3f} [{r.tau_w_lo:+.2f}, {r.tau_w_hi:+.2f}] | {r.regret:.3f} [{r.regret_lo:.2f}, {r.regret_hi:.2f}] | "
                  f"{note if isinstance(note, str) else ''} |")
    print(f"\ntotal {(time.monotonic() - started) / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()

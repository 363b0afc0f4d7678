"""gate-rank measured offline: a pool of encoders on demo stand-ins, a ground truth of full runs (``--seeds`` of
them), then gate-rank (v2) at a budget beside its baselines, and the table (docs/ranking.md).

    .venv/bin/python measurements/rank_validation.py --root /tmp/rv_a --pool A --seeds 3 --truth-only
    .venv/bin/python measurements/rank_validation.py --root /tmp/rv_a --pool A --seeds 3 \
        --variant "" --variant "proxy_benchmarks=first" --proxy-seeds 100 101 102

``--pool`` names one of the pools docs/ranking.md measures (A–E: their encoders and benchmarks); ``--encoders``
and ``--benchmarks`` give another, ``--pool-file`` reads them from a YAML file (``encoders: [...]``, ``benchmarks:
[...]``). Each ``--variant`` is one gate-rank call with those overrides; ``--proxy-seeds`` are the proxy's (outside the
truth's seeds).

Every stage goes through the results store under ``--root``: rerunning the script after a kill trains only what
is missing. Sizes are set for a 2-core CPU (one pool's ground truth, 8 encoders × 5 benchmarks × 3 seeds, ~45 min
wall with two workers); raise ``--steps`` and the data caps on a bigger machine.
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

#: The pools of docs/ranking.md: A (the v1 design pool), B and C (v1's independent checks), D and E (pre-registered for
#: v2; E on a GPU, with the no-skill guard).
POOLS = {
    "A": (["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2", "resnet18_scratch", "resnet50_scratch",
           "vit_tiny_scratch", "minilm", "resemblyzer"],
          ["digits", "fashion_mnist", "fmnist_multilabel", "fmnist_pairs", "fmnist_relational"]),
    "B": (["efficientnet_lite0", "efficientnet_lite2", "efficientnetv2_scratch", "flexivit_scratch", "vit_base_scratch",
           "resnet18_scratch", "minilm", "resemblyzer"],
          ["digits", "fashion_mnist", "fmnist_multilabel", "fmnist_pairs", "fmnist_relational"]),
    "C": (["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2", "resnet18_scratch", "resnet50_scratch",
           "vit_tiny_scratch", "efficientnetv2_scratch", "vit_base_scratch"],
          ["fmnist_seg", "fmnist_volume", "fmnist_video", "fmnist_video_speed"]),
    "D": (["efficientnet_lite1", "efficientnet_lite2", "resnet50_scratch", "efficientnetv2_scratch", "vit_tiny_scratch",
           "flexivit_scratch", "minilm", "resemblyzer"],
          ["fashion_mnist", "fmnist_multilabel", "fmnist_pairs", "fmnist_relational", "fmnist_video"]),
    "E": (["efficientnet_lite0", "efficientnet_lite2", "resnet18_scratch", "efficientnetv2_scratch", "vit_tiny_scratch",
           "vit_base_scratch", "flexivit_scratch", "resemblyzer"],
          ["digits", "fmnist_fewshot", "fmnist_multilabel", "fmnist_video", "fmnist_video_speed"]),
}
POOL = POOLS["A"][0]
DEMO_ENTRIES = {e["dataset"]: e for e in (x if isinstance(x, dict) else {"dataset": x} for x in yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "conf" / "tier" / "demo.yaml").read_text())["benchmarks"])}
BASELINES = ["knn_acc", "linear_probe_acc", "logme"]
#: Entry overrides a benchmark needs under this protocol: the few-shot stand-in's training split is 5 classes × 300
#: images and its cap keeps whole classes, so the protocol's 1,000 would leave 3 of the 5 ways an episode needs.
PROTOCOL_ENTRY = {"fmnist_fewshot": {"data.max_train_samples": None}}


def tier_yaml(args) -> str:
    lines = ["name: rankval", f"seeds: [{', '.join(str(s) for s in range(args.seeds))}]", "score: false",
             "overrides:", "  logger: csv", "  image_size: 32", "  ensembles: [1]", f"  trainer.max_steps: {args.steps}",
             f"  trainer.val_check_interval: {args.val_every}", f"  data.batch_size: {args.batch}",
             f"  data.max_train_samples: {args.train}", f"  data.max_val_samples: {args.val}",
             f"  data.max_test_samples: {args.test}", "  callbacks.count_flops: false", "  callbacks.visuals.enabled: false",
             "  callbacks.grad_norms.enabled: false", "score_overrides:",
             f"  max_samples: {args.score_samples}", "benchmarks:"]
    for b in args.benchmarks:  # a demo-tier benchmark keeps that tier's own entry overrides (few-shot episode sizes)
        own = {**(DEMO_ENTRIES.get(b, {}).get("overrides") or {}), **PROTOCOL_ENTRY.get(b, {})}
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
    ap.add_argument("--pool", choices=sorted(POOLS), default=None, help="one of docs/ranking.md's pools")
    ap.add_argument("--pool-file", default=None, help="a YAML file with encoders: [...] and benchmarks: [...]")
    ap.add_argument("--encoders", nargs="+", default=None)
    ap.add_argument("--benchmarks", nargs="+", default=None)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=96)
    ap.add_argument("--val-every", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--train", type=int, default=1000)
    ap.add_argument("--val", type=int, default=200)
    ap.add_argument("--test", type=int, default=400)
    ap.add_argument("--score-samples", type=int, default=500)
    ap.add_argument("--truth-only", action="store_true", help="train the ground truth and stop (no gate-rank)")
    ap.add_argument("--budgets", nargs="+", type=float, default=[0.1])
    ap.add_argument("--proxy-seeds", nargs="+", type=int, default=[100, 101, 102])
    ap.add_argument("--workers", type=int, default=2, help="ground-truth processes in parallel")
    ap.add_argument("--shard", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads (1: no spinning on a shared CPU)")
    ap.add_argument("--variant", action="append", default=None,
                    help="gate-rank overrides of one call, e.g. 'proxy_benchmarks=first' (repeatable; default: one "
                         "call with gate-rank's defaults)")
    args = ap.parse_args()
    encoders, benchmarks = POOLS[args.pool] if args.pool else POOLS["A"]
    if args.pool_file:
        doc = yaml.safe_load(Path(args.pool_file).read_text())
        encoders, benchmarks = doc["encoders"], doc["benchmarks"]
    args.encoders = args.encoders or encoders
    args.benchmarks = args.benchmarks or benchmarks
    import os

    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # this script's own processes only (gate-rank inherits it)
    import torch

    torch.set_num_threads(args.threads)
    root = Path(args.root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    tier = root / "rankval.yaml"
    tier.write_text(tier_yaml(args))
    started = time.monotonic()
    # 1. the ground truth: the full tier (every encoder × benchmark × seed) — the very experiments gate-tier runs
    if args.shard is not None:
        ground_truth_in_process(tier, args.encoders, root, args.shard, args.workers)
        return
    if args.workers > 1:  # one process per worker, each a slice of the pending experiments
        procs = [subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--shard", str(k)]) for k in range(args.workers)]
        if any(p.wait() for p in procs):
            sys.exit("a ground-truth worker failed")
    ground_truth_in_process(tier, args.encoders, root)  # anything a worker left (nothing, normally)
    truth_minutes = (time.monotonic() - started) / 60
    if args.truth_only:
        print(f"ground truth stored under {root} ({truth_minutes:.1f} min wall)")
        return
    # 2. gate-rank at each budget, never ranking a benchmark by its stored full runs (use_full_runs=false), validated
    results = {}
    for budget in args.budgets:
        for variant in (args.variant or [""]):
            cmd = [sys.executable, "-m", "gate.cli.rank", f"tier={tier}", f"encoder={','.join(args.encoders)}",
                   f"paths.root={root}", f"budget={budget}", "use_full_runs=false",
                   f"baseline_scores=[{','.join(BASELINES)}]",
                   f"proxy_seeds=[{','.join(str(s) for s in args.proxy_seeds)}]", *variant.split()]
            run(cmd)
            results[(budget, variant)] = sorted((root / "reports").glob("rank-rankval-*"),
                                                key=lambda p: (p / "ledger.json").stat().st_mtime)[-1]
    print(f"\nground truth: {len(args.encoders)} encoders × {len(args.benchmarks)} benchmarks × {args.seeds} seeds, "
          f"{args.steps} steps of batch {args.batch} ({truth_minutes:.1f} min wall incl. anything already stored)")
    for (budget, variant), out in results.items():
        summarise(out, f"budget {budget}{' ' + variant if variant else ''}")
    print(f"\ntotal {(time.monotonic() - started) / 60:.1f} min", flush=True)


def summarise(out: Path, label: str) -> None:
    """One gate-rank call's measured rows: τ and the rest per method, the ceiling, the paired table, the cost."""
    from gate.ranking.budget import shown

    ledger = json.loads((out / "ledger.json").read_text())
    ceiling = json.loads((out / "ceiling.json").read_text()) if (out / "ceiling.json").exists() else {}
    ranking = pd.read_csv(out / "tier_ranking.csv")
    seeds = pd.read_csv(out / "seeds.csv", index_col=0) if (out / "seeds.csv").exists() else pd.DataFrame()
    print(f"\n## {label}: the {ranking['source'].iloc[0]}'s ranking; spent {shown(ledger.get('fraction'))} of the full "
          f"tier (planned {shown(ledger.get('planned_fraction'))}, spent/planned {shown(ledger.get('spent_over_planned'))}); "
          f"{seeds.shape[1]} proxy seed(s); ceiling (one seed vs the rest) {shown(ceiling.get('one_seed_vs_rest'))}, "
          f"v2 vs the same {shown(ceiling.get('v2_vs_rest'))}, ratio {shown(ceiling.get('ratio'))}\n")
    if (out / "selection.csv").exists():
        sel = pd.read_csv(out / "selection.csv")
        ran = sel.loc[sel["ran"], "benchmark"] if "ran" in sel else []
        print("chosen: " + ", ".join(sel.loc[sel["chosen"], "benchmark"]) + "; ran: " + ", ".join(ran) + "\n")
    if (out / "validation.csv").exists():
        print("| method | τ | τ_w | top-1 regret (tier mean) | top-3 recall |\n|---|---|---|---|---|")
        for r in pd.read_csv(out / "validation.csv").itertuples(index=False):
            print(f"| {r.method} | {r.tau:+.3f} | {r.tau_w:+.3f} | {r.regret:.3f} | {r.top3_recall:.2f} |")
    if (out / "paired.csv").exists():
        print("\n| v2 − baseline | τ difference [95%] | P(v2 ≤ baseline) |\n|---|---|---|")
        for r in pd.read_csv(out / "paired.csv").itertuples(index=False):
            print(f"| {r.baseline} | {r.tau_difference:+.3f} [{r.lo:+.2f}, {r.hi:+.2f}] | {r.p_v2_not_better:.2f} |")


if __name__ == "__main__":
    main()

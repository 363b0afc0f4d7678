"""gate-rank's plan under a small budget, measured: the tiny tier (fashion_mnist + digits, 100-step runs, one seed,
three encoders) ranked ``--times`` times, each in a fresh output root (a cold cost model, nothing stored), the last
``--loaded`` of them beside a process that keeps one core busy; then a rerun of the last root (everything read back
from the store); then, with ``--budgets``, one call per budget on a root of your choice (e.g. a pool's ground truth).
Prints per call: exit code, whether it refused, its plan line, the compute line and the wall seconds.

    .venv/bin/python measurements/rank_budget_robustness.py --times 10 --loaded 1
    .venv/bin/python measurements/rank_budget_robustness.py --times 0 --budgets 0.005 0.02 0.05 0.1 0.2 \
        --root /tmp/rv_d --tier /tmp/rv_d/rankval.yaml --encoders a,b,c,...
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
GATE_RANK = [sys.executable, "-m", "gate.cli.rank"]  # the interpreter it runs in (a GPU host has no console scripts)
TINY = {"name": "tiny100", "seeds": [0], "score": False,
        "overrides": {"logger": "csv", "image_size": 32, "ensembles": [1], "trainer.max_steps": 100,
                      "trainer.val_check_interval": 25, "data.batch_size": 16, "data.max_train_samples": 1000,
                      "data.max_val_samples": 200, "data.max_test_samples": 400, "callbacks.count_flops": False,
                      "callbacks.visuals.enabled": False, "callbacks.grad_norms.enabled": False},
        "benchmarks": ["fashion_mnist", "digits"]}
POOL = "efficientnet_lite0,resnet18_scratch,vit_tiny_scratch"


def _burn(stop_at: float) -> None:
    x = 0
    while time.monotonic() < stop_at:
        x = (x * 31 + 7) % 1_000_003


def call(args: list[str], label: str) -> dict:
    started = time.monotonic()
    proc = subprocess.run([*GATE_RANK, *args], capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - started
    out = proc.stdout + proc.stderr
    plan = next((line for line in out.splitlines() if line.startswith("[gate] plan:")), "(no plan line)")
    compute = next((line for line in out.splitlines() if line.startswith("[gate] compute:")), "(no compute line)")
    refused = proc.returncode != 0 or "error:" in out
    print(f"{label}: exit {proc.returncode}, {'REFUSED' if refused else 'ranked'}, {wall:.0f} s\n  {plan}\n  {compute}",
          flush=True)
    if proc.returncode != 0:
        print("  " + "\n  ".join(out.strip().splitlines()[-5:]), flush=True)
    return {"label": label, "code": proc.returncode, "refused": refused, "wall": wall, "plan": plan, "compute": compute}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--times", type=int, default=10)
    ap.add_argument("--loaded", type=int, default=1, help="of --times, how many run beside a busy core")
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--budgets", nargs="*", type=float, default=[])
    ap.add_argument("--root", default=None, help="for --budgets: the output root (its store)")
    ap.add_argument("--tier", default=None, help="for --budgets: the tier file")
    ap.add_argument("--encoders", default=POOL)
    ap.add_argument("--extra", nargs="*", default=[], help="more gate-rank overrides for every call")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rank_robust_") as tmp:
        tier = Path(tmp) / "tiny100.yaml"
        tier.write_text(yaml.safe_dump(TINY))
        last = None
        for i in range(args.times):
            root = Path(tmp) / f"root{i}"
            burner = None
            if i >= args.times - args.loaded:
                burner = multiprocessing.Process(target=_burn, args=(time.monotonic() + 900,), daemon=True)
                burner.start()
            try:
                rows.append(call([f"tier={tier}", f"encoder={POOL}", f"paths.root={root}", f"budget={args.budget}",
                                  *args.extra], f"fresh {i + 1}{' (beside a busy core)' if burner else ''}"))
            finally:
                if burner is not None:
                    burner.terminate()
            last = root
        if last is not None:
            rows.append(call([f"tier={tier}", f"encoder={POOL}", f"paths.root={last}", f"budget={args.budget}",
                              *args.extra], "rerun of the last root (read back from the store)"))
        for budget in args.budgets:
            rows.append(call([f"tier={args.tier}", f"encoder={args.encoders}", f"paths.root={args.root}",
                              f"budget={budget}", *args.extra], f"budget {budget}"))
    refused = sum(r["refused"] for r in rows)
    print(f"{len(rows)} call(s), {refused} refused or failed")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())

"""Tier expansion, measured and checked: every packaged tier expanded for three encoders (the issue's
efficientnet_lite0, resnet18_scratch, vit_base_scratch), each tier's wall seconds printed, and every experiment's
id and gate-run command line compared with ``tests/data/tier_expansion.json`` (the expansion as it was when each
experiment was composed on its own, before :func:`gate.tiers.expand.with_seed`).

    .venv/bin/python measurements/tier_expansion.py            # every packaged tier
    .venv/bin/python measurements/tier_expansion.py small demo # some
    .venv/bin/python measurements/tier_expansion.py --write    # rewrite the reference (only for a deliberate change)

Exit 1 when any tier differs from the reference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path("/gate-golden-root")   # any absolute path: it is replaced by <root> in the digest
ENCODERS = ("efficientnet_lite0", "resnet18_scratch", "vit_base_scratch")
REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "tier_expansion.json"


def digest(tier: str) -> dict:
    """One tier expanded: each experiment as [id, dataset, encoder, seed, sha256[:16] of its command line with the
    root as <root>], and what was skipped."""
    from gate.tiers.expand import expand_tier, load_tier

    plan = expand_tier(load_tier(tier), ENCODERS, ROOT, check_prepared=lambda _: None, unprepared_is_error=False)
    rows = [[e.id, e.dataset, e.encoder, e.seed,
             hashlib.sha256("\n".join(o.replace(str(ROOT), "<root>") for o in e.overrides).encode()).hexdigest()[:16]]
            for e in plan.experiments]
    return {"skipped": plan.skipped, "experiments": rows}


def main() -> int:
    from gate.tiers.expand import known_tiers

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tiers", nargs="*")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    reference = json.loads(REFERENCE.read_text()) if REFERENCE.is_file() else {}
    got, bad = {}, []
    for tier in args.tiers or known_tiers():
        t0 = time.perf_counter()
        got[tier] = digest(tier)
        same = got[tier] == reference.get(tier)
        bad += [] if same else [tier]
        print(f"{tier}: {len(got[tier]['experiments'])} experiments in {time.perf_counter() - t0:.1f} s; "
              f"{'identical to' if same else 'DIFFERS from'} the reference", flush=True)
    if args.write:
        reference.update(got)
        REFERENCE.write_text(json.dumps(reference, indent=0) + "\n")
        return 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""gate-rank: a pool of encoders ranked on a tier at a fraction of the full tier's compute (conf/rank.yaml).

    gate-rank encoder=efficientnet_lite0,efficientnet_lite1,resnet18_scratch              # demo tier, budget 0.1
    gate-rank tier=small encoder=a,b,c,d budget=0.05 proxy_seeds=7,8

``encoder=a,b,c`` is read as the list ``encoders=[a,b,c]``, ``proxy_seeds=7,8`` as ``proxy_seeds=[7,8]`` and
``tier=<path>.yaml`` as a tier file, before Hydra parses the command line (gate-tier's own rules:
:func:`gate.cli.tier.normalise_args`).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from gate.cli.common import fail, hydra_entry, prepare_process, run_cli
from gate.errors import ConfigError

CMD = "gate-rank"
_LIST_KEYS = {"encoder": "encoders", "encoders": "encoders", "prior": "prior", "static": "static",
              "baseline_scores": "baseline_scores", "proxy_seeds": "proxy_seeds", "history": "history"}


def check(plain: dict[str, Any]) -> None:
    """The request's own problems (budget, pool, scores, history, ...), before the tier is expanded."""
    from gate.ranking.pipeline import check_request

    check_request(plain)


def retired(argv: list[str]) -> str | None:
    """One line for a v1 key on the command line (``seed=3``, ``cost_probe_steps=4``), naming its replacement."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from gate.ranking.pipeline import RETIRED

    for arg in argv:
        key = arg.split("=", 1)[0].lstrip("+~")
        if key in RETIRED and "=" in arg:
            try:  # an override Hydra cannot parse is reported as such (Hydra's line), whatever its key
                OverridesParser.create().parse_overrides([arg])
            except HydraException:
                continue
            return f"{key} was replaced by {RETIRED[key]}"
    return None


def print_result(run, prepared) -> None:
    from gate.ranking.budget import shown
    from gate.ranking.pipeline import compute_line, seed_agreement_line

    result = run.result
    print(f"[gate] predicted ranking on tier {prepared.plan.tier.name} ({result.source}'s: {result.why}):")
    for enc, row in result.tier_ranking.iterrows():
        print(f"  {int(row['rank']):>2}. {enc:<24} mean rank {row['mean_rank']:.2f}")
    if result.selection is not None and result.selection.chosen:
        sel = result.selection
        print(f"[gate] benchmarks run: {', '.join(sel.chosen)} ({sel.method}; held-out τ on the history "
              f"{shown(sel.tau)}, completion {'used' if sel.use_completion else 'not used'})")
    print(seed_agreement_line(result))
    print(compute_line(result))
    if result.ledger.overrun():
        print(f"[gate] compute: {result.ledger.overrun()}")
    if result.validation is not None:
        c = result.ceiling
        print(f"[gate] predicted vs full (tier mean rank over {len(result.truth.values.columns)} benchmark(s)); "
              f"ceiling (one truth seed vs the rest, {c.get('n_seeds')} seeds) {shown(c.get('one_seed_vs_rest'))}, "
              f"v2 vs the same {shown(c.get('v2_vs_rest'))}, ratio {shown(c.get('ratio'))}")
        for row in result.validation.itertuples(index=False):
            note = f"  (degenerate {row.degenerate})" if isinstance(row.degenerate, str) and row.degenerate else ""
            print(f"  {row.method:<24} τ {shown(row.tau, '+.3f')}  τ_w {shown(row.tau_w, '+.3f')}  regret "
                  f"{shown(row.regret, '.3f')}  top-3 recall {shown(row.top3_recall, '.2f')}{note}")
        if result.paired is not None:
            for row in result.paired.itertuples(index=False):
                print(f"  v2 − {row.baseline:<20} {shown(row.tau_difference, '+.3f')} [{shown(row.lo, '+.2f')}, "
                      f"{shown(row.hi, '+.2f')}]  P(v2 ≤ it) {shown(row.p_v2_not_better, '.2f')}")
    print(f"[gate] tables: {run.out}")
    if run.files.get("report") is not None:
        print(f"[gate] report: {run.files['report'].resolve()}")


@hydra.main(version_base=None, config_path="pkg://gate.conf", config_name="rank")
def _main(cfg: DictConfig) -> None:
    prepare_process(cfg)
    started = time.monotonic()
    from hydra.core.hydra_config import HydraConfig

    plain = run_cli(CMD, OmegaConf.to_container, cfg, resolve=True)
    searchpath = [str(s) for s in (HydraConfig.get().searchpath or [])]
    run_cli(CMD, check, plain)
    from gate.ranking import stage

    prepared = run_cli(CMD, stage.prepare, plain, searchpath)
    from gate.cli.common import quiet_lightning

    quiet_lightning()
    print(f"[gate] ranking {len(prepared.plan.encoders)} encoders on tier {prepared.plan.tier.name} at budget "
          f"{prepared.request.budget} (proxy seeds {list(prepared.request.proxy_seeds)})", flush=True)
    done = run_cli(CMD, stage.run, plain, searchpath, prepared)
    print_result(done, prepared)
    print(f"[gate] gate-rank: {(time.monotonic() - started) / 60:.1f} min", flush=True)


def main() -> None:
    from gate.cli.tier import normalise_args  # gate-tier's command-line rules, with gate-rank's list keys

    old = retired(sys.argv[1:])
    if old:
        fail(CMD, old)
    try:
        sys.argv = [sys.argv[0], *normalise_args(sys.argv[1:], _LIST_KEYS)]
    except ConfigError as err:
        fail(CMD, str(err))
    hydra_entry(CMD, _main)  # an unknown key or an unparsable override: one line, not Hydra's report


if __name__ == "__main__":
    main()

"""gate-rank: a pool of encoders ranked on a tier at a fraction of the full tier's compute (conf/rank.yaml).

    gate-rank encoder=efficientnet_lite0,efficientnet_lite1,resnet18_scratch              # demo tier, budget 0.1
    gate-rank tier=small encoder=a,b,c,d budget=0.05 scores=[knn_acc]

``encoder=a,b,c`` is read as the list ``encoders=[a,b,c]``, ``scores=a,b`` as ``scores=[a,b]`` and
``tier=<path>.yaml`` as a tier file, before Hydra parses the command line (gate-tier's own rules:
:func:`gate.cli.tier.normalise_args`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from gate.cli.common import fail, hydra_entry, prepare_process, run_cli
from gate.errors import ConfigError

CMD = "gate-rank"
_LIST_KEYS = {"encoder": "encoders", "encoders": "encoders", "scores": "scores", "score": "scores",
              "baseline_scores": "baseline_scores"}


def check(plain: dict[str, Any]) -> None:
    """The request's own problems (budget, pool, scores, ...), before the tier is expanded."""
    from gate.ranking.pipeline import check_request

    check_request(plain)


def print_result(result, plan, request, files: dict[str, Path], report: Path | None) -> None:
    from gate.ranking.budget import shown
    from gate.ranking.pipeline import compute_line, summary_lines, summary_table

    skipped = f", not run on {', '.join(result.not_run)} (proxy_benchmarks)" if result.not_run else ""
    print(f"[gate] predicted ranking on tier {plan.tier.name} (mean rank over {len(result.rankings)} benchmark(s)"
          f"{skipped}; 95% bootstrap interval over benchmarks):")
    for enc, row in result.tier_ranking.iterrows():
        print(f"  {int(row['rank']):>2}. {enc:<24} mean rank {row['mean_rank']:.2f}  [{row['rank_lo']:.0f}, {row['rank_hi']:.0f}]")
    for bench, r in result.rankings.items():
        how = "full runs" if r.source == "full" else f"rungs {list(r.steps)} of {r.full_steps} steps on val {r.monitor}"
        print(f"  {bench:<22} {' > '.join(r.order)}  ({how})")
    print(compute_line(result, request.budget))
    if result.ledger.overrun(request.budget):
        print(f"[gate] compute: {result.ledger.overrun(request.budget)}")
    if result.validation is not None:
        table = summary_table(result.validation, result.ceiling)
        print(f"[gate] predicted vs full (Kendall τ on the tier's mean rank [95% CI], weighted τ, top-1 regret in "
              f"mean-rank units; mean per-benchmark τ); seed-to-seed ceiling τ: tier "
              f"{shown(table.attrs['ceiling_tier'])}, per benchmark {shown(table.attrs['ceiling_mean_bench'])}")
        print("\n".join(summary_lines(table)))
    print(f"[gate] tables: {files['predictions'].parent}")
    if report is not None:
        print(f"[gate] report: {report.resolve()}")


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
          f"{prepared.request.budget} (seed {prepared.seed})", flush=True)
    done = run_cli(CMD, stage.run, plain, searchpath, prepared)
    print_result(done.result, prepared.plan, prepared.request, done.files, done.files.get("report"))
    print(f"[gate] gate-rank: {(time.monotonic() - started) / 60:.1f} min", flush=True)


def main() -> None:
    from gate.cli.tier import normalise_args  # gate-tier's command-line rules, with gate-rank's list keys

    try:
        sys.argv = [sys.argv[0], *normalise_args(sys.argv[1:], _LIST_KEYS)]
    except ConfigError as err:
        fail(CMD, str(err))
    hydra_entry(CMD, _main)  # an unknown key or an unparsable override: one line, not Hydra's report


if __name__ == "__main__":
    main()

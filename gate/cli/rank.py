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

    problems = []
    enc = plain.get("encoders")
    if not isinstance(enc, list) or not all(isinstance(e, str) and e for e in enc):
        raise ConfigError(f"encoders={enc!r} is invalid: expected encoder names (encoder=a,b,c)")
    for key in ("scores", "baseline_scores", "overrides"):
        if not isinstance(plain.get(key), list):
            problems.append(f"{key}={plain.get(key)!r} is invalid: expected a list")
    seed = plain.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        problems.append(f"seed={seed!r} is invalid: expected an integer >= 0 or null (the tier's first)")
    for key in ("use_full_runs", "validate", "proxy_without_scores", "report"):
        if not isinstance(plain.get(key), bool):
            problems.append(f"{key}={plain.get(key)!r} is invalid: expected true or false")
    if problems:
        raise ConfigError("; ".join(problems))
    check_request(plain["budget"], enc, plain["eta"], plain["scores"], plain["baseline_scores"],
                  plain["overhead_steps"], plain["n_boot"], plain["proxy_benchmarks"], plain["max_rungs"], plain["run_fraction"],
                  plain["cost_probe_steps"])


def prepare(plain: dict[str, Any], searchpath: list[str]):
    """Everything that can fail without training: the tier, its expansion, the proxy's entries and schedules."""
    from gate.ranking.budget import plan_schedule, subset_budget
    from gate.ranking.pipeline import Request, choose_benchmarks, entry_steps, proxy_entries
    from gate.tiers.expand import expand_tier, load_tier

    tier = load_tier(plain["tier_file"] or plain["tier"])
    seed = plain["seed"] if plain["seed"] is not None else tier.seeds[0]
    # a seed outside the tier's: the proxy's runs share no step with the full runs it is validated against
    seeds = tier.seeds if seed in tier.seeds else (*tier.seeds, seed)
    plan = expand_tier(tier, plain["encoders"], plain["paths"]["root"], overrides=plain["overrides"],
                       searchpath=searchpath, seeds=seeds)
    entries, _ = proxy_entries(plan, seed)
    pb = plain["proxy_benchmarks"]
    chosen = choose_benchmarks(list(entries), pb, full_cost=entry_steps(entries), budget=float(plain["budget"]),
                               seeds=len(tier.seeds), run_fraction=float(plain["run_fraction"]))
    budget = subset_budget(float(plain["budget"]), entry_steps(entries), chosen)
    for bench in chosen:
        exps = entries[bench]
        plan_schedule(len(exps), int(exps[0].config["trainer"]["max_steps"]), len(tier.seeds), budget,
                      int(plain["eta"]), float(plain["overhead_steps"]), plain["max_rungs"])
    request = Request(tier, tuple(plain["encoders"]), float(plain["budget"]), eta=int(plain["eta"]),
                      overhead_steps=float(plain["overhead_steps"]), n_boot=int(plain["n_boot"]),
                      use_full_runs=bool(plain["use_full_runs"]), seed_scores=tuple(plain["scores"]),
                      baseline_scores=tuple(plain["baseline_scores"]),
                      proxy_benchmarks=tuple(pb) if isinstance(pb, list) else pb, max_rungs=plain["max_rungs"],
                      run_fraction=float(plain["run_fraction"]), cost_probe_steps=int(plain["cost_probe_steps"]))
    return plan, request, seed


def contexts(plan, searchpath: list[str]):
    """The proxy's ways of composing and running gate-run / gate-score in this process."""
    from gate.engine.training.finetune import run_finetune
    from gate.ranking.proxy import ProxyContext
    from gate.scoring.stage import run_score
    from gate.tiers.expand import hydra_compose_context, searchpath_override

    store = plan.store()
    sp = searchpath_override(searchpath)

    def compose(kind: str):
        def go(overrides: list[str]):
            import warnings

            from hydra import compose as hydra_compose

            with hydra_compose_context(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return hydra_compose(kind, overrides=[*sp, *overrides] if kind == "score" else list(overrides))
        return go

    ctx = ProxyContext(compose=compose("run"), run=run_finetune, records=lambda: store.complete_records(),
                       runs_dir=plan.root / "runs")
    return ctx, compose("score"), run_score


def print_result(result, plan, request, files: dict[str, Path], report: Path | None) -> None:
    from gate.ranking.pipeline import summary_lines, summary_table

    skipped = f", not run on {', '.join(result.not_run)} (proxy_benchmarks)" if result.not_run else ""
    print(f"[gate] predicted ranking on tier {plan.tier.name} (mean rank over {len(result.rankings)} benchmark(s)"
          f"{skipped}; 95% bootstrap interval over benchmarks):")
    for enc, row in result.tier_ranking.iterrows():
        print(f"  {int(row['rank']):>2}. {enc:<24} mean rank {row['mean_rank']:.2f}  [{row['rank_lo']:.0f}, {row['rank_hi']:.0f}]")
    for bench, r in result.rankings.items():
        how = "full runs" if r.source == "full" else f"rungs {list(r.steps)} of {r.full_steps} steps on val {r.monitor}"
        print(f"  {bench:<22} {' > '.join(r.order)}  ({how})")
    led = result.ledger
    measured = sum(led.full.values()) != sum(led.estimated.values())
    basis = "measured cost" if result.cost_basis == "measured" else "full steps"
    print(f"[gate] compute: {led.spent_seconds / 60:.1f} min spent; the full tier "
          f"{'took ' if measured else 'would take ~'}{led.full_seconds / 60:.1f} min "
          f"({'its stored runs' if measured else 'estimated from the proxy step times'}"
          f"{'; benchmarks not run: scaled by their ' + basis if result.not_run and not measured else ''}) → "
          f"{led.fraction:.3f} of it "
          f"(budget {request.budget}; {led.estimated_fraction:.3f} of the estimate from the proxy's own step times)")
    if led.overrun(request.budget):
        print(f"[gate] compute: {led.overrun(request.budget)}")
    if result.validation is not None:
        table = summary_table(result.validation, result.ceiling)
        print(f"[gate] predicted vs full (Kendall τ on the tier's mean rank [95% CI], weighted τ, top-1 regret in "
              f"mean-rank units; mean per-benchmark τ); seed-to-seed ceiling τ: tier "
              f"{table.attrs['ceiling_tier']:.3f}, per benchmark {table.attrs['ceiling_mean_bench']:.3f}")
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
    plan, request, seed = run_cli(CMD, prepare, plain, searchpath)
    from gate.cli.common import quiet_lightning
    from gate.ranking.pipeline import rank_tier, write_outputs
    from gate.results import stable_hash

    quiet_lightning()
    print(f"[gate] ranking {len(plan.encoders)} encoders on tier {plan.tier.name} at budget {request.budget} "
          f"(seed {seed})", flush=True)
    ctx, compose_score, run_score = contexts(plan, searchpath)
    result = run_cli(CMD, rank_tier, plan, request, seed=seed, ctx=ctx, compose_score=compose_score,
                     run_score=run_score, validate=plain["validate"], proxy_without_scores=plain["proxy_without_scores"])
    key = stable_hash([plan.key, request.budget, request.eta, list(request.seed_scores), seed,
                       request.proxy_benchmarks, request.max_rungs, request.run_fraction])[:8]
    out = Path(plain["paths"]["reports"]) / f"rank-{plan.tier.name}-{key}"
    files = run_cli(CMD, write_outputs, result, out)
    report = None
    if plain["report"]:
        from gate.ranking.report import write_report

        report = run_cli(CMD, write_report, result, plan, request, out)
    print_result(result, plan, request, files, report)
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

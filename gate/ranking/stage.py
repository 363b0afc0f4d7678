"""gate-rank's stage, from a checked request (conf/rank.yaml composed) to its output folder: the tier's plan, the
proxy's runs, the ranking and its validation (:func:`gate.ranking.pipeline.rank_tier`), written as one set of files
under ``<paths.reports>/rank-<tier>-<key>/``. The CLI composes, checks and prints; this module does the rest, as
:mod:`gate.scoring.stage` does for gate-score.

The folder's key is the request's identity, derived from its settings rather than picked from them: every setting
of the request (``conf/rank.yaml``, declared in :mod:`gate.settings`) enters it except :data:`RUN_ONLY`, with the
tier as the plan expands it (its content and its experiments' ids) and the seed the proxy runs. Two requests that
can give different files never share a folder; a request run again writes the same folder, replacing its files as a
whole (:func:`gate.files.atomic_folder`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gate.files import atomic_folder
from gate.ranking.pipeline import RankResult, Request, rank_tier, write_outputs
from gate.results import stable_hash

#: The request's settings that decide where or how the outputs are written, never what they hold: the output root,
#: and whether the HTML page is written beside the tables. Every other setting is part of the folder's key.
RUN_ONLY = ("paths", "report")
#: The settings read through the plan: the tier (its file or group choice) enters the key as the loaded tier and its
#: experiments' ids, and the seed as the proxy's seed (null: the tier's first).
THROUGH_PLAN = ("tier", "tier_file", "seed")


@dataclasses.dataclass
class Prepared:
    """A request ready to run: the expanded tier (every seed of it, and the proxy's), the request, the proxy's seed."""

    plan: Any               # gate.tiers.expand.Plan
    request: Request
    seed: int


@dataclasses.dataclass
class RankRun:
    result: RankResult
    out: Path                          # the output folder
    files: dict[str, Path]             # what it holds, by name (rungs, predictions, ..., report)


def prepare(plain: Mapping[str, Any], searchpath: list[str]) -> Prepared:
    """Everything that can fail without training: the tier, its expansion, the proxy's entries and schedules."""
    from gate.ranking.budget import plan_schedule, subset_budget
    from gate.ranking.pipeline import choose_benchmarks, entry_steps, proxy_entries
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
    return Prepared(plan, request, seed)


def output_key(plain: Mapping[str, Any], prepared: Prepared) -> str:
    """The request's identity: every setting but :data:`RUN_ONLY`, the tier as loaded and expanded, the seed."""
    settings = {k: v for k, v in plain.items() if k not in RUN_ONLY and k not in THROUGH_PLAN}
    tier = dataclasses.asdict(prepared.plan.tier)
    return stable_hash({"settings": settings, "tier": tier, "plan": prepared.plan.key, "seed": prepared.seed})[:8]


def output_dir(plain: Mapping[str, Any], prepared: Prepared) -> Path:
    """``<paths.reports>/rank-<tier>-<key>``."""
    return Path(plain["paths"]["reports"]) / f"rank-{prepared.plan.tier.name}-{output_key(plain, prepared)}"


def contexts(plan: Any, searchpath: list[str], echo: Callable[..., None] = print):
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
                       runs_dir=plan.root / "runs", echo=echo)
    return ctx, compose("score"), run_score


def write(result: RankResult, prepared: Prepared, out: Path, report: bool) -> dict[str, Path]:
    """The tables (and with ``report`` the HTML page and its figures) as one set: written into a new folder that
    then replaces ``out`` whole, so a reader (or a kill) never sees a mix of two runs' files, and a file the run
    did not write (a validation a later run had no full results for) does not survive from an earlier one."""
    names: dict[str, Path] = {}

    def fill(staging: Path) -> None:
        files = write_outputs(result, staging)
        if report:
            from gate.ranking.report import write_report

            files["report"] = write_report(result, prepared.plan, prepared.request, staging)
        names.update({name: path.relative_to(staging) for name, path in files.items()})

    atomic_folder(out, fill)
    return {name: out / rel for name, rel in names.items()}


def run(plain: Mapping[str, Any], searchpath: list[str], prepared: Prepared,
        echo: Callable[..., None] = print) -> RankRun:
    """The whole stage on a prepared request: the proxy (reusing the store), the ranking and its validation, and
    the output folder."""
    ctx, compose_score, run_score = contexts(prepared.plan, searchpath, echo)
    result = rank_tier(prepared.plan, prepared.request, seed=prepared.seed, ctx=ctx, compose_score=compose_score,
                       run_score=run_score, validate=plain["validate"],
                       proxy_without_scores=plain["proxy_without_scores"])
    out = output_dir(plain, prepared)
    return RankRun(result, out, write(result, prepared, out, bool(plain["report"])))

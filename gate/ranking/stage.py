"""gate-rank's stage, from a checked request (conf/rank.yaml composed) to its output folder: the tier's plan, the
proxy's runs, the ranking and its validation (:func:`gate.ranking.pipeline.rank_tier`), written as one set of files
under ``<paths.reports>/rank-<tier>-<key>/``. The CLI composes, checks and prints; this module does the rest, as
:mod:`gate.scoring.stage` does for gate-score.

The folder's key is the request's identity, derived from its settings rather than picked from them: every setting
of the request (``conf/rank.yaml``, declared in :mod:`gate.settings`) enters it except :data:`RUN_ONLY`, with the
tier as the plan expands it (its content and its experiments' ids). Two requests that
can give different files never share a folder; a request run again writes the same folder, replacing its files as a
whole (:func:`gate.files.atomic_folder`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gate.files import atomic_folder
from gate.ranking.pipeline import RankResult, rank_tier, write_outputs
from gate.ranking.request import Request
from gate.results import stable_hash

#: The request's settings that decide where or how the outputs are written, never what they hold: the output root,
#: and whether the HTML page is written beside the tables. Every other setting is part of the folder's key.
RUN_ONLY = ("paths", "report")
#: The settings read through the plan: the tier (its file or group choice) enters the key as the loaded tier and its
#: experiments' ids.
THROUGH_PLAN = ("tier", "tier_file")


@dataclasses.dataclass
class Prepared:
    """A request ready to run: the expanded tier (every tier seed and every proxy seed of it) and the request."""

    plan: Any               # gate.tiers.expand.Plan
    request: Request
    history_plan: Any = None  # the tier expanded for the store's other encoders (history: store), None: none stored


@dataclasses.dataclass(frozen=True)
class RankCall:
    """gate-rank's composed request, checked once (:func:`parse`): its settings as plain data and Hydra's search
    path (a config dir of the user's own reaches the runs the proxy composes)."""

    plain: Mapping[str, Any]
    searchpath: list[str]
    uses_lightning: bool = True


@dataclasses.dataclass
class RankRun:
    result: RankResult
    out: Path                          # the output folder
    files: dict[str, Path]             # what it holds, by name (selection, predictions, ..., report)
    prepared: Prepared | None = None
    seconds: float = 0.0               # the whole call, wall clock

    def report(self) -> int:
        """gate-rank's lines: the ranking (each value marked as a prediction), what ran, the seeds' agreement,
        the compute, the validation with its paired table, where the files are."""
        print_result(self, self.prepared)
        print(f"[gate] gate-rank: {self.seconds / 60:.1f} min", flush=True)
        return 0


def parse(cfg: Any) -> RankCall:
    """The composed ``rank.yaml`` as plain data, its own problems (budget, pool, scores, history, ...) checked
    before the tier is expanded (:func:`gate.ranking.request.check_request`)."""
    from hydra.core.hydra_config import HydraConfig

    from gate.engine.validate import resolved
    from gate.ranking.request import check_request

    plain = resolved(cfg)
    check_request(plain)
    return RankCall(plain, [str(s) for s in (HydraConfig.get().searchpath or [])])


def rank(call: RankCall, echo: Callable[..., None] = print) -> RankRun:
    """gate-rank's stage: the request prepared (the tier expanded), ranked and written (:func:`run`)."""
    import time

    started = time.monotonic()
    prepared = prepare(call.plain, call.searchpath)
    echo(f"[gate] ranking {len(prepared.plan.encoders)} encoders on tier {prepared.plan.tier.name} at budget "
         f"{prepared.request.budget} (proxy seeds {list(prepared.request.proxy_seeds)})", flush=True)
    done = run(call.plain, call.searchpath, prepared, echo)
    return dataclasses.replace(done, prepared=prepared, seconds=time.monotonic() - started)


def print_result(run: RankRun, prepared: Prepared) -> None:
    from gate.ranking.budget import shown
    from gate.ranking.pipeline import (
        benchmarks_run_line,
        compute_line,
        halving_line,
        predicted_footnote,
        rule_line,
        seed_agreement_line,
    )

    result = run.result
    print(f"[gate] predicted ranking on tier {prepared.plan.tier.name} ({result.source}'s: {result.why}):")
    for enc, row in result.tier_ranking.iterrows():
        print(f"  {int(row['rank']):>2}. {enc:<24} mean rank {row['mean_rank']:.2f}†")
    print(f"  {predicted_footnote(result)}")
    for line in (benchmarks_run_line(result), rule_line(result), halving_line(result)):
        if line is not None:
            print(line)
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


def prepare(plain: Mapping[str, Any], searchpath: list[str]) -> Prepared:
    """Everything that can fail without training: the tier, its expansion with the proxy's seeds, the entries the
    proxy can run."""
    from gate.ranking.request import proxy_entries
    from gate.tiers.expand import expand_tier, load_tier

    tier = load_tier(plain["tier_file"] or plain["tier"])
    request = Request.from_plain(tier, plain)
    seeds = (*tier.seeds, *(s for s in request.proxy_seeds if s not in tier.seeds))
    plan = expand_tier(tier, plain["encoders"], plain["paths"]["root"], overrides=plain["overrides"],
                       searchpath=searchpath, seeds=seeds)
    proxy_entries(plan, request.proxy_seeds)
    history_plan = store_history_plan(plan, plain, searchpath) if "store" in request.history else None
    return Prepared(plan, request, history_plan)


def store_history_plan(plan: Any, plain: Mapping[str, Any], searchpath: list[str]) -> Any | None:
    """The tier expanded, at its own seeds and with the request's overrides, for the encoders outside the pool
    whose full runs of its entries the store holds: the store's part of the history (its runs are read back by
    their experiment ids, so only runs under the tier's protocol count). None where the store holds none. An
    encoder the expansion cannot take (its config is gone) is left out of the history."""
    import warnings

    from gate.errors import ConfigError
    from gate.tiers.expand import expand_tier

    tier = plan.tier
    datasets = {e.dataset for e in tier.entries}
    others = sorted({str(r["encoder"]) for r in plan.store().complete_records(kind="finetune")
                     if r.get("split") == "test" and r.get("dataset") in datasets and r.get("seed") in tier.seeds
                     and r.get("encoder") not in plan.encoders})
    if not others:
        return None

    def expand(encoders: list[str]) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a benchmark not prepared here: its stored runs still count
            return expand_tier(tier, encoders, plain["paths"]["root"], overrides=plain["overrides"],
                               searchpath=searchpath, seeds=tier.seeds, unprepared_is_error=False)

    try:
        return expand(others)
    except ConfigError:  # one encoder's config is gone: keep the others
        plans = []
        for enc in others:
            try:
                plans.append(expand([enc]))
            except ConfigError:
                continue
        if not plans:
            return None
        return dataclasses.replace(plans[0], encoders=tuple(e for p in plans for e in p.encoders),
                                   experiments=[x for p in plans for x in p.experiments])


def output_key(plain: Mapping[str, Any], prepared: Prepared) -> str:
    """The request's identity: every setting but :data:`RUN_ONLY`, the tier as loaded and expanded."""
    settings = {k: v for k, v in plain.items() if k not in RUN_ONLY and k not in THROUGH_PLAN}
    tier = dataclasses.asdict(prepared.plan.tier)
    return stable_hash({"settings": settings, "tier": tier, "plan": prepared.plan.key})[:8]


def output_dir(plain: Mapping[str, Any], prepared: Prepared) -> Path:
    """``<paths.reports>/rank-<tier>-<key>``."""
    return Path(plain["paths"]["reports"]) / f"rank-{prepared.plan.tier.name}-{output_key(plain, prepared)}"


def contexts(plan: Any, searchpath: list[str], echo: Callable[..., None] = print):
    """The proxy's ways of composing and running gate-run / gate-score in this process."""
    from gate.engine.compose import hydra_compose_context
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run, parse_score
    from gate.ranking.proxy import ProxyContext
    from gate.scoring.stage import run_score
    from gate.tiers.expand import searchpath_override

    store = plan.store()
    sp = searchpath_override(searchpath)
    kept: dict = {}  # the packaged config files, read once for all of the ranking's compositions (not once each)

    def compose(kind: str):
        def go(overrides: list[str]):
            import warnings

            from hydra import compose as hydra_compose

            with hydra_compose_context(kept=kept), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return hydra_compose(kind, overrides=[*sp, *overrides] if kind == "score" else list(overrides))
        return go

    ctx = ProxyContext(compose=compose("run"), run=lambda cfg: run_finetune(parse_run(cfg)),
                       records=lambda: store.complete_records(), runs_dir=plan.root / "runs", echo=echo)
    return ctx, compose("score"), lambda cfg: run_score(parse_score(cfg))


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
    """The whole stage on a prepared request: the plan, the prior and the proxy (reusing the store), the ranking and
    its validation, and the output folder."""
    ctx, compose_score, run_score = contexts(prepared.plan, searchpath, echo)
    result = rank_tier(prepared.plan, prepared.request, ctx=ctx, compose_score=compose_score, run_score=run_score,
                       history_plan=prepared.history_plan)
    out = output_dir(plain, prepared)
    return RankRun(result, out, write(result, prepared, out, bool(plain["report"])))

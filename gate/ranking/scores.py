"""The prior's zero-training scores on the pool (gate-score's, per encoder × benchmark whose family takes scores),
what their feature passes cost, and each score's ranking of the pool."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from gate.errors import ConfigError
from gate.families import family
from gate.ranking import complete
from gate.ranking import prior as priors
from gate.settings import AUTO

Scores = dict[str, dict[str, dict[str, Any]]]  # score → benchmark → encoder → value (or why it is degenerate)


def _score_names(names: Sequence[str]) -> list[str]:
    """The stored metrics ``names`` read (``ncti`` is three stored terms)."""
    return sorted({n for name in names for n in (("ncti_seli", "ncti_ncc", "ncti_collapse") if name == "ncti"
                                                  else (name,))})


def score_values(plan: Any, benchmarks: Sequence[str], names: Sequence[str], *, compose_score: Callable[[list[str]], Any],
                 run_score: Callable[[Any], Any], records: Callable[[], list[dict[str, Any]]],
                 echo: Callable[..., None] = print, key: str = "prior") -> tuple[Scores, dict[str, float], Scores]:
    """Zero-training scores of every encoder on the benchmarks among ``benchmarks`` whose family takes scores:
    ``{score: {benchmark: {encoder: value}}}``, the seconds each (encoder × benchmark) took (feature passes + the
    scores, from the score records' facts, so stored scores count what they cost) and, in the same shape, why a
    value cannot discriminate. ``key``: the setting that named ``names``, named in errors."""
    from gate.scoring.stage import NeedsSourceHead
    from gate.transferability import SCORES

    wanted = _score_names(names)
    values: Scores = {n: {} for n in names}
    seconds: dict[str, float] = {}
    degenerate: Scores = {}
    if not wanted:
        return values, seconds, degenerate
    check_score_heads(plan, names, key)
    for exp in scored_experiments(plan, benchmarks):
        cfg, sid = score_config(plan, exp, wanted, compose_score)
        try:
            run_score(cfg)
        except NeedsSourceHead as err:  # gate-score's words name its own key (metrics): say gate-rank's
            raise ConfigError(_headless(key, names, err.metrics, err.encoder)) from None
        rows = {r["metric"]: r for r in records() if r.get("experiment") == sid and r.get("kind") == "score"}
        spent = seconds[f"{exp.encoder} × {exp.dataset}"] = pass_seconds(rows, wanted)
        marks = []
        for name in names:
            if name == "ncti" or name not in rows:
                continue
            values[name].setdefault(exp.dataset, {})[exp.encoder] = float(rows[name]["value"])
            facts = rows[name].get("facts") or {}
            classes = facts.get("num_classes", exp.config["dataset"]["num_classes"])
            if "num_samples" in facts and {"feature_rank", "feature_dim"} & set(facts) and (why := SCORES[name].degenerate(
                    facts["num_samples"], classes, feature_rank=facts.get("feature_rank"),
                    feature_dim=facts.get("feature_dim"))):
                degenerate.setdefault(name, {}).setdefault(exp.dataset, {})[exp.encoder] = why
                marks.append(f"{name} ({why})")
        if "ncti" in names and all(t in rows for t in ("ncti_seli", "ncti_ncc", "ncti_collapse")):
            values.setdefault("_ncti_terms", {}).setdefault(exp.dataset, {})[exp.encoder] = {  # type: ignore[assignment]
                t: float(rows[t]["value"]) for t in ("ncti_seli", "ncti_ncc", "ncti_collapse")}
        echo(f"[gate] score {exp.encoder} × {exp.dataset}: {spent:.0f}s"
             + (f"; degenerate: {', '.join(marks)}" if marks else ""), flush=True)
    if "ncti" in names:
        from gate.transferability.collapse import ncti

        for bench, pool in values.pop("_ncti_terms", {}).items():  # type: ignore[arg-type]
            values["ncti"][bench] = ncti(pool)
    return values, seconds, degenerate


def scored_experiments(plan: Any, benchmarks: Sequence[str]) -> list[Any]:
    """The experiments of ``plan`` (its first tier seed) the prior scores: those on ``benchmarks`` whose family
    takes scores."""
    seed0 = plan.tier.seeds[0]
    return [exp for exp in plan.experiments if exp.dataset in benchmarks and exp.seed == seed0
            and family(exp.config["dataset"].get("task")).transferability]


def score_config(plan: Any, exp: Any, wanted: Sequence[str], compose_score: Callable[[list[str]], Any]) -> tuple[Any, str]:
    """gate-score's config of the stored metrics ``wanted`` on ``exp``'s encoder × benchmark (the prior's protocol:
    the tier's image size and score overrides), and its experiment id."""
    from gate.engine.validate import resolved_config
    from gate.results import experiment_id

    cfg = compose_score([f"paths.root={plan.root}", f"dataset={exp.dataset}", f"encoder={exp.encoder}",
                         f"image_size={exp.config['image_size']}", "progress_bar=false", *plan.tier.score_overrides,
                         f"metrics=[{','.join(wanted)}]"])
    return cfg, experiment_id(resolved_config(cfg), "score")


def stored_scores(plan: Any, benchmarks: Sequence[str], names: Sequence[str], *,
                  compose_score: Callable[[list[str]], Any], records: Sequence[Mapping[str, Any]]) -> Scores:
    """The prior's scores (``names``, but ``ncti``, a pool's) of ``plan``'s encoders that the store already holds
    under the prior's protocol, read back, never computed: ``{score: {benchmark: {encoder: value}}}``. A score
    experiment's id leaves out which scores were computed (:data:`gate.results.RUN_ONLY_KEYS`), so gate-tier's
    scoring (every score) and an earlier gate-rank call's prior (its own) are both found by it."""
    names = [n for n in names if n != "ncti"]
    wanted = _score_names(names)
    by_id: dict[str, dict[str, Mapping[str, Any]]] = {}
    for r in records:
        if r.get("kind") == "score":
            by_id.setdefault(str(r.get("experiment")), {})[str(r.get("metric"))] = r
    values: Scores = {n: {} for n in names}
    if not wanted or not by_id:
        return values
    for exp in scored_experiments(plan, benchmarks):
        rows = by_id.get(score_config(plan, exp, wanted, compose_score)[1], {})
        for name in names:
            if name in rows and isinstance(rows[name].get("value"), (int, float)):
                values[name].setdefault(exp.dataset, {})[exp.encoder] = float(rows[name]["value"])
    return values


def prior_history_tau(history: Any, history_plan: Any, tier_benchmarks: Sequence[str], scored: Sequence[str],
                      names: Sequence[str], static: Sequence[str], *, compose_score: Callable[[list[str]], Any],
                      records: Sequence[Mapping[str, Any]], min_encoders: int) -> tuple[float, list[str]]:
    """How well the prior ranks encoders whose full runs are known: the history's encoders (``history_plan``'s that
    the history holds) with every prior score stored on the ``scored`` benchmarks (:func:`stored_scores`), ranked
    as the pool is — the mean rank over those scores and the ``static`` facts the pool's prior took (parameters from
    their runs' records, source top-1 from their configs), each where every one of them has it — against their full
    runs' mean rank over the tier's benchmarks the history holds for all of them. Kendall τ and those encoders; NaN
    with fewer than ``min_encoders``."""
    from gate.analysis.ranks import kendall
    from gate.ranking.pricing import recorded_params

    vals = stored_scores(history_plan, scored, names, compose_score=compose_score, records=records)
    benches = [b for b in scored if any(b in v for v in vals.values())]
    encs = [e for e in history_plan.encoders if e in history.values.index
            and benches and all(e in v.get(b, {}) for v in vals.values() for b in benches)]
    truth = history.values.loc[encs, [b for b in tier_benchmarks if b in history.values.columns]].dropna(axis=1)
    if len(encs) < min_encoders or truth.empty:
        return math.nan, encs
    components = {n: r for n in vals if (r := score_ranks(vals[n], encs)) is not None}
    if not components:
        return math.nan, encs
    configs = {e.encoder: e.config["encoder"] for e in history_plan.experiments}
    components.update({f"static:{k}": v for k, v in static_rankings(static, encs, recorded_params(encs, records),
                                                                     configs).items()})
    prior = priors.combine(components).reindex(encs)
    return kendall(-prior.to_numpy(float), -complete.mean_rank(truth.to_numpy(float))), encs


def _headless(key: str, names: Sequence[str], need: Sequence[str], encoder: str) -> str:
    from gate.transferability import SCORES

    every = sorted(n for n, m in SCORES.items() if m.needs == "features")
    one = len(need) == 1
    return (f"{key}={list(names)} is invalid: {', '.join(need)} {'needs' if one else 'need'} the source-class "
            f"probabilities of a pretrained classification head, which encoder {encoder} lacks; drop "
            f"{'it' if one else 'them'} from {key} (the scores every encoder takes: {every})")


def check_score_heads(plan: Any, names: Sequence[str], key: str) -> None:
    """Before any run: a score of ``names`` that needs a source classification head, asked of an encoder whose
    class declares none (``num_source_classes = None``), is one :class:`ConfigError` naming ``key``."""
    from hydra.utils import get_class

    from gate.transferability import SCORES

    need = [n for n in names if n in SCORES and SCORES[n].needs == "source_probs"]
    if not need:
        return
    for exp in plan.experiments:
        try:
            cls = get_class(exp.config["encoder"]["_target_"])
        except Exception:  # noqa: BLE001 - an unimportable class is gate-run's validation to report
            continue
        if getattr(cls, "num_source_classes", 0) is None:
            raise ConfigError(_headless(key, names, need, exp.encoder))


def score_ranks(values: Mapping[str, Mapping[str, float]], encoders: Sequence[str]) -> pd.Series | None:
    """One score's ranking of the pool: its mean rank over the benchmarks where every encoder has a value."""
    cols = {b: v for b, v in values.items() if all(e in v and math.isfinite(v[e]) for e in encoders)}
    if not cols:
        return None
    frame = pd.DataFrame(cols).reindex(list(encoders))
    return pd.Series(complete.mean_rank(frame.to_numpy(float)), index=list(encoders))


#: A feature pass the store has no record of, predicted (the demo's passes of 500 rows at 32 px took 5–19 s on 2 CPU
#: cores, feature pass and scores together; pool A's sixteen averaged 11 s).
COLD_PASS_SECONDS = 10.0


def pass_seconds(rows: Mapping[str, Mapping[str, Any]], metrics: Iterable[str]) -> float:
    """What one encoder × benchmark's scores cost, from its score records (``{metric: record}``): the feature pass
    (stored once per set) plus each of ``metrics``' own seconds. The plan predicts with it and the ledger spends
    it, so the two count the same seconds."""
    extract = max((float((r.get("facts") or {}).get("extract_seconds") or 0.0) for r in rows.values()), default=0.0)
    return extract + sum(float((rows[m].get("facts") or {}).get("seconds") or 0.0) for m in metrics if m in rows)


def _prior_seconds(records: Sequence[Mapping[str, Any]], pool: Sequence[str], benches: Sequence[str],
                   metrics: Sequence[str]) -> float:
    """The prior's feature passes and scores, predicted: what stored score records of the pool's encoders cost
    (:func:`pass_seconds`), else :data:`COLD_PASS_SECONDS` a pass."""
    rows: dict[str, dict[str, Mapping[str, Any]]] = {}
    for r in records:
        if r.get("kind") == "score" and r.get("encoder") in pool and r.get("dataset") in benches:
            rows.setdefault(f"{r['encoder']} × {r['dataset']}", {})[str(r.get("metric"))] = r
    seen = {key: pass_seconds(found, metrics) for key, found in rows.items() if set(metrics) <= set(found)}
    return sum(seen.get(f"{e} × {b}", COLD_PASS_SECONDS) for e in pool for b in benches)


def static_names(static: str | Sequence[str]) -> tuple[str, ...]:
    """The static facts a request's ``static`` names: ``auto`` is every one (:data:`gate.ranking.prior.STATIC`), of
    which :func:`static_rankings` keeps those every encoder of the pool has (source_top1 where all declare it)."""
    return tuple(priors.STATIC) if static == AUTO else tuple(static)


def static_rankings(names: Sequence[str], pool: Sequence[str], params: Mapping[str, float],
                    configs: Mapping[str, Mapping[str, Any]]) -> dict[str, pd.Series]:
    """Each static fact's ranking of the pool (where every encoder has it): more parameters, a higher published
    source top-1 first."""
    out = {}
    for name in names:
        values = dict(params) if name == "params" else {e: configs[e].get("source_top1") for e in pool}
        if all(isinstance(values.get(e), (int, float)) and math.isfinite(values[e]) for e in pool):
            out[name] = priors.ranks({e: float(values[e]) for e in pool}, pool)
    return out

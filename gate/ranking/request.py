"""gate-rank's request: its settings as one frozen :class:`Request` (``conf/rank.yaml``'s values its defaults), and
every problem that can be known before any run — of the request alone (:func:`check_request`, before the tier is
expanded) and against the expanded tier (:func:`check_against_plan`, :func:`proxy_entries`) — as one line."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from gate.errors import ConfigError
from gate.ranking import prior as priors
from gate.settings import AUTO, yaml_defaults

MIN_ENCODERS = 3
POOL_SCORES = ("ncti",)  # scores defined over a pool from per-encoder terms (gate.transferability.collapse.ncti)
_HALVING = ("halving=contested (v1's successive halving over every encoder was removed: it ranked worst, "
            "docs/ranking.md; contested lengthens only the runs of the least settled pairs)")
#: gate-rank v1's keys, refused naming what replaced them.
RETIRED = {
    "seed": "proxy_seeds (a list of seeds outside the tier's; the proxy runs each and ranks by their mean)",
    "cost_probe_steps": "the cost model (gate/ranking/cost.py): costs are predicted from the store's records, never "
                        "timed by a probe",
    "overhead_steps": "the cost model's fixed seconds per run, fitted on the store's records",
    "eta": _HALVING,
    "max_rungs": _HALVING,
    "scores": "prior (the zero-training scores that order the first allocation and are the fallback)",
    "proxy_without_scores": "nothing: the prior no longer seeds a run; validation compares it as a baseline",
}
#: The baselines every validation compares (their τ beside v2's, paired).
STATIC_BASELINES = priors.STATIC


def known_scores() -> list[str]:
    from gate.transferability import SCORES

    return [*SCORES, *POOL_SCORES]


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


#: gate-rank's defaults, stated once: conf/rank.yaml.
_RANK_YAML = yaml_defaults("rank.yaml")


@dataclasses.dataclass(frozen=True)
class Request:
    """One gate-rank request: the checked settings of conf/rank.yaml (:data:`gate.settings.RANK`), whose values are
    its defaults (the only place that states them), lists as tuples."""

    tier: Any                       # gate.tiers.spec.Tier
    encoders: tuple[str, ...]
    budget: float
    _: dataclasses.KW_ONLY
    history: tuple[str, ...] = _as_tuple(_RANK_YAML["history"])
    proxy_benchmarks: str | tuple[str, ...] | None = _as_tuple(_RANK_YAML["proxy_benchmarks"])  # auto | first | None | names
    min_per_family: int = _RANK_YAML["min_per_family"]
    val_points: int = _RANK_YAML["val_points"]
    proxy_seeds: tuple[int, ...] = _as_tuple(_RANK_YAML["proxy_seeds"])
    run_fraction: float = _RANK_YAML["run_fraction"]
    halving: str | None = _RANK_YAML["halving"]  # contested | None
    prior: tuple[str, ...] = _as_tuple(_RANK_YAML["prior"])
    static: str | tuple[str, ...] = _as_tuple(_RANK_YAML["static"])  # auto | names
    baseline_scores: tuple[str, ...] = _as_tuple(_RANK_YAML["baseline_scores"])
    n_boot: int = _RANK_YAML["n_boot"]
    use_full_runs: bool = _RANK_YAML["use_full_runs"]
    validate: bool = _RANK_YAML["validate"]

    @classmethod
    def from_plain(cls, tier: Any, plain: Mapping[str, Any]) -> Request:
        """The request of a checked gate-rank config (:func:`check_request` passed): each field its setting."""
        fields = {f.name: _as_tuple(plain[f.name]) for f in dataclasses.fields(cls)
                  if f.name not in ("tier", "encoders", "budget", "_")}
        if isinstance(fields["history"], str):
            fields["history"] = (fields["history"],)
        return cls(tier, tuple(plain["encoders"]), float(plain["budget"]), **fields)


def check_request(request: Mapping[str, Any]) -> None:
    """Every problem with the request itself (its settings, declared in :data:`gate.settings.RANK`), the pool, the
    score and static names and the history, as one :class:`ConfigError` line, before the tier is expanded."""
    from gate.ranking.history import problems as history_problems
    from gate.settings import RANK, check

    retired = [k for k in RETIRED if k in request]
    problems = [f"{k} was replaced by {RETIRED[k]}" for k in retired]
    problems += check({k: v for k, v in request.items() if k not in retired}, RANK)
    encoders = request.get("encoders")
    if RANK.settings["encoders"].valid(encoders) and len(dict.fromkeys(encoders)) < MIN_ENCODERS:
        problems.append(f"encoders={list(encoders)!r} is invalid: a ranking needs at least {MIN_ENCODERS} distinct "
                        f"encoders (encoder=a,b,c)")
    known = known_scores()
    for key in ("prior", "baseline_scores"):
        names = request.get(key)
        bad = [s for s in names if s not in known] if RANK.settings[key].valid(names) else []
        if bad:
            problems.append(f"{key}: unknown score {', '.join(map(repr, bad))}; known scores are {known}")
    static = request.get("static")
    bad = ([s for s in static if s not in priors.STATIC]
        if static != AUTO and RANK.settings["static"].valid(static) else [])
    if bad:
        problems.append(f"static: unknown fact {', '.join(map(repr, bad))}; known: {list(priors.STATIC)}")
    if RANK.settings["history"].valid(request.get("history")):
        problems += history_problems(request["history"])
    if problems:
        raise ConfigError("; ".join(problems))


def check_against_plan(request: Request, plan: Any, entries: Mapping[str, Any], records: Sequence[Mapping[str, Any]],
                       configs: Mapping[str, Mapping[str, Any]]) -> None:
    """The problems only the expanded tier shows, before any run: ``proxy_benchmarks`` naming a benchmark the tier
    lacks, ``static=[source_top1]`` for an encoder that does not declare it, proxy seeds shared with stored full
    runs (with ``validate``), and an encoder's ``paper_name`` that the paper's table lacks (with history ``paper``)."""
    problems = []
    pb = request.proxy_benchmarks
    if isinstance(pb, tuple):
        unknown = [b for b in pb if b not in entries]
        if unknown:
            problems.append(f"proxy_benchmarks: {', '.join(map(repr, unknown))} is not among the benchmarks the proxy "
                            f"can run on tier {plan.tier.name} ({list(entries)})")
    if request.static != AUTO and "source_top1" in request.static:
        lacking = [e for e in plan.encoders if not isinstance(configs[e].get("source_top1"), (int, float))]
        if lacking:
            problems.append(f"static=[source_top1]: encoder(s) {', '.join(lacking)} declare no source_top1 (the top-1 "
                            f"accuracy their pretrained weights publish) in conf/encoder/<name>.yaml; drop "
                            f"source_top1 from static or declare it")
    if request.validate:
        stored = {int(exp.seed) for exp in plan.experiments
                  if exp.seed in request.proxy_seeds and any(r.get("experiment") == exp.id for r in records)}
        if stored:
            problems.append(f"proxy_seeds={list(request.proxy_seeds)} shares seed(s) {sorted(stored)} with stored full "
                            f"runs of this tier (a proxy run would share their data order and random stream while "
                            f"validate=true grades it against them); choose seeds outside {sorted(plan.tier.seeds)}")
    if "paper" in request.history:
        from gate.analysis.meta import default_paper_table

        columns = set(pd.read_csv(default_paper_table(), nrows=0).columns)
        missing = [f"{e} ({configs[e]['paper_name']})" for e in plan.encoders
                   if configs[e].get("paper_name") and configs[e]["paper_name"] not in columns]
        if missing:
            problems.append(f"paper_name of {', '.join(missing)} is not a column of the paper's table")
    if problems:
        raise ConfigError("; ".join(problems))


def proxy_entries(plan: Any, seeds: Sequence[int]) -> tuple[dict[str, dict[int, dict[str, Any]]], list[str]]:
    """The tier's benchmarks the proxy can run: those every encoder of the pool takes, with a step budget >= 2.
    Returns ``{benchmark: {seed: {encoder: experiment}}}`` for the proxy ``seeds`` and why others are left out;
    a :class:`ConfigError` when none is left, or when a dataset is the entry of two protocols."""
    listed: dict[str, list[int]] = {}
    for i, entry in enumerate(plan.tier.entries, 1):
        listed.setdefault(entry.dataset, []).append(i)
    twice = [f"{name} (entries {', '.join(map(str, at))})" for name, at in listed.items() if len(at) > 1]
    if twice:
        raise ConfigError(f"tier {plan.tier.name}: gate-rank ranks each benchmark once, and {'; '.join(twice)} "
                          f"{'is' if len(twice) == 1 else 'are'} listed with more than one protocol: keep one entry "
                          f"per dataset")
    by: dict[str, dict[int, dict[str, Any]]] = {}
    for exp in plan.experiments:
        if exp.seed in seeds:
            by.setdefault(exp.dataset, {}).setdefault(int(exp.seed), {})[exp.encoder] = exp
    out, dropped = {}, []
    for entry in plan.tier.entries:
        got = by.get(entry.dataset, {})
        missing = [e for e in plan.encoders if any(e not in got.get(s, {}) for s in seeds)]
        if missing:
            dropped.append(f"{entry.dataset}: not taken by {', '.join(dict.fromkeys(missing))}")
            continue
        steps = got[seeds[0]][plan.encoders[0]].config["trainer"].get("max_steps")
        if not isinstance(steps, int) or steps < 2:
            dropped.append(f"{entry.dataset}: trainer.max_steps={steps!r} (the proxy needs a step budget >= 2)")
            continue
        out[entry.dataset] = got
    if not out:
        raise ConfigError(f"tier {plan.tier.name} has nothing the proxy can run for {list(plan.encoders)}: "
                          f"{'; '.join(dropped) or 'no experiments'}")
    return out, dropped

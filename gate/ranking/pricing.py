"""What one gate-rank call's runs cost and what the full tier costs, priced by the cost model
(:mod:`gate.ranking.cost`) on the expanded tier's experiments: :class:`Prices` holds the model (refitted after every
run), the store's prices from before the call, the speed measured against them, and the full tier's seconds in the
call's :class:`~gate.ranking.budget.Ledger`. The plan, the in-block stop and the ledger all read these prices, so the
seconds planned and the seconds spent are counted the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gate.errors import ConfigError, GateError
from gate.ranking.budget import Ledger, finite_or_none
from gate.ranking.cost import COLD_MARGIN, NEW_FAMILY, CostModel, RunFeatures, observation, test_passes

Made = Mapping[tuple[str, str, int, int, int], float]  # (encoder, benchmark, seed, steps, val every) → stored seconds


def run_features(exp: Any, params: float) -> RunFeatures:
    feats = features_of(exp.config, exp.encoder, exp.dataset, params)
    if feats is None:
        raise GateError(f"experiment {exp.id}: its config has no data.batch_size or dataset section to cost it by")
    return feats


def features_of(cfg: Mapping[str, Any], encoder: str, dataset: str, params: float) -> RunFeatures | None:
    """What a run's cost depends on, read from its resolved config (None: the config lacks the data section)."""
    data, spec = cfg.get("data") or {}, cfg.get("dataset") or {}
    if "batch_size" not in data or not spec:
        return None
    size = cfg.get("image_size") or 224
    frames = (spec.get("options") or {}).get("frames") or 1
    return RunFeatures(encoder, dataset, str(spec.get("task") or ""), float(params), float(size) ** 2 * float(frames),
                       int(data["batch_size"]))


def recorded_params(encoders: Sequence[str], records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The parameter count of each of ``encoders`` that a stored fine-tuning run recorded (the model it trained)."""
    out: dict[str, float] = {}
    for r in records:
        facts = r.get("facts") or {}
        if r.get("kind") == "finetune" and r.get("encoder") in encoders and isinstance(facts.get("params"), (int, float)):
            out.setdefault(str(r["encoder"]), float(facts["params"]))
    return out


def encoder_params(plan: Any, records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each encoder's parameter count: from a stored run's facts (:func:`recorded_params`), else by building it."""
    out = recorded_params(plan.encoders, records)
    for enc in plan.encoders:
        if enc in out:
            continue
        exp = next(e for e in plan.experiments if e.encoder == enc)
        try:
            from gate.engine.build import build_encoder

            model = build_encoder(exp.config["encoder"], None, seed=0)
        except Exception as err:  # noqa: BLE001 - Hydra wraps the encoder's own error: its innermost cause is the line
            while err.__cause__ is not None:
                err = err.__cause__
            # its proxy runs would fail the same way, after the budget was planned around them
            raise ConfigError(f"encoder {enc!r} cannot be built here (to count its parameters for the cost model, "
                              f"before any run): {' '.join(str(err).split()) or type(err).__name__}") from None
        out[enc] = float(sum(p.numel() for p in model.parameters()))
    return out


def cost_observations(records: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Every stored run's costs (:func:`gate.ranking.cost.observation`), with its features from its config."""
    seen, out = set(), []
    for r in records:
        if r.get("kind") != "finetune" or r.get("experiment") in seen:
            continue
        seen.add(r.get("experiment"))
        facts = r.get("facts") or {}
        if not isinstance(facts.get("params"), (int, float)):
            continue
        feats = features_of(r.get("config") or {}, str(r["encoder"]), str(r["dataset"]), float(facts["params"]))
        obs = (observation(feats, facts, test_passes(r.get("config") or {}, facts.get("split_rows")))
               if feats is not None else None)
        if obs is not None:
            out.append(obs)
    return out


def stored_full_seconds(plan: Any, records: Sequence[Mapping[str, Any]], seeds: Sequence[int]) -> dict[str, float]:
    """``"enc × bench"`` → the summed wall seconds of its stored full runs, where every seed in ``seeds`` is stored."""
    walls: dict[str, dict[int, float]] = {}
    ids = {exp.id: exp for exp in plan.experiments if exp.seed in seeds}
    for r in records:
        exp = ids.get(r.get("experiment"))
        facts = r.get("facts") or {}
        if exp is not None and r.get("split") == "test" and isinstance(facts.get("wall_seconds"), (int, float)):
            walls.setdefault(f"{exp.encoder} × {exp.dataset}", {})[int(exp.seed)] = float(facts["wall_seconds"])
    return {k: sum(v.values()) for k, v in walls.items() if set(v) >= set(seeds)}


class Prices:
    """One call's prices. ``entries``: ``{benchmark: {seed: {encoder: experiment}}}`` (the proxy's experiments; a
    run's cost does not depend on its seed, so the first proxy seed's experiment prices every seed's); ``made``: the
    proxy runs an earlier call stored (read back, not trained; their seconds still count)."""

    def __init__(self, plan: Any, records: Sequence[Mapping[str, Any]], entries: Mapping[str, Any],
                 pool: Sequence[str], *, proxy_seed: int, tier_seeds: Sequence[int], params: Mapping[str, float],
                 made: Made, ledger: Ledger) -> None:
        self.entries, self.pool, self.seed, self.tier_seeds = entries, list(pool), proxy_seed, list(tier_seeds)
        self.params, self.made, self.ledger = params, made, ledger
        self.model = CostModel(cost_observations(records))
        # the store's prices from before this call: what the speed measured is measured against
        self.base = CostModel(self.model.observations)
        self.full_steps = {b: int(self.exp(b, pool[0]).config["trainer"]["max_steps"]) for b in entries}
        self.stored_full = stored_full_seconds(plan, records, tier_seeds)
        # the tier's own runs (they test; the proxy runs whose configs price the steps do not) and a dataset's split
        # sizes as a stored run of it recorded them (facts["split_rows"]): what a full run's test pass covers
        self.full_configs = {(e.encoder, str(e.config["dataset"].get("name"))): e.config for e in plan.experiments}
        self.rows_seen: dict[str, Mapping[str, Any]] = {}
        for r in records:
            if r.get("kind") == "finetune" and (r.get("facts") or {}).get("split_rows"):
                self.rows_seen.setdefault(str(r.get("dataset")), r["facts"]["split_rows"])
        # How fast this machine runs now against the store's runs (a parallel load they did not have): this call's
        # trained runs' seconds over what the store's own runs of the same encoder × benchmark predict for them
        # (``base``; a run whose pair the store lacks is priced by a fit across pairs, whose error would pass for a
        # load). The call's first trained run is no evidence either: it pays the process's start on the device once
        # (on an H200 pool C's first runs took 1.22-1.45 of their price, the rest 0.52-0.76). 1 until such a run has
        # been measured; never below 1 (a faster machine is not carried to later predictions: docs/ranking.md).
        self.speed = 1.0
        self._trained: list[tuple[float, float]] = []  # (seconds, the store's price) of the trained runs but the first
        self._first_trained = True

    def exp(self, bench: str, enc: str) -> Any:
        return self.entries[bench][self.seed][enc]

    def _costs(self, model: CostModel, bench: str, enc: str) -> Any:
        return model.predict(run_features(self.exp(bench, enc), self.params.get(enc, math.nan)))

    def run_seconds(self, bench: str, enc: str, steps: int, val_every: int, bound: bool = False) -> float:
        """A proxy run's predicted seconds (``bound``: with the margin a plan fits it into the budget at, and at the
        present speed)."""
        costs = self._costs(self.model, bench, enc)
        margin = COLD_MARGIN if costs.basis == "cold start" else self.model.margin(costs.basis) if bound else 1.0
        return margin * costs.seconds(steps, steps // max(val_every, 1)) * (self.speed if bound else 1.0)

    def block_seconds(self, bench: str, seed: int, steps: int, val_every: int, bound: bool = False,
                      encoders: Sequence[str] | None = None, scale: float = 1.0) -> float:
        """A block's predicted seconds (of ``encoders``, all by default; ``scale`` times a run to be trained). A run
        an earlier call stored is read back, not trained; its seconds still count (the ledger spends them), so the
        plan prices it at what it cost."""
        made = self.made
        return sum(made[key] if (key := (e, bench, seed, steps, val_every)) in made and math.isfinite(made[key])
                   else scale * self.run_seconds(bench, e, steps, val_every, bound) for e in encoders or self.pool)

    def block_bound(self, bench: str, seed: int, steps: int, val_every: int) -> float:
        return self.block_seconds(bench, seed, steps, val_every, bound=True)

    def predict_full(self) -> float:
        """The full tier's seconds into the ledger: stored full runs' own, else predicted (every tier seed) by the
        same model as the proxy runs. Called again whenever a run refits the model: a machine slower than the cold
        start (a parallel load) makes the full tier dearer too, so the fraction spent is a ratio of like to like."""
        ledger = self.ledger
        for bench in self.entries:
            steps = self.full_steps[bench]
            every = self.exp(bench, self.pool[0]).config["trainer"].get("val_check_interval") or 1
            every = int(every) if isinstance(every, int) else max(1, steps)
            for enc in self.pool:
                key = f"{enc} × {bench}"
                if key in self.stored_full:
                    ledger.full[key], ledger.full_basis[key] = self.stored_full[key], "stored"
                    continue
                exp = self.exp(bench, enc)
                costs = self._costs(self.model, bench, enc)
                # the cold start's fixed seconds hold a full run's test pass (measured on full runs); a model learnt
                # from proxy runs, which never test, does not: their test pass is added at their price
                dataset = str(exp.config["dataset"].get("name"))
                tests = (test_passes(self.full_configs.get((enc, dataset), exp.config), self.rows_seen.get(dataset))
                         if costs.basis != "cold start" else 0.0)
                ledger.full[key] = finite_or_none(len(self.tier_seeds) * costs.seconds(steps, steps // every, tests))
                ledger.full_basis[key] = costs.basis
        if NEW_FAMILY in ledger.full_basis.values():
            ledger.new_family_margin = self.model.margin(NEW_FAMILY)
        return ledger.full_seconds or math.nan

    def observe(self, run: Any, exp: Any, block: Any) -> None:
        """A proxy run of ``block`` has ended (trained, or read back): refit the model on it and, where it trained
        and the store prices its pair from its own runs, measure the speed."""
        feats = run_features(exp, self.params.get(run.encoder, math.nan))
        self.model.add(observation(feats, run.facts, test_passes(exp.config, run.facts.get("split_rows"))))
        if run.facts.get("split_rows"):
            self.rows_seen.setdefault(str(exp.config["dataset"].get("name")), run.facts["split_rows"])
        if run.stored or run.seconds is None or run.facts.get("resumed_from_step") is not None:
            return  # a resumed run (halving's continuation, an interrupted one) is priced as a whole run, so no speed
        first, self._first_trained = self._first_trained, False
        costs = self._costs(self.base, block.benchmark, run.encoder)
        price = costs.seconds(block.steps, block.steps // max(block.val_every, 1))
        if first or costs.basis != "measured" or not price:
            return
        self._trained.append((run.seconds, price))
        self.speed = max(1.0, sum(t[0] for t in self._trained) / sum(t[1] for t in self._trained))

    def projected(self, block: Any, left: Sequence[str]) -> float:
        """The fraction of the full tier (as now predicted) the call will have spent when ``left``, the block's runs
        still to make, have run at the speed measured."""
        return self.fraction_after(self.block_seconds(block.benchmark, block.seed, block.steps, block.val_every,
                                                      encoders=left, scale=self.speed))

    def fraction_after(self, seconds: float) -> float:
        """The fraction of the full tier (as now predicted) the call will have spent after ``seconds`` more."""
        return ((self.ledger.spent_seconds or 0.0) + seconds) / self.predict_full()

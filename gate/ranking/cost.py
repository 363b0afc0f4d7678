"""What a run costs, predicted from the store's records instead of a timed probe.

A run's wall seconds are ``fixed + steps × per_step + (validations + tests) × per_validation``: ``fixed`` is
building the model and data and checkpointing; ``per_step`` a training step; ``per_validation`` one validation pass;
``tests`` what a run's testing costs in validation passes (:func:`test_passes`: each checkpoint of its largest
ensemble over the test rows; 0 for a proxy run, which does not test). A full run's test pass is counted apart
because the proxy runs the model learns from never make one: folded into ``fixed``, a full run predicted from them
came out 4–11 % short (the demo tier's fashion_mnist, measured), and so every fraction of the full tier too high.
:func:`observation` reads the three from every run's facts in the store (``wall_seconds``,
``train_step_seconds`` over the steps trained, ``validation_seconds`` over ``validations``); :class:`CostModel`
predicts them for a run not made yet:

1. the same encoder on the same benchmark, measured before (this machine, this protocol): their median;
2. else a regression on the runs measured here: ``log per_step ~ log params + log (pixels × batch)`` (+ a term per
   task family when two families or more are measured, coded as deviations from their mean, so that a family not
   measured yet is priced at the mean of those measured: basis ``new family``), least squares with a ridge, and
   the fixed and validation seconds as the median of the same family's runs (all runs' where the family has none);
3. else the cold start: :data:`COLD` (seconds on a CPU core, the slow case), deliberately high, so a plan made before
   anything ran spends less than its budget rather than more, and is re-planned after every run with what it cost.

A warm prediction (1 or 2) is unbiased, not an upper bound: on this machine the proxy runs of one call took 0.60–1.21
of theirs, so a plan that one block nearly fills passed its budget by a fifth (the README's budget=0.02 call spent
0.021). The plan therefore fits ``predicted × margin`` into the budget (:meth:`CostModel.margin`): the
:data:`MARGIN_QUANTILE` of actual over predicted seconds of the store's own runs, each predicted without itself, by
basis. The ledger keeps the prediction itself, so spent/predicted still says how right the model was.

A plan (:mod:`gate.ranking.plan`) is made from these predictions before anything runs and again before every run,
the same function both times; ``cost.csv`` and ``ledger.json`` hold what was planned beside what was spent.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

#: The cold start: seconds of a step per unit of :attr:`RunFeatures.load` (a million parameters × a (224 px)² image),
#: and of a run's fixed and per-validation parts. Measured on this project's 2-core CPU machine, one thread, the demo
#: tier: a step 0.09 s per unit for resnet18 (0.70 s a step of 32 at 32 px), 0.16 for efficientnet_lite0; a run's
#: fixed part 4–8 s, a validation 1–2 s. What decides what fits is a short run's cost relative to a full one, so the
#: three keep their measured proportion; a proxy run's cold prediction is then raised by :data:`COLD_MARGIN`, so a
#: plan made before anything ran errs towards spending less. The first run's own times replace them.
COLD = {"per_step_per_mparam_image": 0.16, "fixed": 8.0, "per_validation": 2.0}
#: The ridge of the per-step regression (in log units).
RIDGE = 0.1
#: A warm plan reserves this quantile of the store's actual/predicted seconds (each run predicted without itself) ...
MARGIN_QUANTILE = 0.8
#: ... from at least this many of them of the prediction's basis (else of every basis; fewer: :data:`COLD_MARGIN`),
MARGIN_MIN_RUNS = 5
#: ... over the store's most recent runs (each one's prediction refits the model without it) ...
MARGIN_RUNS = 200
#: ... and never more than this (a store whose runs ran on another machine says little about this one).
MARGIN_MAX = 1.5
#: A proxy run predicted by the cold start is taken to cost this much more (never the full runs it is a fraction of):
#: an error nothing has measured gets the largest margin. At 1.25 the README's first gate-rank call (demo tier, empty
#: store) spent 1.09–1.47× the fraction its cold prediction gave (0.069, before the margin) in six calls, 0.101 once.
COLD_MARGIN = MARGIN_MAX
#: The errors of predictions for a family with every run of it left out (:meth:`CostModel.errors`).
NEW_FAMILY = "new family"


@dataclasses.dataclass(frozen=True)
class RunFeatures:
    """What decides a run's cost, known before it runs."""

    encoder: str
    benchmark: str
    family: str
    params: float          # the encoder's parameters
    pixels: float          # the input's pixels per example (image_size², × frames for video)
    batch: int

    @property
    def load(self) -> float:
        """Millions of parameters × (224 px)² images per step: the regression's unit of work."""
        return max(self.params, 1.0) / 1e6 * max(self.pixels, 1.0) / 224 ** 2 * max(self.batch, 1)


@dataclasses.dataclass(frozen=True)
class Costs:
    per_step: float
    fixed: float
    per_validation: float
    basis: str                   # "measured" (this encoder × benchmark) | "fitted" | "new family" | "cold start"

    def seconds(self, steps: float, validations: float, tests: float = 0.0) -> float:
        return self.fixed + steps * self.per_step + (validations + tests) * self.per_validation


@dataclasses.dataclass(frozen=True)
class Observation:
    features: RunFeatures
    per_step: float
    fixed: float
    per_validation: float
    steps: float = math.nan          # what the run trained and validated (its own seconds, for the margin)
    validations: float = 0.0

    @property
    def seconds(self) -> float:
        """The run's seconds less its test pass: what :meth:`Costs.seconds` predicts for its steps and validations."""
        per_val = self.per_validation if self.validations else 0.0  # (NaN where it never validated)
        return Costs(self.per_step, self.fixed, per_val, "measured").seconds(self.steps, self.validations)


def test_passes(config: Mapping[str, Any], split_rows: Mapping[str, Any] | None = None) -> float:
    """What a run's testing costs in validation passes: the checkpoints of its largest ensemble (the test streams
    each batch through all of them) over its test rows, in units of its validation rows. A split's rows are its cap
    (``data.max_<split>_samples``) or, uncapped or capped above it, the whole split as a run of the dataset recorded
    it (``split_rows`` of its facts: ``{split: {"used", "of"}}``); one to one where neither is known. 0 for a run that
    does not test (``evaluate_test: false``, a proxy run)."""
    if config.get("evaluate_test") is False:
        return 0.0
    data = config.get("data") or {}

    def rows(split: str) -> float:
        cap, whole = data.get(f"max_{split}_samples"), ((split_rows or {}).get(split) or {}).get("of")
        known = [float(v) for v in (cap, whole) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
        return min(known) if known else math.nan

    test, val = rows("test"), rows("val")
    ratio = test / val if math.isfinite(test) and math.isfinite(val) else 1.0
    members = max([int(k) for k in config.get("ensembles") or () if isinstance(k, int)] + [1])
    return members * ratio


def observation(features: RunFeatures, facts: Mapping[str, Any], tests: float = 0.0) -> Observation | None:
    """The three costs of one stored run from its facts (None where the run timed no step); ``tests``: its test
    passes (:func:`test_passes`), taken out of its fixed seconds at its own validation pass's price."""
    wall = facts.get("wall_seconds")
    train = facts.get("train_step_seconds")
    steps = facts.get("global_step")
    if facts.get("resumed_from_step") is not None:
        return None  # its seconds span attempts (each with its own fixed cost), its step times its last attempt only
    if not all(isinstance(v, (int, float)) for v in (wall, train, steps)):
        return None
    trained = float(steps)
    if trained <= 0 or float(train) <= 0:
        return None
    validations = facts.get("validations")
    val_seconds = facts.get("validation_seconds")
    per_val = (float(val_seconds) / float(validations) if isinstance(validations, (int, float)) and validations
        and isinstance(val_seconds, (int, float)) else math.nan)
    fixed = float(wall) - float(train) - (float(val_seconds) if isinstance(val_seconds, (int, float)) else 0.0)
    if tests and math.isfinite(per_val):
        fixed -= tests * per_val
    return Observation(features, float(train) / trained, max(fixed, 0.0), per_val, trained,
                       float(validations) if isinstance(validations, (int, float)) else 0.0)


class CostModel:
    """Predicted costs of runs (see the module docstring); refitted whenever observations are added."""

    def __init__(self, observations: Iterable[Observation] = ()) -> None:
        self.observations: list[Observation] = list(observations)
        self._fit()

    def add(self, obs: Observation | None) -> None:
        if obs is not None:
            self.observations.append(obs)
            self._fit()

    def _fit(self) -> None:
        self._ratios: dict[str, list[float]] | None = None
        obs = [o for o in self.observations if o.per_step > 0 and math.isfinite(o.per_step)]
        self._coef = None
        families = sorted({o.features.family for o in obs})
        self._families = families if len(families) > 1 else []
        if len(obs) >= 3 and len({round(math.log(o.features.load), 6) for o in obs}) >= 2:
            x = np.array([[1.0, math.log(o.features.load), *self._family_columns(o.features.family)] for o in obs])
            y = np.array([math.log(o.per_step) for o in obs])
            reg = RIDGE * np.eye(x.shape[1])
            reg[0, 0] = 0.0
            self._coef = np.linalg.solve(x.T @ x + reg, x.T @ y)

    def _family_columns(self, family: str) -> list[float]:
        """A family's terms in the regression, coded as deviations from the mean of the measured families (the first
        family is -1 in every column): a family not measured has none, so it is priced at the measured families'
        mean in log seconds per step — never at whichever family sorts first, as a treatment coding did. On two
        stores of the demo tier (20 runs, 8 families each), each run predicted with every run of its family left out
        (measurements/rank_cost_model.py, "new family"): the predicted seconds over the actual 0.69 and 0.64 with the
        first family, 0.74 and 0.73 with the mean; median |predicted/actual − 1| 0.45 and 0.51 → 0.39 and 0.44."""
        if not self._families:
            return []
        first = family == self._families[0]
        return [-1.0 if first else float(family == f) for f in self._families[1:]]

    def _median(self, values: Sequence[float]) -> float:
        finite = [v for v in values if math.isfinite(v)]
        return float(np.median(finite)) if finite else math.nan

    def predict(self, f: RunFeatures) -> Costs:
        same = [o for o in self.observations if o.features.encoder == f.encoder and o.features.benchmark == f.benchmark]
        if same:
            per_val = self._median([o.per_validation for o in same])
            return Costs(self._median([o.per_step for o in same]), self._median([o.fixed for o in same]),
                         per_val if math.isfinite(per_val) else COLD["per_validation"], "measured")
        if self._coef is not None:
            row = [1.0, math.log(f.load), *self._family_columns(f.family)]
            per_step = float(math.exp(np.dot(self._coef, row)))
            family = [o for o in self.observations if o.features.family == f.family] or self.observations
            per_val = self._median([o.per_validation for o in family])
            return Costs(per_step, self._median([o.fixed for o in family]),
                         per_val if math.isfinite(per_val) else COLD["per_validation"], self._fitted(f))
        if self.observations:  # one or two runs measured: scale the nearest by its load
            near = min(self.observations, key=lambda o: abs(math.log(o.features.load) - math.log(f.load)))
            per_val = near.per_validation if math.isfinite(near.per_validation) else COLD["per_validation"]
            return Costs(near.per_step * f.load / near.features.load, near.fixed, per_val, self._fitted(f))
        return Costs(COLD["per_step_per_mparam_image"] * f.load, COLD["fixed"], COLD["per_validation"], "cold start")

    def measures(self, family: str) -> bool:
        """Whether a run of ``family`` was measured (else the family is priced at the measured families' mean)."""
        return any(o.features.family == family for o in self.observations)

    def _fitted(self, f: RunFeatures) -> str:
        """The basis of a fitted price: :data:`NEW_FAMILY` where no run of its family was measured."""
        return "fitted" if self.measures(f.family) else NEW_FAMILY

    def margin(self, basis: str) -> float:
        """What a plan multiplies a prediction of ``basis`` by before fitting it into the budget: the
        :data:`MARGIN_QUANTILE` of actual/predicted seconds over the store's runs, each predicted by the model fitted
        without it (:meth:`errors`), of that basis where at least :data:`MARGIN_MIN_RUNS` are, else of every basis;
        between 1 and :data:`MARGIN_MAX`. Too few runs to say: :data:`COLD_MARGIN`. A :data:`NEW_FAMILY` price (a
        family no run measured, priced at the others' mean) errs most: its margin is that of each measured family's
        runs predicted with the whole family left out (:data:`MARGIN_MAX` where fewer than :data:`MARGIN_MIN_RUNS`).
        The cold start's margin is in its prediction already (1 here)."""
        if basis == "cold start":
            return 1.0
        if basis == NEW_FAMILY:
            return self._new_family_margin()
        ratios = self.errors()
        pooled = ratios.get(basis, [])
        if len(pooled) < MARGIN_MIN_RUNS:
            pooled = [r for b, rs in ratios.items() if b != NEW_FAMILY for r in rs]
        if len(pooled) < MARGIN_MIN_RUNS:
            return COLD_MARGIN
        return self._quantile(pooled)

    def _new_family_margin(self) -> float:
        unseen = self.errors().get(NEW_FAMILY, [])
        return self._quantile(unseen) if len(unseen) >= MARGIN_MIN_RUNS else MARGIN_MAX

    @staticmethod
    def _quantile(ratios: Sequence[float]) -> float:
        return float(min(MARGIN_MAX, max(1.0, np.quantile(ratios, MARGIN_QUANTILE))))

    def errors(self) -> dict[str, list[float]]:
        """basis → actual/predicted seconds of the :data:`MARGIN_RUNS` most recent runs with their steps known, each
        predicted by a model of every other run, and under :data:`NEW_FAMILY` by a model of every run of the other
        families (computed once per fit)."""
        if self._ratios is None:
            self._ratios = {}
            known = [i for i, o in enumerate(self.observations) if math.isfinite(o.steps) and o.per_step > 0]
            recent = known[-MARGIN_RUNS:]
            for i in recent:
                self._ratio(self.observations[i], self.observations[:i] + self.observations[i + 1:])
            for family in sorted({self.observations[i].features.family for i in recent}):
                others = [o for o in self.observations if o.features.family != family]
                if others:
                    model = CostModel(others)
                    for i in recent:
                        if self.observations[i].features.family == family:
                            self._ratio(self.observations[i], model, NEW_FAMILY)
        return self._ratios

    def _ratio(self, o: Observation, others: CostModel | list[Observation], key: str | None = None) -> None:
        costs = (others if isinstance(others, CostModel) else CostModel(others)).predict(o.features)
        if key is None and costs.basis == NEW_FAMILY:
            return  # the only run of its family: counted where its family is left out whole
        predicted = costs.seconds(o.steps, o.validations)
        if costs.basis != "cold start" and predicted > 0 and math.isfinite(predicted) and math.isfinite(o.seconds):
            self._ratios.setdefault(key or costs.basis, []).append(o.seconds / predicted)

    def margin_line(self) -> str:
        """The margins a warm plan reserves, for the printout ('' before anything was measured)."""
        ratios = self.errors()
        if not self.observations:
            return ""
        every = sum(len(rs) for b, rs in ratios.items() if b != NEW_FAMILY)

        def basis_of(b: str) -> str:
            n = len(ratios.get(b, []))
            if b == NEW_FAMILY:
                return (f"{n} run(s), each family left out" if n >= MARGIN_MIN_RUNS else
                    f"fewer than {MARGIN_MIN_RUNS} runs: the cap")
            return (f"{n} run(s)" if n >= MARGIN_MIN_RUNS else f"{every} run(s) of any basis"
                if every >= MARGIN_MIN_RUNS else f"fewer than {MARGIN_MIN_RUNS} runs: the cold start's")

        parts = [f"{b} ×{self.margin(b):.2f} ({basis_of(b)})" for b in ("measured", "fitted")]
        parts.append(f"a family not measured ×{self._new_family_margin():.2f} ({basis_of(NEW_FAMILY)})")
        return ("warm predictions planned with a margin (the store's runs predicted without themselves): " +
            ", ".join(parts))

"""Successive-halving schedules and compute accounting for the budgeted fine-tuning proxy.

Units. The *full tier* of one benchmark costs ``n_encoders × seeds × full_steps`` training steps; a budget is a
fraction of that. A schedule is a list of rungs; rung ``k`` ends at ``r0 · eta^k`` steps (cumulative: a survivor
continues from its checkpoint) and is reached by ``keep_k = ceil(n / eta^k)`` encoders, down to two (the last
rung orders the final two). Its cost in steps is ``Σ_k keep_k (r_k − r_{k−1})`` plus a fixed overhead per run
(building the model, validating, testing) given in step equivalents.

Seconds. Planning is in steps; what is *reported* is seconds, measured: every proxy run's ``wall_seconds`` and
every feature pass the proxy used (:class:`Ledger`). The full tier's cost is estimated from the proxy's own runs:
per encoder × benchmark, ``overhead + full_steps × seconds_per_step`` of its first (from-scratch) rung, where
``overhead = wall − training seconds``. That leaves out the extra validations of a longer run, so it
underestimates the full cost and the reported fraction errs on the high (honest) side. Where the store already
holds the full run, its own ``wall_seconds`` is used instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from gate.errors import ConfigError


def keep_counts(n: int, eta: int, max_rungs: int | None = None) -> list[int]:
    """Encoders reaching each rung: ``n, ceil(n/eta), ...`` while at least two are left to order, at most
    ``max_rungs`` rungs (1: every encoder one run, no halving)."""
    counts = [n]
    while counts[-1] > 2 and (max_rungs is None or len(counts) < max_rungs):
        counts.append(max(2, math.ceil(counts[-1] / eta)))
    return counts


def rung_steps(r0: int, eta: int, rungs: int, full_steps: int) -> list[int]:
    """Cumulative steps at the end of each rung: ``r0 · eta^k``, capped at the last multiple of ``r0`` within
    ``full_steps`` (a rung validates every ``r0`` steps, so it must end on one), duplicates dropped."""
    out: list[int] = []
    for k in range(rungs):
        s = min(full_steps // r0 * r0, r0 * eta ** k)
        if not out or s > out[-1]:
            out.append(s)
    return out


def schedule_cost(keeps: Sequence[int], steps: Sequence[int], overhead_steps: float = 0.0) -> float:
    """Steps a schedule trains in all (survivors continue: each rung pays only its new steps), plus
    ``overhead_steps`` per run."""
    total, prev = 0.0, 0
    for keep, s in zip(keeps, steps):
        total += keep * (s - prev + overhead_steps)
        prev = s
    return total


@dataclasses.dataclass(frozen=True)
class Schedule:
    r0: int
    keeps: tuple[int, ...]
    steps: tuple[int, ...]
    cost_steps: float
    budget_steps: float


def plan_schedule(n: int, full_steps: int, seeds: int, budget: float, eta: int = 2,
                  overhead_steps: float = 0.0, max_rungs: int | None = None) -> Schedule:
    """The largest first rung ``r0`` whose schedule fits ``budget × n × seeds × (full_steps + overhead_steps)``
    step equivalents: every run, a full one too, pays the fixed cost ``overhead_steps`` once (a full run pays
    more — it validates more often and tests — so the fraction of the real full cost comes out lower).

    Raises :class:`ConfigError` when not even one step per encoder fits (the budget is too small)."""
    keeps = keep_counts(n, eta, max_rungs)
    budget_steps = budget * n * seeds * (full_steps + overhead_steps)
    best = None
    for r0 in range(1, full_steps + 1):
        steps = rung_steps(r0, eta, len(keeps), full_steps)
        cost = schedule_cost(keeps[:len(steps)], steps, overhead_steps)
        if cost > budget_steps:
            break
        best = Schedule(r0, tuple(keeps[:len(steps)]), tuple(steps), cost, budget_steps)
    if best is None:
        raise ConfigError(f"budget={budget} buys {budget_steps:.1f} training steps for {n} encoders on a benchmark "
                          f"of {full_steps} steps × {seeds} seed(s) (with {overhead_steps:g} steps of overhead per "
                          f"run): not one step each; raise the budget (0 < budget < 1)")
    return best


def subset_budget(budget: float, full_cost: Mapping[str, float], chosen: Sequence[str]) -> float:
    """The budget of each benchmark the proxy runs when it runs only ``chosen`` of the tier's benchmarks
    (``full_cost``: every benchmark the proxy must cover → what its full run costs, in one unit for all: the
    seconds measured by :func:`gate.ranking.proxy.probe_costs`, or its steps, which take a step to cost alike on
    every benchmark): the whole tier's budget ``budget × Σ_all`` is spent on the chosen ones, so each gets
    ``budget × Σ_all / Σ_chosen`` of its own full cost (the same pool and seeds on every benchmark of a tier)."""
    total = sum(full_cost.values())
    mine = sum(full_cost[b] for b in chosen)
    return budget * total / mine if mine > 0 else budget


@dataclasses.dataclass(frozen=True)
class RunCost:
    """What one fine-tuning run cost, from its records' facts."""

    wall_seconds: float
    train_seconds: float
    trained_steps: int

    @property
    def overhead_seconds(self) -> float:
        return max(0.0, self.wall_seconds - self.train_seconds)

    @property
    def seconds_per_step(self) -> float:
        return self.train_seconds / self.trained_steps if self.trained_steps > 0 else math.nan

    def full_estimate(self, full_steps: int) -> float:
        """A full run's seconds estimated from this one (see the module docstring: a lower bound)."""
        return self.overhead_seconds + full_steps * self.seconds_per_step

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any]) -> RunCost:
        def num(key: str) -> float:
            v = facts.get(key)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan

        start = facts.get("resumed_from_step") or 0
        return cls(num("wall_seconds"), num("train_step_seconds"), int(num("global_step") - float(start))
                   if math.isfinite(num("global_step")) else 0)


def finite_or_none(value: float | None) -> float | None:
    """A number as the ledger keeps it: a finite float, or None where nothing was measured (never NaN)."""
    return float(value) if value is not None and math.isfinite(value) else None


def minutes(seconds: float | None) -> str:
    """Seconds as printed minutes, ``—`` where they were not measured."""
    return "—" if seconds is None else f"{seconds / 60:.1f} min"


def shown(value: float | None, spec: str = ".3f") -> str:
    """A number as printed, ``—`` where it was not measured (None or NaN: fewer than two seeds for a τ)."""
    return "—" if value is None or not math.isfinite(value) else format(value, spec)


@dataclasses.dataclass
class Ledger:
    """Every second the proxy spent (runs and feature passes) and the full tier's estimated seconds.

    A full-run cost that was not measured — a rung resumed at its last step trains nothing to time — is None, and
    so is every total and fraction over it: ``ledger.json`` writes null, the printout ``—`` and names the part
    (:attr:`unmeasured`); NaN is never a value here."""

    spent: dict[str, float] = dataclasses.field(default_factory=dict)      # item -> seconds
    full: dict[str, float | None] = dataclasses.field(default_factory=dict)       # (encoder × benchmark) -> seconds
    estimated: dict[str, float | None] = dataclasses.field(default_factory=dict)  # the same from the proxy's steps

    def spend(self, item: str, seconds: float) -> None:
        if math.isfinite(seconds):
            self.spent[item] = self.spent.get(item, 0.0) + float(seconds)

    def estimate(self, key: str, estimated: float | None, stored: float | None = None) -> None:
        """``key``'s full-run seconds: ``estimated`` from the proxy's step times (None or NaN: not measured), and
        the stored full runs' own seconds (``stored``) where they exist, which win in :attr:`full`."""
        self.estimated[key] = finite_or_none(estimated)
        stored = finite_or_none(stored)
        self.full[key] = stored if stored else self.estimated[key]

    @property
    def unmeasured(self) -> list[str]:
        """The (encoder × benchmark) full costs nothing measured."""
        return sorted(k for k in {**self.full, **self.estimated} if self.full.get(k, 0.0) is None
                      or self.estimated.get(k, 0.0) is None)

    @property
    def from_stored_runs(self) -> bool:
        """Whether some full cost is a stored full run's own seconds rather than the proxy's estimate."""
        return any(self.full[k] != self.estimated.get(k) for k in self.full)

    @property
    def spent_seconds(self) -> float:
        return float(sum(self.spent.values()))

    @property
    def full_seconds(self) -> float | None:
        return None if None in self.full.values() else float(sum(self.full.values()))

    @property
    def fraction(self) -> float | None:
        full = self.full_seconds
        return self.spent_seconds / full if full else None

    @property
    def estimated_fraction(self) -> float | None:
        """Spent over the full tier as estimated from the proxy's own step times (a lower bound: errs high)."""
        if None in self.estimated.values():
            return None
        total = sum(self.estimated.values())
        return self.spent_seconds / total if total > 0 else None

    def to_json(self) -> dict[str, Any]:
        """What ``ledger.json`` holds (null where not measured)."""
        return {"spent_seconds": self.spent_seconds, "full_seconds": self.full_seconds, "fraction": self.fraction,
                "estimated_fraction": self.estimated_fraction, "unmeasured": self.unmeasured, "full": self.full,
                "estimated": self.estimated}

    def overrun(self, budget: float) -> str:
        """A warning when the seconds spent pass ``budget`` of the full tier (:attr:`fraction`: the stored full
        runs' seconds where they exist, else the estimate), else ''. The plan is in training steps: it takes a
        step to cost alike on every benchmark of the tier and leaves out a run's fixed cost (building,
        validating) unless a cost probe measured it, so a proxy on a benchmark that costs more per step than the
        tier's mean, or on many short runs, can pass the budget — and says so."""
        if self.fraction is None or self.fraction <= budget * 1.01:
            return ""
        return (f"OVER THE BUDGET: {self.fraction:.3f} of the full tier's seconds against budget={budget} (the plan counts "
                f"training steps, and a run's fixed cost where a probe measured it; the seeding scores' feature "
                f"passes, and a benchmark's cost where it was not measured, are outside it)")

    def merged(self, other: Ledger) -> Ledger:
        """A ledger with both ledgers' items; an item in both (a shared run) counts once."""
        return Ledger({**self.spent, **other.spent}, {**self.full, **other.full}, {**self.estimated, **other.estimated})

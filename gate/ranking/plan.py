"""How gate-rank spends its budget: a plan made from predicted costs, shrunk until it fits, never refused.

The budget is a fraction of the full tier's seconds (every encoder × benchmark × the tier's seeds, each full run's
seconds predicted by :class:`gate.ranking.cost.CostModel`, or its stored wall time where the store has it). The
plan tries, in order, and takes the first that fits:

1. the proxy: ``seeds`` proxy seeds × the benchmarks the selection takes (:func:`gate.ranking.select.choose`, whose
   budget is what is left after the prior) × one run per encoder of ``fraction`` of each benchmark's full steps,
   validating ``val_points`` times. It shrinks **fewer seeds first** (down to one), **then fewer benchmarks** (the
   selection takes what the budget affords), **then shorter runs** (the fraction halved down to
   :data:`MIN_FRACTION`);
2. the prior alone (its scores' feature passes);
3. the static ranking (parameter counts, published source accuracy): it costs nothing, so every budget in (0, 1)
   has a plan.

What fits is each block's predicted seconds times the cost model's margin (:meth:`gate.ranking.cost.CostModel.margin`:
a prediction is as likely too low as too high), and priced at the present speed (this call's runs over the model's
prediction for them, where above 1: a load the store's runs did not have); the plan's seconds are the predictions.
A block whose remaining runs, at that speed, would pass the budget stops after the run that shows it (its runs are
listed, not ranked; their seconds count).

:func:`make_plan` is the one planner: gate-rank calls it before anything runs, and the run loop calls it again
after the prior's feature passes and before every (seed, benchmark) block with the costs measured so far (the cost
model refitted after every run), what is left of the budget and the blocks already run: a plan that turns out
cheaper than predicted grows (more seeds, benchmarks or steps), one that turns out dearer shrinks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

#: The shortest proxy run, as a fraction of the full run's steps.
MIN_FRACTION = 1 / 16
#: At least this many validations of a proxy run fall on distinct steps.
MIN_STEPS_PER_POINT = 1


@dataclasses.dataclass(frozen=True)
class Block:
    """One proxy seed × one benchmark: every encoder of the pool runs ``steps`` steps, validating every
    ``val_every``."""

    seed: int
    benchmark: str
    steps: int
    val_every: int
    seconds: float          # predicted, every encoder's run together


@dataclasses.dataclass(frozen=True)
class Plan:
    kind: str                          # proxy | prior | static
    blocks: tuple[Block, ...]
    benchmarks: tuple[str, ...]        # the proxy's, in the selection's order
    seeds: tuple[int, ...]
    fraction: float
    prior_seconds: float               # the prior's feature passes (0 where the plan has no prior)
    planned_seconds: float
    budget_seconds: float
    full_seconds: float
    why: str                           # one line: what the plan is and why (what was shrunk)
    selection: object = None           # the gate.ranking.select.Selection behind the benchmarks
    with_prior: bool = False           # the prior's scores are computed (stored ones read back may cost 0 s)

    @property
    def planned_fraction(self) -> float:
        return self.planned_seconds / self.full_seconds if self.full_seconds > 0 else math.nan


def proxy_steps(full_steps: int, fraction: float, val_points: int) -> tuple[int, int]:
    """(steps, validate every) of a proxy run: ``fraction`` of the full run, a multiple of ``val_points`` so that it
    validates exactly ``val_points`` times (at least one step between validations)."""
    every = max(MIN_STEPS_PER_POINT, int(full_steps * fraction) // max(val_points, 1))
    return min(full_steps, every * max(val_points, 1)), every


def make_plan(*, candidates: Sequence[str], full_steps: Mapping[str, int], proxy_seeds: Sequence[int],
              run_fraction: float, val_points: int, budget_seconds: float, full_seconds: float,
              block_seconds: Callable[[str, int, int, int], float], choose: Callable[[Mapping[str, float], float], object],
              prior_seconds: float, with_prior: bool, done: frozenset = frozenset(),
              prefer: Sequence[float] = (), block_bound: Callable[[str, int, int, int], float] | None = None) -> Plan:
    """The first plan that fits ``budget_seconds`` (see the module docstring).

    ``block_seconds(benchmark, seed, steps, val_every)``: the predicted seconds of every encoder's proxy run (for a
    run an earlier call stored, the seconds it cost: read back, not trained, but counted as the ledger counts it);
    ``choose(cost, affordable)``: the selection (a :class:`gate.ranking.select.Selection`) among ``candidates``
    given each one's cost and what is affordable;
    ``prior_seconds``: the prior's feature passes (spent first where ``with_prior``); ``done``: the (seed, benchmark)
    blocks already run (re-planning before a block: they cost nothing more and are kept); ``prefer``: run fractions
    tried before the ladder's own order (those whose runs the store already holds); ``block_bound``: the seconds a
    block is fitted into the budget at (its prediction with the cost model's margin; default ``block_seconds``) —
    the plan's own seconds stay the predictions."""
    # the proxy with the prior, else without it (said only where a prior was asked for and its passes were dropped)
    for included in ((True, False) if with_prior else (False,)):
        found = _proxy_plan(candidates=candidates, full_steps=full_steps, proxy_seeds=proxy_seeds,
                            run_fraction=run_fraction, val_points=val_points, budget_seconds=budget_seconds,
                            full_seconds=full_seconds, block_seconds=block_seconds, choose=choose,
                            prior=prior_seconds if included else 0.0, with_prior=included,
                            prior_dropped=with_prior and not included, done=done, prefer=prefer,
                            block_bound=block_bound or block_seconds)
        if found is not None:
            return found
    if with_prior and prior_seconds <= budget_seconds:
        return Plan("prior", (), (), (), 0.0, prior_seconds, prior_seconds, budget_seconds, full_seconds,
                    "no proxy run fits the budget: the zero-training prior ranks the pool", with_prior=True)
    return Plan("static", (), (), (), 0.0, 0.0, 0.0, budget_seconds, full_seconds,
                "neither a proxy run nor the prior's feature passes fit the budget: the static ranking (parameters, "
                "published source accuracy) ranks the pool")


def fractions(run_fraction: float) -> list[float]:
    """The planner's ladder of run lengths: ``run_fraction``, halved down to :data:`MIN_FRACTION`."""
    out = []
    f = run_fraction
    while f >= MIN_FRACTION - 1e-12:
        out.append(f)
        f /= 2
    return out


def _proxy_plan(*, candidates, full_steps, proxy_seeds, run_fraction, val_points, budget_seconds, full_seconds,
                block_seconds, choose, prior, with_prior, prior_dropped, done, prefer, block_bound) -> Plan | None:
    """The first proxy level that fits with ``prior`` seconds of feature passes first (None: none fits)."""
    left = budget_seconds - prior
    ladder = fractions(run_fraction)
    ladder = [f for f in prefer if f in ladder] + [f for f in ladder if f not in prefer]
    wanted = None  # the benchmarks the selection takes when affordable is no limit
    for fraction in ladder:
        for n_seeds in range(len(proxy_seeds), 0, -1):
            steps = {b: proxy_steps(full_steps[b], fraction, val_points) for b in candidates}
            cost = {b: sum(block_bound(b, s, *steps[b]) for s in proxy_seeds[:n_seeds] if (s, b) not in done)
                    for b in candidates}  # what must fit
            if wanted is None:
                wanted = choose(cost, math.inf).chosen
            if left <= 0:
                break
            selection = choose(cost, left)
            chosen = [b for b in selection.chosen if cost[b] <= left + 1e-9]
            spent = sum(cost[b] for b in chosen)
            if not chosen or spent > left + 1e-9:
                continue
            whole = set(chosen) >= set(wanted)
            if n_seeds > 1 and not whole:
                continue  # fewer seeds before fewer benchmarks
            seeds = tuple(proxy_seeds[:n_seeds])
            blocks = tuple(Block(s, b, *steps[b], block_seconds(b, s, *steps[b])) for s in seeds for b in chosen
                           if (s, b) not in done)
            shrunk = []
            if n_seeds < len(proxy_seeds):
                shrunk.append(f"{n_seeds} of {len(proxy_seeds)} proxy seeds")
            if not whole:
                shrunk.append(f"{len(chosen)} of the {len(wanted)} benchmarks the selection wants")
            if fraction < run_fraction:
                shrunk.append(f"runs of {fraction:.3g} of the full steps (not {run_fraction:.3g})")
            if prior_dropped:
                shrunk.append("no prior (its feature passes do not fit beside the runs)")
            why = ("the proxy as wanted" if not shrunk else "the proxy, shrunk to fit: " + ", ".join(shrunk))
            return Plan("proxy", blocks, tuple(chosen), seeds, fraction, prior,
                        prior + sum(block.seconds for block in blocks), budget_seconds,
                        full_seconds, why, selection, with_prior)
    return None

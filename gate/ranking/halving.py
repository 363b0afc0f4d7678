"""``halving: contested``: the budget's second half goes to the encoders whose order the first half left least settled.

With ``halving=contested`` gate-rank plans its first allocation (the prior and one proxy run per encoder per block)
in :data:`FIRST_SHARE` of the budget. Then, in rounds while the budget lasts, every pair of encoders is judged on the
runs ranked so far: in one block a pair is *settled* when one encoder's interval of its extrapolated end lies wholly
above the other's, and the pair's certainty is the net share of blocks settling it one way (``|a above b − b above
a| / blocks``: 1 when every block settles it the same way, 0 when none does or they split evenly). The encoders of
the least certain pairs (ties: the pair nearer in the runs' ranking first) get a run :data:`GROWTH` times as long in
every block they ran, while those runs' prices, with the plan's margin, fit what is left of the budget. Each longer
run replaces the shorter one in the ranking; the shorter one stays listed (``superseded`` in predictions.csv) and
its seconds count.

A longer run continues the shorter run from its last checkpoint (kept until the rounds end): a run resumed from a
checkpoint written mid-epoch is the run never stopped (:mod:`gate.data.resumable`, tests/test_resume_exact.py), so
the continued run is the longer experiment exactly and costs only the steps it adds. Where the checkpoint is gone
(an earlier call's run), it trains from its start and costs its whole steps, as it is then priced.

Off by default (``halving: null``): no measurement has shown it ranks better at the same budget (docs/ranking.md).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

import numpy as np

from gate.ranking.complete import mean_rank

#: The share of the budget the first allocation is planned in (successive halving's first rung).
FIRST_SHARE = 0.5
#: A contested encoder's longer run, in the steps of its first run (at most the full run's).
GROWTH = 2


@dataclasses.dataclass(frozen=True)
class Contest:
    a: str
    b: str
    certainty: float    # the net share of the blocks that settle the pair one way (0: unsettled, 1: settled)
    blocks: int         # the blocks it was judged on


def _interval(run) -> tuple[float, float]:
    """The run's interval of its extrapolated end, higher is better."""
    return (run.lo, run.hi) if run.higher_is_better else (-run.hi, -run.lo)


def _blocks(runs: Sequence) -> list[dict[str, object]]:
    by: dict[tuple[int, str], dict[str, object]] = {}
    for r in runs:
        by.setdefault((r.seed, r.benchmark), {})[r.encoder] = r
    return list(by.values())


def contests(runs: Sequence, pool: Sequence[str]) -> list[Contest]:
    """Every pair of the pool, least certain first (ties: nearer in the runs' mean rank first), judged on the blocks
    in which every encoder of the pool ran."""
    blocks = [b for b in _blocks(runs) if all(e in b for e in pool)]
    if not blocks:
        return []
    ranks = np.array([mean_rank(np.array([[b[e].oriented] for e in pool], dtype=float)) for b in blocks])
    place = dict(zip(pool, ranks.mean(axis=0), strict=True))
    out = []
    for a, b in itertools.combinations(pool, 2):
        votes = 0
        for block in blocks:
            (a_lo, a_hi), (b_lo, b_hi) = _interval(block[a]), _interval(block[b])
            votes += int(a_lo > b_hi) - int(b_lo > a_hi)
        out.append(Contest(a, b, abs(votes) / len(blocks), len(blocks)))
    return sorted(out, key=lambda c: (c.certainty, abs(place[c.a] - place[c.b])))


def longer_steps(steps: int, val_every: int, full_steps: int) -> int | None:
    """A longer run's steps: :data:`GROWTH` × ``steps``, at most the full run's, on the same validation interval (its
    curve passes through the shorter run's points); None where no longer run is possible."""
    every = max(val_every, 1)
    longer = min(GROWTH * steps, full_steps) // every * every
    return longer if longer > steps else None


def choose(ranked: Sequence[Contest], price: Callable[[str], float | None], left: float) -> tuple[list[str], float]:
    """The encoders of the least certain pairs whose longer runs fit ``left`` seconds (``price(encoder)``: all of its
    longer runs with the plan's margin, None: it has none), and their price. A settled pair (certainty 1) adds
    nothing; a pair that does not fit is passed over for a cheaper one after it."""
    chosen: list[str] = []
    spent = 0.0
    for c in ranked:
        if c.certainty >= 1.0:
            break
        new = [e for e in (c.a, c.b) if e not in chosen and price(e) is not None]
        cost = sum(price(e) or 0.0 for e in new)
        if new and spent + cost <= left + 1e-9:
            chosen += new
            spent += cost
    return chosen, spent


def contest_line(ranked: Sequence[Contest], shown: int = 3) -> str:
    """The least certain pairs, as printed."""
    return ", ".join(f"{c.a}–{c.b} {c.certainty:.2f}" for c in ranked[:shown] if c.certainty < 1.0) or "none"

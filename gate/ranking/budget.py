"""What gate-rank spent against what it planned, and against the full tier.

Every proxy run and every feature pass is an item with its planned seconds (the plan's prediction when it was made,
:mod:`gate.ranking.plan`) and its spent seconds (the run's own ``wall_seconds``, the score records' feature-pass
seconds). The full tier is every encoder × benchmark × the tier's seeds: a stored full run's own seconds where the
store has it, else the cost model's prediction (``full_basis`` says which), re-predicted after every run with the
model refitted on what the runs cost, so that ``fraction`` compares seconds measured on this machine, under its
present load, with the full tier's seconds on the same machine. A number that was not measured is
``None`` — ``ledger.json`` writes null and the printout ``—`` — never NaN.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from gate.ranking.cost import NEW_FAMILY

#: How far past the budget the seconds spent may go before it counts as overspent: the rounding of measured seconds.
OVERRUN_TOLERANCE = 0.01


def finite_or_none(value: float | None) -> float | None:
    """A number as the ledger keeps it: a finite float, or None where nothing was measured (never NaN)."""
    return float(value) if value is not None and math.isfinite(value) else None


def minutes(seconds: float | None) -> str:
    """Seconds as printed minutes, ``—`` where they were not measured."""
    return "—" if seconds is None or not math.isfinite(seconds) else f"{seconds / 60:.1f} min"


def shown(value: float | None, spec: str = ".3f") -> str:
    """A number as printed, ``—`` where it was not measured (None or NaN: fewer than two seeds for a τ)."""
    return "—" if value is None or not math.isfinite(value) else format(value, spec)


@dataclasses.dataclass
class Ledger:
    """Planned and spent seconds per item, and the full tier's seconds per encoder × benchmark."""

    planned: dict[str, float] = dataclasses.field(default_factory=dict)     # item -> seconds, as planned
    spent: dict[str, float | None] = dataclasses.field(default_factory=dict)  # item -> seconds (None: unmeasured)
    full: dict[str, float | None] = dataclasses.field(default_factory=dict)   # "enc × bench" -> every tier seed
    full_basis: dict[str, str] = dataclasses.field(default_factory=dict)  # stored|measured|fitted|new family|cold start
    planned_total: float = 0.0        # the whole plan's seconds when it was first made
    planned_full: float = math.nan    # the full tier's seconds as predicted when the plan was first made
    budget: float = math.nan
    new_family_margin: float = 1.0    # how far a 'new family' price can err low (the cost model's margin for it)

    def plan(self, item: str, seconds: float) -> None:
        self.planned[item] = float(seconds)

    def spend(self, item: str, seconds: float | None) -> None:
        seconds = finite_or_none(seconds)
        self.spent[item] = None if seconds is None else (self.spent.get(item) or 0.0) + seconds

    @property
    def unmeasured(self) -> list[str]:
        return sorted([k for k, v in self.spent.items() if v is None] + [k for k, v in self.full.items() if v is None])

    @property
    def spent_seconds(self) -> float | None:
        return None if None in self.spent.values() else float(sum(self.spent.values()))

    @property
    def full_seconds(self) -> float | None:
        return None if not self.full or None in self.full.values() else float(sum(self.full.values()))

    @property
    def fraction(self) -> float | None:
        spent, full = self.spent_seconds, self.full_seconds
        return spent / full if spent is not None and full else None

    @property
    def planned_fraction(self) -> float | None:
        """The first plan's seconds over the full tier as predicted then (the plan's own fraction)."""
        full = self.planned_full if math.isfinite(self.planned_full) else self.full_seconds
        return self.planned_total / full if full else None

    @property
    def planned_vs_spent(self) -> float | None:
        """Spent over planned, for the items that were planned and ran (1 = the cost model was right)."""
        both = [(self.planned[k], self.spent[k]) for k in self.planned if self.spent.get(k) is not None]
        planned = sum(p for p, _ in both)
        return sum(s for _, s in both) / planned if both and planned > 0 else None

    def new_family_note(self) -> str:
        """'' or, where some of the full tier's runs are of families no run measured yet (priced at the measured
        families' mean, the cost model's largest error: 46–55 % median on the stores measured), how many: the
        fraction of the full tier is then uncertain."""
        n = self.new_family_entries
        return f"; {n} of {len(self.full_basis)} priced from other families' runs: uncertain" if n else ""

    @property
    def new_family_entries(self) -> int:
        """How many of the full tier's encoder × benchmark entries are priced from other families' runs."""
        return sum(1 for b in self.full_basis.values() if b == NEW_FAMILY)

    def fraction_if_dearer(self) -> float | None:
        """The fraction spent were every full-tier entry priced from other families' runs :attr:`new_family_margin`
        times dearer: the low end of what the fraction can be (None: nothing so priced, or not measured)."""
        if self.fraction is None or not self.new_family_entries:
            return None
        full = sum(v * (self.new_family_margin if self.full_basis.get(k) == NEW_FAMILY else 1.0)
                   for k, v in self.full.items() if v is not None)
        return (self.spent_seconds or 0.0) / full if full else None

    def overrun(self) -> str:
        """A warning when the seconds spent pass the budget of the full tier (:data:`OVERRUN_TOLERANCE`), else ''.
        Where they pass it only on entries priced from other families' runs, and would not were those entries
        :attr:`new_family_margin` dearer, the warning says the overrun is possible, not that it happened: one
        measured family cannot say how much dearer the others are (the README's first call in an empty root)."""
        limit = self.budget * (1 + OVERRUN_TOLERANCE)
        if self.fraction is None or not math.isfinite(self.budget) or self.fraction <= limit:
            return ""
        low = self.fraction_if_dearer()
        if low is not None and low <= limit:
            return (f"possibly over the budget: {self.fraction:.3f} of the full tier as predicted against "
                    f"budget={self.budget}, but {self.new_family_entries} of its {len(self.full_basis)} encoder × "
                    f"benchmark entries are priced from other families' runs, which err up to "
                    f"×{self.new_family_margin:.2f}: {low:.3f} if they cost that much more")
        return (f"OVER THE BUDGET: {self.fraction:.3f} of the full tier's seconds against budget={self.budget} (the "
                f"plan is re-made before every block from the costs measured so far, and a block stops where its other runs "
                f"would pass the budget at the speed measured; a run once started runs whole"
                f"{self.new_family_note()})")

    def to_json(self) -> dict[str, Any]:
        """What ``ledger.json`` holds (strict JSON: null where not measured)."""
        return {"budget": finite_or_none(self.budget), "planned_seconds": finite_or_none(self.planned_total),
                "planned_fraction": finite_or_none(self.planned_fraction), "spent_seconds": self.spent_seconds,
                "planned_full_seconds": finite_or_none(self.planned_full), "full_seconds": self.full_seconds,
                "fraction": finite_or_none(self.fraction),
                "spent_over_planned": finite_or_none(self.planned_vs_spent), "unmeasured": self.unmeasured,
                "full": self.full, "full_basis": self.full_basis,
                "items": {k: {"planned": finite_or_none(self.planned.get(k)), "spent": self.spent.get(k)}
                          for k in dict.fromkeys([*self.planned, *self.spent])}}

"""Tiers into jobs: expand a tier × encoders × seeds into experiments (:mod:`gate.tiers.expand`), hand the
pending ones to a launcher (:mod:`gate.tiers.launchers`), then summarise the tier (:mod:`gate.tiers.summary`)."""

from gate.tiers.expand import Experiment, Plan, expand_tier, load_tier

__all__ = ["Experiment", "Plan", "expand_tier", "load_tier"]

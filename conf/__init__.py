"""Hydra configs shipped inside the package as ``gate.conf`` (see pyproject.toml)."""

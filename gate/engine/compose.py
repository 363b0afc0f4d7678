"""Hydra's compose API over gate's packaged configs, for the stages that compose configs of their own (a tier's
experiments, gate-rank's runs, gate-data's datasets) — also from inside a ``@hydra.main`` command."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def hydra_compose_context() -> Iterator[Any]:
    """Hydra's compose API over ``gate.conf``, usable inside a ``@hydra.main`` app (its state is restored)."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("gate.conf", version_base=None):
            yield GlobalHydra.instance()
    finally:
        restore_gh_from_backup(backup)

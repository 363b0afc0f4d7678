"""A Hydra callback that says, before a ``-m`` sweep starts, how many jobs it holds and which."""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


def sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """The override list of every job of a sweep, in Hydra's own order (its basic sweeper's expansion)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    batches = BasicSweeper.split_arguments(parsed, max_batch_size=None)
    return [list(job) for batch in batches for job in batch]


class AnnounceSweep(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            jobs = sweep_jobs(list(config.hydra.overrides.task))
        except Exception:  # noqa: BLE001 - announcing is a courtesy; Hydra reports bad sweeps itself
            return
        print(f"[gate] sweep of {len(jobs)} job(s):", flush=True)
        for number, job in enumerate(jobs):
            print(f"  #{number}: {' '.join(job)}", flush=True)

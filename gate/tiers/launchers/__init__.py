"""Launchers: hand a tier's pending experiments to something that runs them. One module each, found here.

A launcher is ``launch(experiments, ctx) -> LaunchResult``. ``commands`` and ``json`` only describe the jobs;
``local`` runs them here; ``slurm`` and ``submitit_local`` submit a job array through submitit.
"""

from __future__ import annotations

import dataclasses
import importlib
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gate.errors import ConfigError

LAUNCHERS: dict[str, str] = {
    "commands": "gate.tiers.launchers.commands:launch",
    "json": "gate.tiers.launchers.json_file:launch",
    "local": "gate.tiers.launchers.local:launch",
    "slurm": "gate.tiers.launchers.submitit_array:launch_slurm",
    "submitit_local": "gate.tiers.launchers.submitit_array:launch_local",
}


@dataclasses.dataclass
class LaunchContext:
    tier: str
    run_dir: Path                      # <paths.root>/tiers/<tier>-<hash>
    options: Mapping[str, Any]         # the `launcher:` section
    force: bool = False
    out: str | None = None             # launch=json
    gpus: Sequence[str] = ()           # visible GPU ids (local)
    env: Mapping[str, str] | None = None   # the environment jobs start from (None: this process's)
    interactive: bool = False          # refresh one status line (a TTY) instead of a line per event
    echo: Callable[..., None] = print      # print-like (accepts end= and flush=)

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "logs"


@dataclasses.dataclass
class LaunchResult:
    ran: bool                                   # the jobs ran (or were waited for): the tier can be summarised
    finished: list[str] = dataclasses.field(default_factory=list)
    failed: list[tuple[Any, str]] = dataclasses.field(default_factory=list)   # (experiment, log path or reason)


def gate_run_args(overrides: Sequence[str], force: bool = False) -> list[str]:
    return [*overrides, *(["force=true"] if force else [])]


def shell_command(overrides: Sequence[str], force: bool = False) -> str:
    """The copy-pasteable ``gate-run ...`` line of one experiment."""
    return shlex.join(["gate-run", *gate_run_args(overrides, force)])


def python_command(overrides: Sequence[str], force: bool = False) -> list[str]:
    """The same run as a subprocess of this interpreter (no PATH lookup)."""
    return [sys.executable, "-m", "gate.cli.run", *gate_run_args(overrides, force)]


def get_launcher(name: str) -> Callable[..., LaunchResult]:
    if name not in LAUNCHERS:
        raise ConfigError(f"launch={name!r} is unknown: choose one of {sorted(LAUNCHERS)}")
    module, _, attr = LAUNCHERS[name].partition(":")
    mod = importlib.import_module(module)
    check = getattr(mod, "check", None)
    if check is not None:
        check(name)
    return getattr(mod, attr)


def die_with_parent() -> None:
    """``preexec_fn`` of job subprocesses: on Linux the job is killed when the launcher dies (SIGKILL included),
    so a killed tier leaves no orphan training (its lock would block the rerun)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

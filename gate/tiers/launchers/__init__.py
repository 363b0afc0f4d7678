"""Launchers: hand a tier's pending experiments to something that runs them. One module each, found here.

A launcher is a module with ``launch(experiments, ctx) -> LaunchResult`` and a ``KIND`` (:class:`LauncherKind`)
saying what it is: ``commands`` and ``json`` only describe the jobs for another machine; ``local`` runs them here,
one GPU each; ``slurm`` and ``submitit_local`` submit a job array through submitit. gate-tier asks the kind, never
the name. Adding one: its module here and its line in :data:`LAUNCHERS` (or, from another package, ``LAUNCHERS.register``).
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gate.errors import ConfigError
from gate.files import write_target
from gate.registry import Registry


@dataclasses.dataclass(frozen=True)
class LauncherKind:
    describes_only: bool = False     # prints or writes the jobs for another machine: nothing runs here, no report,
    #                                  and a benchmark not prepared here is a warning (it may be there), not an error
    pins_gpus: bool = False          # gives each job its own visible GPU of this machine
    output_on_stdout: bool = False   # its output is the job list on stdout (gate-tier's progress goes to stderr)
    out_help: str = ""               # writes the jobs to the file out= names: what that file is (checked before any work)


#: Each launcher's function, imported on first use (a launcher's module may need submitit, a SLURM client, ...).
LAUNCHERS: Registry[Callable[..., LaunchResult]] = Registry("launcher", key="launch", error=ConfigError)
for _name, _where in {
    "commands": "gate.tiers.launchers.commands:launch",
    "json": "gate.tiers.launchers.json_file:launch",
    "local": "gate.tiers.launchers.local:launch",
    "slurm": "gate.tiers.launchers.submitit_array:launch_slurm",
    "submitit_local": "gate.tiers.launchers.submitit_array:launch_local",
}.items():
    LAUNCHERS.register(_name, _where)


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
    stopped: set[str] = dataclasses.field(default_factory=set)  # ids of the failed ones a signal stopped (they resume)


def gate_run_args(overrides: Sequence[str], force: bool = False) -> list[str]:
    return [*overrides, *(["force=true"] if force else [])]


def shell_command(overrides: Sequence[str], force: bool = False) -> str:
    """The copy-pasteable ``gate-run ...`` line of one experiment."""
    return shlex.join(["gate-run", *gate_run_args(overrides, force)])


def python_command(overrides: Sequence[str], force: bool = False) -> list[str]:
    """The same run as a subprocess of this interpreter (no PATH lookup)."""
    return [sys.executable, "-m", "gate.cli.run", *gate_run_args(overrides, force)]


@dataclasses.dataclass(frozen=True)
class Launcher:
    """A registered launcher: call it with ``(experiments, ctx)``; ``kind`` says what it does."""

    name: str
    kind: LauncherKind
    launch: Callable[..., LaunchResult]

    def __call__(self, experiments, ctx: LaunchContext) -> LaunchResult:
        return self.launch(experiments, ctx)

    def check_out(self, out: str | None) -> None:
        """Before the tier is expanded: a launcher that writes its jobs to ``out=`` gets a file it can write there."""
        if self.kind.out_help:
            out_file(self.name, self.kind, out)


def out_file(name: str, kind: LauncherKind, out: str | None) -> Path:
    """The file ``launch=<name>`` writes its jobs to: ``out=``, a regular file or a new one in an existing folder
    (``out=/dev/full`` is refused, never replaced by a file)."""
    if not out:
        raise ConfigError(f"launch={name} needs out={kind.out_help}")
    return write_target(out, f"launch={name} out file", make_parents=False)


def get_launcher(name: str) -> Launcher:
    """The launcher registered as ``name`` (its module's own ``check(name)`` run first: e.g. slurm needs sbatch)."""
    launch = LAUNCHERS.lookup(name)
    module = launch.__module__
    mod = sys.modules[module]
    check = getattr(mod, "check", None)
    if check is not None:
        check(name)
    kind = getattr(mod, "KIND", None)
    if not isinstance(kind, LauncherKind):
        raise ConfigError(f"launcher module {module} declares no KIND (gate.tiers.launchers.LauncherKind)")
    return Launcher(name, kind, launch)


def die_with_parent() -> None:
    """``preexec_fn`` of job subprocesses: on Linux the job is killed when the launcher dies (SIGKILL included),
    so a killed tier leaves no orphan training (its lock would block the rerun)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

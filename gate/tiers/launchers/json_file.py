"""launch=json: ``{experiment_id: command}`` of every pending experiment, written to ``out=`` (for a cluster's
own scheduler)."""

from __future__ import annotations

import json
from pathlib import Path

from gate.errors import ConfigError
from gate.files import atomic_write_text
from gate.tiers.launchers import LaunchContext, LauncherKind, LaunchResult, shell_command

KIND = LauncherKind(describes_only=True)

def launch(experiments, ctx: LaunchContext) -> LaunchResult:
    if not ctx.out:
        raise ConfigError("launch=json needs out=<file.json> (where to write {experiment_id: command})")
    path = Path(ctx.out).expanduser()
    # a regular file or a new one in an existing folder (out=/dev/full is refused, never replaced by a file)
    atomic_write_text(path, json.dumps({e.id: shell_command(e.overrides, ctx.force) for e in experiments}, indent=2,
                                     allow_nan=False)
                      + "\n", what="launch=json out file", make_parents=False)
    ctx.echo(f"[gate] wrote {len(experiments)} command(s) to {path.resolve()}")
    return LaunchResult(ran=False)

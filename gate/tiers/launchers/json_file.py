"""launch=json: ``{experiment_id: command}`` of every pending experiment, written to ``out=`` (for a cluster's
own scheduler)."""

from __future__ import annotations

import json
from pathlib import Path

from gate.files import atomic_write_text
from gate.tiers.launchers import LaunchContext, LauncherKind, LaunchResult, out_file, shell_command

KIND = LauncherKind(describes_only=True, out_help="<file.json> (where to write {experiment_id: command})")


def launch(experiments, ctx: LaunchContext) -> LaunchResult:
    out_file("json", KIND, ctx.out)  # checked again here for a caller that did not go through gate-tier's parse
    path = Path(ctx.out).expanduser()
    atomic_write_text(path, json.dumps({e.id: shell_command(e.overrides, ctx.force) for e in experiments}, indent=2,
                                     allow_nan=False)
                      + "\n", what="launch=json out file", make_parents=False)
    ctx.echo(f"[gate] wrote {len(experiments)} command(s) to {path.resolve()}")
    return LaunchResult(ran=False)

"""launch=commands: one copy-pasteable ``gate-run`` command per pending experiment, on stdout."""

from __future__ import annotations

from gate.tiers.launchers import LaunchContext, LaunchResult, shell_command


def launch(experiments, ctx: LaunchContext) -> LaunchResult:
    for exp in experiments:
        ctx.echo(shell_command(exp.overrides, ctx.force))
    return LaunchResult(ran=False)

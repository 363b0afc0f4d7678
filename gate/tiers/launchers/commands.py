"""launch=commands: one copy-pasteable ``gate-run`` command per pending experiment, on stdout."""

from __future__ import annotations

from gate.tiers.launchers import LaunchContext, LauncherKind, LaunchResult, shell_command

KIND = LauncherKind(describes_only=True, output_on_stdout=True)

def launch(experiments, ctx: LaunchContext) -> LaunchResult:
    for exp in experiments:
        ctx.echo(shell_command(exp.overrides, ctx.force))
    return LaunchResult(ran=False)

"""launch=slurm: one SLURM job array through submitit, one task per pending experiment; launch=submitit_local:
the same path on this machine with submitit's local executor (how the SLURM path is tested without a cluster).

Each task runs ``gate-run`` with the experiment's overrides. It is a submitit ``Checkpointable``: on preemption
or timeout submitit calls :meth:`GateRunJob.checkpoint`, which requeues the same job (a ``DelayedSubmission`` of
itself); the requeued run resumes from its own newest checkpoint (``<paths.runs>/<experiment>/checkpoints``,
saved at every validation), and its records are appended once, when it completes. Tasks are stateless: any of
them can be killed and rerun.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Sequence

from gate.errors import ConfigError
from gate.signals import exit_reason, stop_processes
from gate.tiers.launchers import LaunchContext, LauncherKind, LaunchResult, die_with_parent, python_command

KIND = LauncherKind()

def check(name: str) -> None:
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise ConfigError(f"launch={name} needs the submitit package: pip install submitit") from None
    if name == "slurm" and shutil.which("sbatch") is None:
        raise ConfigError("launch=slurm needs SLURM's sbatch on PATH (run gate-tier on the cluster's login node); "
                          "to try the same path on this machine use launch=submitit_local, or launch=commands / "
                          "launch=json to hand the jobs to another scheduler")


class GateRunJob:
    """A picklable ``gate-run`` call; submitit requeues it on preemption/timeout (see the module docstring)."""

    def __call__(self, overrides: Sequence[str], force: bool = False) -> str:
        command = python_command(overrides, force)
        print("$ " + " ".join(command), flush=True)
        proc = subprocess.Popen(command, preexec_fn=die_with_parent)
        try:
            code = proc.wait()
        except BaseException:  # submitit requeues (SIGUSR2) or the task is stopped: gate-run stops at a safe point
            stop_processes([proc], signal.SIGTERM)
            raise
        if code != 0:  # stopped by a signal (exit 128 + n) is not done: the job fails, a rerun resumes it
            why = exit_reason(code)
            raise RuntimeError(f"gate-run exited with code {code}" + (f" ({why}; rerun to resume it from its last "
                                                                      f"checkpoint)" if why else ""))
        return "done"

    def checkpoint(self, *args, **kwargs):
        from submitit.helpers import DelayedSubmission

        # Nothing to save here: gate-run checkpoints at every validation and resumes from its newest checkpoint.
        return DelayedSubmission(self, *args, **kwargs)


def _executor(cluster: str, ctx: LaunchContext):
    import submitit

    # Every option from the composed launcher section: conf/tier_run.yaml states the defaults, gate/settings.py
    # their types and ranges (checked before the tier expands).
    opts = dict(ctx.options)
    executor = submitit.AutoExecutor(folder=ctx.run_dir / "submitit" / "%j", cluster=cluster,
                                     slurm_max_num_timeout=int(opts["max_requeues"]))
    params = dict(name=f"gate-{ctx.tier}", timeout_min=int(opts["timeout_min"]), cpus_per_task=int(opts["cpus_per_task"]),
                  stderr_to_stdout=True)
    if cluster == "slurm":
        params.update(gpus_per_node=int(opts["gpus_per_node"]),
                      mem_gb=float(opts["mem_gb"]) if opts["mem_gb"] is not None else None,
                      slurm_array_parallelism=int(opts["array_parallelism"]), slurm_setup=list(opts["setup"]),
                      slurm_additional_parameters=dict(opts["additional_parameters"]))
        for key in ("partition", "qos", "account"):
            if opts[key]:
                params[f"slurm_{key}"] = str(opts[key])
        params = {k: v for k, v in params.items() if v is not None}
    else:
        params["gpus_per_node"] = min(int(opts["gpus_per_node"]), len(ctx.gpus))
    executor.update_parameters(**params)
    return executor


def _launch(cluster: str, experiments, ctx: LaunchContext) -> LaunchResult:
    executor = _executor(cluster, ctx)
    jobs = executor.map_array(GateRunJob(), [list(e.overrides) for e in experiments],
                              [ctx.force] * len(experiments))
    ids = sorted({str(j.job_id).split("_")[0] for j in jobs})
    ctx.echo(f"[gate] submitted {len(jobs)} job(s) ({cluster}: array {', '.join(ids)}); logs in "
             f"{ctx.run_dir / 'submitit'}")
    if not ctx.options["wait"]:
        ctx.echo("[gate] not waiting (launcher.wait=false); rerun the same gate-tier command once they finish: "
                 "it skips what is done and writes the tier report")
        return LaunchResult(ran=False)
    result = LaunchResult(ran=True)
    waiting = dict(zip(jobs, experiments))
    start = time.monotonic()
    poll = float(ctx.options["poll_seconds"])
    while waiting:
        time.sleep(poll)
        for job, exp in list(waiting.items()):
            if not job.done():
                continue
            del waiting[job]
            try:
                job.result()
            except Exception as err:  # noqa: BLE001 - a failed job is reported, the others go on
                result.failed.append((exp, str(job.paths.stdout)))
                ctx.echo(f"[gate] {int(time.monotonic() - start)}s  FAILED {exp.label}: {str(err).splitlines()[-1][:200]}  "
                         f"log: {job.paths.stdout}")
            else:
                result.finished.append(exp.id)
                ctx.echo(f"[gate] {int(time.monotonic() - start)}s  done   {exp.label}  "
                         f"({len(result.finished)}/{len(experiments)})")
    return result


def launch_slurm(experiments, ctx: LaunchContext) -> LaunchResult:
    return _launch("slurm", experiments, ctx)


def launch_local(experiments, ctx: LaunchContext) -> LaunchResult:
    return _launch("local", experiments, ctx)

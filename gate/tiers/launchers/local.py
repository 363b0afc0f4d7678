"""launch=local: run the tier here. One worker per visible GPU, each job pinned by ``CUDA_VISIBLE_DEVICES``; on the
CPU one worker per core with one torch thread each (``launcher.workers`` and ``launcher.threads`` override). Each job
is a ``gate-run`` subprocess with its own log (``<tier run dir>/logs/<experiment>.log``); a failed job does not stop
the others. Progress: one refreshed line on a terminal, a line per event otherwise.

Why a worker per core on the CPU: a job is not all matrix products. Its start (imports, data, the model), its
validation and its records run on one core, so one job with two threads kept 1.58 of 2 cores busy; two jobs with
one thread each keep 1.84 busy and finished 8 demo jobs in 333 s instead of 458 s, with 15 % less CPU time (torch's
threads no longer wait on each other). Two jobs of two threads each oversubscribe the cores and took over 10
minutes (measured on a 2-core machine, docs/tiers.md).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections import deque
from pathlib import Path

from gate.errors import ConfigError
from gate.settings import LAUNCHER
from gate.signals import exit_reason, stop_processes
from gate.tiers.launchers import LaunchContext, LauncherKind, LaunchResult, die_with_parent, python_command


@dataclasses.dataclass
class _Job:
    exp: object
    proc: subprocess.Popen
    slot: str | None
    log: Path
    started: float


KIND = LauncherKind(pins_gpus=True)

#: What one CPU job may hold in memory: a demo-sized gate-run peaks near 1.5 GB resident, so a CPU machine runs no
#: more workers than its available memory holds at 2 GiB each.
JOB_MEMORY = 2 * 2**30
#: The thread-count variables torch and the BLAS libraries read at start-up (set in a job's environment only).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def cpu_layout(workers: int | None, threads: int | None, jobs: int, cores: int | None = None,
               memory: int | None = None) -> tuple[int, int]:
    """(workers, torch threads per job) for ``jobs`` jobs on the CPU: a worker per core (no more than the jobs, nor
    than the available ``memory`` holds at :data:`JOB_MEMORY` each) and the cores shared out among the workers.
    A value given (``launcher.workers`` / ``launcher.threads``) is kept."""
    cores = cores or _cores()
    if workers is None:
        by_memory = cores if memory is None else max(1, memory // JOB_MEMORY)
        workers = max(1, min(cores // (threads or 1), by_memory, max(jobs, 1)))
    if threads is None:
        threads = max(1, cores // workers)
    return workers, threads

def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return (f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else
        f"{seconds // 60:02d}:{seconds % 60:02d}")


def last_error(log: Path) -> str:
    """The last meaningful line of a job's log (its error line when it failed)."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or [""])[-1][:300]


def launch(experiments, ctx: LaunchContext) -> LaunchResult:
    workers, threads = ctx.options["workers"], ctx.options["threads"]  # conf/tier_run.yaml states the defaults
    for key, value in (("workers", workers), ("threads", threads)):
        problem = LAUNCHER.settings[key].problem(f"launcher.{key}", value)
        if problem:
            raise ConfigError(problem)
    slots: list[str | None] = list(ctx.gpus) or [None]
    if not ctx.gpus:
        workers, threads = cpu_layout(workers, threads, len(experiments), memory=_available_memory())
    if workers is not None:
        slots = [slots[i % len(slots)] for i in range(workers)]
    poll = float(ctx.options["poll_seconds"])
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    queue = deque(experiments)
    free = list(slots)
    running: list[_Job] = []
    result = LaunchResult(ran=True)
    start = time.monotonic()
    total = len(experiments)
    where = ", ".join(f"GPU {s}" for s in slots if s is not None) or "the CPU"
    if threads is not None:
        where += f", {threads} thread{'s' if threads > 1 else ''} each"
    ctx.echo(f"[gate] running {total} job(s) on {len(slots)} worker(s) ({where}); logs in {ctx.log_dir}", flush=True)

    def status() -> str:
        now = time.monotonic()
        run = ", ".join(f"{j.exp.label} {_clock(now - j.started)}" for j in running)
        return (f"[gate] {_clock(now - start)}  done {len(result.finished)}/{total}  running {len(running)}  "
                f"failed {len(result.failed)}" + (f"  · {run}" if run else ""))

    def event(text: str) -> None:
        if ctx.interactive:
            ctx.echo("\r\033[K" + text, flush=True)
        else:  # a log file or a pipe (SLURM, tee): each event appears as it happens, not at exit
            ctx.echo(text, flush=True)

    try:
        while queue or running:
            while queue and free:
                exp = queue.popleft()
                slot = free.pop(0)
                env = dict(ctx.env if ctx.env is not None else os.environ)
                if slot is not None:
                    env["CUDA_VISIBLE_DEVICES"] = slot
                if threads is not None:  # the job's own environment: this process's threads stay as they are
                    env.update({name: str(threads) for name in THREAD_VARIABLES})
                log = ctx.log_dir / f"{exp.id}.log"
                with open(log, "ab") as fh:
                    fh.write(f"$ {' '.join(python_command(exp.overrides, ctx.force))}\n".encode())
                    fh.flush()
                    proc = subprocess.Popen(python_command([*exp.overrides, "trainer.enable_progress_bar=false"],
                                                           ctx.force),
                                            stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                            preexec_fn=die_with_parent)
                running.append(_Job(exp, proc, slot, log, time.monotonic()))
                if not ctx.interactive:
                    event(f"[gate] {_clock(time.monotonic() - start)}  start  {exp.label}  [{exp.id}]"
                          + (f" on GPU {slot}" if slot is not None else ""))
            time.sleep(poll)
            for job in list(running):
                code = job.proc.poll()
                if code is None:
                    continue
                running.remove(job)
                free.append(job.slot)
                took = _clock(time.monotonic() - job.started)
                if code == 0:
                    result.finished.append(job.exp.id)
                    event(f"[gate] {_clock(time.monotonic() - start)}  done   {job.exp.label} in {took}  "
                          f"({len(result.finished)}/{total})")
                else:  # a job stopped by a signal (exit 128 + n) is not done either: the rerun resumes it
                    result.failed.append((job.exp, str(job.log)))
                    why = exit_reason(code)
                    if why:
                        result.stopped.add(job.exp.id)
                    event(f"[gate] {_clock(time.monotonic() - start)}  FAILED {job.exp.label} after {took} (exit {code}"
                          f"{f', {why}' if why else ''}): {last_error(job.log)}  log: {job.log}")
            if ctx.interactive:
                ctx.echo("\r\033[K" + status(), end="", flush=True)
    except BaseException:
        # interrupted (a stop signal: gate.signals): the jobs we started get it too and a grace period to stop by
        # themselves, whole checkpoints and records; what is left is killed. They resume on the next run.
        stop_processes([job.proc for job in running])
        raise
    if ctx.interactive:
        ctx.echo("")
    return result

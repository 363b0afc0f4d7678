"""launch=local: run the tier here. One worker per visible GPU, each job pinned by ``CUDA_VISIBLE_DEVICES``; one
worker on the CPU (``launcher.workers`` overrides both). Each job is a ``gate-run`` subprocess with its own log
(``<tier run dir>/logs/<experiment>.log``); a failed job does not stop the others. Progress: one refreshed line
on a terminal, a line per event otherwise."""

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

def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60:02d}:{seconds % 60:02d}"


def last_error(log: Path) -> str:
    """The last meaningful line of a job's log (its error line when it failed)."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or [""])[-1][:300]


def launch(experiments, ctx: LaunchContext) -> LaunchResult:
    workers = ctx.options["workers"]  # conf/tier_run.yaml states every launcher default (gate/settings.py)
    slots: list[str | None] = list(ctx.gpus) or [None]
    if workers is not None:
        problem = LAUNCHER.settings["workers"].problem("launcher.workers", workers)
        if problem:
            raise ConfigError(problem)
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

"""What gate does on a signal: one policy for every entry point and the training run (docs/results.md, "What gate
does on a signal, a full disk, a hostile file").

SLURM sends SIGTERM at pre-emption and at a time limit (submitit's SIGUSR2 before either), a terminal SIGINT
(Ctrl-C) or SIGHUP. Each of them stops the process: a :class:`Stopped` is raised where the process is (as Ctrl-C's
KeyboardInterrupt would be), nothing is recorded for an experiment that did not finish, and the process exits with
``128 + the signal's number`` (143 for SIGTERM) after one line saying it was stopped and that the same command
resumes it (from the last checkpoint of an unfinished run). A launcher reads that exit code as *not done*
(:func:`exit_reason`), never as success: Lightning alone turns SIGTERM into a bare ``SystemExit()``, exit code 0.

A write that must not be cut in half (a checkpoint, a record set) runs inside :func:`critical`: a signal there is
noted and raised when the write is over.

The base layer: it imports nothing from gate. Only an entry point installs the handlers (:func:`install`): library
code changes no process-wide state.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence

#: The signals that stop a gate process; any other keeps Python's default.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR2")
                     if hasattr(signal, name))
#: How long a launcher waits for a job it passed a stop signal on before it kills it (SLURM's KillWait: 30 s).
GRACE_SECONDS = 20.0

_received: int | None = None   # the first stop signal this process received
_critical = 0                  # depth of critical() blocks: a signal inside one is raised when it ends
_reported = False
_installed = False
_at_exit = False               # the exit report has run: a signal now must say its line itself
_recorded: str | None = None   # what this process finished and stored (a stop after it loses nothing)


class Stopped(SystemExit):
    """The process was asked to stop by a signal. A ``SystemExit`` whose code is ``128 + signum``: no ``except
    Exception`` takes it for an error, and uncaught it ends the process with that code."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + int(signum))
        self.signum = int(signum)

    def __str__(self) -> str:
        return message(self.signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def message(signum: int) -> str:
    """The one line a stopped process leaves: whether what it ran was stored, and what to do."""
    if _recorded is not None:
        return (f"[gate] stopped by {signal_name(signum)} (exit code {128 + signum}) after its records were written: "
                f"{_recorded} is complete in the results store; a rerun of the same command skips it")
    return (f"[gate] stopped by {signal_name(signum)} (exit code {128 + signum}): nothing was recorded for an "
            f"unfinished experiment; rerun the same command to go on (an unfinished run resumes from its last "
            f"checkpoint)")


def recorded(what: str) -> None:
    """Say that ``what`` (an experiment) is now stored whole: a stop after this point says so, not "nothing was
    recorded"."""
    global _recorded
    _recorded = what


def install() -> None:
    """Make :data:`STOP_SIGNALS` raise :class:`Stopped` in this process and leave :func:`message` on stderr at exit.
    For entry points only (the main thread of a process of their own)."""
    global _installed
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        signal.signal(signum, _handle)
    if not _installed:
        atexit.register(_report)
        _installed = True


def uninstall(previous: dict[int, object]) -> None:
    """Put back the handlers ``previous`` (``{signum: handler}``) and forget a received signal (tests that call an
    entry point in their own process)."""
    global _received, _reported, _recorded, _at_exit
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    _received, _reported, _recorded, _at_exit = None, False, None, False


def _handle(signum: int, frame: object) -> None:
    global _received
    if _received is not None:
        return  # already stopping: a repeat (a launcher passing it on, a second Ctrl-C) must not cut the clean-up
    _received = signum
    if _at_exit:
        _report()  # the exit report has run already: nobody else would say it (a stop in a run's last moment)
    if _critical:
        return  # raised when the critical block ends
    raise Stopped(signum)


def _report() -> None:
    global _reported, _at_exit
    _at_exit = True
    if _received is not None and not _reported:
        _reported = True
        print(message(_received), file=sys.stderr, flush=True)


def check() -> None:
    """Raise :class:`Stopped` if a stop signal came (a point where stopping is safe)."""
    if _received is not None:
        raise Stopped(_received)


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """A write that must finish once begun (a checkpoint, a record set): a stop signal that comes inside is raised
    when the block ends."""
    global _critical
    _critical += 1
    try:
        yield
    finally:
        _critical -= 1
    if not _critical:
        check()


@contextlib.contextmanager
def lightning_stops() -> Iterator[None]:
    """Around ``trainer.fit`` / ``trainer.test``: Lightning's own answer to SIGTERM (a bare ``SystemExit()``, exit
    code 0, raised at its next step) becomes :class:`Stopped`, as does any failure that follows a stop signal
    (a data-loader worker stopped by the same signal)."""
    try:
        yield
    except Stopped:
        raise
    except BaseException as err:
        if _received is not None:
            raise Stopped(_received) from err
        if type(err).__name__ == "SIGTERMException":  # lightning.pytorch.utilities.exceptions (without importing it)
            raise Stopped(signal.SIGTERM) from err
        raise


def exit_reason(code: int | None) -> str | None:
    """``"stopped by SIGTERM"`` for the exit code of a process stopped by one of :data:`STOP_SIGNALS` (``128 + n``
    from this policy or a shell, ``-n`` from ``subprocess`` when the signal killed it), else None."""
    if code is None:
        return None
    for signum in STOP_SIGNALS:
        if code in (128 + signum, -signum):
            return f"stopped by {signal_name(signum)}"
    return None


def stop_processes(procs: Sequence[subprocess.Popen], signum: int | None = None,
                   grace: float = GRACE_SECONDS) -> None:
    """Pass a stop signal on to child processes (the one received, else SIGTERM), give them ``grace`` seconds to
    stop by themselves (each leaves its records or its checkpoints whole), then kill what is left."""
    signum = signum or _received or signal.SIGTERM
    with critical():  # a second signal does not cut the wait short
        alive = [p for p in procs if p.poll() is None]
        for proc in alive:
            with contextlib.suppress(OSError):
                proc.send_signal(signum)
        deadline = time.monotonic() + grace
        for proc in alive:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def handlers() -> dict[int, object]:
    """The current handlers of :data:`STOP_SIGNALS` (to put back with :func:`uninstall`)."""
    return {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}


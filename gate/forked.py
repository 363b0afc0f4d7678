"""Independent jobs computed by processes forked from this one, where that is safe; results in the jobs' order.

A report's figures (:func:`gate.analysis.figures.draw_all`), a tier's benchmarks (:func:`gate.tiers.expand.expand_tier`)
and the datasets of ``gate-data list`` (:func:`gate.engine.prepare.listing`) are independent pieces of Python work: on a
machine with cores to spare, forked children do them side by side. A fork copies the calling thread alone (a lock
another thread held stays held in the child), so it is used only where the platform forks and the process runs no
other thread; otherwise, or on one core, the jobs run here, one after the other. Each child takes the next job not yet
taken, in the jobs' order (so give the dearest first), until none is left, and exits: no pool waits for more work, so a
child of a killed process ends with the jobs there are.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def children_for(jobs: int) -> int:
    """How many children :func:`map_forked` starts for ``jobs`` jobs here: one per core, at most one per job; 0 where
    forking is not safe (no fork, another thread running) or would not help (one core, one job)."""
    workers = min(jobs, cores())
    if workers < 2 or threading.active_count() > 1 or not hasattr(os, "fork"):
        return 0
    return workers


def map_forked(fn: Callable[[Any], Any], items: Sequence[Any], *, lost: str = "a child process ended without its results",
               on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
    """``[fn(item) for item in items]``, in forked children where :func:`children_for` allows (here otherwise). A
    result goes back pickled as soon as it is computed (``on_result(index, result)`` is then called here, in whatever
    order they come: progress). An exception ``fn`` raises is raised here and the other children are stopped; a child
    that dies without its results (killed, out of memory) is one line: ``<lost> (exit code N)``."""
    workers = children_for(len(items))
    if not workers:
        out = []
        for index, item in enumerate(items):
            out.append(fn(item))
            if on_result is not None:
                on_result(index, out[-1])
        return out
    return _in_children(fn, items, workers, lost, on_result)


def _in_children(fn: Callable[[Any], Any], items: Sequence[Any], workers: int, lost: str,
                 on_result: Callable[[int, Any], None] | None) -> list[Any]:
    import multiprocessing
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("fork")
    taken = context.Value("i", 0)  # the next job no child has taken
    children = {}
    for _ in range(workers):
        receive, send = context.Pipe(duplex=False)
        # the child closes every read end it inherits (its own too): with its parent gone, a send then fails (no
        # reader) instead of waiting forever on a full pipe
        child = context.Process(target=_take_jobs, args=(fn, items, taken, send, [*children, receive]), daemon=True)
        child.start()
        send.close()
        children[receive] = child
    results: dict[int, Any] = {}
    try:
        while children:
            for receive in wait(list(children)):
                try:
                    index, result, error = receive.recv()
                except EOFError:  # the child is done (it sends every result before it exits) or dead
                    child = children.pop(receive)
                    child.join()
                    receive.close()
                    if child.exitcode != 0:
                        raise RuntimeError(f"{lost} (exit code {child.exitcode})") from None
                    continue
                if error is not None:
                    raise raised(error)
                results[index] = result
                if on_result is not None:
                    on_result(index, result)
        missing = [i for i in range(len(items)) if i not in results]
        if missing:  # every child exited cleanly, yet a job has no result: never silently short
            raise RuntimeError(f"{lost} (job(s) {missing} came back without a result)")
        return [results[i] for i in range(len(items))]
    finally:
        for receive, child in children.items():
            if child.is_alive():
                child.terminate()  # an error elsewhere, or this process stopped: its results are not wanted
            child.join()
            receive.close()


def _take_jobs(fn: Callable[[Any], Any], items: Sequence[Any], taken: Any, send: Any, inherited: Sequence[Any]) -> None:
    """In a child: take the next job (``taken``: a shared counter) and send back ``(index, result, error)`` for it,
    until none is left, one fails or the parent is gone."""
    for receive in inherited:
        receive.close()

    while True:
        with taken.get_lock():
            index = taken.value
            taken.value += 1
        if index >= len(items):
            break
        try:
            result, error = fn(items[index]), None
        except Exception as err:  # noqa: BLE001 - raised in the parent
            result, error = None, err
        if error is not None:
            error = sendable(error)
        try:
            send.send((index, result, error))
        except OSError:  # the parent is gone (killed): nobody wants the rest
            break
        if error is not None:
            break
    send.close()


def sendable(error: BaseException) -> BaseException:
    """``error`` as it can go back to the parent through a pipe: itself if it pickles, else a RuntimeError with its
    line. Its causes (``raise ... from``), which a pickle drops, go with it; :func:`raised` links them again in the
    parent (a command's one-line error reads the cause: Hydra's composition error wraps the unknown key)."""
    out, causes, cause = _pickling(error), [], error.__cause__
    while cause is not None and len(causes) < 8:
        causes.append(_pickling(cause))
        cause = cause.__cause__
    if causes:
        out.__dict__["_gate_causes"] = causes
    return out


def raised(error: BaseException) -> BaseException:
    """``error`` as :func:`sendable` sent it, with its causes linked again: ``raise raised(error)``."""
    here = error
    for cause in error.__dict__.pop("_gate_causes", ()):
        here.__cause__ = here = cause
    return error


def _pickling(error: BaseException) -> BaseException:
    import pickle

    try:
        pickle.dumps(error)
    except Exception:  # noqa: BLE001 - whatever stops it pickling, its line still says what happened
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error

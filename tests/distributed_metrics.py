"""Run torchmetrics metrics in several CPU processes (gloo) and compare with one process.

Under data parallelism (``trainer.devices=N``) every rank updates its metrics with its own share of the evaluation
batches, and torchmetrics reduces the states across ranks (each state's ``dist_reduce_fx``) before ``compute``.
A metric is right under DDP when ``compute`` on the reduced states equals ``compute`` on one process that saw every
update. :func:`run_distributed` checks that for a list of :class:`MetricCase` in ONE fork of ``world`` processes
(starting processes costs seconds; the cases run in a loop), each case shared out two ways:

* ``round_robin``: update ``i`` goes to rank ``i % world`` (how gate deals whole batches: episodes, in-batch
  retrieval, segmentation; the slices of one volume land on several ranks);
* ``halves``: contiguous blocks, the first ``⌈n / world⌉`` updates to rank 0 (another order of the gathered rows).

Every rank must also compute the same value: ranks pick checkpoints by the validation metric.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

SHARES = ("round_robin", "halves")


@dataclasses.dataclass(frozen=True)
class MetricCase:
    """One metric (or collection) and its updates.

    ``make``: builds a fresh ``Metric`` or ``MetricCollection``; ``updates``: the argument tuples of its ``update``
    calls, in order (seeded: every process must build the same ones). Both are module-level functions that each rank
    calls for itself. ``tolerance``: the absolute difference allowed between the
    distributed and the one-process value (the gathered rows are summed in another order)."""

    name: str
    make: Callable[[], Any]
    updates: Callable[[], Sequence[tuple]]
    tolerance: float = 1e-6


def owner(share: str, index: int, count: int, world: int) -> int:
    """The rank that receives update ``index`` of ``count``."""
    if share == "round_robin":
        return index % world
    return index // math.ceil(count / world)


def computed(metric) -> dict[str, list[float]]:
    """Every value the metric reports, as Lightning reads it: a collection's members one by one (``log_dict`` logs
    each member and computes it at epoch end), plus the collection's own ``compute``; values flattened to floats."""
    from torchmetrics import MetricCollection

    def floats(value) -> list[float]:
        return [float(v) for v in torch.as_tensor(value).detach().double().reshape(-1).tolist()]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. multi-label's "class left out" warning: not under test here
        if not isinstance(metric, MetricCollection):
            return {"": floats(metric.compute())}
        values = {key: floats(member.compute()) for key, member in metric.items()}
        values.update({f"collection:{key}": floats(v) for key, v in metric.compute().items()})
    return values


def evaluate(case: MetricCase, updates: Sequence[tuple]) -> dict[str, list[float]]:
    metric = case.make()
    for args in updates:
        metric.update(*args)
    return computed(metric)


def alone(case: MetricCase, updates: Sequence[tuple]) -> dict[str, list[float]]:
    """The reference: each member of the case's collection updated and computed on its own, in one process (keys
    as :func:`computed` gives them). torchmetrics merges a collection's members into one compute group when their
    states are equal after the first update, so a collection can disagree with its own members; this cannot."""
    import copy

    from torchmetrics import MetricCollection

    metric = case.make()
    if not isinstance(metric, MetricCollection):
        return evaluate(case, updates)
    values: dict[str, list[float]] = {}
    for key, member in metric.items():
        member = copy.deepcopy(member)
        for args in updates:
            member.update(*args)
        values[key] = values[f"collection:{key}"] = computed(member)[""]
    return values


def _worker(rank: int, world: int, init_file: str, cases: Sequence[MetricCase], out_dir: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)  # a forked test process: the machine's cores are shared
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    results: dict[tuple[str, str], Any] = {}
    try:
        for case in cases:
            for share in SHARES:
                updates = list(case.updates())
                mine = [u for i, u in enumerate(updates) if owner(share, i, len(updates), world) == rank]
                try:
                    results[(case.name, share)] = evaluate(case, mine)
                except Exception as error:  # noqa: BLE001 (reported per case by the test; the other cases still run)
                    results[(case.name, share)] = f"{type(error).__name__}: {error}"
    finally:
        torch.save(results, Path(out_dir) / f"rank{rank}.pt")
        dist.destroy_process_group()


def run_distributed(cases: Sequence[MetricCase], world: int = 2) -> list[dict[tuple[str, str], Any]]:
    """Each rank's results, ``{(case name, share): {key: values} or an error string}``, from one fork of
    ``world`` gloo processes on the CPU."""
    import torch.multiprocessing as mp

    names = [case.name for case in cases]
    if len(set(names)) != len(names):
        raise ValueError(f"metric case names must be unique, got {names}")
    with tempfile.TemporaryDirectory(prefix="gate-ddp-metrics-") as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        # forked, not spawned: the ranks start with this process's imports (two fresh interpreters cost ~7 s each
        # here) and share nothing else with it; each joins the gloo group and computes on its own
        mp.start_processes(_worker, args=(world, init_file, list(cases), tmp), nprocs=world, join=True,
                           start_method="fork")
        return [torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in range(world)]


def differences(expected: dict[str, list[float]], got: Any, tolerance: float) -> list[str]:
    """What differs between the expected values and those got (NaN equals NaN: an undefined score must stay
    undefined)."""
    if isinstance(got, str):
        return [got]
    problems = []
    if set(got) != set(expected):
        problems.append(f"keys differ: {sorted(set(got) ^ set(expected))}")
    for key in sorted(set(got) & set(expected)):
        a, b = expected[key], got[key]
        if len(a) != len(b):
            problems.append(f"{key}: shape {len(a)} != {len(b)}")
            continue
        for x, y in zip(a, b):
            if (math.isnan(x) != math.isnan(y)) or (not math.isnan(x) and abs(x - y) > tolerance):
                problems.append(f"{key}: expected {a}, got {b}")
                break
    return problems

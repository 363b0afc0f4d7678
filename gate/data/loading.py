"""How a split's loader is set up on this machine: worker processes and pinned memory.

``data.num_workers`` and ``data.pin_memory`` (gate-score: ``num_workers``, ``pin_memory``) take a number / a boolean
or ``auto``. ``auto`` is resolved here, once, from the machine and the run's device; the resolved values are facts
of the run (``facts.num_workers``, ``facts.pin_memory``), never part of the experiment id (they change speed, not
numbers).

* ``num_workers: auto`` — on CUDA, the CPUs this process may use divided by the devices it drives, at most
  :data:`MAX_AUTO_WORKERS` (each worker only decodes examples to uint8; the rest runs on the device). On the CPU,
  :data:`CPU_AUTO_WORKERS`: what measured fastest there (measurements/bench_step.py: a worker process competes
  with the model for the same cores, and decoding to uint8 is cheap next to a training step).
* ``pin_memory: auto`` — on when the run uses CUDA (page-locked batches copy to the GPU asynchronously); ``true``
  without CUDA is ignored with one line (there is nothing to copy to), not an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

AUTO = "auto"
#: The most loader workers ``auto`` starts per device.
MAX_AUTO_WORKERS = 8
#: ``auto`` on the CPU (measurements/bench_step.py, 2-core machine: docs/design.md "Inputs" has the numbers).
CPU_AUTO_WORKERS = 0


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, e.g. a SLURM allocation)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def uses_cuda(trainer_cfg: Mapping[str, Any]) -> bool:
    """Whether a run with these trainer settings trains on CUDA (Lightning's ``auto`` picks a visible GPU)."""
    import torch

    accelerator = str(trainer_cfg["accelerator"])  # conf/trainer/default.yaml states it
    return accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()


def resolve_num_workers(value: Any, *, cuda: bool, devices: int = 1) -> int:
    """The loader workers for ``value`` (an integer >= 0, or ``auto``; validated before this is called)."""
    if value != AUTO:
        return int(value)
    if not cuda:
        return CPU_AUTO_WORKERS
    return max(1, min(MAX_AUTO_WORKERS, available_cpus() // max(int(devices), 1)))


def resolve_pin_memory(value: Any, *, cuda: bool) -> tuple[bool, str | None]:
    """(pin the loader's batches?, a one-line note when the setting is ignored)."""
    if value == AUTO:
        return cuda, None
    if bool(value) and not cuda:
        return False, "pin_memory=true ignored: the run does not use CUDA (pinned memory only speeds copies to a GPU)"
    return bool(value), None

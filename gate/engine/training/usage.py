"""What this process has used so far: CPU time and peak host memory. Read by the run's facts
(:mod:`gate.engine.training.facts`) and by the fine-tuning stage before it imports the training stack."""

from __future__ import annotations

import os
import resource
import sys


def peak_host_memory_mb() -> float:
    """Peak resident memory of this process so far (MiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and of its finished child processes (e.g. DataLoader workers
    once their loader shut down) so far."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system

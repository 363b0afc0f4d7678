"""How a run went, measured while it runs: the facts every record carries next to its value."""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

import lightning as L
import torch


def peak_host_memory_mb() -> float:
    """Peak resident memory of this process so far (MiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


class RunFacts(L.Callback):
    """Times the training steps (not validation) and counts samples; notes the step a resumed run started at."""

    def __init__(self) -> None:
        self.start_step: int | None = None
        self.samples = 0
        self.step_seconds = 0.0
        self._t0 = 0.0

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        # Called when a run resumes (also when the checkpoint is already at max_steps and no step follows);
        # later calls load checkpoints for testing and must not count.
        if self.start_step is None:
            self.start_step = int(checkpoint.get("global_step", 0))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.start_step is None:
            self.start_step = int(trainer.global_step)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.step_seconds += time.perf_counter() - self._t0
        self.samples += int(pl_module.adapter.batch_size(batch))

    def facts(self, resumed: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "resumed_from_step": self.start_step if resumed else None,
            "train_samples": self.samples,
            "train_step_seconds": round(self.step_seconds, 3),
            "train_samples_per_second": round(self.samples / self.step_seconds, 2) if self.step_seconds else None,
            "peak_host_memory_mb": round(peak_host_memory_mb(), 1),
        }
        if torch.cuda.is_available():
            out["peak_gpu_memory_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        return out

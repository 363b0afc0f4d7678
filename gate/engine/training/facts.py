"""How a run went, measured while it runs: the facts every record carries next to its value.

One place computes each fact (docs/results.md lists them):

* :class:`RunFacts` (always on): training step time and throughput, the fraction of the training time spent
  waiting for data, CPU time, peak memory, GPU-hours, the step a resumed run started at, and the model's
  metadata (parameters, trainable parameters, forward GFLOPs per example at the run's input size);
* :class:`gate.engine.training.hardware.HardwareMonitor` (a RunFacts that also logs ``hw/*`` metrics while training)
  adds the energy measured through NVML (``energy_kwh``; null when nothing measured it).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import lightning as L
import torch
from torch import nn

from ...encoders.base import INPUT_KEYS
from .usage import cpu_seconds, peak_host_memory_mb


def count_parameters(module: nn.Module) -> tuple[int, int]:
    """(all parameters, trainable parameters) of ``module``; a parameter shared by two layers counts once."""
    params = list(module.parameters())  # nn.Module.parameters() yields each shared tensor once
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


def forward_flops(forward: Callable[[], Any]) -> int:
    """FLOPs of one call of ``forward`` as counted by ``torch.utils.flop_counter`` (a multiply-add counts 2;
    matmuls, convolutions and attention are counted, elementwise operations are not), without gradients."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        forward()
    return int(counter.get_total_flops())


def batch_inputs(batch: Mapping[str, Any], fallback: int) -> int:
    """How many inputs (images, clips, texts) a batch feeds the encoder: the length of its input tensor."""
    for keys in INPUT_KEYS.values():
        value = batch.get(keys[0]) if isinstance(batch, Mapping) else None
        if isinstance(value, torch.Tensor) and value.ndim > 0:
            return int(value.shape[0])
    return fallback


class HostTimeline:
    """Marks on the host's clock: right where the device computes synchronously (the CPU)."""

    def mark(self) -> float:
        return time.perf_counter()

    def seconds(self, start: float, end: float) -> float:
        return end - start

    def synchronize(self) -> None:
        pass


class CudaTimeline:
    """Marks on the GPU's own timeline (CUDA events on the current stream): a kernel queued by a step is counted in
    the step when it runs, not when Python returns from queueing it. Read only after :meth:`synchronize`."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def mark(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def seconds(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1000.0

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)


def timeline_for(device: torch.device) -> HostTimeline | CudaTimeline:
    """The clock that times steps on ``device``: its CUDA events on a GPU, the host's clock otherwise."""
    return CudaTimeline(device) if device.type == "cuda" else HostTimeline()


class RunFacts(L.Callback):
    """Times the training steps (not validation) and the waits for data between them, counts samples and CPU
    time, notes the step a resumed run started at, and measures the model once (parameters, FLOPs).

    Times are read on the device's own timeline (:func:`timeline_for`): on a GPU, CUDA events recorded when a step
    starts and ends, folded into seconds only after a synchronisation at the points where they are read (every
    ``hw/*`` log and the run's facts). A step is the time from its start mark to its end mark; the wait for data is
    the time between one step's end and the next one's start (the batch's fetch, copy and device transform), so
    ``train_samples_per_second`` can never exceed what the model alone reaches. Timed without them, host clocks
    see the time Python takes to queue a step: 2,584 samples/s where the model alone reaches 1,866.

    count_flops: count the forward FLOPs on the first training batch (one extra forward without gradients,
        in eval mode, so no dropout or batch-norm statistic and no random number is touched).
    timeline: the clock (default: chosen from the module's device when training starts); tests give a fake one.
    """

    def __init__(self, count_flops: bool = True, timeline: Any = None, since: tuple[float, float] | None = None) -> None:
        self.count_flops = bool(count_flops)
        self.start_step: int | None = None
        self.samples = 0
        self.step_seconds = 0.0
        self.wait_seconds = 0.0
        self.params: int | None = None
        self.trainable_params: int | None = None
        self.gflops: float | None = None
        self.weights_revision: str | None = None
        self.timeline = timeline
        # (start mark, end mark or None, whether the wait before it counts) of steps not folded into the sums yet
        self._pending: list[list[Any]] = []
        self._last_end: Any = None  # the end mark of the last folded step (None: no wait before the next one)
        self._flops_done = False
        # the run starts at ``since`` (its CPU seconds and monotonic time, taken before its data was built), else
        # when its facts object is made (before the model is built)
        self._cpu0, self._wall0 = since if since is not None else (cpu_seconds(), time.monotonic())
        #: wall and CPU seconds of the attempts before a resume, up to the checkpoint resumed from (the checkpoint
        #: holds them): a resumed run's cost is all of them, not its last attempt's alone
        self.earlier_wall_seconds: float | None = None
        self.earlier_cpu_seconds = 0.0
        self._training = False
        #: the validation metric whose curve is recorded (``val/<monitor>``; set once the adapter is built)
        self.monitor: str | None = None
        self.curve: list[list[float]] = []        # [step, value] at each validation (kept across a resume)
        #: the tier metric's validation name where it is not the checkpoint monitor (a regression checkpoints on mae
        #: and enters tier means by r2): its curve too, so that gate-rank ranks a short run by what the tier ranks by
        self.tier_monitor: str | None = None
        self.tier_curve: list[list[float]] = []
        self.validation_seconds: list[float] = []  # wall seconds of each validation (the cost model's)
        self._validation_start: float | None = None

    # ------------------------------------------------------------------------------------------ hooks
    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        # Called when a run resumes (also when the checkpoint is already at max_steps and no step follows);
        # later calls load checkpoints for testing and must not count.
        if self.start_step is None:
            self.start_step = int(checkpoint.get("global_step", 0))

    def on_fit_start(self, trainer, pl_module) -> None:
        self.params, self.trainable_params = count_parameters(pl_module)
        self.weights_revision = getattr(getattr(pl_module, "encoder", None), "weights_revision", None)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._training = True
        if self.start_step is None:
            self.start_step = int(trainer.global_step)
        if self.timeline is None:
            self.timeline = timeline_for(pl_module.device)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.count_flops and not self._flops_done:
            self._flops_done = True
            self.gflops = model_gflops(pl_module, batch)
        # the wait before this step counts unless validation (or nothing) came between it and the last step
        waited = bool(self._pending) and self._pending[-1][1] is not None or (not self._pending
                                                                               and self._last_end is not None)
        self._pending.append([self._timeline().mark(), None, waited])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._pending and self._pending[-1][1] is None:
            self._pending[-1][1] = self._timeline().mark()
        self.samples += int(pl_module.adapter.batch_size(batch))

    def on_validation_start(self, trainer, pl_module) -> None:
        # validation and checkpointing between two steps are no wait for data
        self.fold()
        self._last_end = None
        self._validation_start = None if getattr(trainer, "sanity_checking", False) else time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        if getattr(trainer, "sanity_checking", False) or self._validation_start is None:
            return
        self.validation_seconds.append(time.perf_counter() - self._validation_start)
        step = int(trainer.global_step)
        self.curve = _with_point(self.curve, step, trainer.callback_metrics.get(self.monitor) if self.monitor else None)
        if self.tier_monitor:
            self.tier_curve = _with_point(self.tier_curve, step, trainer.callback_metrics.get(self.tier_monitor))

    # the curve, the validations' times and the seconds spent so far survive a resume (the checkpoint holds them)
    def state_dict(self) -> dict[str, Any]:
        return {"curve": [list(p) for p in self.curve], "tier_curve": [list(p) for p in self.tier_curve],
                "validation_seconds": list(self.validation_seconds),
                "wall_seconds": self.wall_seconds(time.monotonic() - self._wall0),
                "cpu_seconds": self.earlier_cpu_seconds + cpu_seconds() - self._cpu0}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self._training:  # a checkpoint loaded after training started (for testing) is no resume
            return
        self.curve = [list(p) for p in state_dict.get("curve", [])]
        self.tier_curve = [list(p) for p in state_dict.get("tier_curve", [])]
        self.validation_seconds = list(state_dict.get("validation_seconds", []))
        if isinstance(state_dict.get("wall_seconds"), (int, float)):  # (absent from checkpoints of older versions)
            self.earlier_wall_seconds = float(state_dict["wall_seconds"])
            self.earlier_cpu_seconds = float(state_dict.get("cpu_seconds") or 0.0)

    def wall_seconds(self, attempt_seconds: float) -> float:
        """The run's wall seconds: this attempt's and, after a resume, the earlier attempts' up to the checkpoint."""
        return attempt_seconds + (self.earlier_wall_seconds or 0.0)

    def _timeline(self) -> Any:
        if self.timeline is None:
            self.timeline = HostTimeline()
        return self.timeline

    def fold(self) -> None:
        """Turn the marks of finished steps into seconds (after a synchronisation: on a GPU this is where the
        queued work is waited for, so it runs only where the times are read)."""
        done = [p for p in self._pending if p[1] is not None]
        if not done:
            return
        timeline = self._timeline()
        timeline.synchronize()
        for start, end, waited in done:
            if waited and self._last_end is not None:
                self.wait_seconds += timeline.seconds(self._last_end, start)
            self.step_seconds += timeline.seconds(start, end)
            self._last_end = end
        self._pending = [p for p in self._pending if p[1] is None]

    # ------------------------------------------------------------------------------------------ facts
    @property
    def data_wait_fraction(self) -> float | None:
        self.fold()
        total = self.wait_seconds + self.step_seconds
        return self.wait_seconds / total if total > 0 else None

    def facts(self, resumed: bool, wall_seconds: float | None = None, gpus: int = 0) -> dict[str, Any]:
        """The facts of the run so far. ``wall_seconds``: this attempt's wall time; the facts' ``wall_seconds``
        (and ``gpu_hours`` with ``gpus``, the number of GPUs the run used, 0 on the CPU) and ``cpu_seconds`` add the
        earlier attempts' up to the checkpoint resumed from (``earlier_wall_seconds``; the seconds an attempt spent
        after its last checkpoint are lost with it). Step times, samples and throughput are this attempt's."""
        self.fold()
        wait = self.data_wait_fraction
        total = self.wall_seconds(wall_seconds) if wall_seconds is not None else None
        out: dict[str, Any] = {
            "resumed_from_step": self.start_step if resumed else None,
            "wall_seconds": round(total, 2) if total is not None else None,
            "earlier_wall_seconds": round(self.earlier_wall_seconds, 2) if resumed and self.earlier_wall_seconds
            is not None else None,
            "train_samples": self.samples,
            "train_step_seconds": round(self.step_seconds, 3),
            "train_samples_per_second": round(self.samples / self.step_seconds, 2) if self.step_seconds else None,
            "data_wait_fraction": round(wait, 4) if wait is not None else None,
            "cpu_seconds": round(self.earlier_cpu_seconds + cpu_seconds() - self._cpu0, 2),
            "gpu_hours": round(total / 3600 * gpus, 6) if total is not None else None,
            "energy_kwh": None,  # measured by the hardware monitor (NVML) where a GPU is used
            "peak_host_memory_mb": round(peak_host_memory_mb(), 1),
            "params": self.params,
            "trainable_params": self.trainable_params,
            "gflops": float(f"{self.gflops:.4g}") if self.gflops is not None else None,
            "weights_revision": self.weights_revision,
            # the checkpoint monitor at each validation (gate-rank extrapolates short runs from it: gate.ranking.curves)
            "val_curve": [[int(step), round(float(v), 6)] for step, v in sorted(self.curve)],
            "validations": len(self.validation_seconds),
            "validation_seconds": round(sum(self.validation_seconds), 3),
        }
        if self.tier_monitor and self.tier_curve:  # the tier metric's own curve, where it is not the monitor
            out["tier_val_curve"] = {"metric": self.tier_monitor.removeprefix("val/"),
                                     "points": [[int(step), round(float(v), 6)] for step, v in sorted(self.tier_curve)]}
        if torch.cuda.is_available():
            out["peak_gpu_memory_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        return out


def _with_point(curve: list[list[float]], step: int, value: Any) -> list[list[float]]:
    """``curve`` with ``[step, value]`` in place of any point at that step (a value that is missing or not finite:
    unchanged)."""
    if value is None or not math.isfinite(float(value)):
        return curve
    return [p for p in curve if p[0] != step] + [[step, float(value)]]


def model_gflops(model: nn.Module, batch: Mapping[str, Any]) -> float | None:
    """Forward GFLOPs per input example of ``model`` (a GATEModel) on ``batch``, in eval mode without
    gradients; the modules' train/eval modes are restored. None (with a warning) when the forward cannot be
    counted."""
    modes = {m: m.training for m in model.modules()}
    try:
        model.eval()
        flops = forward_flops(lambda: model(batch))
    except (RuntimeError, TypeError, ValueError) as err:  # a model FlopCounterMode cannot trace: no number rather than a wrong one
        warnings.warn(f"gflops not measured: counting the forward FLOPs failed ({type(err).__name__}: {err})",
                      stacklevel=2)
        return None
    finally:
        for module, training in modes.items():
            module.training = training
    inputs = batch_inputs(batch, fallback=int(model.adapter.batch_size(batch)))
    return flops / 1e9 / max(inputs, 1)

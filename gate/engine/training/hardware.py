"""Hardware and cost while training: the ``hw/*`` metrics, and the energy fact of the record.

Always (any machine): step time, throughput, the fraction of the training time spent waiting for data, CPU
time and peak resident memory. Where the run uses a GPU and NVML is importable (the optional dependency
``nvidia-ml-py``, module ``pynvml``): GPU utilisation, memory, power and the energy used since training
started (kWh). Otherwise one info line says why the GPU part is off.

The facts themselves are computed by :class:`gate.engine.training.facts.RunFacts`, which this monitor extends; it
only adds the periodic logging and the NVML energy meter.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from .facts import RunFacts
from .usage import cpu_seconds, peak_host_memory_mb


class NvmlMeter:
    """One GPU through NVML: utilisation (%), memory used (MiB), power (W) and energy since :meth:`start`.

    Energy comes from the GPU's cumulative energy counter where it has one (Volta and later), otherwise from
    integrating the power readings over time.
    """

    def __init__(self, pynvml, handle) -> None:
        self.nvml, self.handle = pynvml, handle
        self._energy0_mj: int | None = None
        self._joules = 0.0
        self._last: tuple[float, float] | None = None  # (time, watts) of the last power reading

    @classmethod
    def open(cls, device: torch.device) -> tuple[NvmlMeter | None, str]:
        """A meter of ``device``, or None and the reason there is none."""
        if device.type != "cuda":
            return None, "no GPU in use: GPU utilisation, power and energy are not logged (energy_kwh is null)"
        try:
            import pynvml
        except ImportError:
            return None, ("NVML is not installed (pip install nvidia-ml-py): GPU utilisation, power and energy "
                          "are not logged (energy_kwh is null)")
        try:
            pynvml.nvmlInit()
            index = device.index if device.index is not None else torch.cuda.current_device()
            uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
            try:  # the same GPU as torch's (CUDA_VISIBLE_DEVICES renumbers devices, UUIDs stay)
                handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}") if uuid is not None else None
            except pynvml.NVMLError:
                handle = None
            if handle is None:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except (pynvml.NVMLError, RuntimeError) as err:  # no driver, no permission, ...
            return None, f"NVML is unavailable ({err}): GPU utilisation, power and energy are not logged"
        return cls(pynvml, handle), ""

    def start(self) -> None:
        try:
            self._energy0_mj = int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except self.nvml.NVMLError:
            self._energy0_mj = None  # no energy counter on this GPU: integrate power instead
        self._joules = 0.0
        self._last = (time.perf_counter(), self.power_watts() or 0.0)

    def power_watts(self) -> float | None:
        try:
            return self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
        except self.nvml.NVMLError:
            return None

    def energy_kwh(self) -> float | None:
        """Energy used by the GPU since :meth:`start` (kWh)."""
        if self._energy0_mj is not None:
            try:
                used_mj = int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) - self._energy0_mj
                return used_mj / 1000.0 / 3.6e6
            except self.nvml.NVMLError:
                return None
        self._integrate()
        return self._joules / 3.6e6 if self._last is not None else None

    def _integrate(self) -> None:
        now, watts = time.perf_counter(), self.power_watts()
        if self._last is not None and watts is not None:
            self._joules += (now - self._last[0]) * (self._last[1] + watts) / 2  # trapezoid
            self._last = (now, watts)

    def sample(self) -> dict[str, float]:
        out: dict[str, float] = {}
        try:
            out["hw/gpu_util_percent"] = float(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            out["hw/gpu_memory_mb"] = self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used / 2**20
        except self.nvml.NVMLError:
            pass
        watts = self.power_watts()
        if watts is not None:
            out["hw/gpu_power_w"] = watts
        energy = self.energy_kwh()
        if energy is not None:
            out["hw/energy_kwh"] = energy
        return out


class HardwareMonitor(RunFacts):
    """RunFacts that also logs ``hw/*`` metrics every ``every_n_steps`` training steps and meters GPU energy.

    Logged (over the steps since the last log): ``hw/step_seconds``, ``hw/samples_per_second``,
    ``hw/data_wait_fraction``; cumulative: ``hw/cpu_seconds``, ``hw/peak_rss_mb``; with NVML:
    ``hw/gpu_util_percent``, ``hw/gpu_memory_mb``, ``hw/gpu_power_w``, ``hw/energy_kwh``.
    """

    def __init__(self, every_n_steps: int = 50, count_flops: bool = True, timeline: Any = None,
                 since: tuple[float, float] | None = None) -> None:
        super().__init__(count_flops=count_flops, timeline=timeline, since=since)
        if int(every_n_steps) < 1:
            raise ValueError(f"callbacks.hardware.every_n_steps must be >= 1, got {every_n_steps}")
        self.every_n_steps = int(every_n_steps)
        self.meter: NvmlMeter | None = None
        self.nvml_note = ""
        self._window = (0.0, 0.0, 0, 0)  # step seconds, wait seconds, samples, batches at the last log
        self._batches = 0
        self._logged_step = -1
        self.earlier_energy_kwh = 0.0  # metered by the attempts before a resume (the checkpoint holds it)

    def on_train_start(self, trainer, pl_module) -> None:
        super().on_train_start(trainer, pl_module)
        if self.meter is None and not self.nvml_note:
            self.meter, self.nvml_note = NvmlMeter.open(pl_module.device)
            if self.meter is None:
                print(f"[gate] hardware: {self.nvml_note}")  # one info line, like gate's other run notes
        if self.meter is not None:
            self.meter.start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        self._batches += 1
        step = int(trainer.global_step)
        if step % self.every_n_steps or step == self._logged_step or not trainer.loggers:
            return
        self._logged_step = step
        self.fold()  # the device's times of the steps so far (one synchronisation per log)
        now = (self.step_seconds, self.wait_seconds, self.samples, self._batches)
        d_step, d_wait, d_samples, d_batches = (a - b for a, b in zip(now, self._window))
        self._window = now
        metrics: dict[str, float] = {"hw/cpu_seconds": cpu_seconds() - self._cpu0,
                                     "hw/peak_rss_mb": peak_host_memory_mb()}
        if d_step > 0:
            metrics["hw/step_seconds"] = d_step / max(d_batches, 1)
            metrics["hw/samples_per_second"] = d_samples / d_step
            metrics["hw/data_wait_fraction"] = d_wait / (d_wait + d_step)
        if self.meter is not None:
            metrics.update(self.meter.sample())
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)

    # the energy metered so far survives a resume too (as the wall seconds do: RunFacts)
    def state_dict(self) -> dict[str, Any]:
        energy = self.meter.energy_kwh() if self.meter is not None else None
        return {**super().state_dict(), "energy_kwh": None if energy is None else self.earlier_energy_kwh + energy}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._training and isinstance(state_dict.get("energy_kwh"), (int, float)):
            self.earlier_energy_kwh = float(state_dict["energy_kwh"])
        super().load_state_dict(state_dict)

    def facts(self, resumed: bool, wall_seconds: float | None = None, gpus: int = 0) -> dict[str, Any]:
        out = super().facts(resumed, wall_seconds, gpus)
        if self.meter is not None:
            energy = self.meter.energy_kwh()
            out["energy_kwh"] = round(self.earlier_energy_kwh + energy, 6) if energy is not None else None
        return out

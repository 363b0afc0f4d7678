"""The run's ``trainer.accelerator`` and ``trainer.devices`` against this machine, before any work: a GPU asked for
on a machine without one is one line (exit code 2), not Lightning's MisconfigurationException (an "internal error")
after the data and the model were built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError


def check_devices(trainer: Mapping[str, Any]) -> None:
    """Refuse an accelerator this machine does not have, or more devices than it has (the ``trainer`` section;
    conf/trainer/default.yaml states both keys). An accelerator object (``_target_``) is Lightning's to check."""
    name = trainer["accelerator"]
    if not isinstance(name, str) or name in ("auto", "cpu"):  # every machine has a CPU: no Lightning to ask (seconds)
        return
    from lightning.pytorch.accelerators import AcceleratorRegistry, CUDAAccelerator, MPSAccelerator

    known = sorted({*AcceleratorRegistry.available_accelerators(), "gpu", "auto"})
    if name not in known:
        raise ConfigError(f"trainer.accelerator={name!r} is unknown: choose one of {known}")
    if name == "gpu":  # Lightning's gpu: CUDA, else Apple's MPS
        found = next((c for c in (CUDAAccelerator, MPSAccelerator) if c.is_available()), None)
    else:
        accelerator = AcceleratorRegistry[name]["accelerator"]
        found = accelerator if accelerator.is_available() else None
    if found is None:
        raise ConfigError(f"trainer.accelerator={name} but torch finds no {name} device on this machine; use "
                          f"trainer.accelerator=auto (a GPU where there is one, else the CPU) or "
                          f"trainer.accelerator=cpu")
    devices = trainer["devices"]
    if name != "cpu" and isinstance(devices, int) and not isinstance(devices, bool) and devices > 0:
        have = found.auto_device_count()
        if devices > have:
            raise ConfigError(f"trainer.devices={devices} but this machine has {have} {name} device(s); use "
                              f"trainer.devices={have} (or auto)")

"""The process layout of a run as far as it matters to its numbers (a pure function of the config).

Several devices run one experiment through Lightning's DDP (gate.engine.training.distributed). For adapters whose loss is
a mean over examples the numbers equal one device's, so the layout is left out of the experiment id; otherwise
the world size enters it (:func:`layout_identity`), so runs that compute something else are never mixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The trainer keys that describe the process layout (run-only in the experiment id, see gate.results).
LAYOUT_KEYS = ("trainer.devices", "trainer.num_nodes", "trainer.strategy", "trainer.sync_batchnorm",
               "trainer.use_distributed_sampler")


def requested_world_size(trainer_cfg: Mapping[str, Any]) -> int:
    """How many processes ``trainer.devices`` × ``trainer.num_nodes`` ask for (``auto``/``-1``: every visible GPU, or
    one CPU process)."""
    devices = trainer_cfg.get("devices", 1)
    nodes = int(trainer_cfg.get("num_nodes", 1) or 1)
    if isinstance(devices, (list, tuple)):
        count = len(devices)
    elif isinstance(devices, str) and devices.strip().lstrip("-").isdigit():
        count = int(devices)
    elif isinstance(devices, int) and not isinstance(devices, bool):
        count = devices
    else:
        count = -1
    if count == -1:  # "auto" / -1: what Lightning would pick here
        import torch

        accelerator = str(trainer_cfg.get("accelerator", "auto"))
        count = torch.cuda.device_count() if accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available() else 1
    return max(int(count), 1) * nodes


def layout_identity(loss_splits: bool, trainer_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What of the process layout enters the experiment id: nothing when the adapter's loss splits across devices
    (``loss_splits``: the numbers equal one device's), else the world size (the per-device batches change the loss)."""
    world = requested_world_size(trainer_cfg)
    if world == 1 or loss_splits:
        return {}
    return {"world_size": world}

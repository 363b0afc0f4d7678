"""The global random streams (torch's CPU and CUDA generators, numpy's, Python's) as part of a checkpoint, so that a
run resumed from it draws what the run that was never stopped drew after it (dropout, a random flip): Lightning
saves the model, the optimiser, the schedulers and the loops' progress, not these. With the loader's position
(:class:`gate.data.resumable.ResumableLoader`) a resumed run is the uninterrupted run (tests/test_resume_exact.py).

Saved as tensors, integers and tuples only: every checkpoint is read as data (``torch.load(weights_only=True)``).
"""

from __future__ import annotations

import random
from typing import Any

import lightning as L
import numpy as np
import torch


class RandomStates(L.Callback):
    """Saves the global random streams with each checkpoint and restores them on resume."""

    def state_dict(self) -> dict[str, Any]:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        return {"torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
                "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)),
                "python": random.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        torch.set_rng_state(state["torch"])
        if state.get("cuda") and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(state["cuda"])
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))

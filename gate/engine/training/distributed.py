"""One experiment on several processes (Lightning DDP): who does what, and what changes with the device count.

``trainer.devices=N`` (and ``trainer.num_nodes``) run one experiment as ``N`` processes. Lightning starts the
other ranks by re-running the command (or SLURM starts every task), so each rank walks through
:func:`gate.engine.training.finetune.run_finetune`. Exactly one of them, global rank 0, touches shared state: it takes
the experiment's lock, removes checkpoints on ``force``, sets damaged checkpoints aside, writes the one record
set and prunes checkpoints; the others follow read-only. Batches are shared out by :mod:`gate.data.distributed`
so that, for adapters whose loss is a mean over examples, the gradient is the one-device gradient of the same
global batch (``data.batch_size`` is the global batch; BatchNorm statistics are synchronised): the device count
does not enter the experiment id. For adapters whose loss is not (few-shot episodes, a batch's contrastive loss,
segmentation's batch Dice), it does (:func:`gate.parallel.layout_identity`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ...parallel import requested_world_size

#: Where a launcher (Lightning, torchrun, SLURM, LSF) puts a process's rank, in the order Lightning reads them
#: (``lightning.fabric.utilities.rank_zero._get_rank``; tests/test_distributed.py compares the two).
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def process_rank() -> int:
    """This process's global rank (0 unless launched as another rank by Lightning, SLURM or torchrun). Lightning
    sets it on ``rank_zero_only`` when it is imported (from the launcher's environment) and again when its strategy
    starts; a process that has not imported Lightning (a run answered from the store, or refused before training)
    reads the environment as Lightning would, without importing it (seconds)."""
    from lightning_utilities.core.rank_zero import rank_zero_only  # the object Lightning sets (not Lightning)

    rank = getattr(rank_zero_only, "rank", None)
    return int(rank) if rank is not None else environment_rank()


def environment_rank() -> int:
    """The rank a launcher gave this process in its environment (:data:`RANK_VARIABLES`, the first one set), or 0."""
    return int(next((os.environ[key] for key in RANK_VARIABLES if os.environ.get(key) is not None), 0) or 0)


def ddp_strategy(trainer_cfg: Mapping[str, Any]):
    """The strategy object for a multi-process run, or None to leave ``trainer.strategy`` as it is.

    ``find_unused_parameters=True``: an encoder's pretrained classification head (kept for LEEP/NCE), the word
    embeddings behind a modality stem and levels an adapter does not read get no gradient, which plain DDP refuses
    ("parameters that were not used in producing the loss"); the search costs one graph walk per step.
    """
    strategy = trainer_cfg.get("strategy", "auto")
    if strategy == "ddp" or (strategy in ("auto", None) and requested_world_size(trainer_cfg) > 1):
        from lightning.pytorch.strategies import DDPStrategy

        return DDPStrategy(find_unused_parameters=True)
    return None

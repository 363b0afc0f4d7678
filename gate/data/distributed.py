"""Serving a split to several processes (data-parallel training, DDP) so that the numbers equal one device's.

gate shards batches itself instead of Lightning's ``DistributedSampler``, which pads a split with repeated
examples to divide it evenly (so a test set of 10 001 images is scored as 10 002 on two ranks) and reshuffles with
its own generator (so two devices would see other batches than one). Here the adapter's loader is built exactly as
on one device, and its sequence of batches is shared out:

* when the adapter's loss and metrics are means over examples (``Adapter.loss_splits_across_devices``): every
  global batch is cut into ``world_size`` contiguous slices, one per rank. ``data.batch_size`` stays the **global** batch size, and
  with the loss weighting of :func:`gate.engine.model.global_batch_loss` the averaged gradient is the one-device
  gradient of the same batch. A final global batch with fewer examples than ranks is dropped (one device would
  have used it), as an empty slice cannot be trained on.
  Evaluation slices alike, unpadded: every example is scored once.
* otherwise (an episode, the candidates of in-batch retrieval, a batch's Dice): whole batches go round-robin (rank
  ``r`` gets batches ``r, r + W, ...``), so batch-shaped metrics see the same batches as on one device; in training
  each rank takes a whole batch per step, so the effective batch is ``W`` batches and the world size enters the
  experiment id (:func:`gate.parallel.layout_identity`).

Metric states are reduced across ranks before they are read.
"""

from __future__ import annotations

from collections.abc import Iterator

from torch.utils.data import BatchSampler, DataLoader, Sampler


class RoundRobinBatches(Sampler):
    """The items ``rank, rank + world, ...`` of ``batches`` (a batch sampler, or a sampler of whole batches);
    ``equal``: only the first ``world · ⌊len / world⌋``, so that every rank takes as many training steps."""

    def __init__(self, batches, rank: int, world: int, equal: bool = False) -> None:
        self.batches, self.rank, self.world, self.equal = batches, int(rank), int(world), bool(equal)

    def __iter__(self) -> Iterator:
        stop = len(self) * self.world if self.equal else None
        for i, batch in enumerate(self.batches):
            if stop is not None and i >= stop:
                break
            if i % self.world == self.rank:
                yield batch

    def __len__(self) -> int:
        n = len(self.batches)
        return n // self.world + (0 if self.equal else int(self.rank < n % self.world))


class SlicedBatches(Sampler):
    """This rank's contiguous slice of every global batch of ``batches`` (a batch sampler of index lists), slices as
    equal as can be. ``train``: a global batch with fewer examples than ranks is skipped by every rank (an empty
    slice cannot be trained on, and every rank must take the same number of steps); in evaluation a rank whose
    slice is empty just skips that batch, so every example is scored exactly once."""

    def __init__(self, batches, rank: int, world: int, train: bool) -> None:
        self.batches, self.rank, self.world, self.train = batches, int(rank), int(world), bool(train)

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.batches:
            batch = list(batch)
            if self.train and len(batch) < self.world:
                continue
            size, extra = divmod(len(batch), self.world)
            start = self.rank * size + min(self.rank, extra)
            mine = batch[start:start + size + (1 if self.rank < extra else 0)]
            if mine:
                yield mine

    def __len__(self) -> int:
        return sum(1 for size in _batch_sizes(self.batches) if self._slice_size(size) > 0)

    def _slice_size(self, size: int) -> int:
        if self.train and size < self.world:
            return 0
        base, extra = divmod(size, self.world)
        return base + (1 if self.rank < extra else 0)


def _batch_sizes(batches) -> list[int]:
    """The sizes of a batch sampler's batches, without drawing from it (iterating a shuffling sampler would
    advance its generator: the ranks would then train on other batches than one device)."""
    if isinstance(batches, BatchSampler):
        n, size = len(batches.sampler), int(batches.batch_size)
        full, rest = divmod(n, size)
        return [size] * full + ([rest] if rest and not batches.drop_last else [])
    return [len(list(b)) for b in batches]  # a custom batch sampler: assumed deterministic


def shard_loader(loader: DataLoader, rank: int, world: int, *, train: bool, splittable: bool,
                 what: str = "split") -> DataLoader:
    """``loader``'s batches shared out to ``rank`` of ``world`` processes (the loader itself when ``world`` is 1).

    ``splittable`` (the adapter's loss and metrics are per example): every batch is sliced across the ranks, so
    a rank's slice of the global batch is its batch. Otherwise whole batches are dealt round-robin (an episode,
    the candidates of in-batch retrieval stay whole): in training each rank then takes a whole batch per step.
    """
    if world <= 1:
        return loader
    from ..errors import GateError

    common = dict(num_workers=loader.num_workers, collate_fn=loader.collate_fn, pin_memory=loader.pin_memory,
                  worker_init_fn=loader.worker_init_fn, persistent_workers=loader.persistent_workers,
                  timeout=loader.timeout,
                  # the same generator: DataLoader draws its workers' base seed from it before the sampler draws
                  generator=loader.generator)
    kind = type(loader)  # a training loader stays resumable (gate.data.resumable)
    if loader.batch_sampler is not None and splittable:
        batches = SlicedBatches(loader.batch_sampler, rank, world, train)
        sharded = kind(loader.dataset, batch_sampler=batches, **common)
    elif loader.batch_sampler is not None:
        sharded = kind(loader.dataset, batch_sampler=RoundRobinBatches(loader.batch_sampler, rank, world, train),
                       **common)
    else:
        sharded = kind(loader.dataset, batch_size=None, sampler=RoundRobinBatches(loader.sampler, rank, world, train),
                       **common)
    if len(sharded) == 0:
        total = len(loader)
        raise GateError(f"the {what} has {total} batch(es), too few to give each of {world} processes one "
                        f"(trainer.devices x trainer.num_nodes); lower data.eval_batch_size or data.batch_size, or "
                        f"use fewer devices")
    return sharded

"""A training loader that a run resumed from a mid-epoch checkpoint continues where it stopped.

Lightning saves a loader's position only when the loader has ``state_dict``/``load_state_dict``; without them a run
resumed from a checkpoint written mid-epoch starts that epoch's data again (its first batches seen twice, its last
never) and trains on other batches than the run that was never stopped. :class:`ResumableLoader` keeps how many
epochs it began and how many batches of the last one it served; resumed, it replays its samplers' random draws
from their seeded start (indices only: no example is loaded) up to that batch and serves the rest, so the resumed
run sees exactly the batches the uninterrupted run sees (tests/test_resume_exact.py). Every random draw a gate
loader makes comes from generators seeded when it is built (the loader's own, a sampler's), never from the global
stream, which is what makes the replay exact.

A :class:`torch.utils.data.DataLoader` draws its workers' base seed from its generator each time an iterator is
made — every epoch without persistent workers, once with them — and a shuffling sampler built by the loader draws
its permutation from the same generator; the replay makes those draws in that order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader

#: Attributes under which gate's samplers and batch samplers hold the sampler they wrap.
_INNER = ("sampler", "batch_sampler", "batches", "inner")


def _shares(obj: Any, generator: torch.Generator, depth: int = 0) -> list[Any]:
    """The samplers under ``obj`` that draw from ``generator`` (the loader's own)."""
    if obj is None or depth > 4:
        return []
    found = [obj] if getattr(obj, "generator", None) is generator else []
    for name in _INNER:
        inner = getattr(obj, name, None)
        if inner is not None and inner is not obj:
            found += _shares(inner, generator, depth + 1)
    return found


def _draw_base_seed(generator: torch.Generator | None) -> None:
    """The draw :class:`torch.utils.data.DataLoader` makes from its generator for a new iterator's base seed."""
    torch.empty((), dtype=torch.int64).random_(generator=generator)


class _Positioned:
    """A loader's index sampler that leaves out the first ``loader._skip`` items of an epoch (drawn, never served),
    read when the epoch begins: an iterator with persistent workers keeps its index sampler for every epoch."""

    def __init__(self, inner: Any, loader: ResumableLoader) -> None:
        self.inner, self.loader = inner, loader

    def __iter__(self) -> Iterator[Any]:
        it = iter(self.inner)
        for _ in range(self.loader._skip):
            next(it, None)
        yield from it

    def __len__(self) -> int:
        return max(len(self.inner) - self.loader._skip, 0)


class ResumableLoader(DataLoader):
    """A DataLoader whose position in its epochs is part of a checkpoint (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._epochs = 0            # epochs begun
        self._served = 0            # batches of the last one served
        self._resume: dict[str, int] | None = None
        self._skip = 0              # batches of the next epoch to leave out (a resume)

    @property
    def _base_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    @property
    def _index_sampler(self) -> Any:
        return _Positioned(self._base_sampler, self)

    def __len__(self) -> int:
        return len(self._base_sampler)

    def state_dict(self) -> dict[str, int]:
        return {"epochs": self._epochs, "served": self._served}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._resume = {"epochs": int(state["epochs"]), "served": int(state["served"])}

    def __iter__(self) -> Iterator[Any]:
        resume, self._resume = self._resume, None
        if resume is not None:
            done, served = resume["epochs"], resume["served"]
            if done and served >= len(self):  # stopped at the end of an epoch: the next one begins
                done, served = done + 1, 0
            self._replay(max(done - 1, 0))
            self._epochs, self._skip = max(done, 1), served
        else:
            self._epochs += 1
            self._skip = 0
        self._served = self._skip
        fresh = self._iterator is None  # a persistent-workers iterator is made once, at its first epoch
        if resume is not None and self.persistent_workers and fresh and self._epochs > 1:
            # the run that was never stopped drew its workers' base seed at its first epoch only; this iterator
            # draws one now: it is taken from a copy, so the samplers' draws continue where the replay left them
            state = self.generator.get_state()
            for sampler in _shares(self.sampler, self.generator) + _shares(self.batch_sampler, self.generator):
                own = torch.Generator()
                own.set_state(state)
                sampler.generator = own
        for batch in super().__iter__():
            self._served += 1
            yield batch

    def _replay(self, epochs: int) -> None:
        """Make the random draws of ``epochs`` whole epochs, as iterating them would (indices only)."""
        base = self._base_sampler
        for i in range(epochs):
            if not self.persistent_workers or i == 0:
                _draw_base_seed(self.generator)
            for _ in base:
                pass

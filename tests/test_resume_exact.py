"""A run resumed from a checkpoint written mid-epoch is the run that was never stopped: the training loader serves
the batches it had not served yet (gate.data.resumable), and the global random streams continue where they were
(gate.engine.training.random_states). Before, Lightning started the epoch's data again and the streams from the
run's seed: a 4-step digits run continued to 8 steps validated 0.094 and 0.156 at steps 6 and 8 where the 8-step
run validated 0.0625 and 0.094."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import Dataset

from helpers import SMOKE, TINY_ENCODER, compose_run


class Indices(Dataset):
    def __len__(self) -> int:
        return 20

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(i)


def _loader(workers: int, sampler=None):
    from gate.data.resumable import ResumableLoader

    if sampler is not None:  # few-shot's way: a sampler with its own generator, one item per step
        return ResumableLoader(Indices(), batch_size=None, sampler=sampler, generator=torch.Generator().manual_seed(5),
                               num_workers=workers, persistent_workers=workers > 0)
    return ResumableLoader(Indices(), batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(5),
                           num_workers=workers, persistent_workers=workers > 0)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("epoch, batch", [(1, 2), (2, 3), (3, 1), (2, 7)])  # 7 batches an epoch: (2, 7) ends one
def test_a_resumed_loader_serves_the_batches_the_uninterrupted_one_serves_next(workers, epoch, batch):
    """Four epochs of 7 shuffled batches; the loader's state after ``batch`` batches of ``epoch``, loaded into a new
    loader (a new process), gives every later batch of the four epochs in the same order, with or without
    persistent workers (whose iterator draws its workers' seed once, not every epoch)."""
    whole, cut, state = [], None, None
    loader = _loader(workers)
    for e in range(1, 5):
        for j, b in enumerate(loader, 1):
            whole.append(b.tolist())
            if (e, j) == (epoch, batch):
                state, cut = loader.state_dict(), len(whole)
    assert state == {"epochs": epoch, "served": batch}
    resumed = _loader(workers)
    resumed.load_state_dict(state)
    rest = []
    while len(rest) < len(whole) - cut:
        rest += [b.tolist() for b in resumed]
    for done in (loader, resumed):  # their persistent workers end here, not in a later test's garbage collection
        if done._iterator is not None:
            done._iterator._shutdown_workers()
    assert rest == whole[cut:]


def test_a_resumed_loader_of_a_sampler_with_its_own_generator_continues_it():
    from gate.adapters.few_shot import FreshSeeds

    loader = _loader(0, FreshSeeds(5, seed=3))
    whole = [int(b) for _ in range(3) for b in loader]
    state = {"epochs": 2, "served": 2}
    resumed = _loader(0, FreshSeeds(5, seed=3))
    resumed.load_state_dict(state)
    rest = [int(b) for _ in range(2) for b in resumed]
    assert rest == whole[7:]


def test_a_run_continued_from_a_mid_epoch_checkpoint_equals_the_run_never_stopped(tmp_path):
    """digits at 200 training examples in batches of 16 is 13 steps an epoch. A 16-step run (its last checkpoint 3
    batches into the second epoch) continued to 24 steps ends with the weights of a 24-step run, to the bit, with
    dropout drawing from the global stream at every step."""
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run
    from gate.ranking.proxy import continue_into
    from gate.results import ResultsStore

    base = [*SMOKE, "dataset=digits", *TINY_ENCODER, "data.max_val_samples=32", "evaluate_test=false",
            "adapter.dropout=0.5", "trainer.val_check_interval=4", "keep_checkpoints=all"]
    whole = run_finetune(parse_run(compose_run(tmp_path / "whole", [*base, "trainer.max_steps=24"])))
    short = run_finetune(parse_run(compose_run(tmp_path / "cont", [*base, "trainer.max_steps=16"])))
    checked = parse_run(compose_run(tmp_path / "cont", [*base, "trainer.max_steps=24"]))
    shorter = Path(short.run_dir) / "checkpoints" / "last.ckpt"
    before = shorter.read_bytes()
    assert continue_into(shorter, checked.run_dir)  # gate-rank's halving: the checkpoint shared, not copied
    continued = run_finetune(checked)
    assert continued.facts["resumed_from_step"] == 16
    assert shorter.read_bytes() == before  # the continued run's checkpoints never wrote into the shorter run's
    a = torch.load(Path(whole.run_dir) / "checkpoints" / "last.ckpt", weights_only=True)
    b = torch.load(Path(continued.run_dir) / "checkpoints" / "last.ckpt", weights_only=True)
    assert a["global_step"] == b["global_step"] == 24
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    assert continued.facts["val_curve"] == whole.facts["val_curve"]
    # its validation record is the best of the whole curve, not of the validations after the checkpoint (the
    # checkpoint callback forgets those of a checkpoint written in another directory)
    best = [[r["value"] for r in ResultsStore(root / "results" / "records.jsonl").records()
             if r["split"] == "val" and r["experiment"] == run.experiment]
            for root, run in ((tmp_path / "whole", whole), (tmp_path / "cont", continued))]
    assert best[0] == best[1] == [max(v for _, v in whole.facts["val_curve"])]

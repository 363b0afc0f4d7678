"""A run is killable at any moment, safe beside its twin, and writes nothing outside its output root. (A gate-run
process SIGKILLed mid-run and rerun: tests/test_tiers.py, whose launcher's job is that process.)"""


import pytest

from gate.cli import run as run_cli
from gate.engine.training.finetune import run_finetune
from gate.engine.validate import parse_run, resolved_config
from gate.results import ExperimentLock, experiment_id

from helpers import SMOKE, TINY_ENCODER, call_cli, compose_run

# The smoke preset (32 px, batch 16, 200/60/60 examples, CSV logging, no logging callbacks), 6 steps, two ensembles.
TINY = [*SMOKE, "dataset=digits", *TINY_ENCODER, "trainer.max_steps=6", "trainer.val_check_interval=3", "ensembles=[1,2]"]


@pytest.mark.slow
def test_twin_runs_never_share_a_run_and_force_never_deletes_a_running_one(tmp_path, capsys):
    cfg = compose_run(tmp_path, TINY)
    exp = experiment_id(resolved_config(cfg), "finetune")
    run_dir = tmp_path / "runs" / exp
    keep = run_dir / "checkpoints" / "step=3.ckpt"
    keep.parent.mkdir(parents=True)
    keep.write_bytes(b"the twin's work")
    with ExperimentLock(run_dir, exp):  # the twin is running
        for extra in ([], ["force=true"]):
            out = call_cli(run_cli.main, [*TINY, f"paths.root={tmp_path}", *extra], capsys, prog="gate-run")  # in process
            assert out.returncode == 2, out.stderr[-2000:]
            assert f"experiment {exp} is already running" in out.stderr and "Traceback" not in out.stderr
            assert keep.read_bytes() == b"the twin's work"
    assert not (tmp_path / "results" / "records.jsonl").exists()


@pytest.mark.slow
def test_a_truncated_checkpoint_is_set_aside_and_the_run_resumes(tmp_path):
    cfg = compose_run(tmp_path, [*TINY, "keep_checkpoints=all"])
    first = run_finetune(parse_run(cfg))
    ckpts = first.run_dir / "checkpoints"
    last = ckpts / "last.ckpt"
    # last.ckpt is a hard link to step=6.ckpt (the top-k file of the same step): a write of last.ckpt replaces the
    # name first, so a kill while saving it leaves a torn file under that name alone
    assert last.stat().st_ino == (ckpts / "step=6.ckpt").stat().st_ino and last.stat().st_nlink == 2
    assert (ckpts / "step=3.ckpt").stat().st_nlink == 1  # the link moved on to step 6; step 3's file is its own
    data = last.read_bytes()
    last.unlink()
    last.write_bytes(data[:1000])  # killed while saving
    elsewhere = compose_run(tmp_path, [*TINY, "keep_checkpoints=all", f"paths.results={tmp_path}/other.jsonl"])
    with pytest.warns(UserWarning, match="truncated"):
        again = run_finetune(parse_run(elsewhere))  # same experiment id (paths are run-only), an empty store: runs again
    assert again.experiment == first.experiment
    assert again.facts["resumed_from_step"] == 6  # from the newest complete checkpoint, step=6
    assert list(ckpts.glob("last.ckpt.corrupt-*"))
    assert again.metrics["acc@1"] == pytest.approx(first.metrics["acc@1"])


def test_last_checkpoint_is_the_newest_state_linked_to_its_steps_top_k_file_where_there_is_one(tmp_path):
    """Validation scores 0.5, 0.9, 0.1 at steps 2, 4, 6 (top-1, max): last.ckpt is a hard link to step=2.ckpt,
    then to step=4.ckpt; at step 6 nothing improves, so it is written afresh as its own file (Lightning 2.6 alone
    would leave it at step 4), and the write does not go through the old link into step=4.ckpt."""
    import lightning as L
    import torch

    from gate.engine.training.trainer import checkpoint_callback

    class Scripted(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)
            self.scores = iter([0.5, 0.9, 0.1])

        def training_step(self, batch, _):
            return self.layer(batch[0]).mean()

        def validation_step(self, batch, _):
            self.log("val/acc", next(self.scores))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    ckpts, seen = tmp_path / "checkpoints", {}

    def look(step):
        last, top = ckpts / "last.ckpt", ckpts / f"step={step}.ckpt"
        seen[step] = (top.exists() and last.stat().st_ino == top.stat().st_ino,
                      torch.load(last, weights_only=False)["global_step"])

    class Watch(L.Callback):  # Lightning runs checkpoint callbacks last: look when the next step starts
        def on_train_batch_start(self, trainer, *_):
            if trainer.global_step and trainer.global_step % 2 == 0 and trainer.global_step not in seen:
                look(trainer.global_step)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(80, 2)), batch_size=8)
    trainer = L.Trainer(max_steps=6, val_check_interval=2, limit_val_batches=1, num_sanity_val_steps=0,
                        callbacks=[checkpoint_callback(ckpts, "acc", "max", 1), Watch()], logger=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Scripted(), data, data)
    look(6)
    assert seen == {2: (True, 2), 4: (True, 4), 6: (False, 6)}, seen
    assert sorted(p.name for p in ckpts.iterdir()) == ["last.ckpt", "step=4.ckpt"]
    assert (ckpts / "last.ckpt").stat().st_nlink == 1 and (ckpts / "step=4.ckpt").stat().st_nlink == 1
    assert torch.load(ckpts / "step=4.ckpt", weights_only=False)["global_step"] == 4

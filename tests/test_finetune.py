"""End-to-end fine-tuning on real data: records, idempotence, force, ensembles, resume."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import gate.engine.training.finetune as finetune
from gate.engine.validate import parse_run
from gate.results import ResultsStore

from helpers import FAST, SMOKE, TINY_ENCODER, call_cli, compose_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    """One real run shared by the assertions below: pretrained EfficientNet-Lite0 on digits, 15 steps (3
    validations, so the 3-checkpoint ensemble has its members)."""
    root = tmp_path_factory.mktemp("digits_run")
    cfg = compose_run(root, [*FAST, "trainer.max_steps=15", "trainer.val_check_interval=5"])
    return root, cfg, finetune.run_finetune(parse_run(cfg))


def test_pretrained_encoder_learns_digits_above_chance(digits_run):
    root, cfg, result = digits_run
    assert not result.skipped
    # Chance is 0.1; 15 steps at 32 px reach 0.575 here (30 steps: 0.731; the value depends on the torch build).
    assert result.metrics["acc@1"] > 0.3
    records = ResultsStore(root / "results" / "records.jsonl").records()
    metrics = {(r["split"], r["metric"]) for r in records}
    assert {("test", "acc@1"), ("test", "acc@5"), ("test", "loss"), ("test", "ensemble_1/acc@1"),
            ("test", "ensemble_3/acc@1"), ("val", "acc@1")} <= metrics
    first = records[0]
    assert (first["encoder"], first["dataset"], first["adapter"], first["recipe"], first["kind"]) == \
        ("efficientnet_lite0", "digits", "linear_classifier", "conv", "finetune")
    assert all(r["experiment"] == result.experiment for r in records)


def test_ensemble_of_one_equals_the_best_checkpoint(digits_run):
    _, _, result = digits_run
    for name in ("acc@1", "acc@5", "loss"):
        assert result.metrics[f"ensemble_1/{name}"] == pytest.approx(result.metrics[name], abs=1e-5)


def test_rerun_is_skipped_and_force_reruns_and_appends(tmp_path):
    # A smoke-sized run (4 steps): what is checked is the store's bookkeeping, not what the run learnt.
    smoke = ["dataset=digits", *SMOKE, *TINY_ENCODER]
    result = finetune.run_finetune(parse_run(compose_run(tmp_path, smoke)))
    store = ResultsStore(tmp_path / "results" / "records.jsonl")
    before = len(store.records())
    assert not result.skipped and before > 0
    again = finetune.run_finetune(parse_run(compose_run(tmp_path, smoke)))
    assert again.skipped and again.experiment == result.experiment
    assert len(store.records()) == before
    forced = finetune.run_finetune(parse_run(compose_run(tmp_path, [*smoke, "force=true"])))
    assert not forced.skipped and forced.experiment == result.experiment  # force is not part of the id
    assert len(store.records()) == 2 * before


def test_ensembles_average_logits_batch_by_batch_in_one_streaming_pass():
    import lightning as L
    from torch.utils.data import DataLoader

    from gate.adapters import LinearClassifier
    from gate.engine.training.ensemble import EnsembleTester

    class Fixed(torch.nn.Module):
        """A member that returns fixed logits per example (looked up by the batch's example index)."""

        def __init__(self, logits):
            super().__init__()
            self.register_buffer("logits", logits)
            self.adapter = LinearClassifier(feature_dim=4, num_classes=3)

        def forward(self, batch):
            return self.logits[batch["index"]]

    target = torch.tensor([0, 1, 2, 2])
    a = torch.tensor([[2.0, 0, 0], [0, 2, 0], [2, 0, 0], [0, 0, 2]])  # 3/4 right
    b = torch.tensor([[2.0, 0, 0], [0, 2, 0], [0, 0, 3], [0, 0, 2]])  # 4/4 right
    rows = [{"index": i, "label": target[i]} for i in range(4)]
    tester = EnsembleTester([Fixed(a), Fixed(b)], sizes=(1, 2, 5))
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    out = trainer.test(tester, DataLoader(rows, batch_size=2), verbose=False)[0]  # two batches of two
    assert out["test/acc@1"] == pytest.approx(0.75, abs=1e-7) and out["test/ensemble_1/acc@1"] == pytest.approx(0.75, abs=1e-7)
    assert out["test/ensemble_2/acc@1"] == pytest.approx(1.0, abs=1e-7)
    assert "test/ensemble_5/acc@1" not in out  # only two checkpoints: no ensemble of five
    # The loss of the ensemble of two is the cross-entropy of the averaged logits, averaged over the examples.
    expected = torch.nn.functional.cross_entropy((a + b) / 2, target)
    assert out["test/ensemble_2/loss"] == pytest.approx(float(expected), rel=1e-6)


class Crash(RuntimeError):
    pass


def test_interrupted_run_resumes_from_last_checkpoint(tmp_path, monkeypatch):
    from lightning.pytorch.callbacks import Callback

    class CrashAfter(Callback):
        def on_train_batch_end(self, trainer, *args):
            if trainer.global_step == 2:  # seconds the first attempt spends before its checkpoint of step 4
                time.sleep(1.5)
            if trainer.global_step >= 6:  # after the checkpoint of step 4
                raise Crash("simulated node failure")

    overrides = [*FAST, *TINY_ENCODER, "trainer.max_steps=8", "trainer.val_check_interval=4",
                 "data.max_val_samples=64", "data.max_test_samples=64"]  # checkpoints at steps 4 and 8
    import lightning as L

    from gate.engine.training import trainer as stack

    real_build = stack.build_trainer  # (the run imports it from there where it trains)
    monkeypatch.setattr(stack, "build_trainer",
                        lambda cfg, callbacks, *a: real_build(cfg, [*callbacks, CrashAfter()], *a))
    with pytest.raises(Crash):
        finetune.run_finetune(parse_run(compose_run(tmp_path, overrides)))
    store = ResultsStore(tmp_path / "results" / "records.jsonl")
    assert store.records() == []  # nothing half-written

    resumed_from = []
    monkeypatch.setattr(stack, "build_trainer", real_build)
    real_fit = L.Trainer.fit

    def spy_fit(self, *args, ckpt_path=None, **kwargs):
        resumed_from.append(ckpt_path)
        return real_fit(self, *args, ckpt_path=ckpt_path, **kwargs)

    monkeypatch.setattr(L.Trainer, "fit", spy_fit)
    result = finetune.run_finetune(parse_run(compose_run(tmp_path, overrides)))
    assert resumed_from and resumed_from[0].endswith("last.ckpt")
    # the run's cost counts the first attempt's seconds up to the checkpoint it resumed from, not the last attempt's only
    facts = result.facts
    assert facts["resumed_from_step"] == 4 and facts["earlier_wall_seconds"] >= 1.5
    assert facts["wall_seconds"] > facts["earlier_wall_seconds"] and facts["cpu_seconds"] > 0
    rows = store.records()
    assert rows and len({(r["split"], r["metric"]) for r in rows}) == len(rows)  # no duplicates
    assert all(r["experiment"] == result.experiment for r in rows)


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_gate_run_cli_on_fashion_mnist_writes_only_under_its_output_root(tmp_path):
    """The console script itself, on the real Fashion-MNIST files, W&B offline, the default callbacks, in a fresh
    interpreter whose HOME, TMPDIR and working directory are empty folders: it learns, says where its results went,
    and writes nothing outside ``paths.root``. (The suite's one real gate-run process that trains from start to end;
    the ensembles are tested in process.)"""
    home, tmp, root = tmp_path / "home", tmp_path / "tmp", tmp_path / "out"
    home.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "WANDB_", "MPLCONFIG", "GATE_DEBUG"))}
    env.update(HOME=str(home), TMPDIR=str(tmp), WANDB_MODE="offline")
    steps, batch = 30, 32
    cmd = [sys.executable, "-m", "gate.cli.run", f"paths.root={root}", "image_size=32", f"trainer.max_steps={steps}",
           "trainer.val_check_interval=15", "trainer.enable_progress_bar=false", f"data.batch_size={batch}",
           "data.max_val_samples=128", "data.max_test_samples=256", "ensembles=[1]", "logger=wandb", "callbacks=default"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "test/acc@1" in proc.stdout and "results store:" in proc.stdout and "wandb" in proc.stdout
    rows = ResultsStore(root / "results" / "records.jsonl").records()
    acc = next(r["value"] for r in rows if r["split"] == "test" and r["metric"] == "acc@1")
    assert acc > 0.4  # 10 classes: chance is 0.1 (0.578 here at 32 px)
    assert list((root / "wandb").rglob("offline-run-*"))
    assert files_under(home) == [], files_under(home)
    assert files_under(tmp) == [], files_under(tmp)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "out", "tmp"]  # nothing in the working dir
    facts = rows[0]["facts"]
    assert facts["resumed_from_step"] is None and facts["wall_seconds"] > 0 and facts["train_samples"] == steps * batch
    assert facts["train_samples_per_second"] > 0 and facts["peak_host_memory_mb"] > 0
    # the capped evaluation is a fact of the run (tables mark it ‡): Fashion-MNIST's test split has 10,000 images
    assert facts["split_rows"]["test"] == {"used": 256, "of": 10000} and facts["split_rows"]["val"]["used"] == 128
    # keep_checkpoints=best (the default): only the tested checkpoint is left.
    (run_dir,) = (root / "runs").iterdir()
    assert len(list((run_dir / "checkpoints").glob("*.ckpt"))) == 1
    # Quiet, honest output: no Lightning banners, tips, "Restoring states" lines or W&B anonymity warnings.
    text = proc.stdout + proc.stderr
    for noise in ("GPU available", "Tip:", "Restoring states", "anonymous", "Epoch 0/-"):
        assert noise not in text, noise


def test_multirun_sweep_records_one_experiment_per_combination(tmp_path, monkeypatch, capsys):
    # In process (gate-run's main() with this command line, Hydra's own multirun); gate-run's one real process is
    # the Fashion-MNIST test above.
    from gate.cli import run as run_cli

    root, cwd = tmp_path / "out", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    # two of timm's tiny test models through encoder=timm: the sweep is the point, not the models
    out = call_cli(run_cli.main, ["-m", "encoder=timm", "encoder.model_name=test_resnet,test_efficientnet", "seed=0,1",
                                  f"paths.root={root}", "dataset=digits", *SMOKE, "data.max_test_samples=32"], capsys,
                   prog="gate-run")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "[gate] sweep of 4 job(s):" in out.stdout
    assert "#3: encoder=timm encoder.model_name=test_efficientnet seed=1" in out.stdout, out.stdout
    assert list(cwd.iterdir()) == []  # nothing in the working directory: Hydra's multirun.yaml is under the root
    rows = ResultsStore(root / "results" / "records.jsonl").records()
    combos = {(r["encoder"], r["seed"]) for r in rows}
    assert combos == {(e, s) for e in ("timm_test_resnet", "timm_test_efficientnet") for s in (0, 1)}
    assert len({r["experiment"] for r in rows}) == 4


def test_identity_evaluate_test_false_records_validation_only_and_never_tests(tmp_path, monkeypatch):
    """gate-rank's rungs: evaluate_test=false fits and validates as usual, stores the val record alone, and never
    evaluates the test split (the test pass would raise here); the experiment id is not the default run's."""
    def no_test(*args, **kwargs):
        raise AssertionError("the test split was evaluated")

    from gate.engine.training import ensemble

    monkeypatch.setattr(ensemble, "test_best_and_ensembles", no_test)  # (the run imports it from there)
    steps = ["trainer.max_steps=4", "trainer.val_check_interval=2", "data.max_train_samples=64"]
    cfg = compose_run(tmp_path, [*FAST, *TINY_ENCODER, *steps, "evaluate_test=false"])
    result = finetune.run_finetune(parse_run(cfg))
    records = ResultsStore(tmp_path / "results" / "records.jsonl").records()
    assert {(r["split"], r["metric"]) for r in records} == {("val", "acc@1")}
    assert records[0]["config"]["evaluate_test"] is False and records[0]["facts"]["global_step"] == 4
    assert result.metrics == {}
    from gate.engine.validate import resolved_config
    from gate.results import experiment_id

    assert result.experiment != experiment_id(resolved_config(compose_run(tmp_path, [*FAST, *steps])), "finetune")

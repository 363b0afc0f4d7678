"""One experiment on several processes (DDP): batches shared out without padding or reshuffling, the numbers of
one device, one record set, the lock and the files left to rank 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader

from gate.data.distributed import RoundRobinBatches, SlicedBatches, shard_loader
from gate.errors import GateError
from gate.parallel import layout_identity, requested_world_size
from gate.results import experiment_id


def _loader(n=10, batch=4, shuffle=False):
    generator = torch.Generator().manual_seed(0) if shuffle else None
    return DataLoader(list(range(n)), batch_size=batch, shuffle=shuffle, generator=generator)


def test_evaluation_slices_every_batch_and_scores_every_example_once():
    loader = _loader(n=10, batch=4)  # batches [0..3] [4..7] [8, 9]
    parts = [list(shard_loader(loader, r, 3, train=False, splittable=True)) for r in range(3)]
    seen = sorted(int(x) for part in parts for batch in part for x in batch)
    assert seen == list(range(10))  # no padding, no repeats (Lightning's DistributedSampler would pad to 12)
    assert [len(p) for p in parts] == [3, 3, 2]  # the batch of two has no example for the third rank
    assert [len(shard_loader(loader, r, 3, train=False, splittable=True)) for r in range(3)] == [3, 3, 2]


def test_training_slices_the_same_global_batches_as_one_device_sees():
    one = [b.tolist() for b in _loader(n=10, batch=4, shuffle=True)]
    two = [[b.tolist() for b in shard_loader(_loader(n=10, batch=4, shuffle=True), r, 2, train=True, splittable=True)]
           for r in range(2)]
    assert [a + b for a, b in zip(*two)] == one  # rank 0 + rank 1 = the one-device batch, in order
    three = [list(shard_loader(_loader(n=10, batch=4, shuffle=True), r, 3, train=True, splittable=True)) for r in range(3)]
    assert {len(p) for p in three} == {2}  # the last global batch (2 examples < 3 ranks) is skipped by every rank


def test_whole_batches_go_round_robin_and_training_steps_stay_equal():
    batches = [[0, 1], [2, 3], [4, 5]]
    assert list(RoundRobinBatches(batches, 0, 2)) == [[0, 1], [4, 5]] and len(RoundRobinBatches(batches, 1, 2)) == 1
    assert list(RoundRobinBatches(batches, 0, 2, equal=True)) == [[0, 1]]  # the same number of steps on each rank
    assert len(SlicedBatches([[0, 1, 2]], 1, 2, train=True)) == 1


def test_too_few_evaluation_batches_for_the_ranks_is_one_clear_line():
    with pytest.raises(GateError, match="too few to give each of 2 processes one"):
        shard_loader(_loader(n=3, batch=4), 1, 2, train=False, splittable=False, what="val split of digits")


def test_the_world_size_enters_the_id_only_where_it_changes_the_loss():
    import yaml
    from hydra.utils import get_class

    from gate.settings import conf_dir

    assert requested_world_size({"devices": 2, "num_nodes": 3}) == 6 and requested_world_size({"devices": [0, 1]}) == 2
    assert layout_identity(True, {"devices": 4}) == {}
    assert layout_identity(False, {"devices": 4}) == {"world_size": 4}
    assert layout_identity(False, {"devices": 1}) == {}
    # the id reads the adapter YAML's statement of its class's fact (gate.settings.ADAPTER_FACTS); each packaged one
    # states what its class says (tests/test_bad_inputs.py: gate-run refuses a YAML that does not)
    stated = {}
    for path in sorted((conf_dir() / "adapter").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        stated[path.stem] = doc["loss_splits_across_devices"]
        assert stated[path.stem] is get_class(doc["_target_"]).loss_splits_across_devices, path.stem
    assert stated["linear_classifier"] and not stated["segmentation"]
    seg = {"adapter": {"_target_": "gate.adapters.segmentation.SegmentationAdapter", "loss_splits_across_devices": False},
           "trainer": {"devices": 1}}
    assert experiment_id(seg, "finetune") != experiment_id({**seg, "trainer": {"devices": 2}}, "finetune")
    linear = {"adapter": {"_target_": "gate.adapters.classification.LinearClassifier", "loss_splits_across_devices": True},
              "trainer": {"devices": 1}}
    assert experiment_id(linear, "finetune") == experiment_id({**linear, "trainer": {"devices": 2}}, "finetune")
    # the statement itself is no part of the experiment: with it, the id of ids stored before it existed
    assert experiment_id({**seg, "adapter": {"_target_": seg["adapter"]["_target_"]}}, "finetune") == \
        experiment_id(seg, "finetune")


def test_a_strategy_gate_does_not_shard_for_and_a_tiny_global_batch_are_refused(tmp_path):
    from gate.engine.validate import validate_run_config

    from helpers import compose_run

    with pytest.raises(Exception, match=r"trainer.strategy='fsdp'.*\['auto', 'ddp'\]"):
        validate_run_config(compose_run(tmp_path, ["++trainer.strategy=fsdp"]))
    with pytest.raises(Exception, match=r"data.batch_size=2 .*shared out to 4 processes"):
        validate_run_config(compose_run(tmp_path, ["trainer.devices=4", "data.batch_size=2"]))


RUN = ["dataset=digits", "image_size=32", "logger=csv", "trainer.max_steps=6", "trainer.val_check_interval=3",
       "trainer.enable_progress_bar=false", "data.batch_size=32", "data.max_val_samples=96",
       "data.max_test_samples=120", "callbacks=none", "trainer.accelerator=cpu", "ensembles=[1,2]"]


def _gate_run(root, extra):
    env = {k: v for k, v in os.environ.items() if k not in ("GATE_DEBUG", "LOCAL_RANK", "RANK", "WORLD_SIZE")}
    proc = subprocess.run([sys.executable, "-m", "gate.cli.run", *RUN, f"paths.root={root}", *extra],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in (root / "results" / "records.jsonl").read_text().splitlines()]
    return proc, rows


@pytest.mark.slow
def test_two_cpu_processes_give_one_record_set_with_one_devices_numbers(tmp_path):
    # vit_tiny (LayerNorm): torch's SyncBatchNorm runs on GPUs only, so a BatchNorm encoder on CPU ranks normalises
    # by its own slice; with LayerNorm the two layouts compute the same function of the same global batches.
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run

    from helpers import compose_run

    # One process: in this one (the same command line; the two-process run below is the real launch).
    run_finetune(parse_run(compose_run(tmp_path / "one", [*RUN, "encoder=vit_tiny_scratch", "trainer.devices=1"])))
    one = [json.loads(line) for line in (tmp_path / "one" / "results" / "records.jsonl").read_text().splitlines()]
    two_proc, two = _gate_run(tmp_path / "two", ["encoder=vit_tiny_scratch", "trainer.devices=2"])
    assert {r["experiment"] for r in one} == {r["experiment"] for r in two}  # the layout is not the experiment
    assert len({r["attempt"] for r in two}) == 1 and len(two) == len(one)  # one record set, written once
    assert two[0]["facts"]["world_size"] == 2 and two_proc.stdout.count("[gate] experiment") == 1
    values = {(r["split"], r["metric"]): r["value"] for r in one}
    n_test = 120  # digits' test split capped (data.max_test_samples)
    for r in two:
        expected = values[(r["split"], r["metric"])]
        # Gradients of the two halves are summed by gloo in another order than one backward pass sums them:
        # float32 rounding (~1e-7 relative per step) after 6 steps moves losses by ~1e-6; an accuracy moves only
        # if an example sits on a decision boundary, by one example (1/360).
        tolerance = 1e-4 if "loss" in r["metric"] else 1.0 / n_test + 1e-9
        assert r["value"] == pytest.approx(expected, abs=tolerance), r["metric"]


@pytest.mark.slow
def test_ddp_with_an_unused_pretrained_head_runs(tmp_path):
    # EfficientNet-Lite keeps its ImageNet head for LEEP; fine-tuning never uses it. Plain DDP stopped with
    # "parameters that were not used in producing the loss" and then hung. One DDP process: in this one, its
    # process group taken down after it (the two-process launch is the test above).
    import torch.distributed as dist

    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run

    from helpers import compose_run

    try:
        run_finetune(parse_run(compose_run(tmp_path, [*RUN, "trainer.devices=1", "++trainer.strategy=ddp"])))
    finally:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    rows = [json.loads(line) for line in (tmp_path / "results" / "records.jsonl").read_text().splitlines()]
    assert {r["metric"] for r in rows if r["split"] == "test"} >= {"acc@1", "ensemble_2/acc@1"}


@pytest.mark.parametrize("env", [{}, {"RANK": "1"}, {"LOCAL_RANK": "2"}, {"SLURM_PROCID": "3", "LOCAL_RANK": "1"},
                                 {"JSM_NAMESPACE_RANK": "4"}, {"RANK": "0", "SLURM_PROCID": "5"}])
def test_the_rank_read_without_lightning_is_the_one_lightning_reads(env, monkeypatch):
    from lightning.fabric.utilities.rank_zero import _get_rank

    from gate.engine.training.distributed import RANK_VARIABLES, environment_rank

    for key in RANK_VARIABLES:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert environment_rank() == (_get_rank() or 0)

"""A paper-scale dry run on the CPU: every task family's model built at the GATE paper protocol's shapes (224 px
inputs; ADE20K's 150 classes on 256² masks; ACDC volumes of 256² slices; 8-frame video clips), trained two steps,
then tested with an ensemble of two checkpoints — asserting that evaluation holds nothing that grows with the
test split. It exists so that a CPU machine catches what would kill a GPU run after its GPU-hours are spent (the
old test pass kept every logit map of every checkpoint: 73 GiB per checkpoint for ADE20K's test split).

The bound, derived: after each test batch the test pass may hold the ensemble's checkpoints, one batch in flight
and the metric states. States may grow with the split only by O(n) scalars: at most ``8 bytes × (classes + 2)`` per
example and metric collection (per-example scores such as a multi-label AUROC's, volume ids). So from the first
test batch to the last, the bytes held by live tensors may grow by at most ``examples × 8 × (C + 2) × members ×
collections + 1 MiB``. Holding the outputs instead would add ``examples × output size × members`` — for ADE20K's
shapes 39 MiB per image per checkpoint, which the test asserts is far beyond the bound (so it can fail).
"""

from __future__ import annotations

import gc

import pytest
import torch

from gate.engine.training import ensemble

from helpers import TINY_ENCODER, compose_run

COMMON = [*TINY_ENCODER, "image_size=224", "logger=csv", "callbacks=none", "trainer.max_steps=2",
          "trainer.val_check_interval=1", "trainer.enable_progress_bar=false", "data.batch_size=2",
          "data.eval_batch_size=2", "ensembles=[1,2]", "keep_checkpoints=none", "data.max_val_samples=4",
          "data.max_test_samples=null"]
ADE_CLASSES = [f"class{i}" for i in range(150)]
FAMILIES = {
    "segmentation": ["dataset=fmnist_seg", "dataset.num_classes=150", f"dataset.class_names=[{','.join(ADE_CLASSES)}]",
                     "dataset.builder._target_=paper_shapes.ade20k_shapes", "~dataset.builder.cache_dir",
                     "~dataset.builder.seed", "~dataset.builder.train_size", "~dataset.builder.val_size",
                     "~dataset.builder.test_size"],
    "medical_segmentation": ["dataset=fmnist_volume", "dataset.builder._target_=paper_shapes.acdc_shapes",
                             "~dataset.builder.cache_dir", "~dataset.builder.seed", "~dataset.builder.train_volumes",
                             "~dataset.builder.val_volumes", "~dataset.builder.test_volumes",
                             "dataset.builder.depth=3"],  # 2 test volumes of 3 slices: 3 test batches
    "classification": ["dataset=digits", "data.max_train_samples=8", "data.max_test_samples=8"],
    "multilabel": ["dataset=fmnist_multilabel", "dataset.builder.train_size=16", "dataset.builder.val_size=4",
                   "dataset.builder.test_size=8"],
    "temporal": ["dataset=fmnist_video", "dataset.options.frames=8", "dataset.builder.train_size=10",
                 "dataset.builder.val_size=2", "dataset.builder.test_size=6", "adapter.clips_per_batch=2",
                 "adapter.eval_clips_per_batch=2"],
    "relational": ["dataset=fmnist_relational", "dataset.builder.train_size=16", "dataset.builder.val_size=4",
                   "dataset.builder.test_size=8"],
    # candidate groups of 4 (the paper's 64 would make one 64-image batch here): 3 test batches of one group each
    "contrastive": ["dataset=fmnist_pairs", "dataset.builder.train_size=16", "dataset.builder.val_size=8",
                    "dataset.builder.test_size=12", "adapter.retrieval_candidates=4", "adapter.top_k=[1]",
                    "data.eval_batch_size=4"],
}


def live_tensor_bytes() -> int:
    gc.collect()
    seen, total = set(), 0
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.Tensor) and not isinstance(obj, torch.nn.Parameter):
                storage = obj.untyped_storage()
                if storage.data_ptr() not in seen:
                    seen.add(storage.data_ptr())
                    total += storage.nbytes()
        except (ReferenceError, RuntimeError):  # a dead weak proxy, a tensor without storage
            continue
    return total


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_testing_at_paper_shapes_holds_nothing_that_grows_with_the_split(family, tmp_path, monkeypatch):
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run

    held: list[int] = []
    examples: list[int] = []
    original = ensemble.EnsembleTester.test_step

    def measured(self, batch, batch_idx):
        original(self, batch, batch_idx)
        examples.append(self.adapter.batch_size(batch))
        if batch_idx in (0, self.trainer.num_test_batches[0] - 1):  # the growth is last minus first (a scan costs)
            held.append(live_tensor_bytes())

    monkeypatch.setattr(ensemble.EnsembleTester, "test_step", measured)
    result = run_finetune(parse_run(compose_run(tmp_path, [*COMMON, *FAMILIES[family]])))
    assert not result.skipped and all(v == v for v in result.metrics.values())
    assert len(examples) >= 3 and len(held) == 2, f"{family}: only {len(examples)} test batches; no growth to show"
    classes = max(int(result.facts.get("num_classes", 0) or 0), 150 if family == "segmentation" else 16)
    members, collections = 2, 3  # best, ensemble_1, ensemble_2 metric collections
    later = sum(examples[1:])
    bound = later * 8 * (classes + 2) * members * collections + 2**20
    grown = held[-1] - held[0]
    assert grown <= bound, (f"{family}: tensors held by the test pass grew by {grown / 2**20:.1f} MiB over "
                            f"{later} examples (bound {bound / 2**20:.2f} MiB): something keeps the split's outputs")
    if family == "segmentation":  # the bound is far below what keeping the logits would take: the test can fail
        assert later * 150 * 256 * 256 * 4 * members > 20 * bound

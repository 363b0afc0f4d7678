"""Relational reasoning: the per-answer-type question-answering adapter and the fmnist_relational stand-in."""

import datasets
import numpy as np
import pytest
import torch
from torch.nn import functional as F

from gate.adapters.relational import RelationalReasoner, hash_words
from gate.adapters.relational_metrics import AnswerAccuracy, own_slices
from gate.cli import run as run_cli
from gate.data.spec import DatasetSpec
from gate.data.standins.relational import ANSWER_TYPES, fmnist_relational
from gate.engine.build import build_adapter, build_datamodule, build_encoder, build_spec
from gate.results import ResultsStore

from helpers import SMOKE, TINY_ENCODER, call_cli, compose_run, resolved

TINY = ["dataset=fmnist_relational", "image_size=32", "dataset.builder.train_size=24", "dataset.builder.val_size=12",
        "dataset.builder.test_size=12", "data.batch_size=12", "data.eval_batch_size=12"]
METRICS = {"acc@1", "acc@1/count", "acc@1/exists", "acc@1/spatial"}
COUNTS = [4, 2, 2]  # count, exists, spatial: columns 0-3, 4-5, 6-7 of the predictions


def spec(answer_types=None) -> DatasetSpec:
    return DatasetSpec(name="qa", modality="image", task="relational", num_classes=10,
                       targets={"answer": "answer", "answer_type": "answer_type"},
                       options={"answer_types": answer_types or ANSWER_TYPES})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """efficientnet_lite0 (32 px), the relational adapter and the tiny stand-in."""
    cfg = compose_run(tmp_path_factory.mktemp("relational"), TINY)
    encoder = build_encoder(resolved(cfg.encoder))
    dataset_spec = build_spec(resolved(cfg.dataset))
    adapter = build_adapter(resolved(cfg.adapter), encoder, dataset_spec)
    return cfg, encoder, dataset_spec, adapter, build_datamodule(cfg, encoder, adapter, dataset_spec)


def hand_made():
    """Six examples, two per type, with known per-type results: count 1/2, exists 2/2, spatial 0/2."""
    predictions = torch.full((6, 8), -5.0)
    # count (answers in columns 0-3): example 0 right (answer 2), example 1 wrong (says 0, answer 3)
    predictions[0, 2] = predictions[1, 0] = 5.0
    # exists (columns 4-5): both right; a huge logit in another head's columns must not matter
    predictions[2, 5] = predictions[3, 4] = 5.0
    predictions[2, 0] = 50.0
    # spatial (columns 6-7): both wrong
    predictions[4, 6] = predictions[5, 7] = 5.0
    target = {"answer": torch.tensor([2, 3, 1, 0, 1, 0]), "answer_type": torch.tensor([0, 0, 1, 1, 2, 2])}
    return predictions, target


def compute(metrics, predictions, target):
    metrics.update(predictions, target)
    return {k: float(v) for k, v in metrics.compute().items()}


def test_per_type_accuracy_on_hand_made_logits():
    adapter = RelationalReasoner(token_dim=16, spec=spec(), width=16, depth=1, heads=2)
    got = compute(adapter.make_metrics(), *hand_made())
    assert got == {"acc@1": pytest.approx(3 / 6), "acc@1/count": 0.5, "acc@1/exists": 1.0, "acc@1/spatial": 0.0}
    # a type absent from what was scored has 0 of 0 questions: undefined (NaN), never a 0 that could be recorded
    metric = AnswerAccuracy(COUNTS, answer_type=2)
    predictions, target = hand_made()
    metric.update(predictions[:4], {k: v[:4] for k, v in target.items()})
    assert torch.isnan(metric.compute()) and float(metric.total) == 0.0


def test_each_example_is_scored_on_its_own_head_slice():
    predictions, target = hand_made()
    counts = torch.tensor(COUNTS)
    offsets = torch.tensor([0, 4, 6])
    slices = own_slices(predictions, target["answer_type"], offsets, counts)
    assert slices.shape == (6, 4)
    assert torch.equal(slices[0], predictions[0, 0:4])
    assert torch.equal(slices[2, :2], predictions[2, 4:6]) and torch.isinf(slices[2, 2:]).all()
    assert torch.equal(slices[5, :2], predictions[5, 6:8])
    adapter = RelationalReasoner(token_dim=16, spec=spec(), width=16, depth=1, heads=2)
    logits = predictions.clone().requires_grad_(True)
    loss = adapter.loss(logits, target)
    heads = [(0, 4), (0, 4), (4, 2), (4, 2), (6, 2), (6, 2)]  # each example's (first column, answers)
    expected = torch.stack([F.cross_entropy(logits[i, s:s + n][None], target["answer"][i:i + 1])
                            for i, (s, n) in enumerate(heads)]).mean()
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    loss.backward()
    # no gradient reaches another head's columns
    own = torch.zeros(6, 8, dtype=torch.bool)
    for i, (s, n) in enumerate(heads):
        own[i, s:s + n] = True
    assert (logits.grad[~own] == 0).all() and (logits.grad[own] != 0).any()


def test_answer_types_from_counts_or_names():
    by_count = RelationalReasoner(token_dim=8, spec=spec({"count": 5, "exists": 2, "left_of": 2}), width=8, heads=2)
    assert by_count.answer_types == {"count": 5, "exists": 2, "left_of": 2}
    assert [h.out_features for h in by_count.heads] == [5, 2, 2]
    with pytest.raises(ValueError, match="answer_types"):
        RelationalReasoner(token_dim=8, spec=DatasetSpec(name="qa", modality="image", task="relational",
                                                         num_classes=2, targets={"a": "answer", "t": "answer_type"}))


def test_ensemble_of_identical_predictions_equals_the_single_one():
    adapter = RelationalReasoner(token_dim=16, spec=spec(), width=16, depth=1, heads=2)
    predictions, target = hand_made()
    combined = adapter.combine([predictions, predictions.clone()])
    assert torch.allclose(combined, predictions)
    assert compute(adapter.make_metrics(), combined, target) == compute(adapter.make_metrics(), predictions, target)


def test_hashing_tokenizer_is_deterministic_and_order_aware():
    a = hash_words("Is the bag left of the sneaker?", 4096, 12)
    assert torch.equal(a, hash_words("is the bag left of the sneaker", 4096, 12))
    assert a.shape == (12,) and (a[:7] > 0).all() and (a[7:] == 0).all() and (a < 4096).all()
    b = hash_words("is the sneaker left of the bag?", 4096, 12)
    assert sorted(a.tolist()) == sorted(b.tolist()) and not torch.equal(a, b)
    assert hash_words("is there an ankle boot? " * 10, 4096, 5).shape == (5,)


def test_forward_backward_on_a_real_batch(built):
    _, encoder, _, adapter, datamodule = built
    batch = datamodule.on_after_batch_transfer(next(iter(datamodule.train_dataloader())), 0)
    assert batch["image"].shape == (12, 3, 32, 32) and batch["question_ids"].shape == (12, 24)
    predictions = adapter.predict(encoder, batch)
    target = adapter.target(batch)
    assert predictions.shape == (12, sum(COUNTS))
    loss = adapter.loss(predictions, target)
    loss.backward()
    assert torch.isfinite(loss)
    assert adapter.word_embedding.weight.grad.abs().sum() > 0 and adapter.image_projection.weight.grad.abs().sum() > 0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in encoder.parameters())
    metrics = adapter.make_metrics()
    metrics.update(predictions.detach(), target)
    assert set(metrics.compute()) == METRICS


def bad_split(**changes):
    rows = {"image": [[[0]]] * 3, "question": ["how many items are there?", "is there a bag?", "is the bag left of the coat?"],
            "answer": [3, 1, 0], "answer_type": [0, 1, 2]}
    for column, (index, value) in changes.items():
        rows[column][index] = value
    return datasets.Dataset.from_dict(rows)


def test_bad_inputs_name_dataset_split_and_example(built):
    _, _, dataset_spec, adapter, _ = built
    adapter.check_split(dataset_spec, "train", bad_split())
    cases = [({"answer_type": (1, 3)}, r"split 'test' example 1 has an unknown answer type answer_type=3"),
             ({"answer_type": (2, -1)}, r"split 'test' example 2 has an unknown answer type"),
             ({"answer": (0, 4)}, r"split 'test' example 0 has answer=4 outside its answer type 'count', which has 4"),
             ({"answer": (2, 2)}, r"split 'test' example 2 has answer=2 outside its answer type 'spatial'"),
             ({"question": (1, " ? ")}, r"split 'test' example 1 has an empty question")]
    for changes, message in cases:
        with pytest.raises(ValueError, match=r"dataset 'fmnist_relational': " + message):
            adapter.check_split(dataset_spec, "test", bad_split(**changes))


def test_stand_in_is_seeded_balanced_and_declared_in_the_yaml(built):
    _, _, dataset_spec, _, _ = built
    assert dataset_spec.options["answer_types"] == ANSWER_TYPES
    a = fmnist_relational(seed=2, train_size=90, val_size=6, test_size=6)
    assert a["train"]["question"] == fmnist_relational(seed=2, train_size=90, val_size=6, test_size=6)["train"]["question"]
    kinds = np.asarray(a["train"]["answer_type"])
    assert np.bincount(kinds).tolist() == [30, 30, 30]
    answers = np.asarray(a["train"]["answer"])
    questions = a["train"]["question"]
    for kind, answer, question in zip(kinds, answers, questions):
        prefix = {0: "how many items are there?", 1: "is there ", 2: "is the "}[int(kind)]
        assert question.startswith(prefix) and 0 <= answer < len(list(ANSWER_TYPES.values())[kind])
    for kind in (1, 2):  # yes and no both occur, roughly equally
        assert 8 <= answers[kinds == kind].sum() <= 22


@pytest.mark.slow
def test_gate_run_end_to_end(tmp_path, capsys):
    # gate-run's command line, in process (tests/helpers.py call_cli); the smoke preset, the default logging callbacks
    args = ["dataset=fmnist_relational", *SMOKE, *TINY_ENCODER, "callbacks=default", "ensembles=[1,2]", f"paths.root={tmp_path}",
            "dataset.builder.train_size=32", "dataset.builder.val_size=16", "dataset.builder.test_size=16",
            "data.batch_size=8", "data.eval_batch_size=8"]
    done = call_cli(run_cli.main, args, capsys, prog="gate-run")
    assert done.returncode == 0, done.stderr[-3000:]
    records = ResultsStore(tmp_path / "results" / "records.jsonl").complete_records(kind="finetune")
    test = {r["metric"] for r in records if r["split"] == "test"}
    for prefix in ("", "ensemble_1/", "ensemble_2/"):
        assert {prefix + m for m in METRICS} <= test
    assert all(0.0 <= r["value"] <= 1.0 for r in records if r["metric"].startswith(("acc", "ensemble")) and
               not r["metric"].endswith("loss"))
    assert [r["metric"] for r in records if r["split"] == "val"] == ["acc@1"]
    assert {r["task"] for r in records} == {"relational"} and {r["adapter"] for r in records} == {"relational"}

"""gate-score: features once (cached), every applicable score, one record per score."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from gate.encoders.base import EncoderOutput
from gate.engine.validate import parse_score
from gate.results import RUN_ONLY_KEYS, ResultsStore
from gate.scoring.features import extract_features, feature_cache_key, feature_cache_path
from gate.scoring.stage import _all_done, run_score
from gate.transferability import SCORES

from helpers import TINY_ENCODER, call_cli, compose_run, resolved

FEATURE_SCORES = {k for k, m in SCORES.items() if m.needs == "features"}
QUICK = ["dataset=digits", "max_samples=150", "image_size=32", "progress_bar=false"]


def score_cfg(root, overrides):
    return compose_run(root, overrides, config_name="score")


def checked(root, overrides):
    """gate-score's config as its stage takes it: composed, checked and resolved once into plain data."""
    from gate.engine.validate import parse_score

    return parse_score(score_cfg(root, overrides)).config


def test_gate_score_in_a_fresh_interpreter_never_imports_the_training_stack(tmp_path):
    """gate-score scores without Lightning or torchmetrics (seconds of imports: torchmetrics loads transformers,
    torchvision's models and scipy.signal): its feature pass reads checkpoints' completeness and the split's items,
    neither of which needs the trainer. Before, a scoring process imported both (the checkpoint module held
    Lightning's checkpoint plugin; the items lived in the Lightning data module's file)."""
    args = [*TINY_ENCODER, "dataset=digits", "max_samples=60", "image_size=32", "progress_bar=false",
            "metrics=[logme]", f"paths.root={tmp_path}"]
    code = ("import sys\n"
            "from gate.cli.score import main\n"
            f"sys.argv = ['gate-score', *{args!r}]\n"
            "main()\n"
            "print(sorted(m for m in ('lightning', 'torchmetrics') if m in sys.modules))\n")
    env = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-2000:]
    (record,) = ResultsStore(tmp_path / "results" / "records.jsonl").records()
    assert (record["metric"], record["encoder"], record["facts"]["num_samples"]) == ("logme", "timm_test_resnet", 60)


@pytest.mark.slow
def test_gate_score_two_encoders_on_digits_writes_records_and_reuses_its_cache(tmp_path, capsys):
    # gate-score's main() with this command line in process (Hydra's own multirun), as tests/test_finetune.py runs
    # gate-run's sweep: an interpreter start costs seconds, and what a real process shows is tested once, for
    # gate-run (tests/test_finetune.py, tests/test_bad_inputs.py)
    from gate.cli import score as score_cli

    out = call_cli(score_cli.main, ["-m", "encoder=efficientnet_lite0,resnet18_scratch", f"paths.root={tmp_path}",
                                    *QUICK], capsys, prog="gate-score")
    assert out.returncode == 0, out.stderr[-3000:]
    records = ResultsStore(tmp_path / "results" / "records.jsonl").records()
    by_encoder = {}
    for r in records:
        by_encoder.setdefault(r["encoder"], {})[r["metric"]] = r
    # The pretrained EfficientNet keeps its ImageNet head: every score. The scratch ResNet has none: no LEEP/NCE.
    assert set(by_encoder["efficientnet_lite0"]) == set(SCORES)
    assert set(by_encoder["resnet18_scratch"]) == FEATURE_SCORES
    for rows in by_encoder.values():
        for r in rows.values():
            assert (r["kind"], r["dataset"], r["split"], r["task"]) == ("score", "digits", "train", "classification")
            assert r["higher_is_better"] is True
            facts = r["facts"]
            assert facts["seconds"] >= 0 and facts["num_samples"] == 150 and not facts["features_from_cache"]
            assert not set(r["config"]) & set(RUN_ONLY_KEYS["score"])  # identity only
            assert r["set_size"] == len(rows) and r["attempt"]
    assert by_encoder["efficientnet_lite0"]["logme"]["value"] > by_encoder["resnet18_scratch"]["logme"]["value"]
    caches = sorted((tmp_path / "cache" / "features").rglob("*.pt"))
    assert len(caches) == 2

    # Second call, in-process: the finished experiment is skipped; with force the scores are recomputed from
    # the cached features (no extraction) and equal the first ones.
    cfg = score_cfg(tmp_path, [*QUICK, "encoder=efficientnet_lite0"])
    assert run_score(parse_score(cfg)).skipped
    again = run_score(parse_score(score_cfg(tmp_path, [*QUICK, "encoder=efficientnet_lite0", "force=true"])))
    assert not again.skipped and again.features_from_cache and again.extract_seconds == 0.0
    first = by_encoder["efficientnet_lite0"]
    for name, value in again.values.items():
        assert value == pytest.approx(first[name]["value"], rel=1e-9), name
    assert len(ResultsStore(tmp_path / "results" / "records.jsonl").records()) == len(records) + len(SCORES)
    assert {str(p) for p in caches} == {str(p) for p in (tmp_path / "cache" / "features").rglob("*.pt")}


def test_pretrained_features_score_higher_logme_than_random_init_on_fashion_mnist(tmp_path):
    if not Path("/usr/share/datasets/fashion-mnist").is_dir():
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    torch.manual_seed(0)  # the random initialisation
    common = ["dataset=fashion_mnist", "max_samples=300", "image_size=48", "metrics=[logme]", "progress_bar=false"]
    pretrained = run_score(parse_score(score_cfg(tmp_path, [*common, "encoder=efficientnet_lite0"])))
    random_init = run_score(parse_score(score_cfg(tmp_path, [*common, "encoder=efficientnet_lite0",
                                                 "encoder.pretrained=false"])))
    assert pretrained.experiment != random_init.experiment
    assert set(pretrained.values) == {"logme"}
    assert pretrained.values["logme"] > random_init.values["logme"] + 0.05, (pretrained.values, random_init.values)
    rows = ResultsStore(tmp_path / "results" / "records.jsonl").records()
    assert [r["metric"] for r in rows] == ["logme", "logme"]
    # Asking for more scores later computes only the missing ones, from the cached features.
    more = run_score(parse_score(score_cfg(tmp_path, [*common[:-2], "metrics=[logme,rankme]", "progress_bar=false",
                                          "encoder=efficientnet_lite0"])))
    assert set(more.values) == {"rankme"} and more.features_from_cache


def test_score_config_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="unknown metric"):
        run_score(parse_score(score_cfg(tmp_path, [*QUICK, "metrics=[logme,nope]"])))
    with pytest.raises(ValueError, match="split"):
        run_score(parse_score(score_cfg(tmp_path, [*QUICK, "split=holdout"])))
    with pytest.raises(ValueError, match="source"):
        run_score(parse_score(score_cfg(tmp_path, [*QUICK, "encoder=resnet18_scratch", "metrics=[leep]"])))


def test_cache_key_follows_what_changes_the_features(tmp_path):
    base = checked(tmp_path, QUICK)
    key = feature_cache_key(base, "train", 150)
    path = feature_cache_path(tmp_path, key)
    assert path == feature_cache_path(tmp_path, feature_cache_key(checked(tmp_path, QUICK), "train", 150))
    assert path.parent == tmp_path / "features" / "efficientnet_lite0" / "digits"
    for other in (feature_cache_key(checked(tmp_path, [*QUICK, "image_size=48"]), "train", 150),
                  feature_cache_key(base, "val", 150), feature_cache_key(base, "train", 100),
                  feature_cache_key(checked(tmp_path, [*QUICK, "seed=1"]), "train", 150)):
        assert feature_cache_path(tmp_path, other) != path
    json.dumps(key)  # plain data


def test_all_done_logic():
    feature_only = set(FEATURE_SCORES)
    assert _all_done(None, set(SCORES)) and _all_done(None, feature_only)
    assert not _all_done(None, feature_only - {"logme"})
    assert not _all_done(None, feature_only | {"leep"})  # a head-ful encoder with some scores missing
    assert _all_done(["logme"], {"logme"}) and not _all_done(["logme", "lfc"], {"logme"})


class TinyEncoder(torch.nn.Module):
    def __init__(self, with_head):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)
        self.head = torch.nn.Linear(4, 5) if with_head else None

    def forward(self, batch):
        f = self.lin(batch["x"])
        return EncoderOutput(features=f, source_logits=self.head(f) if self.head is not None else None)


@pytest.mark.parametrize("with_head", [True, False])
def test_extract_features_collects_features_labels_and_source_probs(with_head):
    data = [{"x": torch.randn(3), "label": torch.tensor(i % 2)} for i in range(10)]
    enc = TinyEncoder(with_head).train()
    feats, labels, probs = extract_features(enc, DataLoader(data, batch_size=4), progress=False)
    assert feats.shape == (10, 4) and labels.tolist() == [i % 2 for i in range(10)]
    assert enc.training  # mode restored
    if with_head:
        assert probs.shape == (10, 5) and torch.allclose(probs.sum(1), torch.ones(10))
    else:
        assert probs is None


def test_a_truncated_feature_cache_is_set_aside_and_re_extracted(tmp_path):
    from gate.scoring.features import cached_features

    cfg = checked(tmp_path, [*QUICK, "encoder=resnet18_scratch"])
    first = cached_features(cfg, "train", 40, tmp_path / "cache", progress=False)
    assert not first.from_cache and first.path.is_file()
    first.path.write_bytes(first.path.read_bytes()[:100])  # killed while writing
    with pytest.warns(UserWarning, match="truncated feature cache"):
        again = cached_features(cfg, "train", 40, tmp_path / "cache", progress=False)
    assert not again.from_cache and torch.equal(again.labels, first.labels)
    assert list(first.path.parent.glob("*.corrupt-*"))
    assert cached_features(cfg, "train", 40, tmp_path / "cache", progress=False).from_cache


def _scratch_cfg(root, seed=0):
    return score_cfg(root, [*QUICK, "encoder=resnet18_scratch", f"seed={seed}"])


def test_a_random_init_encoder_is_built_from_the_experiments_seed_without_touching_the_global_generator(tmp_path):
    import lightning as L

    from gate.engine.build import build_encoder

    cfg = _scratch_cfg(tmp_path)
    state = torch.get_rng_state()
    a, b = (build_encoder(resolved(cfg.encoder), "image", seed=0).state_dict() for _ in range(2))
    assert torch.equal(torch.get_rng_state(), state)  # scoped: nothing leaks into the process
    assert all(torch.equal(a[k], b[k]) for k in a)
    other = build_encoder(resolved(cfg.encoder), "image", seed=1).state_dict()
    assert not all(torch.equal(a[k], other[k]) for k in a)
    # Fine-tuning seeds the process (seed_everything) right before building: the very same initial weights.
    L.seed_everything(0, verbose=False)
    finetune = build_encoder(resolved(cfg.encoder), "image").state_dict()
    assert all(torch.equal(a[k], finetune[k]) for k in a)


def test_two_extractions_of_a_random_init_encoder_give_the_same_features(tmp_path):
    """gate-score encoder=resnet18_scratch used to draw a new random init per extraction (TransRate 7.65 to 10.60
    under one experiment id); without the cache, two extractions now agree."""
    from gate.scoring.features import cached_features

    config = checked(tmp_path, [*QUICK, "encoder=resnet18_scratch", "seed=0"])
    first, second = (cached_features(config, "train", 40, None, progress=False) for _ in range(2))
    assert not first.from_cache and not second.from_cache
    assert torch.equal(first.labels, second.labels)
    assert torch.allclose(first.features, second.features, rtol=0, atol=1e-6)

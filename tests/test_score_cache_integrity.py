"""gate-score never scores features that are not this encoder's on this split (issue 27: GS09, GS10).

A feature cache file is used only when its key file says it is the pass being asked for (encoder, dataset, split,
seed, cap), its bytes are the ones that key file recorded (sha256), and its labels are the split's; anything else
is set aside and extracted again. A score set is stored only whole (every score asked for), so a failing score
never leaves a partial set that reads as complete; ``metrics=[]`` is refused."""

import json
import shutil

import pytest
import torch

from gate.engine.validate import parse_score
from gate.results import ResultsStore
from gate.scoring.features import cached_features, feature_cache_key, feature_cache_path
from gate.scoring.stage import run_score
from gate.scoring.transferability import SCORES

from helpers import compose_run

QUICK = ["dataset=digits", "max_samples=40", "image_size=32", "progress_bar=false"]
FEATURE_SCORES = sorted(k for k, m in SCORES.items() if m.needs == "features")


def score_cfg(root, *overrides):
    """gate-score's config as its stage takes it: composed, checked and resolved once into plain data."""
    from gate.engine.validate import parse_score

    return parse_score(compose_run(root, [*QUICK, *overrides], config_name="score")).config


def cache_path(root, cfg, split="train"):
    return feature_cache_path(root / "cache", feature_cache_key(cfg, split, 40))


def features(root, cfg, split="train"):
    return cached_features(cfg, split, 40, root / "cache", progress=False)


def test_another_encoders_cache_copied_under_this_encoders_name_is_not_scored(tmp_path):
    """GS09: efficientnet_lite0's cache file and its key file, copied (or renamed) to where resnet18_scratch's would
    be: the key file names another encoder, so resnet18_scratch's own features are extracted and scored."""
    lite0, scratch = score_cfg(tmp_path, "encoder=efficientnet_lite0"), score_cfg(tmp_path, "encoder=resnet18_scratch")
    theirs = features(tmp_path, lite0)
    mine = cache_path(tmp_path, scratch)
    mine.parent.mkdir(parents=True)
    shutil.copy(theirs.path, mine)
    shutil.copy(theirs.path.with_suffix(".json"), mine.with_suffix(".json"))
    with pytest.warns(UserWarning, match="another feature pass"):
        result = run_score(parse_score(score_cfg(tmp_path, "encoder=resnet18_scratch", "metrics=[rankme]")))
    assert not result.features_from_cache
    facts = ResultsStore(tmp_path / "results" / "records.jsonl").records()[0]["facts"]
    assert facts["feature_dim"] == 512  # ResNet-18's width, not EfficientNet-Lite0's 1280
    assert list(mine.parent.glob("*.corrupt-*"))  # the impostor is kept aside for inspection, never read again


def test_a_cache_file_whose_bytes_are_not_the_ones_its_key_file_recorded_is_extracted_again(tmp_path):
    """GS09: the tensor file replaced by another encoder's while its key file stays: the content hash differs."""
    lite0, scratch = score_cfg(tmp_path, "encoder=efficientnet_lite0"), score_cfg(tmp_path, "encoder=resnet18_scratch")
    theirs, mine = features(tmp_path, lite0), features(tmp_path, scratch)
    shutil.copy(theirs.path, mine.path)
    with pytest.warns(UserWarning, match="not the bytes its key file recorded"):
        again = features(tmp_path, scratch)
    assert not again.from_cache and again.features.shape == (40, 512)
    assert torch.allclose(again.features, mine.features, atol=1e-5)


def test_a_cache_whose_labels_are_not_the_splits_is_extracted_again(tmp_path):
    """A key file that claims the train pass for features of the val split (e.g. written by a tool that got the
    split wrong): the labels and rows are checked against the split itself."""
    cfg = score_cfg(tmp_path, "encoder=resnet18_scratch")
    train, val = features(tmp_path, cfg), features(tmp_path, cfg, "val")
    shutil.copy(val.path, train.path)
    record = json.loads(train.path.with_suffix(".json").read_text())
    record["sha256"] = json.loads(val.path.with_suffix(".json").read_text())["sha256"]
    train.path.with_suffix(".json").write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="labels are not those of"):
        again = features(tmp_path, cfg)
    assert not again.from_cache and torch.equal(again.labels, train.labels)


def test_weights_changed_under_the_same_checkpoint_path_are_a_new_feature_pass(tmp_path):
    """GS09 (keys that collide): encoder.checkpoint_path names a file; new weights written to the same path are
    another encoder, so the cache key must change with the file."""
    import timm

    weights = tmp_path / "resnet18.pth"
    cfg = score_cfg(tmp_path, "encoder=timm", "encoder.model_name=resnet18", f"encoder.checkpoint_path={weights}")
    torch.manual_seed(0)
    torch.save(timm.create_model("resnet18", num_classes=0).state_dict(), weights)
    first = features(tmp_path, cfg)
    torch.manual_seed(1)
    torch.save(timm.create_model("resnet18", num_classes=0).state_dict(), weights)
    second = features(tmp_path, cfg)
    assert not second.from_cache and second.path != first.path
    assert not torch.allclose(first.features, second.features)
    assert features(tmp_path, cfg).from_cache  # unchanged weights: the cache is used


def test_a_damaged_cache_never_stores_label_free_scores_as_a_complete_set(tmp_path):
    """GS10: labels in the cache file damaged (one class): the label scores failed, and rankme/etran_energy from
    the damaged features were stored as a complete set that a later call never recomputed. Now the damage is seen
    and the features are extracted again: every score, from the real features."""
    cfg = score_cfg(tmp_path, "encoder=resnet18_scratch")
    good = features(tmp_path, cfg)
    blob = torch.load(good.path, weights_only=True)
    damaged = blob["features"].clone()
    damaged[:, ::2] = 0  # half the columns lost: a wrong rankme
    torch.save({**blob, "features": damaged, "labels": torch.zeros_like(blob["labels"])}, good.path)
    with pytest.warns(UserWarning, match="not the bytes its key file recorded"):
        result = run_score(parse_score(cfg))
    assert set(result.values) == set(FEATURE_SCORES) and not result.features_from_cache
    rows = ResultsStore(tmp_path / "results" / "records.jsonl").complete_records()
    clean = run_score(parse_score(score_cfg(tmp_path / "clean", "encoder=resnet18_scratch")))
    by_metric = {r["metric"]: r["value"] for r in rows}
    assert by_metric["rankme"] == pytest.approx(clean.values["rankme"], rel=1e-6)


def test_a_score_that_fails_stores_no_partial_set(tmp_path, monkeypatch):
    """A set is complete only with every score asked for: one failure stores nothing and says which failed."""
    import dataclasses

    def broken(*args, **kwargs):
        raise ValueError("a single class in the subsample")

    with SCORES.replacing("logme", dataclasses.replace(SCORES["logme"], fn=broken)), \
            pytest.raises(ValueError, match=r"logme failed \(a single class in the subsample\).*nothing stored.*"
                                            r"metrics=\[") as err:
        run_score(parse_score(score_cfg(tmp_path, "encoder=resnet18_scratch")))
    assert "\n" not in str(err.value)
    assert ResultsStore(tmp_path / "results" / "records.jsonl").records() == []


def test_an_empty_metrics_list_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"metrics=\[\] names no score.*metrics=null"):
        run_score(parse_score(score_cfg(tmp_path, "encoder=resnet18_scratch", "metrics=[]")))

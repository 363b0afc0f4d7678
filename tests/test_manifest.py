"""Split manifests: disjoint, deterministic, reused, safe under concurrent creation; tampered or stale
manifests and bad local copies fail with one line naming the dataset, the file and what to do."""

from __future__ import annotations

import json
import threading

import datasets
import numpy as np
import pytest
from benchmark_fixtures import all_fixtures

from gate.cli import data as gate_data
from gate.data import hub
from gate.data.manifest import ManifestError, first_shared, load_or_create, recipe_of, source_fingerprint
from gate.data.splits import make_splits
from gate.errors import DatasetUnavailable, GateError


def raw(n=200, classes=4, with_test=True):
    rng = np.random.default_rng(0)
    train = datasets.Dataset.from_dict({"x": rng.normal(size=n).tolist(), "label": (np.arange(n) % classes).tolist()})
    out = {"train": train}
    if with_test:
        out["test"] = datasets.Dataset.from_dict({"x": [0.0] * 20, "label": list(range(classes)) * 5})
    return datasets.DatasetDict(out)


def manifest_for(data, where, seed=0, **kw):
    recipe = recipe_of({"seed": seed, "val_fraction": 0.1, "test_fraction": 0.2, **kw}, "label")
    return load_or_create(data, "toy", recipe, source_fingerprint(data, "rev1", ["label"]), where)


def test_carved_splits_are_disjoint_stratified_deterministic_and_reused(tmp_path):
    m, path, created = manifest_for(raw(with_test=False), tmp_path)
    assert created and path.is_file()
    assert m["from"] == {"train": "train", "val": "train", "test": "train"}
    parts = [set(m[s]) for s in ("train", "val", "test")]
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert sum(map(len, parts)) == 200
    labels = np.arange(200) % 4
    assert set(labels[m["val"]]) == {0, 1, 2, 3}  # stratified
    again, _, created_again = manifest_for(raw(with_test=False), tmp_path)
    assert not created_again and again == m
    other, _, _ = manifest_for(raw(with_test=False), tmp_path / "b")
    assert other == m  # same seed, computed afresh: identical
    seed1, _, _ = manifest_for(raw(with_test=False), tmp_path / "c", seed=1)
    assert seed1["test"] != m["test"]


def test_source_test_split_is_kept_and_val_comes_from_train(tmp_path):
    m, _, _ = manifest_for(raw(), tmp_path)
    assert m["from"] == {"train": "train", "val": "train", "test": "test"}
    assert m["test"] == list(range(20))


def test_groups_never_straddle_splits(tmp_path):
    data = datasets.DatasetDict({"train": datasets.Dataset.from_dict(
        {"label": [0, 1] * 50, "patient": [str(i // 4) for i in range(100)]})})
    splits = make_splits(data, seed=0, recipe=recipe_of({"group_column": "patient"}, None), name="toy",
                         manifest_dir=tmp_path)
    groups = [set(s["patient"]) for s in splits.values()]
    assert not (groups[0] & groups[1] or groups[0] & groups[2] or groups[1] & groups[2])


def test_overlapping_manifest_is_refused(tmp_path):
    _, path, _ = manifest_for(raw(), tmp_path)
    m = json.loads(path.read_text())
    m["val"].append(m["train"][0])
    path.write_text(json.dumps(m))
    with pytest.raises(ManifestError, match=r"'toy'.*both 'train' and 'val'.*gate-data prepare dataset=toy force=true"):
        manifest_for(raw(), tmp_path)


def test_first_shared_names_the_first_overlapping_pair_in_order():
    assert first_shared({"train": {1, 2}, "val": {3}, "test": {4}}) is None
    assert first_shared({"train": {1, 2}, "val": {3, 5}, "test": {2, 3}}) == ("train", "test", {2})
    assert first_shared({"val": {3, 5}, "test": {3}}) == ("val", "test", {3})


def test_stale_source_hash_is_refused(tmp_path):
    manifest_for(raw(), tmp_path)
    changed = raw()
    changed["train"] = changed["train"].select(range(150))  # a truncated copy
    with pytest.raises(ManifestError, match=r"'toy'.*different source.*force=true"):
        manifest_for(changed, tmp_path)


def test_concurrent_creation_writes_one_manifest(tmp_path):
    results = []
    threads = [threading.Thread(target=lambda: results.append(manifest_for(raw(), tmp_path))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(created for _, _, created in results) == 1
    assert all(m == results[0][0] for m, _, _ in results)
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_local_copy_missing_a_split_or_a_column(tmp_path):
    all_fixtures()["cifar100"](tmp_path)
    source = {"kind": "hf", "repo_id": "uoft-cs/cifar100", "revision": "main",
              "files": {"train": ["cifar100/train-*.parquet"], "test": ["cifar100/test-*.parquet"]}}
    (tmp_path / "cifar100" / "test-00000-of-00001.parquet").unlink()
    with pytest.raises(DatasetUnavailable, match=r"'cifar100'.*no 'test' split.*cifar100/test-\*\.parquet"):
        hub.load_parquet("cifar100", source, tmp_path, columns=["img", "fine_label"])
    source["files"].pop("test")
    with pytest.raises(GateError, match=r"'cifar100'.*train-00000-of-00001.parquet.*missing \['label'\]"):
        hub.load_parquet("cifar100", source, tmp_path, columns=["img", "label"])


def test_offline_and_not_on_disk_and_gated_without_credentials(tmp_path, monkeypatch):
    source = {"kind": "hf", "repo_id": "facebook/winoground", "revision": "abc", "access": "gated",
              "files": {"test": ["default/test/*.parquet"]}}
    with pytest.raises(DatasetUnavailable, match=r"'winoground' is not on disk.*facebook/winoground.*--local-dir"):
        hub.load_parquet("winoground", source, tmp_path / "none")
    monkeypatch.setattr(hub, "is_offline", lambda: False)
    monkeypatch.setattr(hub, "has_credentials", lambda s: False)
    with pytest.raises(DatasetUnavailable, match=r"'winoground'.*gated.*huggingface-cli login"):
        hub.fetch("winoground", source, tmp_path / "none")


def test_gate_data_cli_list_prepare_verify_and_errors(tmp_path, capsys):
    root = f"paths.root={tmp_path / 'out'}"
    gate_data.main(["list", root])
    table = capsys.readouterr().out
    for key in gate_data.dataset_keys():
        assert f"\n{key} " in table
    assert "needs registration" in table and "packaged (offline)" in table
    copy = tmp_path / "nycc"
    all_fixtures()["nycc"](copy)
    gate_data.main(["prepare", "dataset=nycc", f"dataset.data_dir={copy}", root])
    assert "manifests:" in capsys.readouterr().out
    gate_data.main(["verify", "dataset=nycc", f"dataset.data_dir={copy}", root])
    assert "matches the source" in capsys.readouterr().out
    manifest = next((tmp_path / "out" / "data" / "manifests").glob("nycc-*.json"))
    m = json.loads(manifest.read_text())
    m["source"]["hash"] = "0" * 32
    manifest.write_text(json.dumps(m))
    with pytest.raises(SystemExit) as exit_:
        gate_data.main(["verify", "dataset=nycc", f"dataset.data_dir={copy}", root])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "different source" in err and "gate-data prepare dataset=nycc force=true" in err
    with pytest.raises(SystemExit):
        gate_data.main(["prepare", "dataset=flickr30k", root])  # offline, not on disk
    err = capsys.readouterr().err.strip()
    assert err.startswith("gate-data: error: dataset 'flickr30k'") and "nlphuji/flickr30k" in err and "\n" not in err


@pytest.mark.slow
def test_gate_data_prepare_in_a_real_process(tmp_path):
    """The command as a user's terminal runs it (the suite's one gate-data subprocess; the rest call ``main`` in
    process): prepare writes digits' split manifest under paths.root and says where."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("GATE_DEBUG", "HYDRA_FULL_ERROR")}
    env["PYTHONPROFILEIMPORTTIME"] = "1"  # Python lists every module it imports on stderr
    out = subprocess.run([sys.executable, "-m", "gate.cli.data", "prepare", "dataset=digits",
                          f"paths.root={tmp_path / 'out'}"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "manifests:" in out.stdout and "Traceback" not in out.stderr
    assert list((tmp_path / "out" / "data" / "manifests").glob("digits-*.json"))
    # preparing data needs no training stack: Lightning and torchmetrics (seconds) are never imported
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "gate.data.manifest" in imported and not imported & {"lightning", "torchmetrics"}

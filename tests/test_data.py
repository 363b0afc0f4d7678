import datasets
import numpy as np
import pytest

from gate.adapters import LinearClassifier
from gate.data import DatasetSpec, GATEDataModule, check_split, sources
from gate.data.splits import labels_of
from gate.engine.build import build_adapter, build_datamodule, build_encoder, build_spec, build_splits

from helpers import compose_run, resolved


def test_digits_splits_are_deterministic_disjoint_and_complete(tmp_path):
    cfg = compose_run(tmp_path, ["dataset=digits"])
    a = build_splits(resolved(cfg.dataset), seed=0)
    b = build_splits(resolved(cfg.dataset), seed=0)
    c = build_splits(resolved(cfg.dataset), seed=1)  # another run seed: the same split (dataset.splits.seed decides it)
    d = build_splits(resolved(compose_run(tmp_path, ["dataset=digits", "+dataset.splits.seed=1"]).dataset), seed=0)
    assert sum(len(s) for s in a.values()) == 1797
    for name in ("train", "val", "test"):
        assert a[name]["image"] == b[name]["image"] == c[name]["image"]
    assert a["test"]["image"] != d["test"]["image"]
    key = lambda split: {np.asarray(img).tobytes() + bytes([lab]) for img, lab in zip(split["image"], split["label"])}
    assert not key(a["train"]) & key(a["test"]) - key(a["val"])  # (the digit set has a few exact duplicates)
    assert set(labels_of(a["val"], "label")) == set(range(10))  # stratified


def test_fashion_mnist_reads_the_debian_package(tmp_path):
    raw = sources.fashion_mnist()
    assert {k: len(v) for k, v in raw.items()} == {"train": 60000, "test": 10000}
    assert np.asarray(raw["train"].with_format("numpy")[0]["image"]).shape == (28, 28)


def test_fashion_mnist_missing_everywhere_says_how_to_get_it(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(FileNotFoundError, match="apt-get install -y dataset-fashion-mnist"):
        sources.fashion_mnist(data_dir=str(tmp_path))


def test_bbc_news_reads_all_articles():
    raw = sources.bbc_news()["train"]
    assert len(raw) == 2225 and raw.features["label"].num_classes == 5
    assert all(isinstance(t, str) and t for t in raw["text"][:20])


def spec(**kw):
    return DatasetSpec(**{"name": "toy", "modality": "image", "task": "classification", "num_classes": 3, **kw})


def test_fewer_than_two_classes_is_refused():
    with pytest.raises(ValueError, match="'toy' declares 1 classes"):
        spec(num_classes=1)


def test_empty_split_and_out_of_range_labels_name_dataset_and_split():
    with pytest.raises(ValueError, match="'toy': split 'val' is empty"):
        check_split(spec(), "val", np.array([], dtype=int))
    with pytest.raises(ValueError, match=r"'toy': split 'test' has labels in \[0, 3\].*num_classes=3"):
        check_split(spec(), "test", np.array([0, 1, 3]))
    with pytest.raises(ValueError, match="fewer than 2 distinct classes"):
        check_split(spec(), "train", np.array([1, 1, 1]))


def test_datamodule_refuses_bad_labels(tmp_path):
    bad = datasets.Dataset.from_dict({"image": [np.zeros((4, 4), np.uint8)] * 4, "label": [0, 1, 2, 7]})
    splits = datasets.DatasetDict({"train": bad, "val": bad, "test": bad})
    with pytest.raises(ValueError, match="split 'train' has labels in \\[0, 7\\]"):
        GATEDataModule(spec(), splits, encoder=None, adapter=LinearClassifier(feature_dim=4, num_classes=3), batch_size=4)


def test_text_encoder_on_image_dataset_names_both(tmp_path):
    cfg = compose_run(tmp_path, ["encoder=minilm", "dataset=digits"])
    encoder = build_encoder(resolved(cfg.encoder))
    with pytest.raises(ValueError, match=r"HFTextEncoder accepts \['text'\].*'digits' is image"):
        build_datamodule(cfg, encoder, LinearClassifier(feature_dim=encoder.feature_dim, num_classes=10),
                         build_spec(resolved(cfg.dataset)))


def test_datamodule_batches(tmp_path):
    cfg = compose_run(tmp_path, ["dataset=digits", "image_size=32", "data.batch_size=16"])
    encoder = build_encoder(resolved(cfg.encoder))
    spec = build_spec(resolved(cfg.dataset))
    dm = build_datamodule(cfg, encoder, build_adapter(resolved(cfg.adapter), encoder, spec), spec)
    batch = dm.on_after_batch_transfer(next(iter(dm.train_dataloader())), 0)
    assert batch["image"].shape == (16, 3, 32, 32) and batch["label"].shape == (16,)

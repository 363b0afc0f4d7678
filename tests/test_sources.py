"""The GATE paper's 31 benchmarks state where their data comes from in one schema (gate/data/hub.py) and their
protocol in one spelling; `gate-data list` reports each honestly, an offline `gate-data prepare` of a benchmark that
is not on disk is one line, and `gate-data prepare` places what it downloads where the loaders read it."""

from __future__ import annotations

import csv
import types
import zipfile
from pathlib import Path

import pytest
import yaml

import gate.conf
from gate.cli import data as gate_data
from gate.cli.common import describe
from gate.data import hub
from gate.engine.build import build_splits
from gate.errors import DatasetUnavailable, GateError

from helpers import compose_run, resolved

POOL = Path(__file__).resolve().parents[1] / "experiments" / "gate_paper" / "gate_pool.csv"
KEYS = [row["key"] for row in csv.DictReader(POOL.open())]
DENSE = ["ade20k", "cityscapes", "coco_10k", "coco_164k", "nyu", "pascal_context", "clevr", "clevr_math", "acdc",
         "hmdb51", "kinetics400", "ucf101", "iwildcam"]
UNITS = ("example", "clip", "episode", "volume")


def config(key: str) -> dict:
    return yaml.safe_load((Path(gate.conf.__file__).parent / "dataset" / f"{key}.yaml").read_text())


def test_the_pool_has_31_benchmarks_with_configs():
    assert len(KEYS) == 31 and set(DENSE) <= set(KEYS)
    assert set(KEYS) <= set(gate_data.dataset_keys())


@pytest.mark.parametrize("key", KEYS)
def test_source_follows_the_schema_and_says_how_to_get_it(key):
    source = config(key)["source"]
    assert hub.source_problems(source) == [], key
    assert source["kind"] in hub.KINDS and source["access"] in hub.ACCESS and isinstance(source["pinned"], bool)
    if source["kind"] == "hf":
        assert source["repo_id"] and source["revision"]
    if source["kind"] == "url":
        assert source["urls"] and all(u["url"].startswith(("http://", "https://")) for u in source["urls"])
    line = hub.how_to_get(key, source, "/data/copy")
    assert line.strip() and "\n" not in line and "/data/copy" in line


@pytest.mark.parametrize("key", KEYS)
def test_paper_protocol_is_spelled_one_way(key):
    cfg = config(key)
    protocol = cfg["paper_protocol"]
    assert set(protocol) <= {"image_size", "batch_size", "batch_unit", "mask_size"}, protocol
    assert isinstance(protocol["image_size"], int) and isinstance(protocol["batch_size"], int)
    unit = protocol.get("batch_unit", "example")
    assert unit in UNITS
    assert (unit == "episode") == (cfg["task"] == "few_shot")
    assert (unit == "clip") == (cfg.get("modality") == "video")


def test_source_problems_name_every_break():
    text = "; ".join(hub.source_problems({"hub": "a/b", "kind": "hf", "access": "free", "pinned": "yes"}))
    for part in ("unknown key(s) ['hub']", "access='free'", "pinned='yes'", "needs repo_id", "needs revision"):
        assert part in text
    assert hub.source_problems({"kind": "url", "access": "open", "pinned": False, "urls": "http://x"}) == [
        "urls must be a list of {url, sha256, to, unpack} mappings"]


def test_gate_data_list_shows_every_benchmark_with_honest_access_and_status(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(hub, "is_offline", lambda: True)
    monkeypatch.setattr(hub, "has_credentials", lambda source: source.get("access") == "open")
    gate_data.main(["list", f"paths.root={tmp_path}"])
    header, *lines = capsys.readouterr().out.splitlines()
    starts = {c: header.index(c) for c in ("key", "group", "adapter", "access", "size", "status", "source")}
    cols = sorted(starts, key=starts.get)

    def cell(line, col):
        i = cols.index(col)
        return line[starts[col]: starts[cols[i + 1]] if i + 1 < len(cols) else None].strip()

    rows = {cell(line, "key"): line for line in lines[:-1]}
    assert set(rows) == set(gate_data.dataset_keys())  # the 31, the offline datasets and the stand-ins
    expected = {"open": "unavailable offline", "gated": "needs credentials", "kaggle": "needs credentials",
                "registration": "needs registration"}
    for key in KEYS:
        access = config(key)["source"]["access"]
        assert cell(rows[key], "access") == access, key
        assert cell(rows[key], "status") == expected[access], key
    assert cell(rows["fashion_mnist"], "status") == "packaged (offline)"


@pytest.mark.parametrize("key", KEYS)
def test_prepare_offline_without_a_copy_is_one_line(key, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(hub, "is_offline", lambda: True)
    with pytest.raises(SystemExit) as exit_:
        gate_data.main(["prepare", f"dataset={key}", f"paths.root={tmp_path}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gate-data: error: dataset {key!r}") and "\n" not in err, err
    assert str(tmp_path / "data" / key) in err  # where to put it


@pytest.mark.parametrize("key", DENSE)
def test_a_missing_copy_says_what_to_download_from_where_and_where_to_put_it(key, tmp_path):
    cfg = compose_run(tmp_path, [f"dataset={key}"])
    with pytest.raises(Exception) as err:  # noqa: B017 - Hydra wraps it; the CLI shows the cause (describe)
        build_splits(resolved(cfg.dataset), seed=0)
    assert isinstance(err.value.__cause__, DatasetUnavailable)
    message, source = describe(err.value), config(key)["source"]
    where = source.get("repo_id") or source.get("slug") or (source.get("urls") or [{}])[0].get("url") or source["homepage"]
    assert f"dataset {key!r}: no local copy at {tmp_path / 'data' / key}" in message and where in message
    assert "\n" not in message


def test_fetch_urls_extracts_archives_and_places_plain_files(tmp_path, monkeypatch):
    served = tmp_path / "served"
    served.mkdir()
    with zipfile.ZipFile(served / "maps.zip", "w") as z:
        z.writestr("train2017/1.png", b"png")
    (served / "train.csv").write_text("label,youtube_id\n")
    source = {"kind": "url", "access": "open", "pinned": False, "urls": [
        {"url": (served / "maps.zip").as_uri(), "sha256": hub.sha256_of(served / "maps.zip"),
         "to": "stuffthingmaps_trainval2017"},
        {"url": (served / "train.csv").as_uri(), "sha256": None, "to": "annotations"}]}
    monkeypatch.setattr(hub, "is_offline", lambda: False)
    root = hub.fetch("toy", source, tmp_path / "copy")
    assert (root / "stuffthingmaps_trainval2017" / "train2017" / "1.png").read_bytes() == b"png"
    assert (root / "annotations" / "train.csv").read_text() == "label,youtube_id\n"
    wrong = dict(source, urls=[dict(source["urls"][1], sha256="0" * 64)])
    with pytest.raises(GateError, match=r"'toy'.*train\.csv does not match its sha256"):
        hub.fetch("toy", wrong, tmp_path / "other")


def test_fetch_hf_unpacks_repo_archives_and_fetches_extra_urls(tmp_path, monkeypatch):
    import huggingface_hub

    images = tmp_path / "CLEVR_v1.0.zip"
    with zipfile.ZipFile(images, "w") as z:
        z.writestr("CLEVR_v1.0/images/train/a.png", b"png")

    def snapshot_download(repo_id, repo_type, revision, local_dir, allow_patterns):
        assert (repo_id, revision, allow_patterns) == ("o/r", "c" * 40, ["data/q.zip", "data/t.zip"])
        for name, member in (("q.zip", "q-train.json"), ("t.zip", "CLEVR_v1.0/images/test/b.png")):
            (Path(local_dir) / "data").mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(Path(local_dir) / "data" / name, "w") as z:
                z.writestr(member, "{}")

    class Api:
        def dataset_info(self, repo_id, revision):
            return types.SimpleNamespace(sha=revision)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(hub, "is_offline", lambda: False)
    source = {"kind": "hf", "repo_id": "o/r", "revision": "c" * 40, "pinned": True, "access": "open",
              "files": {"questions": ["data/q.zip"], "test_images": ["data/t.zip"]},
              "unpack": {"data/q.zip": ".", "data/t.zip": "test_images"},
              "urls": [{"url": images.as_uri(), "sha256": None}]}
    assert hub.source_problems(source) == []
    root = hub.fetch("toy", source, tmp_path / "copy")
    assert (root / "q-train.json").is_file() and (root / "test_images/CLEVR_v1.0/images/test/b.png").is_file()
    assert (root / "CLEVR_v1.0/images/train/a.png").is_file() and (root / hub.SOURCE_FILE).is_file()

"""gate-data can be trusted with a local copy: a copy counts only once its whole fetch ended (an interrupted one is
called incomplete and resumed), every fetched file's sha256 is recorded and `verify` re-checks it, a network error
or a damaged file is one line naming what and where, `force=true` offline rebuilds the manifest from the copy on
disk, an unknown key is one line, and `list` says whether a benchmark's schema rests on evidence.

The network is faked (huggingface_hub's snapshot_download and HfApi, urllib's urlopen), or the real hub client is
pointed at a closed local port; nothing here downloads or waits on the network."""

from __future__ import annotations

import json
import types
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import huggingface_hub
import pytest
from benchmark_fixtures import all_fixtures

from gate.cli import data as gate_data
from gate.data import hub
from gate.errors import DatasetUnavailable, GateError

COMMIT = "c" * 40


def list_rows(capsys, *overrides: str) -> dict[str, dict[str, str]]:
    """`gate-data list` parsed into {key: {column: cell}} (columns are space-padded to their header's start)."""
    capsys.readouterr()
    gate_data.main(["list", *overrides])
    header, *lines = capsys.readouterr().out.splitlines()
    names = header.split()
    starts = [header.index(f"{n} ") if f"{n} " in header else header.index(n) for n in names]
    ends = [*starts[1:], None]
    return {line[: starts[1]].strip(): {n: line[s:e].strip() for n, s, e in zip(names, starts, ends)}
            for line in lines[:-1]}


def one_error_line(capsys, argv: list[str]) -> str:
    """The error of a gate-data call that must fail: exit code 2 and one line (after datasets' progress bars)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        gate_data.main(argv)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if "gate-data: error: " in line]
    assert len(errors) == 1 and lines[-1] == errors[0] and errors[0].startswith("gate-data: error: "), lines
    return errors[0]


@pytest.fixture
def fake_hub(monkeypatch):
    """An online hub serving uoft-cs/cifar100 as the cifar100 fixture writes it; ``calls`` counts downloads and
    ``interrupt`` makes the next download stop after the train file (as Ctrl-C or a killed job would)."""
    state = types.SimpleNamespace(calls=0, interrupt=False)

    def snapshot_download(repo_id, repo_type, revision, local_dir, allow_patterns):
        assert (repo_id, repo_type, revision) == ("uoft-cs/cifar100", "dataset", COMMIT)
        state.calls += 1
        all_fixtures()["cifar100"](Path(local_dir))
        if state.interrupt:
            state.interrupt = False
            (Path(local_dir) / "cifar100" / "test-00000-of-00001.parquet").unlink()
            raise KeyboardInterrupt
        return local_dir

    class Api:
        def dataset_info(self, repo_id, revision):
            return types.SimpleNamespace(sha=COMMIT)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(hub, "is_offline", lambda: False)
    return state


def test_an_interrupted_fetch_is_incomplete_until_prepare_resumes_it(tmp_path, capsys, fake_hub):
    root = f"paths.root={tmp_path}"
    copy = tmp_path / "data" / "cifar100"
    fake_hub.interrupt = True
    with pytest.raises(KeyboardInterrupt):
        gate_data.main(["prepare", "dataset=cifar100", root])
    assert (copy / "cifar100" / "train-00000-of-00001.parquet").is_file()  # files are there, the copy is not whole
    row = list_rows(capsys, "dataset=cifar100", root)["cifar100"]
    assert row["status"] == "incomplete download; rerun gate-data prepare dataset=cifar100"
    with pytest.raises(DatasetUnavailable, match=r"'cifar100'.*incomplete download.*gate-data prepare dataset=cifar100"):
        hub.load_parquet("cifar100", {"files": {"train": ["cifar100/train-*.parquet"]}}, copy)  # a run refuses it
    gate_data.main(["prepare", "dataset=cifar100", root])  # no force=true needed
    out = capsys.readouterr().out
    assert fake_hub.calls == 2 and "resuming the incomplete download of cifar100" in out and "manifests:" in out
    assert list_rows(capsys, "dataset=cifar100", root)["cifar100"]["status"] == "prepared"
    record = json.loads((copy / hub.SOURCE_FILE).read_text())
    assert record["complete"] is True and record["commit"] == COMMIT
    fetched = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*.parquet"))
    assert sorted(record["files"]) == fetched == ["cifar100/test-00000-of-00001.parquet",
                                                  "cifar100/train-00000-of-00001.parquet"]
    for rel, facts in record["files"].items():
        assert (facts["sha256"], facts["size"]) == (hub.sha256_of(copy / rel), (copy / rel).stat().st_size)


def test_a_refetch_that_leaves_files_alone_keeps_their_recorded_hashes_unread(tmp_path, capsys, fake_hub, monkeypatch):
    root = f"paths.root={tmp_path}"
    gate_data.main(["prepare", "dataset=cifar100", root])
    before = json.loads((tmp_path / "data" / "cifar100" / hub.SOURCE_FILE).read_text())["files"]
    hashed = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kw: kw["local_dir"])  # nothing changed upstream
    monkeypatch.setattr(hub, "_sha256", lambda path, bar: hashed.append(path) or "0" * 64)
    gate_data.main(["prepare", "dataset=cifar100", "force=true", root])
    assert hashed == [] and json.loads((tmp_path / "data" / "cifar100" / hub.SOURCE_FILE).read_text())["files"] == before


def test_verify_rehashes_the_copy_and_names_the_first_changed_file(tmp_path, capsys, fake_hub):
    root = f"paths.root={tmp_path}"
    gate_data.main(["prepare", "dataset=cifar100", root])
    capsys.readouterr()
    gate_data.main(["verify", "dataset=cifar100", root])
    out = capsys.readouterr().out
    assert "2 files" in out and "match the sha256 gate-data prepare recorded" in out and "matches the source" in out
    test_file = tmp_path / "data" / "cifar100" / "cifar100" / "test-00000-of-00001.parquet"
    data = bytearray(test_file.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte, same size
    test_file.write_bytes(bytes(data))
    err = one_error_line(capsys, ["verify", "dataset=cifar100", root])
    assert f"{test_file} changed since gate-data prepare fetched it" in err and "'cifar100'" in err
    test_file.write_bytes(bytes(data[:-10]))  # a changed size is found without hashing
    err = one_error_line(capsys, ["verify", "dataset=cifar100", root])
    assert f"{test_file} has {len(data) - 10} bytes, not the {len(data)} recorded" in err
    assert "rerun `gate-data prepare dataset=cifar100`" in err
    assert list_rows(capsys, "dataset=cifar100", root)["cifar100"]["status"] == \
        "damaged (a fetched file is missing or resized); rerun gate-data prepare dataset=cifar100"
    gate_data.main(["prepare", "dataset=cifar100", root])  # fetches the resized file again
    assert fake_hub.calls == 2 and "fetching the missing or changed files" in capsys.readouterr().out
    test_file.unlink()
    err = one_error_line(capsys, ["verify", "dataset=cifar100", root])
    assert f"{test_file} is missing since gate-data prepare fetched it" in err


def test_a_users_own_copy_is_usable_and_says_it_has_no_hashes(tmp_path, capsys):
    copy = tmp_path / "data" / "cifar100"
    all_fixtures()["cifar100"](copy)
    assert hub.copy_state(copy).state == "user"
    assert list_rows(capsys, "dataset=cifar100", f"paths.root={tmp_path}")["cifar100"]["status"] == \
        "on disk (no manifest yet) (not fetched by gate: no hashes)"
    gate_data.main(["prepare", "dataset=cifar100", f"paths.root={tmp_path}"])
    gate_data.main(["verify", "dataset=cifar100", f"paths.root={tmp_path}"])
    out = capsys.readouterr().out
    assert "not fetched by gate: no hashes to check" in out and "matches the source" in out
    assert list_rows(capsys, "dataset=cifar100", f"paths.root={tmp_path}")["cifar100"]["status"] == \
        "prepared (not fetched by gate: no hashes)"


def test_a_downloads_folder_without_a_record_is_an_interrupted_fetch(tmp_path):
    # What gate before completion records left behind: list called it "on disk" and prepare skipped the fetch.
    all_fixtures()["cifar100"](tmp_path)
    (tmp_path / hub.DOWNLOADS).mkdir()
    (tmp_path / hub.DOWNLOADS / "archive.zip.part").write_bytes(b"PK")
    state = hub.copy_state(tmp_path)
    assert state.state == "incomplete" and not state.usable


def test_an_interrupted_url_fetch_resumes_without_downloading_finished_files_again(tmp_path, monkeypatch):
    served = tmp_path / "served"
    served.mkdir()
    with zipfile.ZipFile(served / "maps.zip", "w") as z:
        z.writestr("train2017/1.png", b"png")
    (served / "train.csv").write_text("label,youtube_id\n")
    source = {"kind": "url", "access": "open", "pinned": False, "urls": [
        {"url": (served / "maps.zip").as_uri(), "sha256": hub.sha256_of(served / "maps.zip"), "to": "maps"},
        {"url": (served / "train.csv").as_uri(), "sha256": None, "to": "annotations"}]}
    opened, real_urlopen = [], urllib.request.urlopen

    def urlopen(url, timeout):
        opened.append(url.rsplit("/", 1)[-1])
        if url.endswith("train.csv") and opened.count("train.csv") == 1:
            raise KeyboardInterrupt
        return real_urlopen(url, timeout=timeout)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(hub, "is_offline", lambda: False)
    copy = tmp_path / "copy"
    with pytest.raises(KeyboardInterrupt):
        hub.fetch("toy", source, copy)
    assert hub.copy_state(copy).state == "incomplete" and (copy / "maps" / "train2017" / "1.png").is_file()
    hub.fetch("toy", source, copy)
    assert opened == ["maps.zip", "train.csv", "train.csv"]  # the finished archive was kept
    state = hub.copy_state(copy)
    assert state.state == "complete" and set(state.files) == {"maps/train2017/1.png", "annotations/train.csv"}
    assert set(state.downloads) == {".downloads/maps.zip", ".downloads/train.csv"}
    assert state.downloads[".downloads/maps.zip"]["into"] == "maps"


def test_a_record_from_before_downloads_were_kept_apart_does_not_need_them(tmp_path):
    # gate before this change listed the .downloads/ archives among the copy's files.
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "1.png").write_bytes(b"png")
    record = {"complete": True, "files": {".downloads/maps.zip": {"sha256": "0" * 64, "size": 22},
                                          "maps/1.png": {"sha256": hub.sha256_of(tmp_path / "maps" / "1.png"),
                                                         "size": 3}}}
    (tmp_path / hub.SOURCE_FILE).write_text(json.dumps(record))
    state = hub.copy_state(tmp_path)
    assert state.state == "complete" and set(state.files) == {"maps/1.png"}
    assert hub.verify_copy("toy", tmp_path) == (1, 3)
    (tmp_path / "maps" / "1.png").unlink()
    assert hub.copy_state(tmp_path).state == "damaged"


@pytest.fixture
def pascal_context_online(tmp_path, monkeypatch):
    """pascal_context's three official URLs served from archives of its fixture (laid out as the config's
    ``verified:`` says: the VOC2010 tar holds VOCdevkit/, trainval.tar.gz trainval/*.mat and labels.txt);
    ``opened`` lists every URL fetched."""
    import tarfile

    from benchmark_fixtures import segmentation

    made, served = tmp_path / "made", tmp_path / "served"
    segmentation.pascal_context(made)
    served.mkdir()
    with tarfile.open(served / "VOCtrainval_03-May-2010.tar", "w") as tar:
        tar.add(made / "VOCdevkit", "VOCdevkit")
    with tarfile.open(served / "trainval.tar.gz", "w:gz") as tar:
        tar.add(made / "trainval", "trainval")
        tar.add(made / "labels.txt", "labels.txt")
    (served / "59_labels.txt").write_bytes((made / "59_labels.txt").read_bytes())
    opened = []

    def urlopen(url, timeout):
        opened.append(url)
        return open(served / url.rsplit("/", 1)[-1], "rb")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(hub, "is_offline", lambda: False)
    return opened


def test_deleting_the_downloaded_archives_after_extraction_keeps_the_copy_usable(tmp_path, capsys,
                                                                                pascal_context_online):
    """The archives in .downloads/ are only what the copy was extracted from: once the extracted files are recorded
    (size and sha256), deleting them (CLEVR 18 GB, COCO ~20 GB) leaves a copy that lists as prepared, verifies and is
    not downloaded again; a missing extracted file is still damage."""
    import shutil

    args = ["dataset=pascal_context", "dataset.paper_protocol.mask_size=32", f"paths.root={tmp_path}"]
    copy = tmp_path / "data" / "pascal_context"
    gate_data.main(["prepare", *args])
    assert len(pascal_context_online) == 3 and (copy / hub.DOWNLOADS / "trainval.tar.gz").is_file()
    shutil.rmtree(copy / hub.DOWNLOADS)
    assert list_rows(capsys, *args)["pascal_context"]["status"] == "prepared"
    assert hub.copy_state(copy).usable
    gate_data.main(["verify", *args])
    out = capsys.readouterr().out
    assert "match the sha256 gate-data prepare recorded" in out and "matches the source" in out
    assert "3 downloaded archives were deleted after extraction" in out
    gate_data.main(["prepare", *args])
    assert len(pascal_context_online) == 3  # nothing downloaded again
    record = json.loads((copy / hub.SOURCE_FILE).read_text())
    assert "trainval/2008_000000.mat" in record["files"] and "labels.txt" in record["files"]
    (copy / "trainval" / "2008_000003.mat").unlink()  # an extracted file is the copy: its loss is damage
    assert list_rows(capsys, *args)["pascal_context"]["status"].startswith("damaged")


def test_a_network_error_is_one_line_with_how_to_get_the_copy(tmp_path, capsys, monkeypatch):
    import httpx

    class Api:
        def dataset_info(self, repo_id, revision):
            raise httpx.ConnectError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(hub, "is_offline", lambda: False)
    err = one_error_line(capsys, ["prepare", "dataset=cifar100", f"paths.root={tmp_path}"])
    assert "dataset 'cifar100': downloading uoft-cs/cifar100@main failed (ConnectError: [Errno -3]" in err
    assert "huggingface-cli download --repo-type dataset uoft-cs/cifar100" in err and "internal error" not in err
    assert not (tmp_path / "data" / "cifar100" / hub.SOURCE_FILE).exists()  # nothing fetched: nothing marked

    def urlopen(url, timeout):
        raise urllib.error.URLError("[Errno 111] Connection refused")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    source = {"kind": "url", "access": "open", "pinned": False,
              "urls": [{"url": "https://example.org/a.zip", "sha256": None}]}
    with pytest.raises(DatasetUnavailable) as info:
        hub.fetch("toy", source, tmp_path / "toy")
    assert "downloading https://example.org/a.zip failed (URLError: <urlopen error [Errno 111] Connection refused>)" \
        in str(info.value) and "`gate-data prepare dataset=toy`" in str(info.value) and "\n" not in str(info.value)


@pytest.fixture
def dead_hub(monkeypatch):
    """Online as far as gate can tell (no offline variable), but the hub endpoint is a closed local port: the real
    client of the installed huggingface_hub fails at once with its own transport's error (httpx2 in 2.x, httpx in
    1.x, requests in 0.x); nothing waits on the network."""
    import socket

    from huggingface_hub import constants

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: connections are refused
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    return port


def test_a_dead_hub_is_one_line_with_how_to_get_the_copy(tmp_path, capsys, dead_hub):
    err = one_error_line(capsys, ["prepare", "dataset=cifar100", f"paths.root={tmp_path}"])
    assert "dataset 'cifar100': downloading uoft-cs/cifar100@" in err and "failed (ConnectError: " in err
    assert "huggingface-cli download --repo-type dataset uoft-cs/cifar100" in err and "internal error" not in err


@pytest.mark.parametrize("module", ["httpx", "httpx2", "requests"])
def test_every_hub_transport_error_is_a_network_error(module):
    """huggingface_hub 0.x talks through requests, 1.x through httpx, 2.x through httpx2; their connection errors
    are what a dead network raises (each installed here: httpx2 beside httpx for huggingface_hub 2.x)."""
    import importlib

    transport = importlib.import_module(module)
    assert issubclass(transport.ConnectionError if module == "requests" else transport.ConnectError,
                      hub.network_errors())


def test_list_says_a_downloadable_copy_needs_the_network(tmp_path, capsys, dead_hub):
    capsys.readouterr()
    gate_data.main(["list", "dataset=cifar100,digits", f"paths.root={tmp_path}"])
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert "downloadable (needs network)" in rows["cifar100"] and "packaged" in rows["digits"]
    assert "not checked" in out.splitlines()[-1] and "HF_HUB_OFFLINE=1" in out


def test_a_truncated_parquet_file_is_named_with_its_dataset(tmp_path, capsys):
    copy = tmp_path / "data" / "cifar100"
    all_fixtures()["cifar100"](copy)
    bad = copy / "cifar100" / "test-00000-of-00001.parquet"
    bad.write_bytes(bad.read_bytes()[:1000])
    err = one_error_line(capsys, ["prepare", "dataset=cifar100", f"paths.root={tmp_path}"])
    assert f"dataset 'cifar100': {bad} cannot be read (" in err and "magic bytes" in err
    assert "delete that file and rerun `gate-data prepare dataset=cifar100`" in err


def test_force_offline_with_a_copy_on_disk_rebuilds_the_manifest(tmp_path, capsys):
    root = f"paths.root={tmp_path}"
    all_fixtures()["nycc"](tmp_path / "data" / "nycc")
    gate_data.main(["prepare", "dataset=nycc", root])
    manifest = next((tmp_path / "data" / "manifests").glob("nycc-*.json"))
    good = manifest.read_text()
    tampered = json.loads(good)
    tampered["source"]["hash"] = "0" * 32
    manifest.write_text(json.dumps(tampered))
    err = one_error_line(capsys, ["verify", "dataset=nycc", root])
    assert "gate-data prepare dataset=nycc force=true" in err  # what every manifest error recommends ...
    gate_data.main(["prepare", "dataset=nycc", "force=true", root])  # ... works offline with the copy on disk
    out = capsys.readouterr().out
    assert "offline (HF_HUB_OFFLINE is set): not re-downloading nycc; rebuilding its manifest" in out
    assert json.loads(manifest.read_text()) == json.loads(good)
    gate_data.main(["verify", "dataset=nycc", root])
    assert "matches the source" in capsys.readouterr().out


def test_unknown_keys_are_one_line_naming_what_is_known(tmp_path, capsys):
    root = f"paths.root={tmp_path}"
    err = one_error_line(capsys, ["prepare", "dataset=cifar100", "dataset.data_dri=/x", root])
    assert "unknown config key 'dataset.data_dri'; dataset has: builder, data_dir, metrics," in err and "paper_group" in err
    assert "internal error" not in err
    err = one_error_line(capsys, ["verify", "dataset=cifar100", "splits.seed=1", root])
    assert "unknown config key 'splits'; the top level has: adapter, dataset, force," in err
    with pytest.raises(SystemExit):
        gate_data.main(["list", "dataset=cifar1000", root])
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "dataset=cifar1000 is not a known dataset; known: acdc, ade20k," in captured.err
    err = one_error_line(capsys, ["prepare", "dataset=cifar100", "force=yes please", root])
    assert "force='yes please' is invalid: expected true or false" in err


def test_list_shows_whether_each_schema_rests_on_evidence(tmp_path, capsys, monkeypatch):
    root = f"paths.root={tmp_path}"
    from gate.engine import prepare

    composed: dict[str, dict] = {}  # each dataset's config as `list` composed and checked it (0.1 s a dataset)
    status_of = prepare.status_of

    def kept(config):
        composed[config["dataset"]["name"]] = config
        return status_of(config)

    monkeypatch.setattr(prepare, "status_of", kept)
    rows = list_rows(capsys, root)
    monkeypatch.setattr(prepare, "status_of", status_of)

    assert set(composed) == set(gate_data.dataset_keys()) == set(rows)
    for key in gate_data.dataset_keys():
        source = composed[key]["dataset"].get("source") or {}
        expected = "-" if not source else "verified" if source.get("schema_verified") is True else "unverified"
        assert rows[key]["schema"] == expected, key
    assert rows["digits"]["schema"] == "-"  # packaged: no source to check against
    flagged = list_rows(capsys, "dataset=cifar100,food101", "++dataset.source.schema_verified=true", root)
    assert {k: r["schema"] for k, r in flagged.items()} == {"cifar100": "verified", "food101": "verified"}
    flagged = list_rows(capsys, "dataset=cifar100", "++dataset.source.schema_verified=false", root)
    assert flagged["cifar100"]["schema"] == "unverified"


def test_a_parquet_conversion_that_cannot_fit_is_refused_before_it_starts(tmp_path, monkeypatch):
    import shutil

    all_fixtures()["cifar100"](tmp_path / "copy")
    source = {"files": {"train": ["cifar100/train-*.parquet"]}}
    monkeypatch.setattr(hub.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**12, 10**12 - 1000, 1000))
    with pytest.raises(GateError, match=r"'cifar100'.*converts them once into datasets' Arrow cache at "
                                        r".*only 1\.0 KB is free there; free space or point paths.cache"):
        hub.load_parquet("cifar100", source, tmp_path / "copy", cache_dir=tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("*.arrow"))
    monkeypatch.undo()
    monkeypatch.setattr(hub, "LARGE_CONVERSION", 1)
    with pytest.warns(UserWarning, match=r"'cifar100': converting its parquet files once .* later runs reuse it"):
        raw = hub.load_parquet("cifar100", source, tmp_path / "copy", cache_dir=tmp_path / "cache")
    assert len(raw["train"]) == 300


def test_a_dense_benchmark_refuses_an_interrupted_fetch(tmp_path):
    # The dense, medical and video loaders find their copy through _dense.require: an incomplete download
    # (a completion record saying so) is one line, never read.
    from gate.data.hub import SOURCE_FILE
    from gate.data.loaders._dense import require
    from gate.errors import DatasetUnavailable

    (tmp_path / "database").mkdir()
    (tmp_path / SOURCE_FILE).write_text(json.dumps({"complete": False, "why": "the download did not finish"}))
    with pytest.raises(DatasetUnavailable, match="incomplete download.*gate-data prepare dataset=acdc"):
        require(tmp_path, "acdc", ["database"], {"kind": "registration", "homepage": "https://x"})
    (tmp_path / SOURCE_FILE).unlink()  # a copy laid out by hand (no record) is the user's: read
    assert require(tmp_path, "acdc", ["database"], {"kind": "registration", "homepage": "https://x"}) == tmp_path

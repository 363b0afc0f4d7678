"""The video benchmarks (HMDB51, UCF101, Kinetics-400, iWildCam 2022) against their real sources (issue 14): each
loader reads a tiny local copy laid out as the source (tests/benchmark_fixtures/video.py, which cites its evidence),
decodes a fixed number of frames per clip, keeps the groups a validation split must not cut (UCF101 group numbers,
HMDB51 source videos), prepares its derived data streamed (memory of one batch, not of a split), stamps every file
it reads, and fails on a bad copy with one line naming the file and the key."""

from __future__ import annotations

import csv
import json
import weakref
from pathlib import Path

import numpy as np
import pytest
import yaml
from benchmark_fixtures import video

import gate.conf
from gate.engine.build import build_splits
from gate.errors import DatasetUnavailable, GateError

from helpers import compose_run, resolved

KEYS = sorted(video.FIXTURES)


def source_of(key: str) -> dict:
    """The packaged config's ``source`` block, which the builder passes to the loader."""
    return yaml.safe_load((Path(gate.conf.__file__).parent / "dataset" / f"{key}.yaml").read_text())["source"]


def load(key: str, copy: Path, cache=None, **kwargs):
    from gate.data.loaders import video as loaders

    return getattr(loaders, key)(str(copy), source_of(key), cache_dir=str(cache) if cache else None,
                                 **{"frames": 4, "frame_size": 32, **kwargs})


def column(split, name):
    return split.select_columns([name]).with_format("numpy")[:][name]


def splits_of(key: str, tmp_path: Path):
    copy = tmp_path / "copy"
    extra = video.FIXTURES[key](copy)
    cfg = compose_run(tmp_path / "out", [f"dataset={key}", f"dataset.data_dir={copy}",
                                         *(f"{k}={v}" for k, v in extra.items())])
    return build_splits(resolved(cfg.dataset), seed=0)


# ------------------------------------------------------------------------------------------- frames
@pytest.mark.parametrize("key", KEYS)
def test_video_loader_decodes_fixed_frames(key, tmp_path):
    video.FIXTURES[key](tmp_path / "copy")
    ds = load(key, tmp_path / "copy", tmp_path / "cache")
    target = "count" if key == "iwildcam" else "label"
    for split in ds.values():
        clips = split.with_format("numpy")[:]
        assert all(np.asarray(c).shape == (4, 32, 32, 3) for c in clips["video"])
        assert len(clips[target]) == len(split)
    if key != "iwildcam":
        assert sorted(set(ds["train"]["label"])) == [0, 1, 2]


def test_clip_frames_are_the_centres_of_equal_segments(tmp_path):
    from gate.data.loaders.video import decode_clip, segment_centres

    assert segment_centres(7, 4).tolist() == [0, 2, 4, 6]
    assert segment_centres(2, 4).tolist() == [0, 0, 1, 1]  # short clips repeat frames
    for name in ("clip.avi", "clip.mp4"):
        path = video.write_video(tmp_path / name, n_frames=7)  # frame i has brightness 10 * i (+0..2 noise)
        means = [float(f.mean()) for f in decode_clip(path, 4, None)]
        assert np.allclose(means, [1, 21, 41, 61], atol=4), (name, means)


def test_a_wrong_frame_count_in_the_container_still_picks_the_true_centres(tmp_path, monkeypatch):
    """The container's frame count is only a first guess: a wrong one costs a second pass, never other frames."""
    import av

    from gate.data.loaders import video as loaders

    path = video.write_video(tmp_path / "clip.avi", n_frames=9)
    truth = [float(f.mean()) for f in loaders.decode_clip(path, 3, None)]
    assert np.allclose(truth, [11, 41, 71], atol=4)  # centres of 3 segments of 9 frames: 1, 4, 7
    real_open = av.open

    class Lying:
        def __init__(self, container):
            self.container = container
            self.streams = type("S", (), {"video": [type("V", (), {"frames": 4})()]})()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.container.close()

    calls = []

    def fake_open(*args, **kwargs):
        calls.append(1)
        return Lying(real_open(*args, **kwargs)) if len(calls) == 1 else real_open(*args, **kwargs)

    monkeypatch.setattr(av, "open", fake_open)
    assert [float(f.mean()) for f in loaders.decode_clip(path, 3, None)] == truth


def test_iwildcam_sequences_are_padded_with_black_frames_in_seq_frame_num_order(tmp_path):
    from gate.data.loaders.video import sequence_frames

    paths = []
    for i, level in enumerate((50, 100, 150)):
        paths.append(video.save(np.full((6, 8, 3), level, np.uint8), tmp_path / f"{i}.png"))
    padded = sequence_frames(paths, 5, None, "pad")
    assert [int(f.mean()) for f in padded] == [50, 100, 150, 0, 0]  # GATE: up to 10 frames, zeros after
    assert [int(f.mean()) for f in sequence_frames(paths, 2, None, "pad")] == [50, 150]  # longer: segment centres
    assert [int(f.mean()) for f in sequence_frames(paths, 4, None, "segments")] == [50, 100, 100, 150]


# ------------------------------------------------------------------------------------------ iWildCam
def test_iwildcam_reads_the_nested_kaggle_layout_and_regresses_the_human_counts(tmp_path):
    """Defect: the loader read flat train/ and metadata/, keyed frames by frame_num and detections by id, and
    regressed MegaDetector box counts over every sequence. The target is the human count of exactly the sequences
    of train_sequence_counts.csv, frames in seq_frame_num order."""
    copy = tmp_path / "copy"
    video.iwildcam(copy)
    assert (copy / "train" / "train").is_dir() and (copy / "metadata" / "metadata").is_dir()
    with open(copy / "metadata/metadata/train_sequence_counts.csv", newline="") as fh:
        human = {row["seq_id"]: float(row["count"]) for row in csv.DictReader(fh)}
    ds = load("iwildcam", copy, tmp_path / "cache", frame_size=None)
    assert list(ds) == ["train"]
    got = dict(zip(ds["train"]["seq_id"], ds["train"]["count"]))
    assert set(got) == set(human) and len(human) < len(video.IWILDCAM_SEQUENCES)  # only the counted sequences
    assert all(abs(got[s] - human[s]) < 1e-6 for s in human)  # human counts, not the 7 MegaDetector boxes

    meta = json.loads((copy / "metadata/metadata/iwildcam2022_train_annotations.json").read_text())
    seq = next(s for s in human if sum(i["seq_id"] == s for i in meta["images"]) == 3)
    frames = sorted((i for i in meta["images"] if i["seq_id"] == seq), key=lambda i: i["seq_frame_num"])
    from PIL import Image

    expected = [np.asarray(Image.open(copy / "train/train" / i["file_name"]).convert("RGB")) for i in frames]
    row = next(i for i, s in enumerate(ds["train"]["seq_id"]) if s == seq)
    clip = np.asarray(ds["train"].with_format("numpy")[row]["video"])
    assert clip.shape == (4, 24, 32, 3)
    for got_frame, want in zip(clip[:3], expected):  # JPEG round trip of a random image: compare loosely
        assert np.abs(got_frame.astype(int) - want.astype(int)).mean() < 40
        assert np.corrcoef(got_frame.ravel(), want.ravel())[0, 1] > 0.6
    assert clip[3].max() == 0  # padded with a black frame


def test_iwildcam_splits_80_10_10_by_sequence(tmp_path):
    splits = splits_of("iwildcam", tmp_path)
    sizes = {n: len(s) for n, s in splits.items()}
    counted = sum(1 for _, c in video.IWILDCAM_SEQUENCES if c is not None)
    assert sum(sizes.values()) == counted
    seqs = {n: set(column(s, "seq_id").tolist()) for n, s in splits.items()}
    assert not seqs["train"] & seqs["val"] and not seqs["train"] & seqs["test"] and not seqs["val"] & seqs["test"]


def test_iwildcam_split_lists_reproduce_a_published_split(tmp_path):
    copy = tmp_path / "copy"
    video.iwildcam(copy)
    with open(copy / "metadata/metadata/train_sequence_counts.csv", newline="") as fh:
        ids = [row["seq_id"] for row in csv.DictReader(fh)]
    (copy / "splits").mkdir()
    for name, part in (("train", ids[:8]), ("val", ids[8:10]), ("test", ids[10:])):
        (copy / "splits" / f"{name}.txt").write_text("".join(f"{i}\n" for i in part))
    ds = load("iwildcam", copy, split_lists="splits")
    assert {n: sorted(s["seq_id"]) for n, s in ds.items()} == {"train": sorted(ids[:8]), "val": sorted(ids[8:10]),
                                                               "test": sorted(ids[10:])}
    (copy / "splits" / "val.txt").write_text(f"{ids[0]}\n")
    with pytest.raises(GateError, match=r"is in both train\.txt and val\.txt"):
        load("iwildcam", copy, split_lists="splits")


def _one_line(err) -> str:
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize(("edit", "names"), [
    ("seq_frame_num", ["iwildcam2022_train_annotations.json", "'seq_frame_num'"]),
    ("file_name", ["iwildcam2022_train_annotations.json", "'file_name'"]),
    ("location", ["iwildcam2022_train_annotations.json", "'location'"]),
    ("images", ["iwildcam2022_train_annotations.json", "'images'"]),
    ("count column", ["train_sequence_counts.csv", "'count'"]),
    ("count value", ["train_sequence_counts.csv", "'many'"]),
    ("image file", [".jpg", "missing"]),
    ("counts file", ["train_sequence_counts.csv"]),
])
def test_iwildcam_bad_keys_and_files_are_one_line_naming_file_and_key(tmp_path, edit, names):
    """Defect: a missing key (seq_frame_num, file) surfaced as a KeyError traceback."""
    copy = tmp_path / "copy"
    video.iwildcam(copy)
    meta_dir = copy / "metadata" / "metadata"
    annotations = meta_dir / "iwildcam2022_train_annotations.json"
    counts = meta_dir / "train_sequence_counts.csv"
    meta = json.loads(annotations.read_text())
    with open(counts, newline="") as fh:
        counted = {row["seq_id"] for row in csv.DictReader(fh)}
    first = next(i for i in meta["images"] if i["seq_id"] in counted)
    if edit in ("seq_frame_num", "file_name", "location"):
        del first[edit]
        annotations.write_text(json.dumps(meta))
    elif edit == "images":
        annotations.write_text(json.dumps({"annotations": meta["annotations"]}))
    elif edit == "count column":
        counts.write_text(counts.read_text().replace("seq_id,count", "seq_id,number"))
    elif edit == "count value":
        lines = counts.read_text().splitlines()
        counts.write_text("\n".join([lines[0], lines[1].split(",")[0] + ",many", *lines[2:]]) + "\n")
    elif edit == "image file":
        (copy / "train" / "train" / first["file_name"]).unlink()
    elif edit == "counts file":
        counts.unlink()
    expected = DatasetUnavailable if edit == "counts file" else GateError
    with pytest.raises(expected) as err:
        load("iwildcam", copy)
    message = _one_line(err)
    assert "'iwildcam'" in message and all(n in message for n in names), message


def test_iwildcam_sequence_declaring_other_frame_count_is_refused(tmp_path):
    video.iwildcam(tmp_path)
    meta_file = tmp_path / "metadata/metadata/iwildcam2022_train_annotations.json"
    data = json.loads(meta_file.read_text())
    seq = data["images"][0]["seq_id"]
    for image in data["images"]:
        if image["seq_id"] == seq:
            image["seq_num_frames"] = 9
    meta_file.write_text(json.dumps(data))
    with pytest.raises(GateError, match=rf"sequence {seq} declares 9 frames but lists 3"):
        load("iwildcam", tmp_path)


def test_clips_of_inconsistent_length_are_refused():
    from gate.data.loaders.video import clip_row

    frame = np.zeros((8, 8, 3), np.uint8)
    assert len(clip_row("ucf101", 0, [frame] * 4, 4)) == 4
    with pytest.raises(GateError, match=r"'ucf101': clip 1 has 3 frames"):
        clip_row("ucf101", 1, [frame] * 3, 4)


# ------------------------------------------------------------------------------------------- groups
def test_ucf101_validation_keeps_each_group_number_on_one_side(tmp_path):
    """Defect: val was carved clip by clip, so clips of one group (cut from one video) sat in train and val."""
    splits = splits_of("ucf101", tmp_path)
    groups = {n: set(column(s, "group").tolist()) for n, s in splits.items()}
    assert groups["val"] and not groups["train"] & groups["val"]
    assert groups["test"] == {1, 2}  # the official test list: groups 1-7
    assert set(column(splits["val"], "label").tolist()) == {0, 1, 2}  # a group number spans every class


def test_hmdb51_validation_keeps_each_source_video_on_one_side(tmp_path):
    """Defect: val was carved clip by clip, so clips of one source video sat in train and val."""
    splits = splits_of("hmdb51", tmp_path)
    sources = {n: set(column(s, "source_video").tolist()) for n, s in splits.items()}
    assert sources["val"] and not sources["train"] & sources["val"]
    every = set().union(*video.HMDB_SOURCES.values())
    assert set().union(*sources.values()) == every  # the names before _<action>_<tags>_<n>, across classes


def test_hmdb51_source_video_is_the_name_before_action_and_tags():
    from gate.data.loaders.video import hmdb_source_video

    assert hmdb_source_video("April_09_brush_hair_u_nm_np1_ba_goo_0.avi", "brush_hair") == "April_09"
    assert hmdb_source_video("(Rad)Schlag_die_Bank!_cartwheel_f_cm_np1_le_med_0.avi", "cartwheel") == \
        "(Rad)Schlag_die_Bank!"
    assert hmdb_source_video("50_FIRST_DATES_sit_f_cm_np1_fr_med_24.avi", "sit") == "50_FIRST_DATES"
    assert hmdb_source_video("clip_7.avi", "catch") is None


def test_kinetics400_uses_the_official_test_split_and_the_mirrors_replacements(tmp_path):
    """Defect: the official val split was the test split (GATE tests on the labelled official test list) and the
    corrupted train downloads were decoded instead of the mirror's replacements."""
    splits = splits_of("kinetics400", tmp_path)
    with open(tmp_path / "copy/annotations/test.csv", newline="") as fh:
        test_ids = {row["youtube_id"] for row in csv.DictReader(fh)}
    with open(tmp_path / "copy/annotations/val.csv", newline="") as fh:
        val_ids = {row["youtube_id"] for row in csv.DictReader(fh)}
    assert set(column(splits["test"], "youtube_id").tolist()) == test_ids
    assert set(column(splits["val"], "youtube_id").tolist()) == val_ids
    assert len(splits["train"]) == 12  # every train clip, the 3 replaced ones included


# ----------------------------------------------------------------------------------- memory, stamps
def test_preparing_holds_one_clip_of_decoded_frames_not_the_split(tmp_path, monkeypatch):
    """Defect: every clip of a split was decoded into memory before anything was written. Now decoded frames live
    while their clip is encoded: at most one clip's frames are alive at once, whatever the number of clips."""
    from gate.data.loaders import video as loaders

    alive, peak = [0], [0]
    real = loaders.decode_clip

    def gone():
        alive[0] -= 1

    def tracked(*args, **kwargs):
        frames = real(*args, **kwargs)
        for frame in frames:
            weakref.finalize(frame, gone)
        alive[0] += len(frames)
        peak[0] = max(peak[0], alive[0])
        return frames

    monkeypatch.setattr(loaders, "decode_clip", tracked)
    video.ucf101(tmp_path / "copy", scale=2)  # 48 train clips
    ds = load("ucf101", tmp_path / "copy", tmp_path / "cache")
    assert len(ds["train"]) == 48
    assert peak[0] <= 4, f"{peak[0]} decoded frames alive at once (4 per clip)"


def test_streamed_rows_are_written_in_bounded_batches(tmp_path):
    """The writer holds at most ``batch_rows`` rows: the rows before each one produced are already on disk."""
    import datasets
    import pyarrow as pa

    from gate.data.disk_cache import StreamedSplits, write_split

    path = tmp_path / "train.arrow"
    behind = []

    def on_disk() -> int:
        if not path.exists():
            return 0
        rows = 0
        with pa.memory_map(str(path)) as source:
            try:
                reader = pa.ipc.open_stream(source)
                while True:
                    rows += reader.read_next_batch().num_rows
            except (StopIteration, pa.ArrowInvalid):
                pass
        return rows

    def rows():
        for i in range(100):
            behind.append(i - on_disk())  # rows produced but not yet written
            yield {"x": i, "payload": bytes(1000)}

    features = datasets.Features({"x": datasets.Value("int64"), "payload": datasets.Value("binary")})
    assert write_split(path, StreamedSplits(features, {"train": rows}, batch_rows=8), "train") == 100
    assert max(behind) <= 8
    assert datasets.Dataset.from_file(str(path))["x"] == list(range(100))


def test_a_changed_clip_rebuilds_the_cache(tmp_path):
    """Defect: the cache key stamped only the list files, so a re-downloaded clip kept its stale frames."""
    copy = tmp_path / "copy"
    video.ucf101(copy)
    before = load("ucf101", copy, tmp_path / "cache")
    line = (copy / "ucfTrainTestlist/trainlist01.txt").read_text().splitlines()[0].split()[0]
    video.write_video(copy / "UCF-101" / line, n_frames=20, seed=5)  # frame i: brightness 10 * i
    after = load("ucf101", copy, tmp_path / "cache")
    assert len(list((tmp_path / "cache" / "benchmarks").glob("ucf101-*"))) == 2
    first = np.asarray(after["train"].with_format("numpy")[0]["video"])
    assert not np.array_equal(first, np.asarray(before["train"].with_format("numpy")[0]["video"]))
    assert [round(float(f.mean()) / 10) for f in first] == [2, 7, 12, 17]  # centres of 4 segments of 20


def test_kinetics400_too_many_missing_clips_is_one_line(tmp_path):
    video.kinetics400(tmp_path)
    for clip in (tmp_path / "val").glob("*.mp4"):
        clip.unlink()
    with pytest.raises(GateError) as err:
        load("kinetics400", tmp_path)
    assert "3 of 3 listed clips are missing" in _one_line(err)

"""Video benchmarks: HMDB51, UCF101, Kinetics-400 (clips) and iWildCam 2022 (camera-trap sequences), read from
local copies laid out as their official releases.

Every clip becomes ``frames`` frames (the paper's 8), sampled deterministically: the clip is cut into ``frames``
equal segments and the centre frame of each is kept (a clip shorter than ``frames`` repeats frames). Frames are
decoded with PyAV (FFmpeg), resized to ``frame_size`` x ``frame_size`` and stored as JPEG once under
``<cache_dir>/benchmarks/`` (decoding is the cost; later runs memory-map the result). Columns: ``video`` (a list
of ``frames`` images, what :func:`gate.encoders.base.frames_transform` and the temporal adapters read) and the
target: ``label`` (a class id, kind ``clip_label``) or ``count`` (a float, kind ``clip_value``).
The same centre frames serve training and evaluation (no temporal jitter), so every run sees the same clip.
"""

from __future__ import annotations

import csv
import io
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import GateError
from ._dense import bad_copy, cached, file_stamp, require


def segment_centres(length: int, frames: int) -> np.ndarray:
    """Indices of the centre frames of ``frames`` equal segments of a ``length``-frame clip."""
    if length < 1:
        raise ValueError("a clip needs at least one frame")
    return np.minimum(((np.arange(frames) + 0.5) * length / frames).astype(np.int64), length - 1)


def decode_clip(path: str | Path, frames: int = 8, frame_size: int | None = 224, dataset: str = "video") -> list[np.ndarray]:
    """``frames`` RGB frames (H, W, 3 uint8) of the video file at ``path``, the centre frames of equal segments."""
    import av
    from PIL import Image

    try:
        with av.open(str(path)) as container:
            decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    except (av.error.FFmpegError, OSError, IndexError, ValueError) as err:
        raise bad_copy(dataset, path, f"cannot decode the video ({type(err).__name__}: {err})") from err
    if not decoded:
        raise bad_copy(dataset, path, "the video holds no frames")
    picked = [decoded[i] for i in segment_centres(len(decoded), frames)]
    if frame_size:
        picked = [np.asarray(Image.fromarray(f).resize((frame_size, frame_size), Image.BILINEAR)) for f in picked]
    return picked


def _jpeg(frame: np.ndarray) -> dict:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=90)
    return {"bytes": buf.getvalue(), "path": None}


def _clips_dataset(dataset: str, items: Sequence[tuple[list[np.ndarray], object]], target: str, frames: int):
    """[(frames, target)] -> Dataset(video: list of images, target); every clip must hold ``frames`` frames of
    one shape."""
    import datasets

    videos, targets = [], []
    for index, (clip, value) in enumerate(items):
        shapes = {np.shape(f) for f in clip}
        if len(clip) != frames or len(shapes) != 1:
            raise GateError(f"dataset {dataset!r}: clip {index} has {len(clip)} frames of shapes {sorted(shapes)}, "
                            f"expected {frames} frames of one shape; check the source clip or dataset.options.frames")
        videos.append([_jpeg(f) for f in clip])
        targets.append(value)
    value_feature = datasets.Value("float32") if target == "count" else datasets.Value("int64")
    features = datasets.Features({"video": datasets.Sequence(datasets.Image()), target: value_feature})
    return datasets.Dataset.from_dict({"video": videos, target: targets}, features=features)


def _clip_splits(dataset: str, lists: dict[str, list[tuple[Path, int]]], frames: int, frame_size: int | None,
                 cache_dir, params: dict, stamp_files: list[Path]):
    import datasets

    def build():
        out = {}
        for split, clips in lists.items():
            if not clips:
                raise bad_copy(dataset, split, "the split lists no clips")
            out[split] = _clips_dataset(dataset, [(decode_clip(p, frames, frame_size, dataset), y) for p, y in clips],
                                        "label", frames)
        return datasets.DatasetDict(out)

    return cached(dataset, {**params, "frames": frames, "frame_size": frame_size, "files": file_stamp(stamp_files)},
                  cache_dir, build)


# ------------------------------------------------------------------------------------------- UCF101
def ucf101(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, frames: int = 8,
           frame_size: int | None = 224, split: int = 1):
    """UCF101 (Soomro et al. 2012), official layout: ``UCF-101/<Class>/v_<Class>_gXX_cYY.avi`` and
    ``ucfTrainTestlist/{classInd.txt, trainlist0N.txt, testlist0N.txt}``; official split ``split`` (1)."""
    lists_dir = "ucfTrainTestlist"
    root = require(data_dir, "ucf101", ["UCF-101", f"{lists_dir}/classInd.txt", f"{lists_dir}/trainlist0{split}.txt",
                                        f"{lists_dir}/testlist0{split}.txt"], source)
    classes = {}
    for line in (root / lists_dir / "classInd.txt").read_text().split("\n"):
        if line.strip():
            number, name = line.split()
            classes[name] = int(number) - 1
    lists = {}
    for ours, name in (("train", f"trainlist0{split}.txt"), ("test", f"testlist0{split}.txt")):
        clips = []
        for line in (root / lists_dir / name).read_text().split("\n"):
            if not line.strip():
                continue
            relative = line.split()[0]
            label = relative.split("/")[0]
            if label not in classes:
                raise bad_copy("ucf101", root / lists_dir / name, f"class {label!r} is not in classInd.txt")
            path = root / "UCF-101" / relative
            if not path.is_file():
                raise bad_copy("ucf101", path, f"missing (listed in {name})")
            clips.append((path, classes[label]))
        lists[ours] = clips
    return _clip_splits("ucf101", lists, frames, frame_size, cache_dir, {"split": split},
                        sorted((root / lists_dir).glob("*.txt")))


# ------------------------------------------------------------------------------------------- HMDB51
def hmdb51(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, frames: int = 8,
           frame_size: int | None = 224, split: int = 1):
    """HMDB51 (Kuehne et al. 2011), official layout: ``hmdb51_org/<class>/<clip>.avi`` (hmdb51_org.rar and its
    per-class archives extracted) and ``testTrainMulti_7030_splits/<class>_test_split<N>.txt`` (lines
    ``<clip>.avi <0|1|2>``: 1 train, 2 test, 0 unused); classes in sorted order; official split ``split`` (1)."""
    splits_dir = "testTrainMulti_7030_splits"
    root = require(data_dir, "hmdb51", ["hmdb51_org", splits_dir], source)
    files = sorted((root / splits_dir).glob(f"*_test_split{split}.txt"))
    if not files:
        raise bad_copy("hmdb51", root / splits_dir, f"no *_test_split{split}.txt files")
    names = [f.name[: -len(f"_test_split{split}.txt")] for f in files]
    lists = {"train": [], "test": []}
    for label, (name, listing) in enumerate(zip(names, files)):
        for line in listing.read_text().split("\n"):
            parts = line.split()
            if len(parts) != 2 or parts[1] == "0":
                continue
            path = root / "hmdb51_org" / name / parts[0]
            if not path.is_file():
                raise bad_copy("hmdb51", path, f"missing (listed in {listing.name})")
            lists["train" if parts[1] == "1" else "test"].append((path, label))
    return _clip_splits("hmdb51", lists, frames, frame_size, cache_dir, {"split": split}, files)


# -------------------------------------------------------------------------------------- Kinetics-400
def kinetics400(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, frames: int = 8,
                frame_size: int | None = 224, split_map=None, class_names: Sequence[str] | None = None,
                max_missing_fraction: float = 0.1):
    """Kinetics-400 (Kay et al. 2017), the CVDF mirror's layout: ``annotations/{train,val}.csv`` (columns
    ``label, youtube_id, time_start, time_end, split``) and ``<split>/<youtube_id>_<start:06d>_<end:06d>.mp4``.
    Classes: ``class_names`` or the sorted labels of the train CSV. Clips deleted from YouTube are missing from
    every copy: they are skipped with a warning naming the count, and more than ``max_missing_fraction`` of a
    split missing is an error (a broken copy)."""
    split_map = dict(split_map or {"train": "train", "val": "val"})
    root = require(data_dir, "kinetics400", [f"annotations/{s}.csv" for s in split_map] + list(split_map), source)
    rows = {}
    for source in split_map:
        with open(root / "annotations" / f"{source}.csv", newline="") as fh:
            reader = csv.DictReader(fh)
            missing = {"label", "youtube_id", "time_start", "time_end"} - set(reader.fieldnames or [])
            if missing:
                raise bad_copy("kinetics400", root / "annotations" / f"{source}.csv", f"no column(s) {sorted(missing)}")
            rows[source] = list(reader)
    first = next(iter(split_map))
    names = list(class_names) if class_names else sorted({r["label"] for r in rows[first]})
    index = {n: i for i, n in enumerate(names)}
    lists = {}
    for source, ours in split_map.items():
        clips, absent = [], 0
        for r in rows[source]:
            path = root / source / f"{r['youtube_id']}_{int(float(r['time_start'])):06d}_{int(float(r['time_end'])):06d}.mp4"
            if r["label"] not in index:
                raise bad_copy("kinetics400", root / "annotations" / f"{source}.csv", f"label {r['label']!r} is not a "
                               f"class of the train CSV")
            if not path.is_file():
                absent += 1
                continue
            clips.append((path, index[r["label"]]))
        if absent:
            if absent > max_missing_fraction * len(rows[source]):
                raise bad_copy("kinetics400", root / source, f"{absent} of {len(rows[source])} listed clips are missing")
            warnings.warn(f"kinetics400: {absent} of {len(rows[source])} {source} clips are missing and skipped",
                          stacklevel=2)
        lists[ours] = clips
    return _clip_splits("kinetics400", lists, frames, frame_size, cache_dir, {"split_map": split_map},
                        [root / "annotations" / f"{s}.csv" for s in split_map])


# ------------------------------------------------------------------------------------ iWildCam 2022
def iwildcam(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, frames: int = 8,
             frame_size: int | None = 224, confidence: float = 0.8, max_sequences: int | None = None):
    """iWildCam 2022 (Beery et al.), the Kaggle competition's layout: ``train/<file_name>`` images,
    ``metadata/iwildcam2022_train_annotations.json`` (``images`` with ``id, file_name, seq_id, seq_num_frames,
    frame_num``) and ``metadata/iwildcam2022_mdv4_detections.json`` (MegaDetector v4: ``images`` with ``id``
    and ``detections`` of ``category`` ("1" = animal) and ``conf``). A sequence is a clip of its frames in
    ``frame_num`` order; its target ``count`` is the largest number of animal detections with confidence >=
    ``confidence`` in any of its frames (the competition's counting rule; its test counts are hidden, so train
    counts are the labels). The competition has one labelled pool: val and test come from ``dataset.splits``."""
    import datasets
    from PIL import Image

    names = ("metadata/iwildcam2022_train_annotations.json", "metadata/iwildcam2022_mdv4_detections.json")
    root = require(data_dir, "iwildcam", ["train", *names], source)
    try:
        meta = json.loads((root / names[0]).read_text())
        detections = json.loads((root / names[1]).read_text())
        images, detected = meta["images"], detections["images"]
    except (ValueError, KeyError) as err:
        raise bad_copy("iwildcam", root / "metadata", f"unreadable annotations ({type(err).__name__}: {err})") from err
    counts = {d["id"]: sum(1 for x in d.get("detections", []) if str(x.get("category")) == "1"
                           and float(x.get("conf", 0)) >= confidence) for d in detected}
    sequences: dict[str, list[dict]] = {}
    for image in images:
        sequences.setdefault(image["seq_id"], []).append(image)
    order = sorted(sequences)[: max_sequences or None]

    def build():
        items = []
        for seq in order:
            members = sorted(sequences[seq], key=lambda m: int(m["frame_num"]))
            declared = int(members[0].get("seq_num_frames", len(members)))
            if declared != len(members):
                raise bad_copy("iwildcam", root / names[0], f"sequence {seq} declares {declared} frames but lists "
                               f"{len(members)}", "use the complete annotation file")
            pictures = []
            for m in members:
                path = root / "train" / m["file_name"]
                if not path.is_file():
                    raise bad_copy("iwildcam", path, f"missing (frame {m['frame_num']} of sequence {seq})")
                with Image.open(path) as img:
                    pictures.append(np.asarray(img.convert("RGB").resize((frame_size, frame_size), Image.BILINEAR)
                                               if frame_size else img.convert("RGB")))
            clip = [pictures[i] for i in segment_centres(len(pictures), frames)]
            items.append((clip, float(max(counts.get(m["id"], 0) for m in members))))
        return datasets.DatasetDict({"train": _clips_dataset("iwildcam", items, "count", frames)})

    return cached("iwildcam", {"files": file_stamp([root / n for n in names]), "frames": frames,
                               "frame_size": frame_size, "confidence": confidence, "max_sequences": max_sequences},
                  cache_dir, build)

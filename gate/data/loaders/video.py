"""Video benchmarks: HMDB51, UCF101, Kinetics-400 (clips) and iWildCam 2022 (camera-trap sequences), read from
local copies laid out as their official releases.

Every clip becomes ``frames`` frames. A video file gives the centre frames of ``frames`` equal segments (a clip
shorter than ``frames`` repeats frames), decoded with PyAV (FFmpeg); an iWildCam sequence gives its images in
order, padded with black frames to ``frames`` (GATE's loader: up to 10 frames, zero padded), or the centre frames
of equal segments (``sampling: segments``). Frames are resized to ``frame_size`` x ``frame_size`` and stored as
JPEG once under ``<cache_dir>/benchmarks/``. Columns: ``video`` (a list of ``frames`` images, what
:func:`gate.encoders.base.frames_transform` and the temporal adapters read), the target (``label``, a class id,
kind ``clip_label``; or ``count``, a float, kind ``clip_value``) and the columns a split is grouped by
(``group`` for UCF101, ``source_video`` for HMDB51, ``youtube_id`` for Kinetics, ``seq_id`` and ``location`` for
iWildCam). The same frames serve training and evaluation (no temporal jitter), so every run sees the same clip.

Preparing is streamed: clips are decoded one at a time and written ``BATCH_ROWS`` rows at a time
(:class:`gate.data.disk_cache.StreamedSplits`), so memory holds one batch, never a split. The cache key stamps
every file read (lists, annotations and every clip or image: name, size, mtime), so a changed clip is rebuilt.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gate.stacks import require as require_stack

from ...errors import GateError
from ..disk_cache import StreamedSplits
from ._dense import bad_copy, cached, file_stamp, require

#: Rows written per Arrow record batch while preparing: what memory holds at once (8 JPEG frames of 224 px,
#: ~120 KB a clip, ~8 MB a batch).
BATCH_ROWS = 64

#: One row to derive: (the clip's source: a video file or the ordered images of a sequence, target, extra columns).
ClipRef = tuple[Path | tuple[Path, ...], int | float, dict[str, Any]]


# ------------------------------------------------------------------------------------------- frames
def segment_centres(length: int, frames: int) -> np.ndarray:
    """Indices of the centre frames of ``frames`` equal segments of a ``length``-frame clip."""
    if length < 1:
        raise ValueError("a clip needs at least one frame")
    return np.minimum(((np.arange(frames) + 0.5) * length / frames).astype(np.int64), length - 1)


def _resized(frame: np.ndarray, frame_size: int | None) -> np.ndarray:
    from PIL import Image

    if not frame_size:
        return frame
    return np.asarray(Image.fromarray(frame).resize((frame_size, frame_size), Image.BILINEAR))


def _pick_frames(path: Path, length: int, frames: int, frame_size: int | None) -> tuple[list[np.ndarray], int]:
    """One decoding pass over the video at ``path`` keeping only the frames :func:`segment_centres` picks for a
    clip of ``length`` frames (none when ``length`` is 0); returns (those frames in order, the frames decoded)."""
    import av

    wanted = segment_centres(length, frames) if length > 0 else np.zeros(0, np.int64)
    keep = set(wanted.tolist())
    kept: dict[int, np.ndarray] = {}
    count = 0
    with av.open(str(path)) as container:
        for index, frame in enumerate(container.decode(video=0)):
            if index in keep:
                kept[index] = _resized(frame.to_ndarray(format="rgb24"), frame_size)
            count = index + 1
    return [kept[i] for i in wanted.tolist() if i in kept], count


def decode_clip(path: str | Path, frames: int = 8, frame_size: int | None = 224, dataset: str = "video") -> list[np.ndarray]:
    """``frames`` RGB frames (H, W, 3 uint8) of the video file at ``path``, the centre frames of equal segments.

    Only the picked frames are kept while decoding (a 10 s HD clip decoded whole is ~1 GB): the container's frame
    count is the first guess of the clip length; when the decoded count differs (or the container has none), a
    second pass picks the frames of the true length. The frames are those of decoding the whole clip either way."""
    require_stack("video")
    import av

    path = Path(path)
    try:
        with av.open(str(path)) as container:
            hint = int(container.streams.video[0].frames or 0) if container.streams.video else 0
        picked, length = _pick_frames(path, hint, frames, frame_size)
        if length != hint and length > 0:
            picked, length = _pick_frames(path, length, frames, frame_size)
    except (av.error.FFmpegError, OSError, IndexError, ValueError) as err:
        raise bad_copy(dataset, path, f"cannot decode the video ({type(err).__name__}: {err})") from err
    if length < 1:
        raise bad_copy(dataset, path, "the video holds no frames")
    return picked


def sequence_frames(paths: Sequence[Path], frames: int, frame_size: int | None, sampling: str = "pad",
                    dataset: str = "iwildcam") -> list[np.ndarray]:
    """``frames`` RGB frames of an image sequence (``paths`` in frame order). ``sampling="pad"``: every image in
    order, then black frames up to ``frames`` (GATE's iWildCam loader: its clips are up to 10 frames, zero padded);
    a sequence longer than ``frames`` gives the centre frames of equal segments. ``sampling="segments"``: the
    centre frames of equal segments (short sequences repeat frames)."""
    from PIL import Image

    if sampling not in ("pad", "segments"):
        raise GateError(f"dataset {dataset!r}: sampling={sampling!r} is not one of ['pad', 'segments']")
    if not paths:
        raise ValueError("a sequence needs at least one image")
    if sampling == "pad" and len(paths) <= frames:
        chosen = list(range(len(paths)))
    else:
        chosen = segment_centres(len(paths), frames).tolist()
    decoded: dict[int, np.ndarray] = {}
    for i in dict.fromkeys(chosen):
        try:
            with Image.open(paths[i]) as img:
                decoded[i] = _resized(np.asarray(img.convert("RGB")), frame_size)
        except OSError as err:
            raise bad_copy(dataset, paths[i], f"cannot read the image ({type(err).__name__}: {err})") from err
    out = [decoded[i] for i in chosen]
    if len(out) < frames:  # black frames after the sequence: GATE's zero padding
        out += [np.zeros_like(out[0])] * (frames - len(out))
    return out


def _jpeg(frame: np.ndarray) -> dict:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=90)
    return {"bytes": buf.getvalue(), "path": None}


def clip_row(dataset: str, where: object, clip: Sequence[np.ndarray], frames: int) -> list[dict]:
    """A clip's frames as the ``video`` column's JPEG images; every clip must hold ``frames`` frames of one shape."""
    shapes = {np.shape(f) for f in clip}
    if len(clip) != frames or len(shapes) != 1:
        raise GateError(f"dataset {dataset!r}: clip {where} has {len(clip)} frames of shapes {sorted(shapes)}, "
                        f"expected {frames} frames of one shape; check the source clip or dataset.options.frames")
    return [_jpeg(f) for f in clip]


# ---------------------------------------------------------------------------------------- streaming
def _stamp(paths: Iterable[Path]) -> dict[str, Any]:
    """A digest of (name, size, mtime) of every file a build reads (thousands of clips: the key holds the digest)."""
    stamps = file_stamp(paths)
    return {"count": len(stamps), "sha256": hashlib.sha256(json.dumps(stamps).encode()).hexdigest()}


def _features(target: str, extra: Mapping[str, str]):
    import datasets

    value = datasets.Value("float32") if target == "count" else datasets.Value("int64")
    return datasets.Features({"video": datasets.Sequence(datasets.Image()), target: value,
                              **{name: datasets.Value(dtype) for name, dtype in extra.items()}})


def _streamed(dataset: str, splits: Mapping[str, list[ClipRef]], target: str, frames: int,
              read: Callable[[Path | tuple[Path, ...]], list[np.ndarray] | None], extra: Mapping[str, str],
              allowed_skips: Mapping[str, int] | None = None) -> StreamedSplits:
    """The splits as rows decoded one clip at a time. ``read`` returns a clip's frames, or None for a clip to skip
    (Kinetics: an undecodable download); more than ``allowed_skips[split]`` skipped clips is an error."""
    for split, refs in splits.items():
        if not refs:
            raise bad_copy(dataset, split, "the split lists no clips")

    def rows_of(split: str):
        def rows():
            skipped = []
            for index, (src, value, columns) in enumerate(splits[split]):
                clip = read(src)
                if clip is None:
                    skipped.append(src)
                    if len(skipped) > (allowed_skips or {}).get(split, 0):
                        raise bad_copy(dataset, src, f"cannot be decoded, and {len(skipped)} {split} clips were "
                                       "skipped so far, more than dataset.builder.max_missing_fraction allows")
                    continue
                row = {"video": clip_row(dataset, f"{index} of {split} ({_name(src)})", clip, frames), target: value,
                       **columns}
                del clip  # the decoded frames go now, before the next clip is decoded: one clip's frames at a time
                yield row
            if skipped:
                warnings.warn(f"{dataset}: {len(skipped)} {split} clips cannot be decoded and were skipped "
                              f"(first: {_name(skipped[0])})", stacklevel=2)
        return rows

    return StreamedSplits(_features(target, extra), {split: rows_of(split) for split in splits}, BATCH_ROWS)


def _name(src: Path | tuple[Path, ...]) -> str:
    return src.name if isinstance(src, Path) else f"{src[0].name} +{len(src) - 1}"


def _video_splits(dataset: str, splits: Mapping[str, list[ClipRef]], frames: int, frame_size: int | None,
                  cache_dir, params: dict, listed: list[Path], extra: Mapping[str, str],
                  skip_undecodable: bool = False, allowed_skips: Mapping[str, int] | None = None):
    """Clips of video files, prepared once (streamed) and cached; the key stamps the lists and every clip."""

    def read(path):
        try:
            return decode_clip(path, frames, frame_size, dataset)
        except GateError:
            if skip_undecodable:
                return None
            raise

    def build():
        return _streamed(dataset, splits, "label", frames, read, extra, allowed_skips)

    clips = [src for refs in splits.values() for src, _, _ in refs]
    return cached(dataset, {**params, "frames": frames, "frame_size": frame_size,
                            "files": _stamp([*listed, *clips])}, cache_dir, build)


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------- UCF101
UCF_NAME = re.compile(r"^v_(?P<action>.+)_g(?P<group>\d+)_c(?P<clip>\d+)\.avi$")


def ucf101(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, frames: int = 8,
           frame_size: int | None = 224, split: int = 1):
    """UCF101 (Soomro et al. 2012), official layout: ``UCF-101/<Class>/v_<Class>_gXX_cYY.avi`` and
    ``ucfTrainTestlist/{classInd.txt, trainlist0N.txt, testlist0N.txt}``; official split ``split`` (1).

    Column ``group``: the clip's group number ``XX``. The 25 groups of a class are clips cut from one longer video
    (similar background and viewpoint); the official lists split by group number for every class at once (split 1
    tests on groups 1-7), so the number is the unit a validation split must keep whole (``splits.group_column``)."""
    lists_dir = "ucfTrainTestlist"
    names = ("classInd.txt", f"trainlist0{split}.txt", f"testlist0{split}.txt")
    root = require(data_dir, "ucf101", ["UCF-101", *(f"{lists_dir}/{n}" for n in names)], source)
    classes = {}
    for line in _lines(root / lists_dir / "classInd.txt"):
        parts = line.split()
        if len(parts) != 2 or not parts[0].isdigit():
            raise bad_copy("ucf101", root / lists_dir / "classInd.txt", f"line {line!r} is not '<number> <Class>'")
        classes[parts[1]] = int(parts[0]) - 1
    lists = {}
    for ours, name in (("train", names[1]), ("test", names[2])):
        listing = root / lists_dir / name
        refs = []
        for line in _lines(listing):
            parts = line.split()
            relative = parts[0]
            label, _, file = relative.partition("/")
            if label not in classes:
                raise bad_copy("ucf101", listing, f"class {label!r} of {relative!r} is not in classInd.txt")
            if len(parts) > 1 and parts[1] != str(classes[label] + 1):
                raise bad_copy("ucf101", listing, f"{relative!r} is labelled {parts[1]}, classInd.txt says "
                               f"{classes[label] + 1}")
            match = UCF_NAME.match(file)
            if not match:
                raise bad_copy("ucf101", listing, f"{relative!r} is not named v_<Class>_gXX_cYY.avi")
            path = root / "UCF-101" / relative
            if not path.is_file():
                raise bad_copy("ucf101", path, f"missing (listed in {name})")
            refs.append((path, classes[label], {"group": int(match["group"])}))
        lists[ours] = refs
    return _video_splits("ucf101", lists, frames, frame_size, cache_dir, {"split": split},
                         [root / lists_dir / n for n in names], {"group": "int64"})


# ------------------------------------------------------------------------------------------- HMDB51
#: The meta tags ending every HMDB51 clip name (Kuehne et al. 2011): visible body parts, camera motion, number of
#: people, viewpoint, quality, then the clip's number within its source video.
HMDB_TAGS = re.compile(r"_[a-z]_(?:cm|nm)_np\d+_[a-z]{2}_[a-z]{3}_\d+$")


def hmdb_source_video(clip: str, action: str) -> str | None:
    """The source video of an HMDB51 clip named ``<source video>_<action>_<tags>_<n>.avi``, or None when the name
    does not end with the meta tags."""
    stem = clip[:-4] if clip.endswith(".avi") else clip
    found = HMDB_TAGS.search(stem)
    if not found or found.start() == 0:
        return None
    head = stem[: found.start()]
    return head[: -len(action) - 1] if head.endswith(f"_{action}") and len(head) > len(action) + 1 else head


def hmdb51(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, frames: int = 8,
           frame_size: int | None = 224, split: int = 1):
    """HMDB51 (Kuehne et al. 2011), official layout: ``hmdb51_org/<class>/<clip>.avi`` (hmdb51_org.rar and its
    per-class archives extracted) and ``testTrainMulti_7030_splits/<class>_test_split<N>.txt`` (lines
    ``<clip>.avi <0|1|2>``: 1 train, 2 test, 0 unused); classes in sorted order; official split ``split`` (1).

    Column ``source_video``: the film or web video a clip was cut from (its name before ``_<action>_<tags>_<n>``);
    clips of one source video share actors and scenes, across actions too, so a validation split keeps each source
    video whole (``splits.group_column``). A clip whose name lacks the tags is its own group (with a warning)."""
    splits_dir = "testTrainMulti_7030_splits"
    root = require(data_dir, "hmdb51", ["hmdb51_org", splits_dir], source)
    files = sorted((root / splits_dir).glob(f"*_test_split{split}.txt"))
    if not files:
        raise bad_copy("hmdb51", root / splits_dir, f"no *_test_split{split}.txt files")
    names = [f.name[: -len(f"_test_split{split}.txt")] for f in files]
    lists: dict[str, list[ClipRef]] = {"train": [], "test": []}
    untagged = []
    for label, (name, listing) in enumerate(zip(names, files)):
        for line in _lines(listing):
            parts = line.split()
            if len(parts) != 2 or parts[1] not in ("0", "1", "2"):
                raise bad_copy("hmdb51", listing, f"line {line!r} is not '<clip>.avi <0|1|2>'")
            if parts[1] == "0":
                continue
            path = root / "hmdb51_org" / name / parts[0]
            if not path.is_file():
                raise bad_copy("hmdb51", path, f"missing (listed in {listing.name})")
            group = hmdb_source_video(parts[0], name)
            if group is None:
                untagged.append(parts[0])
            lists["train" if parts[1] == "1" else "test"].append((path, label, {"source_video": group or parts[0]}))
    if untagged:
        warnings.warn(f"hmdb51: {len(untagged)} clip names do not end with the meta tags _<body>_<cm|nm>_np<N>_<view>_"
                      f"<quality>_<n>.avi (first: {untagged[0]}); each is its own source-video group", stacklevel=2)
    return _video_splits("hmdb51", lists, frames, frame_size, cache_dir, {"split": split}, files,
                         {"source_video": "string"})


# -------------------------------------------------------------------------------------- Kinetics-400
KINETICS_REPLACEMENTS = "replacement/replacement_for_corrupted_k400"


def _kinetics_name(folder: Path, row: Mapping[str, str]) -> Path | None:
    """``<youtube_id>_<start:06d>_<end:06d>.mp4``, the mirror's file name, when the row's times are numbers."""
    try:
        start, end = int(float(row.get("time_start") or "")), int(float(row.get("time_end") or ""))
    except ValueError:
        return None
    return folder / f"{row['youtube_id']}_{start:06d}_{end:06d}.mp4"


def kinetics400(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, frames: int = 8,
                frame_size: int | None = 224, split_map=None, class_names: Sequence[str] | None = None,
                max_missing_fraction: float = 0.1):
    """Kinetics-400 (Kay et al. 2017), the CVDF mirror's layout (k400_downloader.sh / k400_extractor.sh):
    ``annotations/{train,val,test}.csv`` (columns ``label, youtube_id[, time_start, time_end, ...]``; the test
    CSV is labelled) and ``<split>/<youtube_id>_<start:06d>_<end:06d>.mp4`` (else the split folder's one file
    whose name starts with the youtube id, as the mirror's scripts match them), with the mirror's replacements for
    ~1,400 corrupted train clips in ``replacement/replacement_for_corrupted_k400/`` used in their place (matched by
    youtube id, as the mirror's arrange_by_classes.py does). ``split_map``: CSV split -> our split (default: all
    three official splits, as GATE's loader). Classes: ``class_names`` or the sorted labels of the first CSV.
    Clips deleted from YouTube are missing from every copy, and some downloads cannot be decoded: both are skipped
    with a warning naming the count; more than ``max_missing_fraction`` of a split skipped is an error."""
    split_map = dict(split_map or {"train": "train", "val": "val", "test": "test"})
    root = require(data_dir, "kinetics400", [f"annotations/{s}.csv" for s in split_map] + list(split_map), source)
    rows = {}
    for csv_split in split_map:
        path = root / "annotations" / f"{csv_split}.csv"
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = {"label", "youtube_id"} - set(reader.fieldnames or [])
            if missing:
                raise bad_copy("kinetics400", path, f"no column(s) {sorted(missing)} (columns: {reader.fieldnames})")
            rows[csv_split] = list(reader)
    first = next(iter(split_map))
    names = list(class_names) if class_names else sorted({r["label"] for r in rows[first]})
    index = {n: i for i, n in enumerate(names)}
    replacements = {p.stem[:11]: p for p in sorted((root / KINETICS_REPLACEMENTS).glob("*.mp4"))}
    lists, allowed, listed = {}, {}, [root / "annotations" / f"{s}.csv" for s in split_map]
    for csv_split, ours in split_map.items():
        by_id: dict[str, Path] | None = None  # the split folder indexed by youtube id, built on the first miss
        refs, absent = [], 0
        for line, r in enumerate(rows[csv_split], start=2):
            if r["label"] not in index:
                raise bad_copy("kinetics400", root / "annotations" / f"{csv_split}.csv", f"line {line}: label "
                               f"{r['label']!r} is not a class of the {first} CSV")
            yid = r["youtube_id"]
            path = replacements.get(yid) or _kinetics_name(root / csv_split, r)
            if path is None or not path.is_file():
                if by_id is None:
                    by_id = {p.stem[:11]: p for p in sorted((root / csv_split).glob("*.mp4"))}
                path = by_id.get(yid)
            if path is None:
                absent += 1
                continue
            refs.append((path, index[r["label"]], {"youtube_id": yid}))
        allowed[ours] = int(max_missing_fraction * len(rows[csv_split])) - absent
        if allowed[ours] < 0:
            raise bad_copy("kinetics400", root / csv_split, f"{absent} of {len(rows[csv_split])} listed clips are "
                           f"missing (more than max_missing_fraction={max_missing_fraction})")
        if absent:
            warnings.warn(f"kinetics400: {absent} of {len(rows[csv_split])} {csv_split} clips are missing and skipped",
                          stacklevel=2)
        lists[ours] = refs
    del rows  # ~300k CSV records: the clip list is all preparing needs
    return _video_splits("kinetics400", lists, frames, frame_size, cache_dir,
                         {"split_map": split_map, "class_names": names, "max_missing_fraction": max_missing_fraction},
                         listed, {"youtube_id": "string"}, skip_undecodable=True, allowed_skips=allowed)


# ------------------------------------------------------------------------------------ iWildCam 2022
IWILDCAM_FILES = ("iwildcam2022_train_annotations.json", "train_sequence_counts.csv")


def _iwildcam_folders(root: Path) -> tuple[Path, Path]:
    """The metadata and train image folders: the Kaggle archive nests them (``metadata/metadata/``,
    ``train/train/``, as GATE's loader reads them); LILA's zips do not (``metadata/``, ``train/``)."""
    def pick(name: str) -> Path:  # the nested folder unless only the flat one is there (a missing one: nested)
        nested, flat = root / name / name, root / name
        return flat if not nested.is_dir() and flat.is_dir() and any(flat.glob("*.*")) else nested

    return pick("metadata"), pick("train")


def _key(path: Path, record: Any, key: str, what: str):
    if not isinstance(record, Mapping) or key not in record:
        keys = sorted(record)[:12] if isinstance(record, Mapping) else type(record).__name__
        raise bad_copy("iwildcam", path, f"{what} has no key {key!r} (it has {keys})",
                       "use the competition's own file (kaggle competitions download -c iwildcam2022-fgvc9)")
    return record[key]


def _int(path: Path, value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as err:
        raise bad_copy("iwildcam", path, f"{what} is {value!r}, not an integer") from err


def _sequence_counts(path: Path) -> dict[str, float]:
    """``train_sequence_counts.csv``: columns ``seq_id, count``, the human count of each annotated sequence."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"seq_id", "count"} - set(reader.fieldnames or [])
        if missing:
            raise bad_copy("iwildcam", path, f"no column(s) {sorted(missing)} (columns: {reader.fieldnames})")
        counts = {}
        for line, row in enumerate(reader, start=2):
            try:
                value = float(row["count"])
            except (TypeError, ValueError):
                value = float("nan")
            if not math.isfinite(value) or value < 0:
                raise bad_copy("iwildcam", path, f"line {line}: count {row['count']!r} is not a count")
            if row["seq_id"] in counts:
                raise bad_copy("iwildcam", path, f"line {line}: sequence {row['seq_id']} is counted twice")
            counts[row["seq_id"]] = value
    if not counts:
        raise bad_copy("iwildcam", path, "no counted sequences")
    return counts


def iwildcam(data_dir: str, source: Mapping[str, Any], cache_dir: str | None = None, frames: int = 10,
             frame_size: int | None = 224, sampling: str = "pad", split_lists: str | None = None):
    """iWildCam 2022 (Beery et al., FGVC9), the Kaggle competition's files: ``train/train/<file_name>`` images and
    ``metadata/metadata/{iwildcam2022_train_annotations.json, train_sequence_counts.csv}`` (LILA's unnested
    ``train/``, ``metadata/`` also read). The task is GATE's: regress the **human count** of
    ``train_sequence_counts.csv`` (columns ``seq_id, count``: 1,780 of the 36,292 train sequences are counted;
    the competition's test counts are hidden) from the sequence's images, ordered by ``seq_frame_num`` (the
    annotation's ``images`` carry ``id, file_name, seq_id, seq_num_frames, seq_frame_num, location, ...``).
    Frames: :func:`sequence_frames` (``sampling``). Columns: ``video``, ``count``, ``seq_id``, ``location``.

    Splits: one labelled pool (``train``), carved by the split manifest, unless ``split_lists`` names a folder of
    ``{train,val,test}.txt`` sequence-id lists under ``data_dir`` (GATE's published split,
    ``kiyoonkim/iwildcam-2022-splits``), which are then used as they are."""
    from ..hub import how_to_get

    if sampling not in ("pad", "segments"):
        raise GateError(f"dataset 'iwildcam': dataset.builder.sampling={sampling!r} is not one of ['pad', 'segments']")
    root = require(data_dir, "iwildcam", [], source)
    meta_dir, image_dir = _iwildcam_folders(root)
    missing = [p for p in (*(meta_dir / n for n in IWILDCAM_FILES), image_dir) if not p.exists()]
    if missing:  # one line: the first missing path, then how to get the copy
        require(data_dir, "iwildcam", [str(missing[0].relative_to(root))], source)
    annotations_file, counts_file = (meta_dir / n for n in IWILDCAM_FILES)
    counts = _sequence_counts(counts_file)
    try:
        meta = json.loads(annotations_file.read_text())
    except (OSError, ValueError) as err:
        raise bad_copy("iwildcam", annotations_file, f"unreadable JSON ({type(err).__name__}: {err})") from err
    images = _key(annotations_file, meta, "images", "the annotation file")
    members: dict[str, list[tuple[int, str, dict]]] = {}
    for number, image in enumerate(images):
        seq = _key(annotations_file, image, "seq_id", f"image {number}")
        if seq in counts:
            order = _key(annotations_file, image, "seq_frame_num", f"image {number} (sequence {seq})")
            name = _key(annotations_file, image, "file_name", f"image {number} (sequence {seq})")
            _key(annotations_file, image, "location", f"image {number} (sequence {seq})")
            members.setdefault(seq, []).append((_int(annotations_file, order, f"seq_frame_num of image {number}"),
                                                name, image))
    del meta, images  # ~200k image records: only the counted sequences' stay while preparing
    lost = sorted(set(counts) - set(members))
    if lost:
        raise bad_copy("iwildcam", counts_file, f"{len(lost)} counted sequences have no image in "
                       f"{annotations_file.name} (first: {lost[0]})", "use files of one download")
    refs: dict[str, ClipRef] = {}
    for seq in sorted(members):
        frames_of = sorted(members[seq], key=lambda m: m[0])
        numbers = [m[0] for m in frames_of]
        if len(set(numbers)) != len(numbers):
            raise bad_copy("iwildcam", annotations_file, f"sequence {seq} lists seq_frame_num {numbers} (repeated)")
        declared = frames_of[0][2].get("seq_num_frames")
        if declared is not None and _int(annotations_file, declared, f"seq_num_frames of {seq}") != len(frames_of):
            raise bad_copy("iwildcam", annotations_file, f"sequence {seq} declares {declared} frames but lists "
                           f"{len(frames_of)}", "use the complete annotation file")
        paths = tuple(image_dir / name for _, name, _ in frames_of)
        for path, number in zip(paths, numbers):
            if not path.is_file():
                raise bad_copy("iwildcam", path, f"missing (frame {number} of sequence {seq})")
        location = _int(annotations_file, frames_of[0][2]["location"], f"location of sequence {seq}")
        refs[seq] = (paths, counts[seq], {"seq_id": seq, "location": location})
    listed = [annotations_file, counts_file]
    if split_lists:
        folder = root / split_lists
        splits = {}
        for name in ("train", "val", "test"):
            path = folder / f"{name}.txt"
            if not path.is_file():
                raise GateError(f"dataset 'iwildcam': no split list {path} (dataset.builder.split_lists="
                                f"{split_lists!r}); get GATE's lists with `huggingface-cli download --repo-type dataset "
                                f"kiyoonkim/iwildcam-2022-splits --local-dir {folder}`, or set split_lists=null to "
                                f"carve the split; {how_to_get('iwildcam', source, root)}")
            ids = _lines(path)
            unknown = [s for s in ids if s not in refs]
            if unknown:
                raise bad_copy("iwildcam", path, f"{len(unknown)} sequence ids are not counted sequences of "
                               f"{counts_file.name} (first: {unknown[0]})", "use the lists of this download")
            splits[name] = [refs[s] for s in sorted(set(ids))]
            listed.append(path)
        seen: dict[str, str] = {}
        for name, rows in splits.items():
            for _, _, columns in rows:
                if columns["seq_id"] in seen:
                    raise bad_copy("iwildcam", folder, f"sequence {columns['seq_id']} is in both "
                                   f"{seen[columns['seq_id']]}.txt and {name}.txt")
                seen[columns["seq_id"]] = name
    else:
        splits = {"train": list(refs.values())}

    def build():
        return _streamed("iwildcam", splits, "count", frames,
                         lambda paths: sequence_frames(paths, frames, frame_size, sampling), {"seq_id": "string",
                                                                                              "location": "int64"})

    stamp = _stamp([*listed, *(p for refs_ in splits.values() for paths, _, _ in refs_ for p in paths)])
    return cached("iwildcam", {"files": stamp, "frames": frames, "frame_size": frame_size, "sampling": sampling,
                               "split_lists": split_lists}, cache_dir, build)

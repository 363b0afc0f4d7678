"""Tiny local copies of the video benchmarks: real video containers (written with PyAV) in the official layouts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .segmentation import save

OVERRIDES = {"dataset.options.frames": 4, "dataset.protocol.image_size": 32, "dataset.num_classes": 3}


def write_video(path: Path, n_frames: int = 10, size=(24, 32), codec: str = "mpeg4", seed: int = 0) -> Path:
    """A real video file: ``n_frames`` frames whose mean brightness encodes the frame index (10 * i)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=10)
        stream.height, stream.width = size
        stream.pix_fmt = "yuv420p"
        for i in range(n_frames):
            frame = np.full((*size, 3), 10 * i, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def ucf101(root: Path) -> dict:
    """UCF-101/<Class>/v_<Class>_gXX_cYY.avi + ucfTrainTestlist/{classInd,trainlist01,testlist01}.txt."""
    classes = ["ApplyEyeMakeup", "Basketball", "YoYo"]
    lists = root / "ucfTrainTestlist"
    lists.mkdir(parents=True, exist_ok=True)
    (lists / "classInd.txt").write_text("".join(f"{i} {c}\n" for i, c in enumerate(classes, 1)))
    train, test = [], []
    for k, c in enumerate(classes, 1):
        for g in range(1, 6):
            rel = f"{c}/v_{c}_g{g:02d}_c01.avi"
            write_video(root / "UCF-101" / rel, n_frames=6 + g)
            (test if g == 5 else train).append(rel)
            if g != 5:
                train[-1] = f"{rel} {k}"
    (lists / "trainlist01.txt").write_text("\r\n".join(train) + "\r\n")
    (lists / "testlist01.txt").write_text("\r\n".join(test) + "\r\n")
    return dict(OVERRIDES)


def hmdb51(root: Path) -> dict:
    """hmdb51_org/<class>/<clip>.avi + testTrainMulti_7030_splits/<class>_test_split1.txt (1 train, 2 test, 0)."""
    for c in ("brush_hair", "cartwheel", "catch"):
        lines = []
        for i in range(6):
            name = f"{c}_clip_{i}.avi"
            write_video(root / "hmdb51_org" / c / name, n_frames=5 + i)
            lines.append(f"{name} {2 if i == 5 else 0 if i == 4 else 1} ")
        (root / "testTrainMulti_7030_splits").mkdir(parents=True, exist_ok=True)
        (root / "testTrainMulti_7030_splits" / f"{c}_test_split1.txt").write_text("\n".join(lines) + "\n")
    return dict(OVERRIDES)


def kinetics400(root: Path) -> dict:
    """annotations/{train,val}.csv (label,youtube_id,time_start,time_end,split,is_cc) + <split>/<id>_<s>_<e>.mp4."""
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 4), ("val", 1)):
        rows = ["label,youtube_id,time_start,time_end,split,is_cc"]
        for label in ("abseiling", "air drumming", "archery"):
            for i in range(n):
                yid = f"{label[:3]}{split[:2]}{i:06d}"[:11]
                rows.append(f"{label},{yid},{10 * i},{10 * i + 10},{split},0")
                write_video(root / split / f"{yid}_{10 * i:06d}_{10 * i + 10:06d}.mp4", n_frames=8)
        (root / "annotations" / f"{split}.csv").write_text("\n".join(rows) + "\n")
    return dict(OVERRIDES)


def iwildcam(root: Path) -> dict:
    """train/<file>.jpg + metadata/iwildcam2022_train_annotations.json + iwildcam2022_mdv4_detections.json."""
    rng = np.random.default_rng(8)
    images, detections = [], []
    for s in range(12):
        n = 1 + s % 3
        for f in range(n):
            image_id = f"img{s:03d}_{f}"
            save(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8), root / "train" / f"{image_id}.jpg")
            images.append({"id": image_id, "file_name": f"{image_id}.jpg", "seq_id": f"seq{s:03d}", "seq_num_frames": n,
                           "frame_num": f, "location": s % 4, "width": 32, "height": 24})
            boxes = [{"category": "1", "conf": 0.9, "bbox": [0.1, 0.1, 0.2, 0.2]} for _ in range((s + f) % 4)]
            boxes.append({"category": "2", "conf": 0.95, "bbox": [0.5, 0.5, 0.1, 0.1]})  # a person: not counted
            detections.append({"id": image_id, "max_detection_conf": 0.95, "detections": boxes})
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    (root / "metadata" / "iwildcam2022_train_annotations.json").write_text(json.dumps(
        {"images": images, "annotations": [], "categories": [{"id": 0, "name": "empty"}]}))
    (root / "metadata" / "iwildcam2022_mdv4_detections.json").write_text(json.dumps(
        {"images": detections, "detection_categories": {"1": "animal", "2": "person", "3": "vehicle"}}))
    return {"dataset.options.frames": 4, "dataset.protocol.image_size": 32}


FIXTURES = {"hmdb51": hmdb51, "kinetics400": kinetics400, "ucf101": ucf101, "iwildcam": iwildcam}

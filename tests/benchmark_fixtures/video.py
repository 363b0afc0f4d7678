"""Tiny local copies of the video benchmarks: real video containers (written with PyAV) and JPEG sequences in the
official layouts. Each writer says where its layout, names and columns come from; ``scale`` multiplies the clips
(the memory measurement prepares Kinetics at 10x)."""

from __future__ import annotations

import csv
import json
import uuid
from pathlib import Path

import numpy as np

from .segmentation import save

OVERRIDES = {"dataset.options.frames": 4, "dataset.paper_protocol.image_size": 32, "dataset.num_classes": 3}


def write_video(path: Path, n_frames: int = 10, size=(24, 32), codec: str = "mpeg4", seed: int = 0) -> Path:
    """A real video file: ``n_frames`` frames whose mean brightness encodes the frame index (10 * i); ``seed`` adds
    a little noise so clips differ."""
    import av

    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=10)
        stream.height, stream.width = size
        stream.pix_fmt = "yuv420p"
        for i in range(n_frames):
            frame = np.clip(10 * i + rng.integers(0, 3, (*size, 3)), 0, 255).astype(np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def ucf101(root: Path, scale: int = 1) -> dict:
    """UCF-101/<Class>/v_<Class>_gXX_cYY.avi + ucfTrainTestlist/{classInd,trainlist01,testlist01}.txt.

    Evidence: the UCF101 page (https://www.crcv.ucf.edu/data/UCF101.php, quoted in many repos): "The videos in 101
    action categories are grouped into 25 groups, where each group can consist of 4-7 videos of an action", named
    ``v_<Class>_gXX_cYY.avi`` (e.g. ``v_ApplyEyeMakeup_g01_c01.avi``); classInd.txt lines ``<n> <Class>``,
    trainlist01 lines ``<Class>/<clip> <n>``, testlist01 lines ``<Class>/<clip>``; split 1 tests on groups 1-7 of
    every class and trains on 8-25. Here: test groups 1-2, train groups 8-11 (x ``scale``), 2 clips a group."""
    classes = ["ApplyEyeMakeup", "Basketball", "YoYo"]
    lists = root / "ucfTrainTestlist"
    lists.mkdir(parents=True, exist_ok=True)
    (lists / "classInd.txt").write_text("".join(f"{i} {c}\r\n" for i, c in enumerate(classes, 1)))
    train, test = [], []
    groups = [1, 2, *range(8, 8 + 4 * scale)]
    for k, c in enumerate(classes, 1):
        for g in groups:
            for clip in (1, 2):
                rel = f"{c}/v_{c}_g{g:02d}_c{clip:02d}.avi"
                write_video(root / "UCF-101" / rel, n_frames=6 + g % 5 + clip, seed=k * 1000 + g * 10 + clip)
                (test.append(rel) if g <= 7 else train.append(f"{rel} {k}"))
    (lists / "trainlist01.txt").write_text("\r\n".join(train) + "\r\n")
    (lists / "testlist01.txt").write_text("\r\n".join(test) + "\r\n")
    return dict(OVERRIDES)


#: HMDB51 clip names end with the paper's meta tags: visible body part (f/u/h/l), camera motion (cm/nm), number of
#: people (npN), viewpoint (fr/ba/le/ri), quality (bad/med/goo), then the clip's number within the source video.
HMDB_SOURCES = {
    "brush_hair": ["April_09", "Aussie_Brunette_Brushing_Long_Hair", "Blonde_being_brushed", "Brushing_Hair_with_Beth"],
    "cartwheel": ["(Rad)Schlag_die_Bank!", "Cartwheel_Competition", "Bodenturnen_2004", "50_FIRST_DATES"],
    "catch": ["96-_Torwarttraining_1", "Faith_Rewarded", "Ball_hochwerfen_-_Rolle", "50_FIRST_DATES"],
}


def hmdb51(root: Path, scale: int = 1) -> dict:
    """hmdb51_org/<class>/<clip>.avi + testTrainMulti_7030_splits/<class>_test_split1.txt.

    Evidence: real clip names quoted across repos (``April_09_brush_hair_u_nm_np1_ba_goo_0.avi``,
    ``(Rad)Schlag_die_Bank!_cartwheel_f_cm_np1_le_med_0.avi``, ``96-_Torwarttraining_1_catch_f_cm_np1_le_bad_0.avi``,
    ``50_FIRST_DATES_sit_f_cm_np1_fr_med_24``): ``<source video>_<action>_<meta tags>_<n>.avi``, the tags as in
    Kuehne et al. 2011 (Fig. 2); one film gives clips of several actions (50_FIRST_DATES here in two). The split
    files' format is the split readme's (quoted in repos): ``<clip> <id>``, 1 train, 2 test, 0 unused. Here: per
    class, the first source video's clips test, the others train (x ``scale``), one clip unused."""
    tags = ["u_nm_np1_ba_goo", "f_cm_np1_le_med", "h_nm_np2_fr_bad", "l_cm_np1_ri_goo"]
    splits_dir = root / "testTrainMulti_7030_splits"
    splits_dir.mkdir(parents=True, exist_ok=True)
    for k, (action, sources) in enumerate(HMDB_SOURCES.items()):
        lines = []
        for s, source in enumerate(sources * scale):
            copy = s // len(sources)
            for n in range(2):
                name = f"{source}{'' if copy == 0 else f'_{copy}'}_{action}_{tags[(s + n) % len(tags)]}_{n}.avi"
                write_video(root / "hmdb51_org" / action / name, n_frames=5 + n + s % 3, seed=100 * k + 10 * s + n)
                lines.append(f"{name} {2 if s == 0 else 1} ")
        unused = f"{sources[1]}_{action}_{tags[0]}_9.avi"
        write_video(root / "hmdb51_org" / action / unused, n_frames=5, seed=999 + k)
        lines.append(f"{unused} 0 ")
        (splits_dir / f"{action}_test_split1.txt").write_text("\n".join(lines) + "\n")
    return dict(OVERRIDES)


def kinetics400(root: Path, scale: int = 1) -> dict:
    """annotations/{train,val,test}.csv + {train,val,test}/<youtube_id>_<start:06d>_<end:06d>.mp4 +
    replacement/replacement_for_corrupted_k400/*.mp4.

    Evidence: the CVDF mirror (github.com/cvdfoundation/kinetics-dataset): k400_downloader.sh fetches
    annotations/{train,val,test}.csv and k400_extractor.sh extracts the split tarballs into k400/{train,val,test}/
    and the corrupted-clip replacements into k400/replacement/; its arrange_by_classes.py reads column 0 (label) and
    1 (youtube_id) of every split's CSV, the test split included (38,685 test clips in 400 class folders, GATE's
    gate/data/video/classes.py), strips '"' from labels and matches videos by the first 11 characters of the file
    name (the youtube id), replacements first. CSV header ``label,youtube_id,time_start,time_end,split,is_cc`` (the
    Kinetics-400 CSVs); file names ``<id>_<start:06d>_<end:06d>.mp4`` as in the mirror's tarballs."""
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 4 * scale), ("val", scale), ("test", scale)):
        rows = []
        for c, label in enumerate(("abseiling", "air drumming", "archery")):
            for i in range(n):
                yid = f"{label[:2]}{split[:2]}{c}{i:06d}"[:11].replace(" ", "_")
                rows.append([label, yid, 10 * i, 10 * i + 10, split, 0])
                where = root / split / f"{yid}_{10 * i:06d}_{10 * i + 10:06d}.mp4"
                if split == "train" and i == 0:  # a corrupted download: the mirror's replacement is read instead
                    where.parent.mkdir(parents=True, exist_ok=True)
                    where.write_bytes(b"not a video")
                    where = root / "replacement/replacement_for_corrupted_k400" / where.name
                write_video(where, n_frames=8 + i % 3, seed=100 * c + 10 * i + len(split))
        with open(root / "annotations" / f"{split}.csv", "w", newline="") as fh:
            writer = csv.writer(fh, quoting=csv.QUOTE_MINIMAL)
            writer.writerow(["label", "youtube_id", "time_start", "time_end", "split", "is_cc"])
            writer.writerows(rows)
    return dict(OVERRIDES)


def _uuid(*parts) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(map(str, parts))))


#: (frames in the sequence, human count or None when the sequence is not in train_sequence_counts.csv)
IWILDCAM_SEQUENCES = [(3, 2), (1, 0), (5, 1), (2, 4), (4, 1), (1, None), (3, None), (2, 3), (1, 1), (3, 0),
                      (2, 2), (4, None), (1, 5), (2, 1), (3, 2)]


def iwildcam(root: Path, scale: int = 1) -> dict:
    """The Kaggle competition archive (``kaggle competitions download -c iwildcam2022-fgvc9``) extracted: train/train/
    <id>.jpg and metadata/metadata/{iwildcam2022_train_annotations.json, iwildcam2022_mdv4_detections.json,
    train_sequence_counts.csv, gps_locations.json}.

    Evidence: GATE's gate/data/video/regression/iwildcam_2022.py (the nested folders, ``seq_id,count`` columns of
    train_sequence_counts.csv, detections keyed by ``file``, gps keyed by str(location), ``seq_frame_num``) and the
    example image record in gate/data/video/utils/loader/iwildcam2022_dataset.py (``seq_num_frames, location,
    datetime, id, seq_id, width, height, file_name, sub_location, seq_frame_num``); the competition README
    (github.com/visipedia/iwildcam_comp: ``categories``/``annotations`` records, MegaDetector v4 ``images`` of
    ``file, max_detection_conf, detections`` with ``detection_categories`` 1 animal, 2 person, 3 vehicle; "count
    annotations on 1780 of the 36,292 train sequences"; sequences of 1 to 10 images). The MegaDetector boxes here
    deliberately disagree with the human counts: the target is the human count."""
    rng = np.random.default_rng(8)
    images, annotations, detections, counts = [], [], [], []
    for s, (n, count) in enumerate(IWILDCAM_SEQUENCES * scale):
        seq = _uuid("seq", s)
        for f in range(n):
            image_id = _uuid("img", s, f)
            save(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8), root / "train" / "train" / f"{image_id}.jpg")
            images.append({"seq_num_frames": n, "location": s % 4, "datetime": f"2013-05-25 17:05:{f:02d}.000",
                           "id": image_id, "seq_id": seq, "width": 32, "height": 24, "file_name": f"{image_id}.jpg",
                           "sub_location": 0, "seq_frame_num": n - 1 - f})  # listed last frame first: sorting matters
            annotations.append({"id": _uuid("ann", s, f), "image_id": image_id, "category_id": 372 if count else 0})
            boxes = [{"category": "1", "conf": 0.9, "bbox": [0.1, 0.1, 0.2, 0.2]} for _ in range(7)]
            boxes.append({"category": "2", "conf": 0.95, "bbox": [0.5, 0.5, 0.1, 0.1]})
            detections.append({"file": f"train/{image_id}.jpg", "max_detection_conf": 0.95, "detections": boxes})
        if count is not None:
            counts.append((seq, count))
    meta = root / "metadata" / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "iwildcam2022_train_annotations.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, "categories": [{"id": 0, "name": "empty"},
                                                                      {"id": 372, "name": "tayassu pecari"}]}))
    (meta / "iwildcam2022_mdv4_detections.json").write_text(json.dumps(
        {"images": detections, "detection_categories": {"1": "animal", "2": "person", "3": "vehicle"},
         "info": {"detector": "megadetector_v4.1"}}))
    (meta / "gps_locations.json").write_text(json.dumps({str(i): {"latitude": 17.49 + i, "longitude": -89.2}
                                                         for i in range(3)}))
    with open(meta / "train_sequence_counts.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["seq_id", "count"])
        writer.writerows(counts)
    return {"dataset.options.frames": 4, "dataset.paper_protocol.image_size": 32}


FIXTURES = {"hmdb51": hmdb51, "kinetics400": kinetics400, "ucf101": ucf101, "iwildcam": iwildcam}

"""Tiny local copies of the segmentation benchmarks with their sources' real schema (paths, columns, encodings)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from gate.data.loaders.segmentation import CITYSCAPES_IDS, COCO_STUFF_IDS

H, W = 24, 32  # small, not square: loaders must not assume a shape
OVERRIDES = {"dataset.paper_protocol.mask_size": 32}


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, name)))


def rgb(rng) -> np.ndarray:
    return rng.integers(0, 256, (H, W, 3), dtype=np.uint8)


def save(array: np.ndarray, path: Path, fmt: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, format=fmt)
    return path


def encoded(array: np.ndarray, fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format=fmt)
    return buf.getvalue()


def labels(rng, values) -> np.ndarray:
    return np.asarray(values)[rng.integers(0, len(values), (H, W))].astype(np.uint8)


def ade20k(root: Path, counts=None) -> dict:
    """scene_parse_150's parquet conversion: scene_parsing/<split>/0000.parquet, columns image, annotation,
    scene_category (images as {bytes, path} structs; annotation PNG: 0 other, 1..150 classes).

    Schema: the hub repo's loading script (zhoubolei/scene_parse_150, scene_parse_150.py) yields image, annotation
    and scene_category for the scene_parsing config; the conversion branch lists scene_parsing/<split>/NNNN.parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = _rng("ade20k")
    for split, n in (counts or {"train": 10, "validation": 4}).items():
        rows = {"image": [], "annotation": [], "scene_category": []}
        for i in range(n):
            rows["image"].append({"bytes": encoded(rgb(rng), "JPEG"), "path": f"ADE_{split}_{i:08d}.jpg"})
            rows["annotation"].append({"bytes": encoded(labels(rng, range(0, 151))), "path": f"ADE_{split}_{i:08d}.png"})
            rows["scene_category"].append(int(rng.integers(0, 1055)))
        image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        table = pa.table({"image": pa.array(rows["image"], image_type), "annotation": pa.array(rows["annotation"], image_type),
                          "scene_category": pa.array(rows["scene_category"], pa.int64())})
        (root / "scene_parsing" / split).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, root / "scene_parsing" / split / "0000.parquet")
    return dict(OVERRIDES)


#: Real Cityscapes cities: the official train and val splits are city-disjoint.
CITYSCAPES_CITIES = {"train": ("aachen", "bochum", "bremen", "cologne", "darmstadt"), "val": ("frankfurt", "lindau")}


def cityscapes(root: Path) -> dict:
    """leftImg8bit/<split>/<city>/<stem>_leftImg8bit.png + gtFine/<split>/<city>/<stem>_gtFine_labelIds.png.

    Schema: mcordts/cityscapesScripts README (``{root}/{type}/{split}/{city}/{city}_{seq:0>6}_{frame:0>6}_{type}
    {ext}``; gtFine ``*_labelIds.png`` pixels are label ids of helpers/labels.py). Several sequences per city,
    several cities per split: the grouped split must keep a city on one side."""
    rng = _rng("cityscapes")
    for split, n in (("train", 3), ("val", 2)):
        for city in CITYSCAPES_CITIES[split]:
            for i in range(n):
                stem = f"{city}_{i:06d}_000019"
                save(rgb(rng), root / "leftImg8bit" / split / city / f"{stem}_leftImg8bit.png")
                save(labels(rng, [0, 1, 4, *CITYSCAPES_IDS]), root / "gtFine" / split / city / f"{stem}_gtFine_labelIds.png")
    return dict(OVERRIDES)


def coco_164k(root: Path) -> dict:
    """train2017/*.jpg, val2017/*.jpg, stuffthingmaps_trainval2017/<split>/*.png (0-indexed ids, 255 unlabeled).

    Schema: nightrome/cocostuff README (stuffthingmaps_trainval2017.zip: train2017/ and val2017/ PNGs of 0-indexed
    class ids, 255 unlabeled) and mmsegmentation's coco_stuff164k converter; images are COCO 2017's zips."""
    rng = _rng("coco_164k")
    for split, n in (("train2017", 10), ("val2017", 4)):
        for i in range(n):
            stem = f"{1000 * (split == 'val2017') + i + 9:012d}"
            save(rgb(rng), root / split / f"{stem}.jpg")
            save(labels(rng, [*COCO_STUFF_IDS[:20], *COCO_STUFF_IDS[-5:], 255]),
                 root / "stuffthingmaps_trainval2017" / split / f"{stem}.png")
    return dict(OVERRIDES)


def coco_10k(root: Path) -> dict:
    """cocostuff-10k-v1.1: images/<id>.jpg, annotations/<id>.mat (S: 0 unlabeled, 1..182), imageLists/*.txt.

    Schema: nightrome/cocostuff10k README (.mat fields S, names, captions, ...; MATLAB indices start from 1) and
    mmsegmentation's tools/dataset_converters/coco_stuff10k.py (images/, annotations/, imageLists/{train,test}.txt)."""
    from scipy.io import savemat

    rng = _rng("coco_10k")
    for split, n in (("train", 10), ("test", 4)):
        ids = [f"COCO_train2014_{(100 * (split == 'test')) + i:012d}" for i in range(n)]
        (root / "imageLists").mkdir(parents=True, exist_ok=True)
        (root / "imageLists" / f"{split}.txt").write_text("\n".join(ids) + "\n")
        for stem in ids:
            save(rgb(rng), root / "images" / f"{stem}.jpg")
            (root / "annotations").mkdir(parents=True, exist_ok=True)
            S = labels(rng, [0, *(i + 1 for i in COCO_STUFF_IDS[:30])]).astype(np.uint16)
            savemat(root / "annotations" / f"{stem}.mat", {"S": S, "names": np.array(["x"], dtype=object)})
    return dict(OVERRIDES)


#: Scene names as the labelled set has them (<scene type>_<4 digits>); the official train and test are scene-disjoint.
NYU_SCENES = ["bedroom_0004"] * 4 + ["kitchen_0031"] * 3 + ["office_0009"] * 3 + ["living_room_0038"] * 4


def _matlab_cell_strings(f, key: str, values: list[str]) -> None:
    """A MATLAB v7.3 cell array of strings: a (1, N) dataset of object references, each to a (n_chars, 1) uint16
    array under the #refs# group (how MATLAB saves cells of char arrays to HDF5)."""
    import h5py

    refs = f.require_group("#refs#")
    ref_list = []
    for i, value in enumerate(values):
        ds = refs.create_dataset(f"{key}_{i}", data=np.array([[ord(c)] for c in value], dtype=np.uint16))
        ref_list.append(ds.ref)
    f.create_dataset(key, data=np.array([ref_list], dtype=h5py.ref_dtype))


def nyu(root: Path) -> dict:
    """nyu_depth_v2_labeled.mat (HDF5: images (N,3,W,H), labels (N,W,H), scenes), splits.mat, classMapping40.mat.

    Schema: the NYU Depth v2 page's field list of the labelled .mat (images, labels, names, scenes, sceneTypes, ...;
    "scenes - Cx1 cell array of the name of the scene from which each image was taken"), h5py loaders that read its
    images as (N, 3, W, H) and its strings as HDF5 references to uint16 arrays, splits.mat trainNdxs / testNdxs
    (1-based) and ankurhanda/nyuv2-meta-data's classMapping40.mat (mapClass: 894 raw classes -> 1..40)."""
    import h5py
    from scipy.io import savemat

    rng = _rng("nyu")
    n = len(NYU_SCENES)
    root.mkdir(parents=True, exist_ok=True)
    with h5py.File(root / "nyu_depth_v2_labeled.mat", "w") as f:
        f["images"] = np.stack([np.transpose(rgb(rng), (2, 1, 0)) for _ in range(n)])
        f["labels"] = np.stack([np.transpose(labels(rng, range(0, 30)).astype(np.uint16), (1, 0)) for _ in range(n)])
        _matlab_cell_strings(f, "scenes", NYU_SCENES)
        _matlab_cell_strings(f, "sceneTypes", [s.rsplit("_", 1)[0] for s in NYU_SCENES])
    savemat(root / "splits.mat", {"trainNdxs": np.arange(1, 11)[:, None], "testNdxs": np.arange(11, n + 1)[:, None]})
    savemat(root / "classMapping40.mat", {"mapClass": (np.arange(894) % 40 + 1)[None, :].astype(np.float64)})
    return dict(OVERRIDES)


#: labels.txt of trainval.tar.gz, the 459 names in id order (1-based), as the real download spells them: copied from
#: shelhamer/fcn.berkeleyvision.org data/pascal-context/classes-400.txt (commit 98d4b38), the list the FCN reference
#: data layer (pascalcontext_layers.py) reads as labels.txt ("<id>: <name>", names with spaces).
PASCAL_CONTEXT_LABELS = (
    "accordion, aeroplane, air conditioner, antenna, artillery, ashtray, atrium, baby carriage, bag, ball, "
    "balloon, bamboo weaving, barrel, baseball bat, basket, basketball backboard, bathtub, bed, bedclothes, "
    "beer, bell, bench, bicycle, binoculars, bird, bird cage, bird feeder, bird nest, blackboard, board, boat, "
    "bone, book, bottle, bottle opener, bowl, box, bracelet, brick, bridge, broom, brush, bucket, building, bus, "
    "cabinet, cabinet door, cage, cake, calculator, calendar, camel, camera, camera lens, can, candle, "
    "candle holder, cap, car, card, cart, case, casette recorder, cash register, cat, cd, cd player, ceiling, "
    "cell phone, cello, chain, chair, chessboard, chicken, chopstick, clip, clippers, clock, closet, cloth, "
    "clothes tree, coffee, coffee machine, comb, computer, concrete, cone, container, control booth, controller, "
    "cooker, copying machine, coral, cork, corkscrew, counter, court, cow, crabstick, crane, crate, cross, "
    "crutch, cup, curtain, cushion, cutting board, dais, disc, disc case, dishwasher, dock, dog, dolphin, door, "
    "drainer, dray, drink dispenser, drinking machine, drop, drug, drum, drum kit, duck, dumbbell, earphone, "
    "earrings, egg, electric fan, electric iron, electric pot, electric saw, electronic keyboard, engine, "
    "envelope, equipment, escalator, exhibition booth, extinguisher, eyeglass, fan, faucet, fax machine, fence, "
    "ferris wheel, fire extinguisher, fire hydrant, fire place, fish, fish tank, fishbowl, fishing net, "
    "fishing pole, flag, flagstaff, flame, flashlight, floor, flower, fly, foam, food, footbridge, forceps, "
    "fork, forklift, fountain, fox, frame, fridge, frog, fruit, funnel, furnace, game controller, game machine, "
    "gas cylinder, gas hood, gas stove, gift box, glass, glass marble, globe, glove, goal, grandstand, grass, "
    "gravestone, ground, guardrail, guitar, gun, hammer, hand cart, handle, handrail, hanger, hard disk drive, "
    "hat, hay, headphone, heater, helicopter, helmet, holder, hook, horse, horse-drawn carriage, "
    "hot-air balloon, hydrovalve, ice, inflator pump, ipod, iron, ironing board, jar, kart, kettle, key, "
    "keyboard, kitchen range, kite, knife, knife block, ladder, ladder truck, ladle, laptop, leaves, lid, "
    "life buoy, light, light bulb, lighter, line, lion, lobster, lock, machine, mailbox, mannequin, map, mask, "
    "mat, match book, mattress, menu, metal, meter box, microphone, microwave, mirror, missile, model, money, "
    "monkey, mop, motorbike, mountain, mouse, mouse pad, musical instrument, napkin, net, newspaper, oar, "
    "ornament, outlet, oven, oxygen bottle, pack, pan, paper, paper box, paper cutter, parachute, parasol, "
    "parterre, patio, pelage, pen, pen container, pencil, person, photo, piano, picture, pig, pillar, pillow, "
    "pipe, pitcher, plant, plastic, plate, platform, player, playground, pliers, plume, poker, poker chip, pole, "
    "pool table, postcard, poster, pot, pottedplant, printer, projector, pumpkin, rabbit, racket, radiator, "
    "radio, rail, rake, ramp, range hood, receiver, recorder, recreational machines, remote control, road, "
    "robot, rock, rocket, rocking horse, rope, rug, ruler, runway, saddle, sand, saw, scale, scanner, scissors, "
    "scoop, screen, screwdriver, sculpture, scythe, sewer, sewing machine, shed, sheep, shell, shelves, shoe, "
    "shopping cart, shovel, sidecar, sidewalk, sign, signal light, sink, skateboard, ski, sky, sled, slippers, "
    "smoke, snail, snake, snow, snowmobiles, sofa, spanner, spatula, speaker, speed bump, spice container, "
    "spoon, sprayer, squirrel, stage, stair, stapler, stick, sticky note, stone, stool, stove, straw, stretcher, "
    "sun, sunglass, sunshade, surveillance camera, swan, sweeper, swim ring, swimming pool, swing, switch, "
    "table, tableware, tank, tap, tape, tarp, telephone, telephone booth, tent, tire, toaster, toilet, tong, "
    "tool, toothbrush, towel, toy, toy car, track, train, trampoline, trash bin, tray, tree, tricycle, tripod, "
    "trophy, truck, tube, turtle, tvmonitor, tweezers, typewriter, umbrella, unknown, vacuum cleaner, "
    "vending machine, video camera, video game console, video player, video tape, violin, wakeboard, wall, "
    "wallet, wardrobe, washing machine, watch, water, water dispenser, water pipe, water skate board, "
    "watermelon, whale, wharf, wheel, wheelchair, window, window blinds, wineglass, wire, wood, wool"
).split(", ")
#: 59_labels.txt of the Pascal-Context page, the 59 classes in class order (ids 1..59), with its own spellings
#: (diningtable, clothes, bedcloth where labels.txt has table, cloth, bedclothes): FCN's classes-59.txt (the same
#: commit) without its "0: background" line, which 59_labels.txt cannot hold (pascalcontext_layers.py looks every
#: 59_labels.txt name up in labels.txt, which has no background, and numbers the classes from 1 in file order).
PASCAL_CONTEXT_59 = (
    "aeroplane, bicycle, bird, boat, bottle, bus, car, cat, chair, cow, diningtable, dog, horse, motorbike, person, "
    "pottedplant, sheep, sofa, train, tvmonitor, bag, bed, bench, book, building, cabinet, ceiling, clothes, "
    "computer, cup, door, fence, floor, flower, food, grass, ground, keyboard, light, mountain, mouse, curtain, "
    "platform, sign, plate, road, rock, shelves, sidewalk, sky, snow, bedcloth, track, tree, truck, wall, water, "
    "window, wood"
).split(", ")
#: Raw labels.txt ids the fixture's label maps hold: the three classes spelt otherwise in 59_labels.txt (table 397,
#: bedclothes 19, cloth 80), two ordinary ones (aeroplane 2, wood 458), and ids outside the 59 that a loose name
#: match could take for them (0 unlabelled, clothes tree 81, pool table 304, tableware 398, plant 293).
PASCAL_CONTEXT_RAW = (397, 19, 80, 2, 458, 0, 81, 304, 398, 293)


def pascal_context(root: Path) -> dict:
    """VOCdevkit/VOC2010/JPEGImages/<id>.jpg + trainval/<id>.mat (LabelMap, 459-class ids), labels.txt, 59_labels.txt.

    Schema: trainval.tar.gz extracts to trainval/<id>.mat (LabelMap, uint16) and labels.txt ("<id>: <name>"
    lines, parsed so by Detectron2-style prepare_pascal_context_459.py scripts); 59_labels.txt is a separate
    download on the Pascal-Context page (https://cs.stanford.edu/~roozbeh/pascal-context/59_labels.txt); images
    are VOC2010's VOCtrainval_03-May-2010.tar (VOCdevkit/VOC2010/JPEGImages). The two name lists are the real
    ones (:data:`PASCAL_CONTEXT_LABELS`, :data:`PASCAL_CONTEXT_59`)."""
    from scipy.io import savemat

    rng = _rng("pascal_context")
    root.mkdir(parents=True, exist_ok=True)
    (root / "labels.txt").write_text("".join(f"{k}: {name}\n" for k, name in enumerate(PASCAL_CONTEXT_LABELS, 1)))
    (root / "59_labels.txt").write_text("".join(f"{k}: {name}\n" for k, name in enumerate(PASCAL_CONTEXT_59, 1)))
    for i in range(12):
        stem = f"2008_{i:06d}"
        save(rgb(rng), root / "VOCdevkit" / "VOC2010" / "JPEGImages" / f"{stem}.jpg")
        (root / "trainval").mkdir(exist_ok=True)
        raw = np.asarray(PASCAL_CONTEXT_RAW, np.uint16)[rng.integers(0, len(PASCAL_CONTEXT_RAW), (H, W))]
        savemat(root / "trainval" / f"{stem}.mat", {"LabelMap": raw})
    return dict(OVERRIDES)


FIXTURES = {"ade20k": ade20k, "cityscapes": cityscapes, "coco_10k": coco_10k, "coco_164k": coco_164k, "nyu": nyu,
            "pascal_context": pascal_context}

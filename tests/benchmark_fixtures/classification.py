"""Image classification fixtures: CIFAR-100, Food-101, Happywhale, ImageNet-1k (hub parquet), Places365."""

from __future__ import annotations

from pathlib import Path

from . import jpeg_file, labelled_rows, png, write_parquet


def cifar100(root: Path) -> dict:
    # uoft-cs/cifar100: cifar100/{train,test}-00000-of-00001.parquet, columns img, fine_label, coarse_label
    for split, per, off in (("train", 3, 0), ("test", 1, 10_000)):
        images, labels = labelled_rows(100, per, off)
        write_parquet(root / "cifar100" / f"{split}-00000-of-00001.parquet",
                      {"img": images, "fine_label": labels, "coarse_label": [x // 5 for x in labels]}, ("img",))
    return {}


def food101(root: Path) -> dict:
    # ethz/food101: data/train-0000x-of-00008.parquet, data/validation-0000x-of-00003.parquet; image, label
    for split, per, off in (("train", 6, 0), ("validation", 2, 10_000)):
        images, labels = labelled_rows(4, per, off)
        write_parquet(root / "data" / f"{split}-00000-of-00001.parquet", {"image": images, "label": labels})
    return {"dataset.num_classes": 4}


def happywhale(root: Path) -> dict:
    # GATE-engine/happy-whale-dolphin-classification @ refs/convert/parquet: default/{train,val,test}/NNNN.parquet.
    # Columns as GATE's uploader wrote them (playground/push_happy_whale_to_hub.py in the GATE repo's history, the
    # hub's dataset viewer agrees): image, species (int64 id), species_name, individual (int64 id), individual_name
    # (the Kaggle individual_id, 12 hex digits). Ids are indices into the whole train.csv's unique values, so the
    # same in every split.
    species = ["melon_headed_whale", "humpback_whale", "bottlenose_dolpin"]
    for split, per, off in (("train", 3, 0), ("val", 1, 5000), ("test", 1, 9000)):
        images, individuals = labelled_rows(6, per, off)
        kinds = [x % 3 for x in individuals]
        write_parquet(root / "default" / split / "0000.parquet",
                      {"image": images, "species": kinds, "species_name": [species[k] for k in kinds],
                       "individual": individuals, "individual_name": [f"{x * 7919:012x}" for x in individuals]})
    return {"dataset.num_classes": 6}


def imagenet1k(root: Path) -> dict:
    for split, per, off in (("train", 8, 0), ("validation", 2, 5000)):
        images, labels = labelled_rows(4, per, off)
        write_parquet(root / "data" / f"{split}-00000-of-00001.parquet", {"image": images, "label": labels})
    return {"dataset.num_classes": 4}


def places365(root: Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    classes = ["/a/airfield", "/a/alley", "/b/bakery/shop", "/c/canyon"]
    (root / "categories_places365.txt").write_text("".join(f"{c} {i}\n" for i, c in enumerate(classes)))
    train, val = [], []
    for i in range(24):
        rel = f"{classes[i % 4]}/{i:08d}.jpg"
        jpeg_file(root / "data_256" / rel.lstrip("/"), i)
        train.append(f"{rel} {i % 4}\n")
    for i in range(8):
        name = f"Places365_val_{i + 1:08d}.jpg"
        jpeg_file(root / "val_256" / name, 100 + i)
        val.append(f"{name} {i % 4}\n")
    (root / "places365_train_standard.txt").write_text("".join(train))
    (root / "places365_val.txt").write_text("".join(val))
    return {"dataset.num_classes": 4}


FIXTURES = {"cifar100": cifar100, "food101": food101, "happywhale": happywhale, "imagenet1k": imagenet1k,
            "places365": places365}
_ = png  # re-exported helper

"""Segmentation stand-ins built from real Fashion-MNIST items (offline, seeded, built once into the cache).

``fmnist_seg`` (2-D semantic segmentation, 11 classes): each example is a mosaic of 2-4 Fashion-MNIST items
pasted into distinct cells of a 2x2 grid of 28-px cells (each item jittered by up to 2 px inside a 32-px cell:
64x64 canvases; :func:`.canvas.place`). The mask holds 0 for background and ``1 + label`` on item pixels
(ink brighter than :data:`.canvas.INK`); faint item pixels (ink 1..INK, the anti-aliased rim) are marked
``IGNORE`` (255), like the void borders of Pascal VOC: neither background nor item, excluded from loss and
metrics. Train examples use Fashion-MNIST train items; val and test use disjoint halves of its test items.

``fmnist_volume`` (volumetric "medical" segmentation, 4 classes): each volume is a stack of ``depth`` 64x64
slices holding three "organs", one item each of Fashion-MNIST classes trouser, bag and ankle boot (classes 1,
2, 3; 0 background), in distinct cells of a 2x2 grid (fixed per volume). Through depth each organ grows and
shrinks like a cut through an ellipsoid (scale sqrt(1 - ((z - c) / r)^2), centre c and half-extent r drawn per
organ, so an organ is absent from some end slices, as in apical/basal MRI slices) and drifts smoothly by up to
4 px; slices get Gaussian noise (std ``noise``, grey levels). Rows are slices with the ``volume`` id and the
``slice`` index; training is per slice and the metrics are per volume (ACDC-style, see
:class:`gate.adapters.segmentation.MedicalSegmentationAdapter`). Volume ids are unique across splits.

Both are deterministic in ``seed`` (a separate generator per split) and sized by builder parameters; the
defaults are small enough for the CPU demo.
"""

from __future__ import annotations

import numpy as np

from ..sources import FASHION_MNIST_DIR
from .canvas import ITEM, cached, class_name, fashion_items, place

IGNORE = 255  # fmnist_seg's ignore_index: faint item pixels
ORGANS = (1, 8, 9)  # Fashion-MNIST classes standing in for organs in fmnist_volume: trouser, bag, ankle boot


def _grid_column(arrays: np.ndarray):
    """(N, H, W) uint8 as an Arrow column of H lists of W uint8 (one buffer, no per-row copy), and its feature."""
    import datasets
    import pyarrow as pa

    n, height, width = arrays.shape
    column = pa.FixedSizeListArray.from_arrays(
        pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(arrays, dtype=np.uint8).reshape(-1)), width),
        height)
    return column, datasets.List(datasets.List(datasets.Value("uint8"), length=width), length=height)


def _dataset(columns: dict[str, np.ndarray]):
    """An HF Dataset from (N, H, W) uint8 grids and (N,) int64 vectors."""
    import datasets
    import pyarrow as pa

    arrays, features = {}, {}
    for name, values in columns.items():
        if values.ndim == 3:
            arrays[name], features[name] = _grid_column(values)
        else:
            arrays[name], features[name] = pa.array(values.astype(np.int64)), datasets.Value("int64")
    return datasets.Dataset(pa.table(arrays), info=datasets.DatasetInfo(features=datasets.Features(features)))


def _pools(seed: int, data_dir: str | None):
    """Item pools per split: train from Fashion-MNIST train, val/test from disjoint halves of its test split."""
    train_items, train_labels = fashion_items("train", data_dir)
    test_items, test_labels = fashion_items("test", data_dir)
    order = np.random.default_rng([seed, 99]).permutation(len(test_items))
    half = len(order) // 2
    return {"train": (train_items, train_labels),
            "val": (test_items[order[:half]], test_labels[order[:half]]),
            "test": (test_items[order[half:]], test_labels[order[half:]])}


def fmnist_seg(cache_dir: str | None = None, seed: int = 0, train_size: int = 2000, val_size: int = 300,
               test_size: int = 300, min_items: int = 2, max_items: int = 4, jitter: int = 2,
               data_dir: str | None = FASHION_MNIST_DIR):
    """Mosaics of 2-4 Fashion-MNIST items on 64x64 canvases with 11-class masks (see the module docstring)."""
    params = dict(seed=seed, train_size=train_size, val_size=val_size, test_size=test_size, min_items=min_items,
                  max_items=max_items, jitter=jitter, data_dir=data_dir)
    if not 1 <= min_items <= max_items <= 4:
        raise ValueError(f"fmnist_seg: need 1 <= min_items <= max_items <= 4 (a 2x2 grid), got {min_items}, {max_items}")

    def build():
        import datasets

        splits = {}
        for index, (split, (items, labels)) in enumerate(_pools(seed, data_dir).items()):
            size = {"train": train_size, "val": val_size, "test": test_size}[split]
            rng = np.random.default_rng([seed, index])
            images, masks = [], []
            for _ in range(size):
                chosen = rng.choice(len(items), size=int(rng.integers(min_items, max_items + 1)), replace=False)
                canvas = place(rng, items[chosen], labels[chosen], grid=(2, 2), jitter=jitter)
                mask = canvas["mask"]
                mask[(canvas["image"] > 0) & (mask == 0)] = IGNORE  # the faint rim (ink 1..INK) of an item
                images.append(canvas["image"])
                masks.append(mask)
            splits[split] = _dataset({"image": np.stack(images), "mask": np.stack(masks).astype(np.uint8)})
        return datasets.DatasetDict(splits)

    return cached("fmnist_seg", params, cache_dir, build)


def fmnist_seg_classes() -> list[str]:
    return ["background", *(class_name(label) for label in range(10))]


def _scaled(item: np.ndarray, scale: float, shift: tuple[int, int]) -> np.ndarray:
    """``item`` shrunk by ``scale`` (bilinear), centred in a 28x28 patch and shifted by ``shift`` (dy, dx)."""
    from PIL import Image

    patch = np.zeros((ITEM, ITEM), np.uint8)
    side = int(round(ITEM * scale))
    if side < 3:
        return patch
    small = np.asarray(Image.fromarray(item).resize((side, side), Image.BILINEAR))
    y0 = int(np.clip((ITEM - side) // 2 + shift[0], 0, ITEM - side))
    x0 = int(np.clip((ITEM - side) // 2 + shift[1], 0, ITEM - side))
    patch[y0:y0 + side, x0:x0 + side] = small
    return patch


def fmnist_volume(cache_dir: str | None = None, seed: int = 0, train_volumes: int = 200, val_volumes: int = 30,
                  test_volumes: int = 40, depth: int = 8, jitter: int = 2, noise: float = 8.0,
                  data_dir: str | None = FASHION_MNIST_DIR):
    """Volumes of ``depth`` 64x64 slices with three organ-like items that grow, shrink and drift through depth
    (see the module docstring); one row per slice with its ``volume`` id and ``slice`` index."""
    params = dict(seed=seed, train_volumes=train_volumes, val_volumes=val_volumes, test_volumes=test_volumes,
                  depth=depth, jitter=jitter, noise=noise, data_dir=data_dir)
    if depth < 2:
        raise ValueError(f"fmnist_volume: a volume needs depth >= 2 slices, got {depth}")

    def build():
        import datasets

        splits, next_id = {}, 0
        organ_ids = np.arange(len(ORGANS))  # place() labels organ k as 1 + k
        for index, (split, (items, labels)) in enumerate(_pools(seed, data_dir).items()):
            count = {"train": train_volumes, "val": val_volumes, "test": test_volumes}[split]
            by_organ = [np.flatnonzero(labels == organ) for organ in ORGANS]
            rng = np.random.default_rng([seed, 10 + index])
            images, masks, volume_ids, slice_ids = [], [], [], []
            for _ in range(count):
                chosen = items[[int(rng.choice(pool)) for pool in by_organ]]
                centre = rng.uniform(0.3, 0.7, len(ORGANS)) * (depth - 1)
                extent = rng.uniform(0.45, 0.75, len(ORGANS)) * depth
                drift = rng.uniform(-4, 4, (len(ORGANS), 2))
                layout = int(rng.integers(2 ** 32))  # the same cells and jitter in every slice of the volume
                for z in range(depth):
                    scale = np.sqrt(np.clip(1.0 - ((z - centre) / extent) ** 2, 0.0, 1.0))
                    t = z / (depth - 1) - 0.5
                    patches = np.stack([_scaled(item, s, tuple(np.round(d * t).astype(int)))
                                        for item, s, d in zip(chosen, scale, drift)])
                    canvas = place(np.random.default_rng(layout), patches, organ_ids, grid=(2, 2), jitter=jitter)
                    image = canvas["image"].astype(np.float64) + rng.normal(0.0, noise, canvas["image"].shape)
                    images.append(np.clip(np.round(image), 0, 255).astype(np.uint8))
                    masks.append(canvas["mask"].astype(np.uint8))
                    volume_ids.append(next_id)
                    slice_ids.append(z)
                next_id += 1
            splits[split] = _dataset({"image": np.stack(images), "mask": np.stack(masks),
                                      "volume": np.asarray(volume_ids), "slice": np.asarray(slice_ids)})
        return datasets.DatasetDict(splits)

    return cached("fmnist_volume", params, cache_dir, build)


def fmnist_volume_classes() -> list[str]:
    return ["background", *(class_name(label) for label in ORGANS)]


__all__ = ["IGNORE", "ORGANS", "fmnist_seg", "fmnist_seg_classes", "fmnist_volume", "fmnist_volume_classes"]

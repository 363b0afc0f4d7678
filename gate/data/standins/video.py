"""``fmnist_video`` and ``fmnist_video_speed``: offline video stand-ins for GATE's video classification (HMDB51,
UCF-101, Kinetics-400) and video regression (iWildCam) families.

How a clip is made: one real Fashion-MNIST item (28x28) moves across a dark ``canvas`` x ``canvas`` square
(48 px by default) for ``frames`` frames (8 by default), Moving-MNIST style: it starts at a uniformly random
position, moves along a uniformly random direction at a constant ``speed`` (px/frame, uniform in
``[min_speed, max_speed]``) and bounces off the edges (a reflection keeps the speed). Positions are real
numbers; an item at a fractional position is drawn by bilinear splatting, so slow motion is smooth.

* ``fmnist_video``: target ``label``, the item's class (10 classes, balanced: class ``i % 10`` for clip ``i``,
  then shuffled). Readable from one frame; the stand-in checks the video plumbing end to end.
* ``fmnist_video_speed``: target ``speed`` (float, px/frame). Speed is visible only across frames: with
  reflections from a uniform start, every single frame's item position is uniform over the canvas whatever
  the speed (a bouncing walk keeps the uniform distribution), and the item, its class and the direction are
  drawn independently of the speed, so one frame carries no information about it. The baseline to beat is
  always predicting the train mean (MAE ~ (max - min) / 4 for a uniform speed).

Seeded and deterministic: ``seed`` fixes every draw (each split has its own generator). Items come from
Fashion-MNIST's train images for ``train`` and from the two halves of its test images for ``val`` and ``test``
(no item image is shared between splits). Columns: ``video`` (frames x canvas x canvas uint8) and ``label``
(int) or ``speed`` (float). Built once under ``<cache_dir>/standins/`` (:func:`.canvas.cached`).
"""

from __future__ import annotations

import functools

import numpy as np

from .canvas import ITEM, cached
from .pairs import SPLITS, ItemPool

VERSION = 2  # part of the cache key: bump when the generation changes


@functools.lru_cache(maxsize=len(SPLITS))
def item_pool(split: str) -> ItemPool:
    """The item images of ``split``, read once per process (both stand-ins and every size share them)."""
    return ItemPool(split)


def trajectory(start: np.ndarray, velocity: np.ndarray, frames: int, room: float) -> np.ndarray:
    """(frames, 2) positions in ``[0, room]`` of a point starting at ``start`` moving by ``velocity`` per frame
    and reflecting off 0 and ``room`` (the motion of a ball bouncing in a box, by unfolding)."""
    raw = start[None, :] + np.arange(frames)[:, None] * velocity[None, :]
    if room <= 0:
        return np.zeros_like(raw)
    folded = np.mod(raw, 2 * room)
    return np.where(folded > room, 2 * room - folded, folded)


def render(item: np.ndarray, positions: np.ndarray, canvas: int) -> np.ndarray:
    """The item (28x28 uint8) at each (y, x) of ``positions`` (top-left corners, real numbers in
    ``[0, canvas - 28]``), bilinearly splatted onto black ``canvas`` x ``canvas`` frames: (T, canvas, canvas)
    uint8."""
    out = np.zeros((len(positions), canvas + 1, canvas + 1), np.float32)
    pixels = item.astype(np.float32)
    for t, (y, x) in enumerate(positions):
        y0, x0 = int(np.floor(y)), int(np.floor(x))
        fy, fx = float(y - y0), float(x - x0)
        for dy, wy in ((0, 1 - fy), (1, fy)):
            for dx, wx in ((0, 1 - fx), (1, fx)):
                if wy * wx > 0:
                    out[t, y0 + dy:y0 + dy + ITEM, x0 + dx:x0 + dx + ITEM] += wy * wx * pixels
    return np.clip(np.rint(out[:, :canvas, :canvas]), 0, 255).astype(np.uint8)


def make_clip(rng: np.random.Generator, item: np.ndarray, speed: float, frames: int,
              canvas: int) -> np.ndarray:
    """One clip of ``item`` moving at ``speed`` px/frame along a random direction from a random start."""
    room = float(canvas - ITEM)
    angle = rng.uniform(0, 2 * np.pi)
    velocity = speed * np.array([np.sin(angle), np.cos(angle)])
    start = rng.uniform(0, room, size=2)
    return render(item, trajectory(start, velocity, frames, room), canvas)


def video_dataset(clips: np.ndarray, **columns):
    """An HF Dataset of (T, H, W) uint8 ``video`` clips (an ``Array3D`` column: a row reads back as one numpy
    array in milliseconds, unlike nested lists) plus int or float ``columns``."""
    import datasets

    features = {"video": datasets.Array3D(shape=tuple(int(d) for d in clips.shape[1:]), dtype="uint8")}
    data = {"video": np.ascontiguousarray(clips, dtype=np.uint8)}
    for name, values in columns.items():
        values = np.asarray(values)
        kind = "float32" if np.issubdtype(values.dtype, np.floating) else "int64"
        features[name] = datasets.Value(kind)
        data[name] = values.astype(kind)
    return datasets.Dataset.from_dict(data, features=datasets.Features(features))


def build_video(target: str, sizes: dict[str, int], seed: int, frames: int, canvas: int, min_speed: float,
                max_speed: float):
    import datasets

    out = {}
    for index, split in enumerate(SPLITS):
        rng = np.random.default_rng([seed, index])
        pool = item_pool(split)
        n = sizes[split]
        classes = rng.permutation(np.arange(n) % 10)
        speeds = rng.uniform(min_speed, max_speed, size=n)
        clips = np.stack([make_clip(rng, pool.draw(rng, [c])[0], float(s), frames, canvas)
                          for c, s in zip(classes, speeds)])
        column = {"label": classes} if target == "label" else {"speed": speeds.astype(np.float32)}
        out[split] = video_dataset(clips, **column)
    return datasets.DatasetDict(out)


def _video(name: str, target: str, cache_dir, seed, train_size, val_size, test_size, frames, canvas, min_speed,
           max_speed):
    sizes = {"train": int(train_size), "val": int(val_size), "test": int(test_size)}
    if min(sizes.values()) < 1:
        raise ValueError(f"{name}: every split needs at least 1 clip, got sizes {sizes}")
    if int(frames) < 2:
        raise ValueError(f"{name}: frames={frames} is invalid: a clip needs at least 2 frames")
    if int(canvas) <= ITEM:
        raise ValueError(f"{name}: canvas={canvas} is invalid: it must exceed the {ITEM}-px item so it can move")
    if not 0 <= float(min_speed) <= float(max_speed):
        raise ValueError(f"{name}: speeds [{min_speed}, {max_speed}] are invalid: need 0 <= min_speed <= max_speed")
    params = {"version": VERSION, "seed": int(seed), **sizes, "frames": int(frames), "canvas": int(canvas),
              "min_speed": float(min_speed), "max_speed": float(max_speed)}
    return cached(name, params, cache_dir,
                  lambda: build_video(target, sizes, int(seed), int(frames), int(canvas), float(min_speed),
                                      float(max_speed)))


def fmnist_video(cache_dir: str | None = None, seed: int = 0, train_size: int = 1200, val_size: int = 100,
                 test_size: int = 200, frames: int = 8, canvas: int = 48, min_speed: float = 0.5,
                 max_speed: float = 3.0):
    """The ``fmnist_video`` stand-in (module docstring): ``train``, ``val``, ``test`` of ``video`` and ``label``."""
    return _video("fmnist_video", "label", cache_dir, seed, train_size, val_size, test_size, frames, canvas,
                  min_speed, max_speed)


def fmnist_video_speed(cache_dir: str | None = None, seed: int = 0, train_size: int = 1200, val_size: int = 100,
                       test_size: int = 200, frames: int = 8, canvas: int = 48, min_speed: float = 0.5,
                       max_speed: float = 3.0):
    """The ``fmnist_video_speed`` stand-in (module docstring): ``train``, ``val``, ``test`` of ``video`` and
    ``speed`` (px/frame)."""
    return _video("fmnist_video_speed", "speed", cache_dir, seed, train_size, val_size, test_size, frames, canvas,
                  min_speed, max_speed)

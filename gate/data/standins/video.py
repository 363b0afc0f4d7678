"""``fmnist_video`` and ``fmnist_video_speed``: offline video stand-ins for GATE's video classification (HMDB51,
UCF-101, Kinetics-400) and video regression (iWildCam) families.

How an ``fmnist_video`` clip is made: one real Fashion-MNIST item (28x28) moves across a dark ``canvas`` x ``canvas`` square
(48 px by default) for ``frames`` frames (8 by default), Moving-MNIST style: it starts at a uniformly random
position, moves along a uniformly random direction at a constant ``speed`` (px/frame, uniform in
``[min_speed, max_speed]``) and bounces off the edges (a reflection keeps the speed). Positions are real
numbers; an item at a fractional position is drawn by bilinear splatting, so slow motion is smooth.

* ``fmnist_video``: target ``label``, the item's class (10 classes, balanced: class ``i % 10`` for clip ``i``,
  then shuffled). Readable from one frame; the stand-in checks the video plumbing end to end.
* ``fmnist_video_speed``: target ``speed``, how fast the item's brightness changes, in percent of full
  brightness per frame (uniform in ``[min_rate, max_rate]``). The item stands still at a random place (a CNN's
  pooled features barely see where an item is, so motion would be almost invisible to a head that reads one
  pooled vector per frame, as GATE's temporal adapters do); its brightness (a gain on its pixels) starts at a
  uniformly random level in ``[min_level, max_level]`` percent, moves up or down (equally likely) by ``speed``
  every frame and reflects off the two bounds (a bouncing walk in brightness, :func:`fading_levels`). One frame
  says nothing about the speed: from a uniform start with a random direction, a reflecting walk keeps every
  frame's level exactly uniform whatever the speed, and the item, its class and its place are drawn
  independently of it. Across frames it is plain: the step between two frames' levels is the speed (smaller
  only at a reflection; ``(frames - 1) * max_rate`` below the level range keeps it to one reflection a clip).
  The baseline to beat is always predicting the train mean (MAE ~ (max_rate - min_rate) / 4).

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

VERSION = 3  # part of the cache key (with this module's source hash): bump when the generation changes
# 3: fmnist_video_speed's target is the brightness speed of a still item (was the motion speed, px/frame)


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


def fading_levels(start: float, step: float, frames: int, low: float, high: float) -> np.ndarray:
    """(frames,) brightness levels from ``start`` changing by ``step`` per frame (either sign) and reflecting off
    ``low`` and ``high``: :func:`trajectory` in one dimension."""
    path = trajectory(np.array([start - low]), np.array([step]), frames, high - low)
    return low + path[:, 0]


def fading_clip(item: np.ndarray, levels: np.ndarray, corner: tuple[int, int], canvas: int) -> np.ndarray:
    """``item`` (28x28 uint8) still at ``corner`` (top-left y, x) on black, its pixels scaled by each of
    ``levels`` (percent of full brightness): (T, canvas, canvas) uint8."""
    out = np.zeros((len(levels), canvas, canvas), np.uint8)
    y, x = corner
    scaled = item.astype(np.float32)[None] * (np.asarray(levels, np.float32)[:, None, None] / 100.0)
    out[:, y:y + ITEM, x:x + ITEM] = np.clip(np.rint(scaled), 0, 255).astype(np.uint8)
    return out


def moving_clips(rng: np.random.Generator, pool: ItemPool, n: int, frames: int, canvas: int, min_speed: float,
                 max_speed: float) -> dict[str, np.ndarray]:
    """``fmnist_video``'s clips of one split: balanced classes, each item bouncing at its own speed."""
    classes = rng.permutation(np.arange(n) % 10)
    speeds = rng.uniform(min_speed, max_speed, size=n)
    clips = np.stack([make_clip(rng, pool.draw(rng, [c])[0], float(s), frames, canvas)
                      for c, s in zip(classes, speeds)])
    return {"video": clips, "label": classes}


def fading_clips(rng: np.random.Generator, pool: ItemPool, n: int, frames: int, canvas: int, min_level: float,
                 max_level: float, min_rate: float, max_rate: float) -> dict[str, np.ndarray]:
    """``fmnist_video_speed``'s clips of one split: a still item whose brightness walks at ``speed`` per frame.
    The speed is drawn first and nothing else drawn depends on it (module docstring)."""
    classes = rng.permutation(np.arange(n) % 10)
    speeds = rng.uniform(min_rate, max_rate, size=n)
    starts = rng.uniform(min_level, max_level, size=n)
    signs = rng.choice([-1.0, 1.0], size=n)
    corners = rng.integers(0, canvas - ITEM + 1, size=(n, 2))
    clips = np.stack([fading_clip(pool.draw(rng, [c])[0], fading_levels(a, g * s, frames, min_level, max_level),
                                  (int(y), int(x)), canvas)
                      for c, s, a, g, (y, x) in zip(classes, speeds, starts, signs, corners)])
    return {"video": clips, "speed": speeds.astype(np.float32)}


def build_splits(make, sizes: dict[str, int], seed: int, **knobs):
    """``make(rng, pool, n, **knobs)`` for every split, each with its own seeded generator and item pool."""
    import datasets

    out = {}
    for index, split in enumerate(SPLITS):
        columns = make(np.random.default_rng([seed, index]), item_pool(split), sizes[split], **knobs)
        out[split] = video_dataset(columns.pop("video"), **columns)
    return datasets.DatasetDict(out)


def _check_common(name: str, sizes: dict[str, int], frames, canvas, moves: bool) -> None:
    if min(sizes.values()) < 1:
        raise ValueError(f"{name}: every split needs at least 1 clip, got sizes {sizes}")
    if int(frames) < 2:
        raise ValueError(f"{name}: frames={frames} is invalid: a clip needs at least 2 frames")
    if moves and int(canvas) <= ITEM:
        raise ValueError(f"{name}: canvas={canvas} is invalid: it must exceed the {ITEM}-px item so it can move")
    if int(canvas) < ITEM:
        raise ValueError(f"{name}: canvas={canvas} is invalid: it must hold the {ITEM}-px item")


def fmnist_video(cache_dir: str | None = None, seed: int = 0, train_size: int = 1200, val_size: int = 100,
                 test_size: int = 200, frames: int = 8, canvas: int = 48, min_speed: float = 0.5,
                 max_speed: float = 3.0):
    """The ``fmnist_video`` stand-in (module docstring): ``train``, ``val``, ``test`` of ``video`` and ``label``."""
    sizes = {"train": int(train_size), "val": int(val_size), "test": int(test_size)}
    _check_common("fmnist_video", sizes, frames, canvas, moves=True)
    if not 0 <= float(min_speed) <= float(max_speed):
        raise ValueError(f"fmnist_video: speeds [{min_speed}, {max_speed}] are invalid: need 0 <= min_speed <= max_speed")
    knobs = {"frames": int(frames), "canvas": int(canvas), "min_speed": float(min_speed), "max_speed": float(max_speed)}
    params = {"version": VERSION, "seed": int(seed), **sizes, **knobs}
    return cached("fmnist_video", params, cache_dir, lambda: build_splits(moving_clips, sizes, int(seed), **knobs))


def fmnist_video_speed(cache_dir: str | None = None, seed: int = 0, train_size: int = 1200, val_size: int = 100,
                       test_size: int = 200, frames: int = 4, canvas: int = 48, min_level: float = 20.0,
                       max_level: float = 100.0, min_rate: float = 2.0, max_rate: float = 20.0):
    """The ``fmnist_video_speed`` stand-in (module docstring): ``train``, ``val``, ``test`` of ``video`` and
    ``speed`` (percent of full brightness per frame)."""
    sizes = {"train": int(train_size), "val": int(val_size), "test": int(test_size)}
    _check_common("fmnist_video_speed", sizes, frames, canvas, moves=False)
    low, high, slow, fast = float(min_level), float(max_level), float(min_rate), float(max_rate)
    if not 0 <= low < high <= 100:
        raise ValueError(f"fmnist_video_speed: levels [{min_level}, {max_level}] are invalid: need "
                         f"0 <= min_level < max_level <= 100 (percent of full brightness)")
    if not 0 <= slow <= fast or (int(frames) - 1) * fast >= high - low:
        raise ValueError(f"fmnist_video_speed: rates [{min_rate}, {max_rate}] are invalid: need 0 <= min_rate <= "
                         f"max_rate and (frames - 1) * max_rate < max_level - min_level = {high - low:g} "
                         f"(at most one reflection a clip)")
    knobs = {"frames": int(frames), "canvas": int(canvas), "min_level": low, "max_level": high, "min_rate": slow,
             "max_rate": fast}
    params = {"version": VERSION, "seed": int(seed), **sizes, **knobs}
    return cached("fmnist_video_speed", params, cache_dir,
                  lambda: build_splits(fading_clips, sizes, int(seed), **knobs))

"""The encoder contract every backbone honours (DESIGN.md, "Encoder").

An encoder declares the modalities it accepts and its feature width, gives the transform that turns
one raw example (a PIL image, an HxW uint8 array, a string) into model inputs, and maps a batch to an
:class:`EncoderOutput`. Task adapters only ever see :class:`EncoderOutput`, so any encoder pairs with
any adapter whose needs it meets.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

from ..settings import MODALITIES  # noqa: F401 - declared with the dataset schema (dataset.modality)

# The batch keys each modality's transform produces; the data module collates them as they are.
INPUT_KEYS = {"image": ("image",), "video": ("video",), "audio": ("audio",), "text": ("input_ids", "attention_mask")}


@dataclasses.dataclass
class EncoderOutput:
    """What an encoder returns for a batch.

    features: pooled features, shape (B, D).
    tokens: token or spatial features (B, N, D) of the last layer where the encoder has them, else None.
    source_logits: logits over the pretraining label set (B, S) where the encoder keeps its source
        classification head (LEEP and NCE need them), else None.
    levels: multi-level spatial features, shallow to deep, each (B, N_l, D_l) with N_l = h_l * w_l, where the
        encoder has them (dense adapters such as segmentation need them), else None.
    grids: the (h_l, w_l) grid of each level.
    """

    features: torch.Tensor
    tokens: torch.Tensor | None = None
    source_logits: torch.Tensor | None = None
    levels: list[torch.Tensor] | None = None
    grids: list[tuple[int, int]] | None = None


def maps_to_levels(maps: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[tuple[int, int]]]:
    """(B, D, h, w) feature maps as ``EncoderOutput.levels`` (B, h*w, D) and their grids."""
    return ([m.flatten(2).transpose(1, 2) for m in maps], [(int(m.shape[2]), int(m.shape[3])) for m in maps])


class GATEEncoder(nn.Module, abc.ABC):
    """Base class of all encoders. Subclasses set ``modalities`` and ``feature_dim`` and implement
    :meth:`transform` and :meth:`forward`."""

    #: The input modalities this encoder accepts, a subset of :data:`MODALITIES`.
    modalities: frozenset[str] = frozenset()
    #: Width D of ``EncoderOutput.features``.
    feature_dim: int
    #: Size of the source (pretraining) label set when the encoder returns ``source_logits``.
    num_source_classes: int | None = None
    #: What ``forward`` returns besides pooled features: "tokens", "levels", "source_logits".
    provides: frozenset[str] = frozenset({"features"})
    #: The smallest input resolution (px) the encoder can take meaningfully, e.g. its total stride; config
    #: validation refuses a smaller ``image_size`` before anything is built.
    min_image_size: int = 1
    #: True for text/audio encoders whose body takes a sequence of token embeddings (:meth:`encode_embeddings`):
    #: a stem (:mod:`gate.encoders.stems`) can then replace their input layer and feed them images.
    takes_embeddings: bool = False
    #: Width of those token embeddings (set by such encoders once built).
    embed_dim: int | None = None
    #: The most tokens the body takes (its position table), None when unbounded.
    max_tokens: int | None = None
    #: The hub commit the pretrained weights were loaded from (set by hub encoders; recorded with every result
    #: as the fact ``weights_revision``). None: packaged, local or randomly initialised weights.
    weights_revision: str | None = None

    @abc.abstractmethod
    def transform(self, modality: str, train: bool) -> Callable[[Any], dict[str, torch.Tensor]]:
        """A function mapping one raw example of ``modality`` to a dict of tensors (no batch dim)."""

    @abc.abstractmethod
    def forward(self, batch: Mapping[str, torch.Tensor]) -> EncoderOutput:
        """Encode a collated batch (the dict produced by the transform, batched)."""

    def optimizer_groups(self) -> list[dict[str, Any]]:
        """Parameter groups that train at their own rate (``{"params": [...], "lr": ...}``), e.g. a new input
        stem in front of a pretrained body; every other parameter follows the recipe. Default: none."""
        return []

    def head_lr(self) -> float | None:
        """The learning rate of the task head, where the recipe's does not apply (a shifted encoder whose
        pretrained body is frozen: everything that trains is new, so the recipe's fine-tuning rate, 1e-5 for
        bodies of architecture vit, would leave the head almost untrained). Default: None, the recipe's."""
        return None

    def encode_embeddings(self, embeds: torch.Tensor) -> EncoderOutput:
        """Run the body on token embeddings ``(B, N, embed_dim)`` instead of the encoder's own input layer
        (the entry point of modality shifting). Encoders with ``takes_embeddings`` implement it."""
        raise NotImplementedError(f"{type(self).__name__} has no body that takes token embeddings")

    @torch.no_grad()
    def output_dims(self) -> dict[str, Any]:
        """Widths of what ``forward`` returns, from one probe forward on a blank image at the encoder's input
        size: ``token_dim``, ``level_dims`` (one per level) and ``grids``. Adapters whose heads depend on them
        receive them by name when they are built."""
        if "image" not in self.modalities:
            return {"token_dim": self.feature_dim, "level_dims": [], "grids": []}
        size = int(getattr(self, "image_size", 224))
        was_training = self.training
        try:
            out = self.eval()({"image": torch.zeros(1, 3, size, size, device=next(self.parameters()).device)})
        finally:
            self.train(was_training)
        return {"token_dim": int(out.tokens.shape[-1]) if out.tokens is not None else self.feature_dim,
                "level_dims": [int(level.shape[-1]) for level in out.levels or []],
                "grids": list(out.grids or [])}

    @classmethod
    def accepts(cls, modality: str) -> bool:
        """Whether the encoder (an instance or its class) takes ``modality``; an image encoder takes video frame by
        frame. The one statement of that rule: validation and tier expansion ask the encoder's class."""
        return modality in cls.modalities or (modality == "video" and "image" in cls.modalities)

    def input_transform(self, modality: str, train: bool) -> Callable[[Any], dict[str, torch.Tensor]]:
        """The transform of one raw input of ``modality``; video clips go through the image transform frame by
        frame (``{"video": (T, C, H, W)}``) when the encoder has no video transform of its own."""
        if modality == "video" and "video" not in self.modalities:
            return frames_transform(self.transform("image", train))
        return self.transform(modality, train)

    def prepare(self, values: Sequence[Any], modality: str = "image", train: bool = False) -> dict[str, Any]:
        """Raw examples of ``modality`` as one model-ready batch on the CPU: the input transform per example, its
        collate, then its per-batch step (for scripts and tests; the data module runs the same three in the
        loader's workers and on the device)."""
        from torch.utils.data import default_collate

        transform = self.input_transform(modality, train)
        items = [transform(value) for value in values]
        batch = getattr(transform, "collate", default_collate)(items)
        step = device_transform(transform)
        return step(batch) if step is not None else batch

    def check_modality(self, modality: str, dataset: str = "") -> None:
        """Raise a clear error if this encoder cannot take ``modality``."""
        if not self.accepts(modality):
            where = f" dataset {dataset!r} is {modality}" if dataset else f" input is {modality}"
            raise ValueError(
                f"encoder {type(self).__name__} accepts {sorted(self.modalities)}, but the{where}; "
                f"choose an encoder that accepts {modality!r} (or add a modality stem)"
            )


def frames_transform(image: Callable[[Any], dict[str, torch.Tensor]]) -> Callable[[Any], dict[str, torch.Tensor]]:
    """A clip (T frames of HxW or HxWxC) through an image transform frame by frame: ``{"video": (T, C, H, W)}``.
    An :class:`ImageTransform` keeps its split: uint8 frames per example, the rest per batch on the device."""
    if isinstance(image, ImageTransform):
        return image.frames()

    def transform(clip: Any) -> dict[str, torch.Tensor]:
        return {"video": torch.stack([image(frame)["image"] for frame in np.asarray(clip)])}

    return transform


def to_pil_rgb(value: Any) -> Image.Image:
    """A raw image example (PIL image, HxW or HxWxC uint8 array, or nested list) as an RGB PIL image."""
    if isinstance(value, Image.Image):
        return value.convert("RGB")
    array = np.asarray(value)
    if np.issubdtype(array.dtype, np.floating) and array.size and array.max() <= 1.0 + 1e-6:
        array = array * 255.0  # floats in [0, 1]
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    if array.ndim == 2:
        return Image.fromarray(array, mode="L").convert("RGB")
    if array.ndim == 3 and array.shape[-1] in (1, 3, 4):
        return Image.fromarray(array.squeeze(-1) if array.shape[-1] == 1 else array).convert("RGB")
    raise ValueError(f"cannot read an image from an array of shape {array.shape}")


def uint8_rgb(value: Any) -> torch.Tensor:
    """A raw image example as a (3, H, W) uint8 tensor at its own size (no copy through PIL for a uint8 array)."""
    if not isinstance(value, Image.Image):
        array = np.asarray(value)
        if array.dtype == np.uint8 and (array.ndim == 2 or (array.ndim == 3 and array.shape[-1] in (1, 3))):
            # a writable C-contiguous copy only where needed (a batch fetch hands out read-only views)
            tensor = torch.from_numpy(np.require(array if array.ndim == 3 else array[..., None], requirements=["C", "W"]))
            return tensor.permute(2, 0, 1).expand(3, -1, -1).contiguous()
    return torch.from_numpy(np.array(to_pil_rgb(value))).permute(2, 0, 1).contiguous()


class ImageTransform:
    """An image encoder's input path, split where examples become a batch (docs/design.md, "Inputs").

    * Per example, in the loader's workers (``__call__``): decode to a (3, H, W) **uint8** RGB tensor. An image
      larger than ``image_size`` on either side is resized to ``image_size``² here (PIL, antialiased: the batch
      then holds one size, and a small uint8 image crosses to the device instead of a large one); a smaller one
      stays at its own size (a 28 px Fashion-MNIST digit crosses as 28², not as 224² float32).
    * Per batch (:meth:`collate`): images of different sizes are each resized to ``image_size``² on the CPU as
      above, so that they stack; one size stacks as it is.
    * Per batch on the device (:meth:`on_device`, called once the batch has moved there): float, the resize to
      ``image_size``² (bilinear, antialiased) where the batch is not that size yet, the random horizontal flip (one
      draw per image) when ``flip``, and the normalisation by ``mean``/``std``.

    The model sees what the former per-example PIL pipeline gave it: identical where PIL resized (downscaling),
    within PIL's uint8 rounding where the device upscales (``tests/test_device_inputs.py`` states the tolerance).
    """

    key = "image"

    def __init__(self, image_size: int, mean, std, flip: bool = False) -> None:
        self.image_size = int(image_size)
        self.mean = tuple(float(m) for m in mean)
        self.std = tuple(float(s) for s in std)
        self.flip = bool(flip)

    def __call__(self, value: Any) -> dict[str, torch.Tensor]:
        return {self.key: self.example(value)}

    def example(self, value: Any) -> torch.Tensor:
        """One raw image as (3, H, W) uint8, resized to ``image_size``² only where it is larger."""
        image = uint8_rgb(value)
        if max(image.shape[-2:]) > self.image_size:
            return self.resized(image)
        return image

    def resized(self, image: torch.Tensor) -> torch.Tensor:
        """(3, H, W) uint8 resized to ``image_size``² by PIL (bilinear, antialiased: the former pipeline's)."""
        if tuple(image.shape[-2:]) == (self.image_size, self.image_size):
            return image
        pil = Image.fromarray(image.permute(1, 2, 0).numpy())
        out = pil.resize((self.image_size, self.image_size), Image.BILINEAR)
        return torch.from_numpy(np.array(out)).permute(2, 0, 1).contiguous()

    def collate(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """``default_collate``, after resizing each image to ``image_size``² where the batch's sizes differ."""
        from torch.utils.data import default_collate

        shapes = {tuple(item[self.key].shape) for item in items if self.key in item}
        if len(shapes) > 1:
            items = [{**item, self.key: self._resized_all(item[self.key])} for item in items]
        return default_collate(items)

    def _resized_all(self, images: torch.Tensor) -> torch.Tensor:
        return self.resized(images)

    def on_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        """The batch with its uint8 images as the encoder's normalised float inputs (a batch already float, e.g.
        from a caller that transformed it itself, is left alone)."""
        images = batch.get(self.key) if isinstance(batch, dict) else None
        if not isinstance(images, torch.Tensor) or images.dtype != torch.uint8:
            return batch
        return {**batch, self.key: self.images(images)}

    def images(self, images: torch.Tensor) -> torch.Tensor:
        """(..., 3, H, W) uint8 → (..., 3, S, S) float32, resized, flipped (when ``flip``) and normalised."""
        lead = images.shape[:-3]
        x = images.reshape(-1, *images.shape[-3:]).float().div_(255.0)
        if tuple(x.shape[-2:]) != (self.image_size, self.image_size):
            x = torch.nn.functional.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear",
                                                align_corners=False, antialias=True).clamp_(0.0, 1.0)
        if self.flip:
            flipped = torch.rand(x.shape[0], device=x.device) < 0.5
            x = torch.where(flipped[:, None, None, None], x.flip(-1), x)
        mean = torch.tensor(self.mean, device=x.device, dtype=x.dtype)[:, None, None]
        std = torch.tensor(self.std, device=x.device, dtype=x.dtype)[:, None, None]
        return x.sub_(mean).div_(std).reshape(*lead, *x.shape[-3:])

    def frames(self) -> FramesTransform:
        """The same path for clips: ``{"video": (T, 3, H, W)}`` uint8 per example."""
        return FramesTransform(self.image_size, self.mean, self.std, self.flip)


class FramesTransform(ImageTransform):
    """:class:`ImageTransform` for a clip of frames (``{"video": (T, 3, H, W)}``); one flip draw per frame would
    break motion, which is why the temporal adapters turn augmentation off."""

    key = "video"

    def example(self, value: Any) -> torch.Tensor:
        return torch.stack([super(FramesTransform, self).example(frame) for frame in np.asarray(value)])

    def _resized_all(self, images: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.resized(frame) for frame in images])


def image_transform(image_size: int, mean, std, train: bool, augment: bool = True) -> ImageTransform:
    """The standard image path (:class:`ImageTransform`): uint8 per example, resize, (a random horizontal flip when
    training with ``augment``) and normalisation per batch on the device."""
    return ImageTransform(image_size, mean, std, flip=train and augment)


def device_transform(transform: Any) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The per-batch device step of an input transform (:meth:`ImageTransform.on_device`), or None where the
    transform finishes its examples on the CPU (text tokenisers, audio features)."""
    return getattr(transform, "on_device", None)

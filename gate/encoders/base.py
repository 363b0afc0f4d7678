"""The encoder contract every backbone honours (DESIGN.md, "Encoder").

An encoder declares the modalities it accepts and its feature width, gives the transform that turns
one raw example (a PIL image, an HxW uint8 array, a string) into model inputs, and maps a batch to an
:class:`EncoderOutput`. Task adapters only ever see :class:`EncoderOutput`, so any encoder pairs with
any adapter whose needs it meets.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

MODALITIES = ("image", "text", "audio", "video")

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

    def accepts(self, modality: str) -> bool:
        """Whether the encoder takes ``modality``; an image encoder takes video frame by frame."""
        return modality in self.modalities or (modality == "video" and "image" in self.modalities)

    def input_transform(self, modality: str, train: bool) -> Callable[[Any], dict[str, torch.Tensor]]:
        """The transform of one raw input of ``modality``; video clips go through the image transform frame by
        frame (``{"video": (T, C, H, W)}``) when the encoder has no video transform of its own."""
        if modality == "video" and "video" not in self.modalities:
            return frames_transform(self.transform("image", train))
        return self.transform(modality, train)

    def check_modality(self, modality: str, dataset: str = "") -> None:
        """Raise a clear error if this encoder cannot take ``modality``."""
        if not self.accepts(modality):
            where = f" dataset {dataset!r} is {modality}" if dataset else f" input is {modality}"
            raise ValueError(
                f"encoder {type(self).__name__} accepts {sorted(self.modalities)}, but the{where}; "
                f"choose an encoder that accepts {modality!r} (or add a modality stem)"
            )


def frames_transform(image: Callable[[Any], dict[str, torch.Tensor]]) -> Callable[[Any], dict[str, torch.Tensor]]:
    """A clip (T frames of HxW or HxWxC) through an image transform frame by frame: ``{"video": (T, C, H, W)}``."""
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


def image_transform(image_size: int, mean, std, train: bool, augment: bool = True):
    """The standard image pipeline: RGB, resize, (light augmentation when training), normalise."""
    from torchvision import transforms as T

    steps: list[Callable] = [to_pil_rgb, T.Resize((image_size, image_size), antialias=True)]
    if train and augment:
        steps.append(T.RandomHorizontalFlip())
    steps += [T.ToTensor(), T.Normalize(mean=list(mean), std=list(std))]
    pipeline = T.Compose(steps)
    return lambda value: {"image": pipeline(value)}

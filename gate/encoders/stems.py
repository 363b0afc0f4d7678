"""Modality shifting (the GATE paper): a new input stem in front of a text or audio encoder's body.

When a dataset's modality is not one an encoder takes, but the encoder's body takes a sequence of token
embeddings (``GATEEncoder.takes_embeddings``: BERT, MPNet, MiniLM, BART's encoder, Whisper's encoder,
Resemblyzer's LSTM), :class:`StemmedEncoder` replaces the body's input layer (word embeddings, mel
convolutions, mel frames) with a ViT-style :class:`PatchStem`:

    image (B, 3, H, W) -> conv patchify (kernel = stride = patch_size) -> (B, N, embed_dim)
                       -> prepend a learned class token, add learned positions -> body -> pooled features

The stem is new and always trained, at its own learning rate ``lr`` (default 1e-3, the GATE conv recipe's
rate for layers trained from scratch; null: the recipe's rate); while the body is frozen the task head
trains at that rate too (:meth:`StemmedEncoder.head_lr`). The body keeps its pretrained weights and is frozen (``freeze_body``,
the default, as the GATE code does for shifted text and audio bodies) or fine-tuned with the run's recipe.
Video goes through the stem frame by frame, like any image encoder (the temporal adapter aggregates).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from .base import EncoderOutput, GATEEncoder, image_transform

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: The dataset modalities a patch stem can put through a body.
STEM_MODALITIES = ("image", "video")


class PatchStem(nn.Module):
    """ViT patch embedding: conv patchify (kernel = stride = ``patch_size``), a class token and learned
    positions (truncated-normal init, std 0.02, as timm's ViT). Output: (B, 1 + (H/p)*(W/p), embed_dim)."""

    def __init__(self, embed_dim: int, image_size: int, patch_size: int = 16, in_chans: int = 3) -> None:
        super().__init__()
        if patch_size < 1 or image_size < patch_size:
            raise ValueError(f"stem.patch_size={patch_size} must be in [1, image_size={image_size}]")
        self.patch_size = int(patch_size)
        self.grid = (image_size // patch_size, image_size // patch_size)
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + self.grid[0] * self.grid[1], embed_dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    @property
    def num_tokens(self) -> int:
        return 1 + self.grid[0] * self.grid[1]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = self.proj(images)  # (B, D, h, w)
        if tuple(patches.shape[-2:]) != self.grid:
            raise ValueError(f"the stem was built for {self.grid[0] * self.patch_size} px images, got "
                             f"{tuple(images.shape[-2:])}")
        tokens = patches.flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(tokens.shape[0], -1, -1)
        return torch.cat([cls, tokens], dim=1) + self.pos_embed


class StemmedEncoder(GATEEncoder):
    """An image encoder made of a :class:`PatchStem` and the body of a text/audio ``encoder``.

    Gives pooled ``features`` (the body's own pooling), ``tokens`` (the body's token states, class token first)
    and one ``levels`` map: the patch tokens on their (H/p, W/p) grid (dense adapters use it).
    """

    modalities = frozenset({"image"})
    provides = frozenset({"features", "tokens", "levels"})

    def __init__(self, body: GATEEncoder, image_size: int, patch_size: int = 16, freeze_body: bool = True,
                 mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                 augment: bool = False, lr: float | None = 1e-3) -> None:
        super().__init__()
        if not body.takes_embeddings or not body.embed_dim:
            raise ValueError(f"encoder {type(body).__name__} has no body that takes token embeddings: no stem can "
                             f"feed it images")
        self.body = body
        self.stem = PatchStem(int(body.embed_dim), int(image_size), int(patch_size))
        if body.max_tokens is not None and self.stem.num_tokens > body.max_tokens:
            raise ValueError(f"stem.patch_size={patch_size} at image_size={image_size} makes {self.stem.num_tokens} "
                             f"tokens, more than the {body.max_tokens} the {type(body).__name__} body takes; use a "
                             f"patch size >= {_smallest_patch(int(image_size), body.max_tokens)}")
        self.freeze_body = bool(freeze_body)
        if self.freeze_body:
            self.body.requires_grad_(False)
        self.image_size = int(image_size)
        self.min_image_size = int(patch_size)
        self.feature_dim = body.feature_dim
        self.mean, self.std, self.augment = tuple(mean), tuple(std), augment
        if lr is not None and not (isinstance(lr, (int, float)) and lr > 0):
            raise ValueError(f"encoder.stem.lr={lr!r} is invalid: expected a learning rate > 0 or null (the recipe's)")
        self.lr = None if lr is None else float(lr)

    @property
    def weights_revision(self) -> str | None:  # the body's weights are the pretrained ones
        return self.body.weights_revision

    def optimizer_groups(self) -> list[dict[str, Any]]:
        """The stem trains at ``lr`` (it starts from scratch); the body follows the recipe."""
        return [] if self.lr is None else [{"params": list(self.stem.parameters()), "lr": self.lr}]

    def head_lr(self) -> float | None:
        """With the body frozen nothing pretrained trains: the task head is as new as the stem and trains at
        the stem's rate. A fine-tuned body keeps the recipe's rate for the head (the GATE protocol)."""
        return self.lr if self.freeze_body else None

    def transform(self, modality: str, train: bool):
        self.check_modality(modality)
        return image_transform(self.image_size, self.mean, self.std, train=train, augment=self.augment)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> EncoderOutput:
        embeds = self.stem(batch["image"])
        if self.freeze_body and self.body.training:
            # A frozen body runs without dropout; its mode is restored after the call (Lightning warns about
            # submodules left in eval mode when fitting starts).
            self.body.eval()
            for module in self.body.modules():  # an RNN without dropout computes the same in training mode, and
                if isinstance(module, nn.RNNBase) and not module.dropout:  # cuDNN backpropagates (into the stem)
                    module.train()                                         # through an RNN only in that mode
            try:
                out = self.body.encode_embeddings(embeds)
            finally:
                self.body.train()
        else:
            out = self.body.encode_embeddings(embeds)
        levels = grids = None
        if out.tokens is not None and out.tokens.shape[1] == self.stem.num_tokens:
            levels, grids = [out.tokens[:, 1:]], [self.stem.grid]
        return EncoderOutput(features=out.features, tokens=out.tokens, levels=levels, grids=grids)


def _smallest_patch(image_size: int, max_tokens: int) -> int:
    patch = 1
    while 1 + (image_size // patch) ** 2 > max_tokens:
        patch += 1
    return patch


def needs_stem(encoder: GATEEncoder, modality: str | None) -> bool:
    """Whether ``encoder`` must be stemmed to take ``modality``: it does not take it, but its body takes
    embeddings and the modality is one a patch stem reads."""
    return (bool(modality) and not encoder.accepts(modality) and modality in STEM_MODALITIES and
        encoder.takes_embeddings)


def stem_encoder(encoder: GATEEncoder, stem_cfg: Mapping[str, Any] | None, image_size: int | None) -> StemmedEncoder:
    """``encoder`` behind a patch stem configured by the encoder config's ``stem:`` section."""
    cfg = dict(stem_cfg or {})
    size = cfg.pop("image_size", None) or image_size
    if size is None:
        raise ValueError(f"a stem for {type(encoder).__name__} needs an image size: set encoder.stem.image_size")
    unknown = set(cfg) - {"patch_size", "freeze_body", "mean", "std", "augment", "lr"}
    if unknown:
        raise ValueError(f"unknown encoder.stem keys {sorted(unknown)}; valid: patch_size, freeze_body, image_size, "
                         f"lr, mean, std, augment")
    return StemmedEncoder(encoder, image_size=int(size), **cfg)

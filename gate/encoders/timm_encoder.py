"""Any timm image model as an encoder: pretrained from the hub, from a local checkpoint, or from scratch."""

from __future__ import annotations

import os

from .base import EncoderOutput, GATEEncoder, image_transform, maps_to_levels
from .hub import hub_revision, require_hub

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin")


class TimmEncoder(GATEEncoder):
    """A timm backbone with its classifier removed (``num_classes=0``); pooled features plus tokens.

    pretrained: load timm's published weights (needs the hub unless they are cached locally).
    checkpoint_path: load weights from a local file instead (a state dict or a Lightning/timm checkpoint).
    revision: the hub revision of the pretrained weights (a commit hash pins them; default: timm's current).
    Random initialisation (``pretrained=false`` and no checkpoint) is the honest "from scratch" baseline.
    """

    modalities = frozenset({"image"})
    min_image_size = 32  # the total stride of timm's CNNs (32) and at least two ViT/16 patches

    def __init__(self, model_name: str, pretrained: bool = False, checkpoint_path: str | None = None,
                 image_size: int = 224, augment: bool = False, revision: str | None = None, **model_kwargs) -> None:
        super().__init__()
        import timm

        if model_name not in timm.list_models() and model_name.split(".")[0] not in timm.list_models():
            close = timm.list_models(f"*{model_name.split('_')[0]}*")[:10]
            raise ValueError(f"unknown timm model {model_name!r}; similar names: {close}")
        if checkpoint_path is not None and not os.path.isfile(checkpoint_path):
            raise FileNotFoundError(f"encoder.checkpoint_path={checkpoint_path!r} does not exist; give the path of a "
                                    f"local weights file (.pth, .pt or .safetensors)")
        if checkpoint_path is not None and os.path.getsize(checkpoint_path) == 0:
            raise ValueError(f"encoder.checkpoint_path={checkpoint_path!r} is an empty file; give a complete weights "
                             f"file")
        hub_id = _hub_id(model_name) if pretrained and checkpoint_path is None else None
        if hub_id is not None:  # fail in seconds, not after a minute of retries, when offline
            require_hub(hub_id, revision, f"timm model {model_name!r}",
                        "pass encoder.checkpoint_path=<a local weights file>", filenames=WEIGHT_FILES)
            if revision:
                model_kwargs["pretrained_cfg_overlay"] = {"hf_hub_id": f"{hub_id}@{revision}"}
        try:
            self.model = timm.create_model(model_name, pretrained=pretrained and checkpoint_path is None,
                                           num_classes=0, checkpoint_path=checkpoint_path or "", **model_kwargs)
        except Exception as err:  # hub unreachable, missing cache, unreadable checkpoint ...
            if checkpoint_path is not None:
                raise ValueError(f"encoder.checkpoint_path={checkpoint_path!r} is not a readable {model_name} "
                                 f"checkpoint ({type(err).__name__}: {' '.join(str(err).split())[:200]})") from err
            if pretrained:
                raise RuntimeError(
                    f"could not load pretrained weights for timm model {model_name!r} ({err}). Offline, either "
                    f"pre-download them into the HF cache or pass encoder.checkpoint_path=<local file>."
                ) from err
            raise
        if hub_id is not None:
            self.weights_revision = hub_revision(hub_id, revision, filenames=WEIGHT_FILES)
        cfg = self.model.pretrained_cfg or {}
        self.mean = tuple(cfg.get("mean", (0.485, 0.456, 0.406)))
        self.std = tuple(cfg.get("std", (0.229, 0.224, 0.225)))
        self.image_size = image_size
        self.augment = augment
        self.feature_dim = self.model.num_features
        self._wants_size = "img_size" in model_kwargs or _has_fixed_size(self.model)
        if self._wants_size and _fixed_size(self.model) not in (None, image_size):
            raise ValueError(f"timm model {model_name!r} is built for {_fixed_size(self.model)} px input; "
                             f"set encoder.image_size to it or pass encoder.img_size={image_size}")

    def transform(self, modality: str, train: bool):
        self.check_modality(modality)
        return image_transform(self.image_size, self.mean, self.std, train=train, augment=self.augment)

    @property
    def provides(self) -> frozenset[str]:
        levels = {"levels"} if hasattr(self.model, "forward_intermediates") else set()
        return frozenset({"features", "tokens"} | levels)

    def forward(self, batch) -> EncoderOutput:
        levels = grids = None
        if hasattr(self.model, "forward_intermediates"):
            # The last four stages (CNNs) or blocks (ViTs) as (B, D, h, w) maps, and the final features.
            tokens, maps = self.model.forward_intermediates(batch["image"], indices=4, output_fmt="NCHW")
            levels, grids = maps_to_levels(list(maps))
        else:
            tokens = self.model.forward_features(batch["image"])
        features = self.model.forward_head(tokens, pre_logits=True)
        if tokens.ndim == 4:  # CNN feature map (B, D, h, w) -> (B, h*w, D)
            tokens = tokens.flatten(2).transpose(1, 2)
        return EncoderOutput(features=features, tokens=tokens, levels=levels, grids=grids)


def _fixed_size(model) -> int | None:
    patch_embed = getattr(model, "patch_embed", None)
    size = getattr(patch_embed, "img_size", None)
    return int(size[0]) if size is not None else None


def _has_fixed_size(model) -> bool:
    dynamic = getattr(getattr(model, "patch_embed", None), "dynamic_img_size", False)
    return _fixed_size(model) is not None and not dynamic


def _hub_id(model_name: str) -> str | None:
    """The Hugging Face repo timm downloads ``model_name``'s pretrained weights from (None: not on the hub)."""
    from timm.models import get_pretrained_cfg

    try:
        cfg = get_pretrained_cfg(model_name)
    except Exception:  # noqa: BLE001 - names without a pretrained config have no hub weights
        return None
    hub_id = getattr(cfg, "hf_hub_id", None) if cfg is not None else None
    return hub_id.split("@")[0] if hub_id else None

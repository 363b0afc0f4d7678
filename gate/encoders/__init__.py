"""Encoders: the GATEEncoder contract and the built-in backbones."""

from .base import MODALITIES, EncoderOutput, GATEEncoder, image_transform, to_pil_rgb
from .efficientnet_lite import EfficientNetLite
from .hf_text import HFTextEncoder
from .timm_encoder import TimmEncoder

__all__ = ["MODALITIES", "EncoderOutput", "GATEEncoder", "image_transform", "to_pil_rgb",
           "EfficientNetLite", "HFTextEncoder", "TimmEncoder"]

"""Encoders: the GATEEncoder contract, the built-in backbones and modality-shifting stems."""

from .base import MODALITIES, EncoderOutput, GATEEncoder, image_transform, to_pil_rgb
from .efficientnet_lite import EfficientNetLite
from .hf_text import HFTextEncoder
from .hf_vision import HFCLIPTextTower, HFVisionEncoder
from .hub import WeightsUnavailable
from .resemblyzer import ResemblyzerEncoder
from .stems import PatchStem, StemmedEncoder
from .timm_encoder import TimmEncoder
from .whisper import WhisperEncoder

__all__ = ["MODALITIES", "EncoderOutput", "GATEEncoder", "image_transform", "to_pil_rgb",
           "EfficientNetLite", "HFCLIPTextTower", "HFTextEncoder", "HFVisionEncoder", "PatchStem",
           "ResemblyzerEncoder", "StemmedEncoder", "TimmEncoder", "WeightsUnavailable", "WhisperEncoder"]

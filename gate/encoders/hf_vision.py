"""Image towers of contrastive image-text models from transformers: OpenAI CLIP, LAION CLIP (OpenCLIP weights
in transformers format) and SigLIP; and their text towers, for the zero-shot image-text adapter.

Features: the tower's pooled output (CLIP: the final-norm class token; SigLIP: its attention-pooling head);
tokens: the last hidden states; levels: the patch tokens of the last four layers on their grid (dense adapters).
Any input size: position embeddings are interpolated (``interpolate_pos_encoding``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gate.stacks import require

from .base import EncoderOutput, GATEEncoder, image_transform
from .hf_text import HFTextEncoder
from .hub import hub_reachable, hub_revision, load_pretrained

MODEL_TYPES = ("clip", "siglip")
LEVELS = 4


def _classes(kind: str):
    if kind not in MODEL_TYPES:
        raise ValueError(f"encoder.model_type={kind!r} is invalid: expected one of {list(MODEL_TYPES)}")
    require("clip")
    from transformers import CLIPTextModel, CLIPVisionModel, SiglipTextModel, SiglipVisionModel

    return {"clip": (CLIPVisionModel, CLIPTextModel), "siglip": (SiglipVisionModel, SiglipTextModel)}[kind]


class HFVisionEncoder(GATEEncoder):
    """The image tower of a CLIP-style model.

    model_id / revision: hub repo and pinned revision; checkpoint_path: a local copy of the repo instead.
    model_type: ``clip`` (CLIPVisionModel) or ``siglip`` (SiglipVisionModel) (not ``kind`` or ``architecture``:
    metadata keys that gate.engine.build drops; ``architecture`` is the body's kind, vit, that picks the recipe).
    mean / std: the model's normalisation.
    ``model``: wrap a built vision model (tests build tiny random ones).
    """

    modalities = frozenset({"image"})
    provides = frozenset({"features", "tokens", "levels"})
    min_image_size = 32

    def __init__(self, model_id: str, model_type: str = "clip", revision: str | None = None,
                 checkpoint_path: str | None = None, pretrained: bool = True, image_size: int = 224,
                 mean: Sequence[float] = (0.48145466, 0.4578275, 0.40821073),
                 std: Sequence[float] = (0.26862954, 0.26130258, 0.27577711), augment: bool = False, model=None) -> None:
        super().__init__()
        kind = model_type
        if model is None:
            model = load_pretrained(_classes(kind)[0], model_id, revision, checkpoint_path, pretrained,
                                    f"{kind} image tower {model_id!r}")
            if pretrained and checkpoint_path is None:
                self.weights_revision = hub_revision(model_id, revision)
        self.model = model
        config = model.config
        self.kind = kind
        self.patch_size = int(config.patch_size)
        self.feature_dim = int(config.hidden_size)
        self.image_size, self.mean, self.std, self.augment = int(image_size), tuple(mean), tuple(std), augment
        # CLIP prepends a class token to the patch tokens; SigLIP has none.
        self._prefix = 1 if kind == "clip" else 0

    def transform(self, modality: str, train: bool):
        self.check_modality(modality)
        return image_transform(self.image_size, self.mean, self.std, train=train, augment=self.augment)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> EncoderOutput:
        images = batch["image"]
        out = self.model(pixel_values=images, output_hidden_states=True, interpolate_pos_encoding=True)
        grid = (images.shape[-2] // self.patch_size, images.shape[-1] // self.patch_size)
        levels = [h[:, self._prefix:] for h in out.hidden_states[1:][-LEVELS:]]  # [0]: the embeddings
        return EncoderOutput(features=out.pooler_output, tokens=out.last_hidden_state, levels=levels,
                             grids=[grid] * len(levels))


class HFCLIPTextTower(HFTextEncoder):
    """The text tower of a CLIP-style model (features: its pooled output), for the zero-shot image-text
    adapter: ``adapter.text_tower._target_=gate.encoders.HFCLIPTextTower
    +adapter.text_tower.model_id=openai/clip-vit-base-patch16``."""

    takes_embeddings = False

    def __init__(self, model_id: str, model_type: str = "clip", revision: str | None = None,
                 checkpoint_path: str | None = None, pretrained: bool = True, max_length: int = 64,
                 model=None, tokenizer=None) -> None:
        kind = model_type
        if model is None:
            from transformers import AutoTokenizer

            model = load_pretrained(_classes(kind)[1], model_id, revision, checkpoint_path, pretrained,
                                    f"{kind} text tower {model_id!r}")
            tokenizer = AutoTokenizer.from_pretrained(checkpoint_path or model_id,
                                                      local_files_only=checkpoint_path is not None or not hub_reachable(),
                                                      revision=None if checkpoint_path else revision)
        super().__init__(max_length=max_length, model=model, tokenizer=tokenizer)
        self.embed_dim = None

    def forward(self, batch) -> EncoderOutput:
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        return EncoderOutput(features=out.pooler_output, tokens=out.last_hidden_state)

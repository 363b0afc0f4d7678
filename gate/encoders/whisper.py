"""Whisper's audio encoder (Radford et al. 2022) from transformers: log-mel features in, token states out.

Hub: ``openai/whisper-base`` (74M parameters; the encoder alone is 20M, width 512, 6 layers). Only the encoder
is kept. Audio input: a 1-D waveform at 16 kHz (or a ``{"array", "sampling_rate"}`` dict), turned into
80-channel log-mel features padded to 30 s by transformers' ``WhisperFeatureExtractor``, as Whisper expects.
Features: the mean of the encoder's token states.

Images: the body (its transformer layers, sinusoidal positions and final norm) takes token embeddings, so a
patch stem (:mod:`gate.encoders.stems`) replaces the two mel convolutions (modality shifting).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from gate.stacks import require

from .base import EncoderOutput, GATEEncoder
from .hub import hub_revision, load_pretrained

SAMPLING_RATE = 16000
HOP = 160  # Whisper's mel hop length (10 ms)


class WhisperEncoder(GATEEncoder):
    """The encoder of a transformers ``WhisperModel``.

    model_id / revision: the hub repo and its pinned revision; checkpoint_path: a local copy of it instead.
    pretrained: false builds the same architecture randomly initialised. ``model``: wrap a built
    ``WhisperModel`` or ``WhisperEncoder`` (tests build tiny random ones).
    """

    modalities = frozenset({"audio"})
    provides = frozenset({"features", "tokens"})
    takes_embeddings = True

    def __init__(self, model_id: str = "openai/whisper-base", revision: str | None = None,
                 checkpoint_path: str | None = None, pretrained: bool = True, model=None) -> None:
        super().__init__()
        if model is None:
            require("audio")
            from transformers import WhisperModel

            model = load_pretrained(WhisperModel, model_id, revision, checkpoint_path, pretrained,
                                    f"whisper encoder {model_id!r}")
            if pretrained and checkpoint_path is None:
                self.weights_revision = hub_revision(model_id, revision)
        self.model = model.get_encoder() if hasattr(model, "get_encoder") else model
        config = self.model.config
        self.feature_dim = self.embed_dim = int(config.d_model)
        self.max_tokens = int(config.max_source_positions)
        self.num_mel_bins = int(config.num_mel_bins)
        strides = self.model.conv1.stride[0] * self.model.conv2.stride[0]
        self.num_frames = self.max_tokens * strides  # the mel length the encoder requires (3000 = 30 s)
        params = inspect.signature(self.model.layers[0].forward).parameters
        self._layer_kwargs = {"layer_head_mask": None} if "layer_head_mask" in params else {}

    def transform(self, modality: str, train: bool):
        self.check_modality(modality)
        require("audio")
        from transformers import WhisperFeatureExtractor

        extractor = WhisperFeatureExtractor(feature_size=self.num_mel_bins, sampling_rate=SAMPLING_RATE,
                                            hop_length=HOP, chunk_length=-(-self.num_frames * HOP // SAMPLING_RATE))

        def features(value: Any) -> dict[str, torch.Tensor]:
            rate = SAMPLING_RATE
            if isinstance(value, Mapping):
                rate, value = int(value.get("sampling_rate", SAMPLING_RATE)), value["array"]
            if rate != SAMPLING_RATE:
                raise ValueError(f"whisper takes 16 kHz audio, got {rate} Hz; resample the dataset's audio column")
            mel = extractor(np.asarray(value, dtype=np.float32), sampling_rate=SAMPLING_RATE,
                            return_tensors="np")["input_features"][0]
            return {"audio": torch.from_numpy(mel[:, :self.num_frames].astype(np.float32))}

        return features

    def forward(self, batch: Mapping[str, torch.Tensor]) -> EncoderOutput:
        tokens = self.model(input_features=batch["audio"]).last_hidden_state
        return EncoderOutput(features=tokens.mean(dim=1), tokens=tokens)

    def encode_embeddings(self, embeds: torch.Tensor) -> EncoderOutput:
        """The encoder's body on (B, N, d_model) embeddings: its sinusoidal positions, layers and final norm
        (what ``WhisperEncoder.forward`` does after its mel convolutions)."""
        encoder = self.model
        hidden = embeds + encoder.embed_positions.weight[: embeds.shape[1]]
        hidden = torch.nn.functional.dropout(hidden, p=encoder.dropout, training=encoder.training)
        for layer in encoder.layers:
            out = layer(hidden, None, **self._layer_kwargs)
            hidden = out[0] if isinstance(out, tuple) else out
        tokens = encoder.layer_norm(hidden)
        return EncoderOutput(features=tokens.mean(dim=1), tokens=tokens)

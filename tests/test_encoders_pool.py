"""The encoder pool (conf/encoder): every entry documents its source and architecture and names real models; hub
entries fail in seconds offline; the hub classes work on tiny random models of the same class (no download)."""

import time
from importlib import resources

import pytest
import torch
import yaml

from gate.encoders import HFCLIPTextTower, HFTextEncoder, HFVisionEncoder, WeightsUnavailable, WhisperEncoder

from helpers import compose_run, resolved

POOL = ["convnextv2_base", "vit_base_patch16", "deit3_base", "flexivit_base", "dino_vitb16", "dinov2_vitb14",
        "sam_vitb", "efficientnetv2_rw_s", "resnet50_a1", "resnext50_32x4d", "efficientformerv2",
        "vit_base_scratch", "resnet50_scratch", "flexivit_scratch", "efficientnetv2_scratch",
        "clip_vitb16", "siglip_vitb16", "laion_clip_vitb16", "bert_base", "bart_base", "mpnet_base", "whisper_base",
        "efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2", "minilm", "resemblyzer"]
HUB = {"clip_vitb16": "HFVisionEncoder", "siglip_vitb16": "HFVisionEncoder", "laion_clip_vitb16": "HFVisionEncoder",
       "bert_base": "HFTextEncoder", "bart_base": "HFTextEncoder", "mpnet_base": "HFTextEncoder",
       "whisper_base": "WhisperEncoder"}


def encoder_yaml(name):
    return yaml.safe_load(resources.files("gate.conf").joinpath("encoder", f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", POOL)
def test_pool_entry_composes_with_its_architecture_recipe(tmp_path, name):
    raw = encoder_yaml(name)
    cfg = compose_run(tmp_path, [f"encoder={name}"])
    assert cfg.encoder.name == name and cfg.encoder.architecture in ("conv", "vit", "hybrid") and "family" not in raw
    assert cfg.recipe.name == cfg.encoder.architecture, (name, cfg.recipe.name)  # recipes follow the architecture
    if raw["_target_"] == "gate.encoders.TimmEncoder":
        import timm

        pool = timm.list_models(pretrained=True) if raw["pretrained"] else timm.list_models()
        assert raw["model_name"] in pool
        assert name.endswith("_scratch") != raw["pretrained"]


@pytest.mark.parametrize("name", sorted(HUB))
def test_hub_encoders_fail_fast_offline_with_a_way_out(tmp_path, name, monkeypatch):
    from huggingface_hub import constants

    from gate.engine.build import build_encoder

    cfg = compose_run(tmp_path, [f"encoder={name}"])
    # Not told to stay offline, but the hub does not answer (a closed local port): still seconds, one line.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "https://127.0.0.1:9")
    start = time.perf_counter()
    with pytest.raises(WeightsUnavailable, match=r"not in the local Hugging Face cache.*checkpoint_path.*HF_HOME") as err:
        build_encoder(resolved(cfg.encoder))
    assert str(err.value).startswith({"siglip_vitb16": "siglip image tower", "clip_vitb16": "clip image tower",
                                      "laion_clip_vitb16": "clip image tower"}.get(name, ""))
    assert time.perf_counter() - start < 10


def test_timm_pool_fails_fast_offline_too(tmp_path):
    from gate.engine.build import build_encoder

    start = time.perf_counter()
    with pytest.raises(WeightsUnavailable, match="timm/vit_base_patch16_224.augreg_in21k_ft_in1k"):
        build_encoder(resolved(compose_run(tmp_path, ["encoder=vit_base_patch16"]).encoder))
    assert time.perf_counter() - start < 10


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_vision_towers_on_tiny_random_models(kind):
    from transformers import CLIPVisionConfig, CLIPVisionModel, SiglipVisionConfig, SiglipVisionModel

    cls, config_cls = (CLIPVisionModel, CLIPVisionConfig) if kind == "clip" else (SiglipVisionModel, SiglipVisionConfig)
    model = cls(config_cls(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8))
    encoder = HFVisionEncoder("tiny", model_type=kind, model=model, image_size=48)  # positions interpolated to 6x6
    image = torch.randint(0, 255, (20, 20), dtype=torch.uint8).numpy()
    out = encoder(encoder.prepare([image, image]))
    assert out.features.shape == (2, 32) and encoder.feature_dim == 32
    assert [level.shape for level in out.levels] == [(2, 36, 32)] * 2 and out.grids == [(6, 6)] * 2
    out.features.sum().backward()


def test_clip_text_tower_and_bart_encoder_only():
    from transformers import CLIPTextConfig, CLIPTextModel

    tower = HFCLIPTextTower("tiny", model=CLIPTextModel(CLIPTextConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        max_position_embeddings=16)))
    ids = torch.randint(0, 99, (2, 8))
    assert tower({"input_ids": ids, "attention_mask": torch.ones_like(ids)}).features.shape == (2, 32)
    assert tower.accepts("text") and not tower.takes_embeddings

    from test_stems import tiny_bart

    bart = HFTextEncoder(model=tiny_bart())
    assert type(bart.model).__name__ == "BartEncoder" and bart.feature_dim == 32
    assert bart({"input_ids": ids, "attention_mask": torch.ones_like(ids)}).tokens.shape == (2, 8, 32)


def test_whisper_pool_entry_wraps_the_encoder_only():
    from test_stems import tiny_whisper

    encoder = WhisperEncoder(model=tiny_whisper())
    assert type(encoder.model).__name__ == "WhisperEncoder"
    assert encoder.num_frames == 100 and encoder.max_tokens == 50 and encoder.embed_dim == 32


def fake_hub_cache(root, repo_id, commit):
    """A Hugging Face cache holding ``repo_id`` at ``commit`` (as a download leaves it): the snapshot folder."""
    repo = root / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return snapshot


def test_hub_weights_load_from_a_local_cache_and_record_their_commit(tmp_path, monkeypatch):
    """Offline, with the weights in the HF cache: timm and transformers load them through their real hub code,
    and the encoder records the snapshot's commit (the run's ``weights_revision`` fact; the configs leave
    ``revision: null``, so this is what says which weights an unpinned run measured)."""
    import json

    import timm
    from huggingface_hub import constants
    from safetensors.torch import save_file
    from transformers import WhisperConfig, WhisperModel

    from gate.encoders import StemmedEncoder, TimmEncoder

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    timm_commit, whisper_commit = "89abcdef" * 5, "01234567" * 5
    snapshot = fake_hub_cache(tmp_path, "timm/resnet18.a1_in1k", timm_commit)
    reference = timm.create_model("resnet18", num_classes=1000)
    save_file(reference.state_dict(), str(snapshot / "model.safetensors"))
    (snapshot / "config.json").write_text(json.dumps({"architecture": "resnet18", "num_classes": 1000}))
    encoder = TimmEncoder("resnet18.a1_in1k", pretrained=True, image_size=32)
    assert encoder.weights_revision == timm_commit
    assert torch.equal(encoder.model.conv1.weight, reference.conv1.weight)

    snapshot = fake_hub_cache(tmp_path, "gate-test/tiny-whisper", whisper_commit)
    WhisperModel(WhisperConfig(vocab_size=51866, d_model=32, encoder_layers=1, decoder_layers=1,
                               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                               decoder_ffn_dim=64, num_mel_bins=80, max_source_positions=50,
                               max_target_positions=32)).save_pretrained(snapshot)
    whisper = WhisperEncoder(model_id="gate-test/tiny-whisper")
    assert whisper.weights_revision == whisper_commit
    assert StemmedEncoder(whisper, image_size=32, patch_size=8).weights_revision == whisper_commit
    assert TimmEncoder("resnet18", pretrained=False, image_size=32).weights_revision is None

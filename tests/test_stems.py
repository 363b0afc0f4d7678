"""Modality shifting: a patch stem in front of each text/audio body (tiny random bodies where the real one is a
hub download), the config path that builds it, and a short real run of minilm and resemblyzer on pixels."""

import pytest
import torch

from gate.encoders import HFTextEncoder, PatchStem, ResemblyzerEncoder, StemmedEncoder, WhisperEncoder
from gate.engine.build import build_encoder
from gate.engine.validate import validate_run_config
from gate.errors import ConfigError

from helpers import compose_run, resolved


def tiny_bert():
    from transformers import BertConfig, BertModel

    return BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=64))


def tiny_mpnet():
    from transformers import MPNetConfig, MPNetModel

    return MPNetModel(MPNetConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64))


def tiny_bart():
    from transformers import BartConfig, BartModel

    return BartModel(BartConfig(vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1,
                                encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                decoder_ffn_dim=64, max_position_embeddings=64))


def tiny_whisper():
    from transformers import WhisperConfig, WhisperModel

    return WhisperModel(WhisperConfig(vocab_size=51866, d_model=32, encoder_layers=1, decoder_layers=1,
                                      encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                      decoder_ffn_dim=64, num_mel_bins=80, max_source_positions=50,
                                      max_target_positions=32))


BODIES = {
    "bert": lambda: HFTextEncoder(model=tiny_bert()),
    "mpnet": lambda: HFTextEncoder(model=tiny_mpnet()),
    "bart": lambda: HFTextEncoder(model=tiny_bart()),
    "minilm": lambda: HFTextEncoder(),  # the real packaged all-MiniLM-L6-v2
    "whisper": lambda: WhisperEncoder(model=tiny_whisper()),
    "resemblyzer": lambda: ResemblyzerEncoder(),  # the real packaged LSTM
}


@pytest.mark.parametrize("freeze", [True, False], ids=["frozen", "finetuned"])
@pytest.mark.parametrize("family", sorted(BODIES))
def test_stem_swap_keeps_the_body_and_trains(family, freeze):
    torch.manual_seed(0)
    body = BODIES[family]()
    before = {k: v.clone() for k, v in body.state_dict().items()}
    encoder = StemmedEncoder(body, image_size=32, patch_size=8, freeze_body=freeze)
    assert encoder.body is body and encoder.accepts("image") and encoder.accepts("video")
    assert not encoder.accepts("text")
    # the body's weights are the original's
    for key, value in encoder.body.state_dict().items():
        assert torch.equal(value, before[key]), key
    images = torch.randn(2, 3, 32, 32)
    out = encoder.train()({"image": images})
    assert out.features.shape == (2, body.feature_dim)
    assert out.tokens.shape[:2] == (2, 1 + 16) and out.levels[0].shape[:2] == (2, 16) and out.grids == [(4, 4)]
    out.features.pow(2).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in encoder.stem.parameters())
    body_grads = [p.grad for p in body.parameters() if p.grad is not None]
    if freeze:
        assert not body_grads and not any(p.requires_grad for p in body.parameters())
        encoder.eval()
        with torch.no_grad():  # a frozen body runs without dropout: training-mode output equals eval output
            assert torch.allclose(encoder.train()({"image": images}).features, encoder.eval()({"image": images}).features,
                                  atol=1e-5)
    else:
        assert body_grads and all(torch.isfinite(g).all() for g in body_grads)


def test_patch_stem_shapes_and_bad_sizes():
    stem = PatchStem(embed_dim=16, image_size=48, patch_size=4)
    assert stem(torch.zeros(3, 3, 48, 48)).shape == (3, 145, 16) and stem.grid == (12, 12)
    with pytest.raises(ValueError, match="built for 48 px"):
        stem(torch.zeros(1, 3, 64, 64))
    with pytest.raises(ValueError, match="stem.patch_size=64"):
        PatchStem(16, image_size=48, patch_size=64)


def test_too_many_tokens_for_the_body_names_a_patch_size_that_fits():
    body = HFTextEncoder(model=tiny_bert())  # 64 positions
    with pytest.raises(ValueError, match=r"makes 65 tokens, more than the 64 .* patch size >= 5"):
        StemmedEncoder(body, image_size=32, patch_size=4)


def test_whisper_and_resemblyzer_read_audio():
    wave = torch.randn(16000).numpy() * 0.1
    whisper = WhisperEncoder(model=tiny_whisper()).eval()
    item = whisper.transform("audio", train=False)({"array": wave, "sampling_rate": 16000})
    assert item["audio"].shape == (80, 100)
    with torch.no_grad():
        assert whisper({"audio": item["audio"][None]}).features.shape == (1, 32)
    speaker = ResemblyzerEncoder().eval()
    mel = speaker.transform("audio", train=False)(wave)["audio"]
    assert mel.shape == (160, 40) and (mel >= 0).all()
    with torch.no_grad():
        assert speaker({"audio": mel[None]}).features.shape == (1, 256)


def test_resemblyzer_loads_the_packaged_weights():
    from gate.stacks import resemblyzer_weights_path

    state = torch.load(resemblyzer_weights_path(), map_location="cpu", weights_only=True)["model_state"]
    encoder = ResemblyzerEncoder()
    assert torch.equal(encoder.lstm.weight_hh_l2, state["lstm.weight_hh_l2"])
    assert torch.equal(encoder.linear.bias, state["linear.bias"])
    assert not torch.equal(ResemblyzerEncoder(pretrained=False).linear.bias, state["linear.bias"])


def test_config_builds_a_stem_for_images_only(tmp_path):
    cfg = compose_run(tmp_path, ["encoder=minilm", "dataset=fashion_mnist", "image_size=32",
                                 "encoder.stem.patch_size=8", "encoder.stem.freeze_body=false"])
    validate_run_config(cfg)
    encoder = build_encoder(resolved(cfg.encoder), "image")
    assert isinstance(encoder, StemmedEncoder) and encoder.image_size == 32 and encoder.stem.patch_size == 8
    assert not encoder.freeze_body and encoder.output_dims()["grids"] == [(4, 4)]
    assert isinstance(build_encoder(resolved(cfg.encoder), "text"), HFTextEncoder)  # text needs no stem
    assert isinstance(build_encoder(resolved(cfg.encoder)), HFTextEncoder)


def test_validation_accepts_stemmable_pairs_and_names_impossible_ones(tmp_path):
    validate_run_config(compose_run(tmp_path, ["encoder=resemblyzer", "dataset=fashion_mnist"]))
    with pytest.raises(ConfigError, match=r"encoder.stem.patch_size=64 is invalid: must be <= the image size 48"):
        validate_run_config(compose_run(tmp_path, ["encoder=minilm", "dataset=fashion_mnist",
                                                   "encoder.stem.patch_size=64"]))
    with pytest.raises(ConfigError, match=r"encoder=efficientnet_lite0 takes \['image'\] input, but "
                                          r"dataset=bbc_news is text"):
        validate_run_config(compose_run(tmp_path, ["encoder=efficientnet_lite0", "dataset=bbc_news"]))


@pytest.mark.parametrize("freeze", [True, False], ids=["frozen", "finetuned"])
def test_learning_rates_per_part_of_a_shifted_model(freeze):
    """The stem trains at stem.lr; the head at stem.lr too while the body is frozen (nothing pretrained trains,
    so the recipe's fine-tuning rate does not apply), else at the recipe's rate like the fine-tuned body."""
    from functools import partial

    from gate.adapters import LinearClassifier
    from gate.engine.model import GATEModel

    encoder = StemmedEncoder(HFTextEncoder(model=tiny_bert()), image_size=32, patch_size=8, freeze_body=freeze,
                             lr=1e-3)
    adapter = LinearClassifier(feature_dim=encoder.feature_dim, num_classes=10)
    model = GATEModel(encoder, adapter, optimizer=partial(torch.optim.AdamW, lr=1e-5))
    rates = {id(p): group["lr"] for group in model.configure_optimizers().param_groups for p in group["params"]}
    assert all(rates[id(p)] == 1e-3 for p in encoder.stem.parameters())
    assert all(rates[id(p)] == (1e-3 if freeze else 1e-5) for p in adapter.parameters())
    body = list(encoder.body.parameters())
    assert all(id(p) not in rates for p in body) if freeze else all(rates[id(p)] == 1e-5 for p in body)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "steps"), [("minilm", 40), ("resemblyzer", 150)])
def test_shifted_encoder_learns_fashion_mnist(tmp_path, name, steps):
    """A short real run through the patch stem with the encoder's default protocol (frozen body; stem and head
    at the stem's rate): the training loss falls clearly. 16-px patches of 32-px images, 4 tokens: the frozen
    3-layer LSTM of resemblyzer learns more slowly than MiniLM's transformer, so it gets more steps. The end is the
    mean of the last 20 steps' losses (the last 5, batches of 32, swing by +-0.1 between runs whose inputs differ by
    one uint8 level of rounding). Here the last-20 mean ends at 0.50 (MiniLM) and 0.64 (resemblyzer) of the start;
    with 8-px patches (16 tokens, twice the time) at 0.77 and 0.78."""
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run

    cfg = compose_run(tmp_path, [f"encoder={name}", "dataset=fashion_mnist", "image_size=32", "logger=csv",
                                 "encoder.stem.patch_size=16", "callbacks=none", f"trainer.max_steps={steps}",
                                 f"trainer.val_check_interval={steps}", "trainer.log_every_n_steps=1",
                                 "trainer.enable_progress_bar=false", "data.max_train_samples=1280",
                                 "data.max_val_samples=64", "data.max_test_samples=64", "ensembles=[1]"])
    result = run_finetune(parse_run(cfg))
    import pandas as pd

    metrics = pd.read_csv(next(tmp_path.rglob("metrics.csv")))
    losses = metrics["train/loss"].dropna().to_numpy()
    assert len(losses) >= 30
    first, last = losses[:3].mean(), losses[-20:].mean()
    assert last < 0.8 * first, (first, last)
    assert result.metrics["acc@1"] >= 0.0


def test_a_pretrained_hugging_face_body_fine_tunes_in_training_mode():
    """from_pretrained returns an eval-mode model (dropout off) and Lightning keeps modes as given: GATEModel
    starts every module in training mode, and a frozen body still runs in eval mode inside its forward."""
    from functools import partial

    from gate.adapters import LinearClassifier
    from gate.engine.model import GATEModel

    body = HFTextEncoder()  # the packaged all-MiniLM-L6-v2, loaded with from_pretrained
    assert not body.model.training
    model = GATEModel(body, LinearClassifier(feature_dim=body.feature_dim, num_classes=4),
                      optimizer=partial(torch.optim.AdamW, lr=1e-5))
    assert all(module.training for module in model.modules())


def test_a_frozen_bodys_rnn_runs_in_training_mode_so_cudnn_can_backpropagate_into_the_stem():
    """A frozen body runs in eval mode (no dropout), but cuDNN backpropagates through an RNN only in training mode
    ("cudnn RNN backward can only be called in training mode": resemblyzer's stem on an H200, pool E): an RNN
    without dropout computes the same in either mode, so it alone stays in training mode."""
    encoder = StemmedEncoder(ResemblyzerEncoder(pretrained=False), image_size=32, patch_size=8, freeze_body=True)
    seen = {}
    lstm = encoder.body.lstm
    lstm.register_forward_pre_hook(lambda module, args: seen.update(lstm=module.training))
    encoder.train()({"image": torch.randn(2, 3, 32, 32)})
    assert seen == {"lstm": True} and lstm.dropout == 0

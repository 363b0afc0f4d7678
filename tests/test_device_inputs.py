"""The device-side input path gives the model what the per-example PIL path gave it.

The reference is the former pipeline, written out here as it stood (gate/encoders/base.py before issue 25:
``to_pil_rgb`` → ``torchvision.transforms.Resize((S, S), antialias=True)`` on the PIL image → ``ToTensor`` →
``Normalize``). The new path decodes to uint8 per example, stacks, and converts, resizes and normalises per batch
(:class:`gate.encoders.base.ImageTransform`). Stated tolerance: identical (1e-6) where PIL still resizes (an
image larger than the encoder's size, or a batch of mixed sizes); within one uint8 level (1/255 before the
normalisation, ≤ 1/255/std after) where the device upscales a small image, because PIL rounds its resized image to
uint8 and the device does not.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torchvision import transforms as T

from gate.encoders.base import FramesTransform, ImageTransform, frames_transform, image_transform, to_pil_rgb

from helpers import resolved

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
ONE_LEVEL = 1.0 / 255 / min(STD) + 1e-6


def old_pipeline(size: int, value) -> torch.Tensor:
    return T.Compose([to_pil_rgb, T.Resize((size, size), antialias=True), T.ToTensor(),
                      T.Normalize(mean=list(MEAN), std=list(STD))])(value)


def new_pipeline(transform: ImageTransform, values) -> torch.Tensor:
    batch = transform.collate([transform(v) for v in values])
    assert batch[transform.key].dtype == torch.uint8  # what crosses to the device
    return transform.on_device(batch)[transform.key]


def images(rng, shapes):
    return [rng.integers(0, 256, size=shape, dtype=np.uint8) for shape in shapes]


@pytest.mark.parametrize("size", [32, 64, 224])
def test_small_images_upscaled_on_the_device_within_one_uint8_level(size):
    rng = np.random.default_rng(0)
    raw = images(rng, [(28, 28)] * 3 + [(28, 28, 3)])
    transform = image_transform(size, MEAN, STD, train=False)
    assert transform(raw[0])["image"].shape == (3, 28, 28)  # crosses at its own size, as uint8
    new = new_pipeline(transform, raw)
    old = torch.stack([old_pipeline(size, v) for v in raw])
    assert new.shape == old.shape == (4, 3, size, size) and new.dtype == torch.float32
    assert float((new - old).abs().max()) <= ONE_LEVEL
    assert float((new - old).abs().mean()) <= 0.5 * ONE_LEVEL


def test_large_and_mixed_images_are_resized_by_pil_as_before():
    rng = np.random.default_rng(1)
    transform = image_transform(64, MEAN, STD, train=False)
    large = images(rng, [(120, 90, 3), (300, 64, 3), (65, 65)])  # larger than 64 on a side: PIL, per example
    assert torch.allclose(new_pipeline(transform, large), torch.stack([old_pipeline(64, v) for v in large]), atol=1e-6)
    mixed = images(rng, [(28, 28), (40, 30, 3), (64, 64, 3)])  # small but of different sizes: PIL, in the collate
    assert torch.allclose(new_pipeline(transform, mixed), torch.stack([old_pipeline(64, v) for v in mixed]), atol=1e-6)


def test_video_frames_take_the_same_path():
    rng = np.random.default_rng(2)
    clips = [rng.integers(0, 256, size=(4, 28, 28), dtype=np.uint8) for _ in range(2)]
    transform = frames_transform(image_transform(32, MEAN, STD, train=False))
    assert isinstance(transform, FramesTransform) and transform(clips[0])["video"].dtype == torch.uint8
    new = new_pipeline(transform, clips)
    old = torch.stack([torch.stack([old_pipeline(32, f) for f in clip]) for clip in clips])
    assert new.shape == old.shape == (2, 4, 3, 32, 32)
    assert float((new - old).abs().max()) <= ONE_LEVEL


def test_the_flip_is_drawn_per_image_and_only_when_training_with_augmentation():
    image = np.tile(np.arange(16, dtype=np.uint8) * 16, (16, 1))  # a left-to-right ramp
    train = image_transform(16, MEAN, STD, train=True, augment=True)
    assert not image_transform(16, MEAN, STD, train=False, augment=True).flip
    assert not image_transform(16, MEAN, STD, train=True, augment=False).flip
    torch.manual_seed(0)
    out = new_pipeline(train, [image] * 64)
    plain = new_pipeline(image_transform(16, MEAN, STD, train=False), [image])[0]
    flipped = [bool(torch.equal(x, plain.flip(-1))) for x in out]
    kept = [bool(torch.equal(x, plain)) for x in out]
    assert all(f != k for f, k in zip(flipped, kept))  # each image is either flipped or not
    assert 16 < sum(flipped) < 48  # one draw per image, not one per batch


def test_masks_and_other_targets_cross_untouched(tmp_path):
    """Masks are stored at their mask size by the loaders and never resized on the way (nearest-neighbour only, at
    preparation): the batch the adapter reads holds the raw class ids."""
    from gate.engine.build import build_adapter, build_datamodule, build_encoder, build_spec

    from helpers import TINY_ENCODER, compose_run

    cfg = compose_run(tmp_path, ["dataset=fmnist_seg", *TINY_ENCODER, "image_size=32",
                                 "data.batch_size=4"])
    encoder = build_encoder(resolved(cfg.encoder), "image", seed=0)
    spec = build_spec(resolved(cfg.dataset))
    module = build_datamodule(cfg, encoder, build_adapter(resolved(cfg.adapter), encoder, spec), spec)
    batch = next(iter(module.split_dataloader("val")))
    raw = np.stack([np.asarray(module.splits["val"][i][spec.column("mask")]) for i in range(len(batch["mask"]))])
    assert batch["image"].dtype == torch.uint8
    assert torch.equal(batch["mask"], torch.as_tensor(raw, dtype=torch.long))
    moved = module.on_after_batch_transfer(batch, 0)
    assert moved["image"].dtype == torch.float32 and moved["image"].shape[-2:] == (32, 32)
    assert moved["mask"] is batch["mask"]


def test_loader_settings_resolve_from_the_machine(monkeypatch):
    from gate.data import loading

    monkeypatch.setattr(loading, "available_cpus", lambda: 32)
    assert loading.resolve_num_workers("auto", cuda=True, devices=2) == 8  # 32 / 2, at most 8
    monkeypatch.setattr(loading, "available_cpus", lambda: 12)
    assert loading.resolve_num_workers("auto", cuda=True, devices=4) == 3
    assert loading.resolve_num_workers("auto", cuda=False) == loading.CPU_AUTO_WORKERS == 0
    assert loading.resolve_num_workers(5, cuda=False) == 5  # an explicit number wins
    assert loading.resolve_pin_memory("auto", cuda=True) == (True, None)
    assert loading.resolve_pin_memory("auto", cuda=False) == (False, None)
    pinned, note = loading.resolve_pin_memory(True, cuda=False)
    assert not pinned and "pin_memory=true ignored" in note and "\n" not in note


def test_pin_memory_without_cuda_is_one_line_not_an_error_and_facts_say_what_ran(tmp_path, capsys, monkeypatch):
    import gate.data.loading as loading
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run

    from helpers import TINY_ENCODER, compose_run

    monkeypatch.setattr(loading, "uses_cuda", lambda trainer: False)
    cfg = compose_run(tmp_path, ["preset=smoke", "dataset=digits", *TINY_ENCODER, "data.pin_memory=true",
                                 "data.num_workers=auto"])
    result = run_finetune(parse_run(cfg))
    assert "[gate] data.pin_memory=true ignored" in capsys.readouterr().out
    assert result.facts["pin_memory"] is False and result.facts["num_workers"] == 0


def test_a_compile_torch_cannot_honour_is_refused_before_any_work(tmp_path, monkeypatch):
    import torch._dynamo

    from gate.engine.validate import validate_run_config
    from gate.errors import ConfigError

    from helpers import compose_run

    monkeypatch.setattr(torch._dynamo, "is_dynamo_supported", lambda: False)
    with pytest.raises(ConfigError) as err:
        validate_run_config(compose_run(tmp_path, ["compile=true"]))
    assert "compile=True is invalid: torch cannot compile here" in str(err.value) and "\n" not in str(err.value)

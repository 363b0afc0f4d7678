"""Helpers shared by the engine tests: compose run configs into a temporary output root."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_module
from omegaconf import DictConfig

# A tiny, fast, but real run: pretrained EfficientNet-Lite0 on scikit-learn digits at 32 px, 60 steps.
FAST = [
    "dataset=digits",
    "image_size=32",
    "logger=csv",
    "trainer.max_steps=60",
    "trainer.val_check_interval=20",
    "trainer.enable_progress_bar=false",
    "data.batch_size=32",
    "data.max_val_samples=null",
    "data.max_test_samples=null",
]


def compose_run(root: Path, overrides: list[str] = (), config_name: str = "run") -> DictConfig:
    with initialize_config_module("gate.conf", version_base=None):
        return compose(config_name, overrides=[f"paths.root={root}", *overrides])

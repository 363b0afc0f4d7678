"""Helpers shared by the engine tests: compose run configs into a temporary output root."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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


def sigkill_once(module: str, args: list[str], runs_dir: Path, pattern: str, timeout: float) -> None:
    """Start ``python -m <module> <args>`` (GATE_DEBUG unset), wait until a file matching ``pattern`` appears
    under ``runs_dir`` (at most ``timeout`` s), then SIGKILL it: a run killed mid-way, as a cluster does."""
    env = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + timeout
    while time.time() < deadline and not list(runs_dir.glob(pattern)):
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

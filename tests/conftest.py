"""Shared test setup: everything offline, on the CPU, deterministic."""

import os

# Tests never reach a hub or a W&B server.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


import pytest  # noqa: E402 - after the environment above, before anything imports the hub libraries


@pytest.fixture(scope="session")
def digits_smoke_run(tmp_path_factory):
    """One finished gate-run for the tests that only read it (resnet18_scratch on digits, the smoke preset, 64
    validation and test examples): ``(root, result)``. Tests copy what they need out of ``root``; none writes under
    it, so every test sees the same finished run."""
    from gate.engine.training.finetune import run_finetune

    from helpers import SMOKE, compose_run

    root = tmp_path_factory.mktemp("digits_smoke_run")
    cfg = compose_run(root, ["dataset=digits", "encoder=resnet18_scratch", *SMOKE, "data.max_val_samples=64",
                             "data.max_test_samples=64"])
    return root, run_finetune(cfg)

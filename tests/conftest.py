"""Shared test setup: everything offline, on the CPU, deterministic."""

import os

# Tests never reach a hub or a W&B server.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


# Under pytest-xdist (`-n auto`, the README's test command) each worker gets its share of the cores for torch's
# intra-op threads, and so do the processes its tests start: two workers of two threads each on a 2-core machine
# ran slower than one process. Set before any test module imports torch.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
if _workers > 1:
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _cores // _workers)))

import sys  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402 - after the environment above, before anything imports the hub libraries


@pytest.fixture(autouse=True)
def _no_process_state_leaks_between_tests():
    """An entry point called in process (``gate_data.main([...])``, ``call_cli``) sends its temp files and caches
    under its output root (``TMPDIR``, ``MPLCONFIGDIR``, ...), as it may in a process of its own: the environment
    and the temp dir are put back after every test, so no test runs with another's settings. A task family a test
    registers (importing tests/toy_family.py registers one) is unregistered after it, so the next test in the same
    worker sees the packaged families only."""
    env, tempdir = dict(os.environ), tempfile.tempdir
    registry = sys.modules.get("gate.families")
    known = set(registry.FAMILIES) if registry is not None else set()  # read without loading the packaged ones
    yield
    registry = sys.modules.get("gate.families")
    if registry is not None:
        packaged = set(registry._packaged())
        for name in set(registry.FAMILIES) - known - packaged:
            registry.unregister_family(name)
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)
    tempfile.tempdir = tempdir


@pytest.fixture(scope="session")
def digits_smoke_run(tmp_path_factory):
    """One finished gate-run for the tests that only read it (resnet18_scratch on digits, the smoke preset, 64
    validation and test examples): ``(root, result)``. Tests copy what they need out of ``root``; none writes under
    it, so every test sees the same finished run."""
    from gate.engine.training.finetune import run_finetune
    from gate.engine.validate import parse_run

    from helpers import SMOKE, compose_run

    root = tmp_path_factory.mktemp("digits_smoke_run")
    cfg = compose_run(root, ["dataset=digits", "encoder=resnet18_scratch", *SMOKE, "data.max_val_samples=64",
                             "data.max_test_samples=64"])
    return root, run_finetune(parse_run(cfg))

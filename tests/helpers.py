"""Helpers shared by the engine tests: compose run configs into a temporary output root, call an entry point in
process as a user's command line would, and kill a command mid-run."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra import compose
from omegaconf import DictConfig

from gate.engine.compose import hydra_compose_context

# The tiny-run overrides (32 px, a few steps, capped splits, CSV logging, no logging callbacks, no progress bar)
# live in one preset, conf/preset/smoke.yaml: a test adds SMOKE and then only what it is about.
SMOKE = ["preset=smoke"]

# A real but tiny encoder for the tests about the engine, not the model: timm's own test ResNet (≈ 0.2 M
# parameters, random init), through the packaged `encoder=timm`. A smoke run of it takes ≈ 0.8 s here where
# ResNet-18 takes ≈ 3.9 s. Tests that check learning use a pretrained or full-size encoder instead.
TINY_ENCODER = ["encoder=timm", "encoder.model_name=test_resnet"]

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


def load_script(relative: str):
    """A script of the repository (``scripts/uv_install.py``, ``measurements/tier_expansion.py``) as a module: they
    are not packages, so tests import them by path."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The packaged config files, loaded once for the whole session (they do not change while it runs); a composition with
# a file:// search path (a test's own config dir) reads its files afresh (gate.engine.compose).
KEPT: dict = {}


def composing():
    """Hydra's compose API over gate's packaged configs, as gate composes them, with the session's loaded files."""
    return hydra_compose_context(kept=KEPT)


# Compositions of the packaged configs by their overrides, for the session: a test that composes what another composed
# gets a deep copy (≈ 5 ms against ≈ 100 ms a composition); the output root is set on the copy as Hydra sets a command
# line's value (gate.tiers.expand.apply_values). Not for a composition that sets a path itself or searches a config
# dir of a test's own (its files may change between two calls).
COMPOSED: dict = {}
_ANY_ROOT = "/gate-test-root"
_CONF = Path(__file__).resolve().parents[1] / "conf"  # gate.conf, the packaged configs


def compose_run(root: Path, overrides: list[str] = (), config_name: str = "run") -> DictConfig:
    import copy

    from gate.tiers.expand import apply_values

    overrides = list(overrides)
    if any(o.lstrip("+~").startswith(("paths", "hydra.searchpath")) for o in overrides):
        with composing():
            return compose(config_name, overrides=[f"paths.root={root}", *overrides])
    # The trailing plain values (``trainer.max_steps=4``) are set on the composition of what comes before them, as
    # Hydra sets a command line's values after merging every config group (gate.tiers.expand.apply_values); where
    # that fails (a key the config lacks), the whole is composed, so the error is Hydra's own.
    split = len(overrides)
    while split and _plain_value(overrides[split - 1]):
        split -= 1
    if split < len(overrides):
        base = (config_name, tuple(overrides[:split]))
        if base not in COMPOSED:
            with composing():
                COMPOSED[base] = compose(config_name, overrides=[f"paths.root={_ANY_ROOT}", *base[1]])
        try:
            return apply_values(copy.deepcopy(COMPOSED[base]), [f"paths.root={root}", *overrides[split:]])
        except Exception:  # noqa: BLE001 - composed whole below
            pass
    key = (config_name, tuple(overrides))
    if key not in COMPOSED:
        with composing():
            COMPOSED[key] = compose(config_name, overrides=[f"paths.root={_ANY_ROOT}", *overrides])
    return apply_values(copy.deepcopy(COMPOSED[key]), [f"paths.root={root}"])


def _plain_value(override: str) -> bool:
    """Whether ``override`` is a plain ``key=value`` on a config node (no config group, no +/~, no sweep)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        (parsed,) = OverridesParser.create().parse_overrides([override])
    except Exception:  # noqa: BLE001 - Hydra reports it when composing
        return False
    key = parsed.key_or_group
    if (parsed.package is not None or parsed.is_delete() or parsed.is_add() or parsed.is_force_add()
            or parsed.is_sweep_override() or "/" in key or key.startswith("hydra")):
        return False
    return "." in key or not (_CONF / key).is_dir()  # a top-level key that names a config group selects a file


def resolved(section):
    """A composed config (or a section of it) as plain data, resolved once: what gate's builders take (a command
    resolves its config once, in its parse; a test that builds from a composition does it here)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(section, resolve=True) if OmegaConf.is_config(section) else section


def sigkill_once(module: str, args: list[str], runs_dir: Path, pattern: str, timeout: float) -> None:
    """Start ``python -m <module> <args>`` (GATE_DEBUG unset), wait until a file matching ``pattern`` appears
    under ``runs_dir`` (at most ``timeout`` s), then SIGKILL it: a run killed mid-way, as a cluster does. The file is
    polled every 50 ms, so a run a few steps long is still killed before it ends."""
    env = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + timeout
    while time.time() < deadline and not list(runs_dir.glob(pattern)):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


@dataclass
class CliResult:
    """What a command left: its exit code and everything it wrote to stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str


def call_cli(main: Callable[[], object], argv: Sequence[str], capsys, prog: str = "gate") -> CliResult:
    """Run an entry point's ``main()`` in this process as ``prog *argv`` would run (Hydra parses ``sys.argv``),
    and undo what an entry point does to its process (env vars, the temp dir, warning format, Hydra's global
    state). An exception that escapes becomes a traceback in ``stderr``, as a real process would print it.
    ``capsys`` is the test's pytest fixture; GATE_DEBUG and HYDRA_FULL_ERROR are unset for the call, and the signal
    handlers the entry point installs are put back."""
    from hydra.core.global_hydra import GlobalHydra

    from gate import signals

    saved_env, saved_argv, saved_tempdir = dict(os.environ), sys.argv, tempfile.tempdir
    saved_signals = signals.handlers()  # an entry point installs gate's stop-signal handlers: this process keeps its own
    saved_format, saved_levels = warnings.formatwarning, _logger_levels()
    # Hydra's job_logging (gate-analysis, gate-eevee: stdout) gives the root logger a handler on this call's
    # captured stdout; left there, a later log line (matplotlib's first font scan) writes to a closed stream
    saved_handlers, saved_root_level = list(logging.root.handlers), logging.root.level
    capsys.readouterr()  # what came before is not this command's output
    os.environ.pop("GATE_DEBUG", None)
    os.environ.pop("HYDRA_FULL_ERROR", None)
    GlobalHydra.instance().clear()
    sys.argv = [prog, *argv]
    code, crash = 0, ""
    try:
        with warnings.catch_warnings():
            main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - a real process would die with this traceback
        code, crash = 1, traceback.format_exc()
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tempdir
        warnings.formatwarning = saved_format
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
        logging.root.handlers[:] = saved_handlers
        logging.root.setLevel(saved_root_level)
        GlobalHydra.instance().clear()
        signals.uninstall(saved_signals)
    out = capsys.readouterr()
    return CliResult(code, out.out, out.err + crash)


def _logger_levels() -> dict[str, int]:
    return {name: logging.getLogger(name).level for name in ("lightning.pytorch", "lightning.fabric", "lightning")}

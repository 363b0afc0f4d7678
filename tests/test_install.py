"""scripts/uv_install.py: uv installs from the indexes pip is configured with, and picks versions as pip does."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("uv_install", ROOT / "scripts" / "uv_install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pips_settings_are_read_with_pips_precedence(monkeypatch):
    """`pip config list` prints scope.name='value' lines; an environment variable beats [install], which beats
    [global] (this machine's own lines, /etc/pip.conf and PIP_* variables, are of this shape)."""
    listed = ("global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'\n"
              "global.find-links='/opt/global'\n"
              "install.find-links='/opt/install'\n"
              ":env:.find-links='/opt/wheels'\n"
              "global.cert='/etc/ssl/certs/ca-certificates.crt'\n"
              "global.constraint='/etc/xdg/pip/constraints.txt'\n"
              "global.timeout='180'\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=listed))
    uv = _module()
    settings = uv.pip_settings("python")
    assert settings["find-links"] == "/opt/wheels" and settings["cert"].endswith("ca-certificates.crt")
    args = uv.uv_arguments(settings)
    assert args[:2] == ["--index-strategy", "unsafe-best-match"]  # the highest version across indexes, as pip
    pairs = list(zip(args[2::2], args[3::2]))
    assert pairs == [("--extra-index-url", "file:///opt/pypi/simple"), ("--extra-index-url", "file:///opt/pypi-more/simple"),
                     ("--find-links", "/opt/wheels"), ("-c", "/etc/xdg/pip/constraints.txt")]
    assert "--index-url" not in args  # none configured: uv's default, PyPI, as pip's


def test_an_index_url_of_its_own_replaces_pypi():
    args = _module().uv_arguments({"index-url": "https://mirror.example/simple"})
    assert args[-2:] == ["--index-url", "https://mirror.example/simple"]

"""The configs ship inside the package: a wheel install finds them from any working directory."""

import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_config_folder_is_a_listed_package():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {"gate.conf." + p.name for p in (ROOT / "conf").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= listed, f"add {sorted(folders - listed)} to [tool.setuptools] packages in pyproject.toml"


def test_editable_install_finds_every_config_file():
    shipped = {str(p.relative_to(ROOT / "conf")) for p in (ROOT / "conf").rglob("*.yaml")}
    conf = resources.files("gate.conf")
    for rel in shipped:
        assert conf.joinpath(rel).is_file(), rel


@pytest.mark.slow
def test_wheel_ships_the_configs_and_composes_from_elsewhere(tmp_path):
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("gate-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in (p.relative_to(ROOT / "conf") for p in (ROOT / "conf").rglob("*.yaml")):
        assert f"gate/conf/{rel}" in names, rel
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, timeout=600)
    probe = ("import gate, hydra; from hydra import compose, initialize_config_module\n"
             "with initialize_config_module('gate.conf', version_base=None):\n"
             "    cfg = compose('run', overrides=['encoder=minilm', 'dataset=bbc_news'])\n"
             "print(gate.__file__); print(cfg.encoder.name, cfg.adapter.num_classes)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.split("\n")
    assert lines[0].startswith(str(target)) and lines[1] == "minilm 5"

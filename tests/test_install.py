"""scripts/uv_install.py: uv installs from the indexes pip is configured with, and picks versions as pip does."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


def _module():
    return load_script("scripts/uv_install.py")


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


# ----------------------------------------------------------------------------------- the wheels uv installs
def _wheel(folder: Path, name: str, version: str, tag: str) -> Path:
    """A minimal wheel of ``name`` with one module and the given tag."""
    import zipfile

    path = folder / f"{name}-{version}-{tag}.whl"
    info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": f"TAG = {tag!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for n, text in {**files, f"{info}/RECORD": record}.items():
            zf.writestr(n, text)
    return path


def _simple_index(root: Path, wheels: list[Path]) -> str:
    """A PEP 503 index (file://) listing ``wheels`` under their project's page."""
    for wheel in wheels:
        page = root / wheel.name.split("-")[0]
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text(f'<html><body><a href="{wheel.resolve().as_uri()}">{wheel.name}</a></body></html>')
    return root.resolve().as_uri()


def _installed_tag(venv: Path, name: str) -> str:
    wheel = next(venv.glob(f"lib/python*/site-packages/{name}-*.dist-info/WHEEL")).read_text()
    return next(line.split(": ", 1)[1] for line in wheel.splitlines() if line.startswith("Tag: "))


def test_the_uv_path_installs_the_wheel_pip_chooses(tmp_path):
    """soundfile's case, planted: one index holds a version's pure wheel, another the platform wheel of the same
    version (the one that bundles the native library). uv alone takes the first index's pure wheel; the install
    puts pip's choice in its place, and pip on the same indexes takes that very wheel."""
    import json
    import shutil
    import sys

    from packaging.tags import sys_tags

    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv is a test dependency (pyproject's test extra)"
    platform = next(t for t in sys_tags() if t.platform != "any").platform
    pure, native = "py3-none-any", f"py3-none-{platform}"
    files = tmp_path / "files"
    files.mkdir()
    first = _simple_index(tmp_path / "first", [_wheel(files, "gatenative", "1.0", pure)])
    second = _simple_index(tmp_path / "second", [_wheel(files, "gatenative", "1.0", native)])
    settings = {"index-url": second, "extra-index-url": first}  # uv asks the extra index first
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    uv_install = _module()

    alone = subprocess.run([uv, "pip", "install", "-q", "--python", python, *uv_install.uv_arguments(settings),
                            "gatenative"], capture_output=True, text=True)
    assert alone.returncode == 0, alone.stderr
    assert _installed_tag(venv, "gatenative") == pure  # what uv takes by itself: the case to correct

    assert uv_install.main(["gatenative"], python=python, settings=settings, uv=uv) == 0
    assert _installed_tag(venv, "gatenative") == native

    report = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
                             "--no-deps", "--quiet", "--report", "-", "--index-url", second, "--extra-index-url", first,
                             "gatenative"], capture_output=True, text=True, check=True)
    chosen = json.loads(report.stdout)["install"][0]["download_info"]["url"]
    assert chosen.endswith(f"-{native}.whl")


def test_pips_choice_ranks_by_this_interpreters_tags():
    """pip's rule, by hand: among one version's wheels the best-ranked supported tag wins; a wheel of another
    version, an unsupported platform, a yanked file or an sdist is never chosen."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import wheel_choice as wc
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    from packaging.tags import Tag

    supported = {Tag("cp311", "cp311", "manylinux_2_28_x86_64"): 0, Tag("py3", "none", "manylinux_2_28_x86_64"): 1,
                 Tag("py311", "none", "any"): 2, Tag("py3", "none", "any"): 3}
    c = wc.Candidate
    files = [c("x-1.0-py3-none-any.whl", "u1"), c("x-1.0-py3-none-manylinux_2_28_x86_64.whl", "u2"),
             c("x-1.0-cp311-cp311-win_amd64.whl", "u3"), c("x-1.1-cp311-cp311-manylinux_2_28_x86_64.whl", "u4"),
             c("x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "u5", yanked=True), c("x-1.0.tar.gz", "u6")]
    assert wc.pip_choice("1.0", "x", files, supported).url == "u2"
    assert wc.pip_choice("1.0", "x", files[:1], supported).url == "u1"
    assert wc.pip_choice("2.0", "x", files, supported) is None
    assert wc.tag_rank([Tag("py310", "none", "any")], supported) is None

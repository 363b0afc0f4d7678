"""Install packages into this interpreter's environment with uv, from the indexes pip is configured to use, and with
the wheels pip would choose.

uv resolves and unpacks in parallel (torch's wheels included) where pip does it one file at a time; it does not
read pip's configuration, so the index, extra indexes, find-links, constraints and CA file that `pip config`
reports are passed to it, and it picks the highest version across them as pip does. Its files can differ from
pip's: uv takes a version's files from the first index holding that version, pip pools them and takes the wheel
whose tags rank highest here (scripts/wheel_choice.py). Every installed wheel is therefore checked against the
sources' files for its version, and one that ranks below pip's choice is replaced by it (soundfile's pure wheel,
which needs a system libsndfile, by the manylinux wheel that bundles it). Any failure (uv cannot be installed, an
index cannot be reached, the check cannot read a source) exits non-zero and scripts/install.sh installs with pip.

Usage: python scripts/uv_install.py [pip-install arguments: -c constraints.txt -e '.[test]']
"""

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wheel_choice  # noqa: E402  (beside this script)

# pip's precedence, lowest first: the [global] section, then [install], then PIP_* environment variables.
SCOPE_RANK = {"global": 0, "install": 1, ":env:": 2}
LIST_OPTIONS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links", "constraint": "-c"}
TRUE = ("1", "true", "yes", "on")


def pip_settings(python: str) -> dict[str, str]:
    """The effective value of each pip setting (`pip config list`: scope.name='value' lines)."""
    listed = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    ranked: dict[str, tuple[int, str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        scope, _, name = key.rpartition(".")
        rank = SCOPE_RANK.get(scope)
        if rank is not None and rank >= ranked.get(name, (-1, ""))[0]:
            ranked[name] = (rank, value.strip().strip("'\""))
    return {name: value for name, (_, value) in ranked.items()}


def uv_arguments(settings: dict[str, str]) -> list[str]:
    args = ["--index-strategy", "unsafe-best-match"]
    if settings.get("no-index", "").lower() in TRUE:
        args += ["--no-index"]
    elif settings.get("index-url"):
        args += ["--index-url", settings["index-url"]]
    for name, flag in LIST_OPTIONS.items():
        for value in settings.get(name, "").split():
            args += [flag, value]
    return args


def sources(settings: dict[str, str]) -> tuple[list[str], list[str]]:
    """The indexes and find-links locations pip reads, as it reads them (PyPI unless an index or no-index is set)."""
    indexes = [] if settings.get("no-index", "").lower() in TRUE else [settings.get("index-url") or wheel_choice.PYPI]
    indexes += settings.get("extra-index-url", "").split()
    return indexes, settings.get("find-links", "").split()


def put_pips_wheels_in(uv: str, python: str, settings: dict[str, str], env: dict[str, str]) -> int:
    """Replace every installed wheel that ranks below pip's choice for its version by pip's choice."""
    started = time.monotonic()
    indexes, find_links = sources(settings)
    site_packages = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        capture_output=True, text=True, check=True).stdout.strip())
    wrong = wheel_choice.mismatches(site_packages, indexes, find_links)
    for mismatch in wrong:
        print(f"[install] {mismatch.line()}: installing pip's choice")
    if wrong:
        code = subprocess.run([uv, "pip", "install", "-q", "--python", python, "--compile-bytecode", "--no-deps",
                               "--reinstall", *(m.chosen.url for m in wrong)], env=env).returncode
        if code != 0:
            return code
    print(f"[install] wheels checked against pip's choice: {len(wrong)} replaced ({time.monotonic() - started:.0f} s)")
    return 0


def main(install_args: list[str], python: str = sys.executable, settings: dict[str, str] | None = None,
         uv: str | None = None) -> int:
    """Install ``install_args`` into ``python``'s environment (pip's settings: read from its ``pip config`` unless
    given; uv: the one beside ``python``, installed there with pip when absent)."""
    quiet = ["--disable-pip-version-check", "-q"]
    uv = Path(uv or Path(python).with_name("uv"))
    if not uv.exists():
        got_uv = subprocess.run([python, "-m", "pip", "install", *quiet, "uv"], capture_output=True, text=True)
        if got_uv.returncode != 0:  # its warnings about indexes without uv are noise; its error is the last line
            print(f"[install] pip could not install uv: {(got_uv.stderr.strip().splitlines() or ['?'])[-1]}")
            return 1
    settings = pip_settings(python) if settings is None else settings
    env = dict(os.environ)
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"]
    command = [str(uv), "pip", "install", "-q", "--python", python, "--compile-bytecode"]
    code = subprocess.run([*command, *uv_arguments(settings), *install_args], env=env).returncode
    return code if code != 0 else put_pips_wheels_in(str(uv), python, settings, env)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, subprocess.CalledProcessError, ValueError) as err:  # pip's config, uv or a source unusable
        print(f"[install] uv could not be used: {err}")
        sys.exit(1)

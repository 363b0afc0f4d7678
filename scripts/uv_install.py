"""Install packages into this interpreter's environment with uv, from the indexes pip is configured to use.

uv resolves and unpacks in parallel (torch's wheels included) where pip does it one file at a time; it does not
read pip's configuration, so the index, extra indexes, find-links, constraints and CA file that `pip config`
reports are passed to it, and it picks the highest version across them as pip does. Any failure (uv cannot be
installed, an index cannot be reached) exits non-zero and scripts/install.sh installs with pip instead.

Usage: python scripts/uv_install.py [pip-install arguments: -c constraints.txt -e '.[test]']
"""

import os
import subprocess
import sys
from pathlib import Path

# pip's precedence, lowest first: the [global] section, then [install], then PIP_* environment variables.
SCOPE_RANK = {"global": 0, "install": 1, ":env:": 2}
LIST_OPTIONS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links", "constraint": "-c"}


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
    if settings.get("index-url"):
        args += ["--index-url", settings["index-url"]]
    for name, flag in LIST_OPTIONS.items():
        for value in settings.get(name, "").split():
            args += [flag, value]
    return args


def main(install_args: list[str]) -> int:
    python = sys.executable
    quiet = ["--disable-pip-version-check", "-q"]
    got_uv = subprocess.run([python, "-m", "pip", "install", *quiet, "uv"], capture_output=True, text=True)
    if got_uv.returncode != 0:  # its warnings about indexes without uv are noise; its error is the last line
        print(f"[install] pip could not install uv: {(got_uv.stderr.strip().splitlines() or ['?'])[-1]}")
        return 1
    settings = pip_settings(python)
    env = dict(os.environ)
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"]
    uv = Path(python).with_name("uv")
    command = [str(uv), "pip", "install", "-q", "--python", python, "--compile-bytecode"]
    return subprocess.run([*command, *uv_arguments(settings), *install_args], env=env).returncode


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, subprocess.CalledProcessError) as err:  # pip's config unreadable, uv not runnable: use pip
        print(f"[install] uv could not be used: {err}")
        sys.exit(1)

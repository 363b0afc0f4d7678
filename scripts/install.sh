#!/usr/bin/env bash
# Install gate on a fresh Debian/Ubuntu machine: the offline datasets from apt, a virtual environment in
# .venv, and the package (editable). `scripts/install.sh test` also installs what the test suite needs.
set -euo pipefail
cd "$(dirname "$0")/.."
want_tests=false
[ "${1:-}" = "test" ] && want_tests=true

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
apt_packages=()
[ -d /usr/share/datasets/fashion-mnist ] || apt_packages+=(dataset-fashion-mnist)
# The report test opens report.html in a headless browser.
if $want_tests && ! command -v chromium >/dev/null 2>&1; then apt_packages+=(chromium); fi
if [ ${#apt_packages[@]} -gt 0 ]; then
  echo "[install] apt packages: ${apt_packages[*]}"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${apt_packages[@]}"
fi

python="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$python" -m venv .venv
if $want_tests; then spec=".[test]"; else spec="."; fi
echo "[install] -e '$spec' into .venv (torch and torchvision pinned by constraints.txt)"
# uv first (a fraction of pip's time; pip's indexes, versions and wheels: scripts/uv_install.py); pip if uv fails.
if ! .venv/bin/python scripts/uv_install.py -c constraints.txt -e "$spec"; then
  echo "[install] uv could not install; installing with pip"
  .venv/bin/python -m pip install --disable-pip-version-check -q -c constraints.txt -e "$spec"
fi
# What was installed, loaded as a run loads it: the text model and tokenizer, CLIP-style processors, video decoding,
# volume reading, the audio encoders, the image encoders' weights, the offline datasets. A missing piece is one line
# naming it and the command that installs it, and the install fails (gate/stacks.py).
.venv/bin/python -m gate.stacks
echo "[install] done. Put gate's commands on your PATH with: source .venv/bin/activate"

#!/usr/bin/env bash
# Installs what weft needs, idempotently: Debian packages, then a Python virtualenv with the
# pinned PyPI wheels of tools/requirements.txt (torch's wheel is also the LibTorch weft links).
# A second run checks and returns in seconds.
#
#   WEFT_VENV   where the virtualenv lives (default: a per-user cache keyed by the pinned
#               versions, so fresh clones and CI reuse it; the repo gets a .venv link to it)
#   WEFT_SKIP_APT=1   do not touch Debian packages (e.g. no root and everything present)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Debian packages: the build toolchain and the C++ libraries the compiler side uses.
apt_packages=(cmake g++ make ccache pkg-config antlr4 libantlr4-runtime-dev nlohmann-json3-dev libre2-dev libgloo-dev libzip-dev
              libgtest-dev libgmock-dev libfmt-dev libcli11-dev python3 python3-venv python3-pip)
if [[ "${WEFT_SKIP_APT:-0}" != 1 ]]; then
  missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}" >&2
    sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
fi

# Python virtualenv, keyed by the pinned versions so that a change of pins makes a new one.
req="$root/tools/requirements.txt"
key=$(sha256sum "$req" | cut -c1-12)
venv=${WEFT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/venv-$key}
if [[ ! -f "$venv/.weft-ready" ]]; then
  echo "setup: creating virtualenv $venv (torch wheel: a few GB on first run)" >&2
  # Prefer Debian's python3 (has ensurepip with python3-venv); any python3 >= 3.10 works.
  py=$(command -v /usr/bin/python3 || command -v python3)
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  "$venv/bin/python" -m pip install -q -r "$req" >&2
  touch "$venv/.weft-ready"
fi
ln -sfn "$venv" "$root/.venv"

#!/usr/bin/env bash
# The two front doors of the README. Each installs what is missing, builds, then:
#   tools/dev.sh run  [weft-run args...]   runs the main job (weft-run's default)
#   tools/dev.sh test [ctest args...]      runs every test and prints ctest's summary
# WEFT_BUILD_DIR (default build/) and WEFT_JOBS (default: cores) tune the build.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cmd=${1:-}; shift || true
case "$cmd" in run|test|build) ;; *) echo "usage: tools/dev.sh run|test|build [args...]" >&2; exit 2;; esac

"$root/tools/setup.sh"
build=${WEFT_BUILD_DIR:-$root/build}
jobs=${WEFT_JOBS:-$(nproc)}
# ccache hits across clones (CI builds a fresh clone each time) need relative paths.
export CCACHE_BASEDIR="$root"
prefix=$("$root/.venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix" -DWEFT_PYTHON="$root/.venv/bin/python" >&2
fi
cmake --build "$build" -j "$jobs" >&2

case "$cmd" in
  run)  exec "$build/executor/weft-run" "$@" ;;
  test) cd "$build" && exec ctest --output-on-failure -j "$jobs" "$@" ;;
  build) ;;
esac

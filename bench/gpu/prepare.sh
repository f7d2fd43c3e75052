#!/usr/bin/env bash
# bench/gpu/prepare.sh: run HERE (the Debian 12 development machine, with network), before a GPU
# call. Fills bench/gpu/carry/ (ignored by git) with what the GPU machine lacks and cannot fetch,
# since nothing outside that machine is reachable:
#   carry/debs/    Debian 12 packages of the compiler side's libraries (headers + shared libraries),
#                  pkgconf, and fallbacks for libzip's runtime needs; run.sh unpacks them with
#                  dpkg -x into a private prefix (never into /).
#   carry/wheels/  diffusers (the version tools/requirements.txt pins) and the pure-Python
#                  dependency the image lacks; run.sh installs them with pip --target.
#   carry/antlr/   the plan parser generated from grammar/WeftPlan.g4 by this machine's ANTLR
#                  tool: the image has no Java, and the generated C++ is all the build needs
#                  (bench/gpu/antlr4-pregenerated.sh stands in for the tool there).
# Then prints the paths for the device tool's `carry` parameter and what will travel in all,
# and fails if that is over the tool's 64 MiB.
#
#   bench/gpu/prepare.sh [--check]     --check: only report sizes of an existing carry/
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
carry=$here/carry
limit_mib=64

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
check_only=0
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "prepare.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

# Headers and libraries weft's CMakeLists.txt finds (find_package / pkg_check_modules /
# find_library), their runtime libraries, and the Gloo headers torch's c10d headers include.
# libgtest-dev is not needed: run.sh builds no tests.
dev_debs=(nlohmann-json3-dev libre2-dev libfmt-dev libcli11-dev libantlr4-runtime-dev libzip-dev libgloo-dev)
runtime_debs=(libre2-9 libfmt9 libantlr4-runtime4.9 libzip4)
# CMake's FindPkgConfig needs an executable; the image may have none.
tool_debs=(pkgconf pkgconf-bin libpkgconf3)
# libzip4's own needs. Used on the GPU machine only where its system has no such library
# (run.sh asks ldconfig first), so a newer system copy always wins.
fallback_debs=(libbz2-1.0 libssl3 zlib1g)

pin() {  # the version of $1 that tools/requirements.txt pins
  sed -n "s/^$1==\([^ #]*\).*/\1/p" "$root/tools/requirements.txt"
}

fetch_debs() {
  mkdir -p "$carry/debs"
  rm -f "$carry/debs"/*.deb
  # apt-get download writes into the current directory; _apt cannot write into root's tree,
  # which only costs a warning.
  if ! (cd "$carry/debs" && apt-get download "${dev_debs[@]}" "${runtime_debs[@]}" "${tool_debs[@]}" \
          "${fallback_debs[@]}" 2>&1 | { grep -v "^W: Download is performed unsandboxed" || true; }); then
    echo "prepare.sh: apt-get download failed in $carry/debs (stale package lists? run apt-get update)" >&2
    exit 1
  fi
  local want=$(( ${#dev_debs[@]} + ${#runtime_debs[@]} + ${#tool_debs[@]} + ${#fallback_debs[@]} ))
  local got
  got=$(find "$carry/debs" -name '*.deb' | wc -l)
  if (( got != want )); then
    echo "prepare.sh: expected $want .deb files in $carry/debs, found $got" >&2
    exit 1
  fi
}

fetch_wheels() {
  local diffusers_version
  diffusers_version=$(pin diffusers)
  if [[ -z "$diffusers_version" ]]; then
    echo "prepare.sh: no diffusers pin in $root/tools/requirements.txt" >&2
    exit 1
  fi
  # The image (device docs, KINDS.md) has diffusers' other needs (filelock, huggingface-hub,
  # numpy, regex, requests, safetensors, Pillow) but not importlib_metadata.
  local py=$root/.venv/bin/python
  [[ -x "$py" ]] || py=python3
  local im_version
  im_version=$("$py" -c 'import importlib.metadata as m; print(m.version("importlib_metadata"))' 2>/dev/null || true)
  mkdir -p "$carry/wheels"
  rm -f "$carry/wheels"/*.whl
  # Flags of the device README: the image's Python is 3.12 (this machine's venv is 3.11).
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$carry/wheels" "diffusers==$diffusers_version" "importlib_metadata${im_version:+==$im_version}"
}

generate_parser() {
  local grammar=$root/grammar/WeftPlan.g4
  command -v antlr4 >/dev/null || { echo "prepare.sh: no antlr4 tool on PATH (Debian package antlr4)" >&2; exit 1; }
  rm -rf "$carry/antlr"
  mkdir -p "$carry/antlr"
  # The same command grammar/CMakeLists.txt runs.
  antlr4 -Dlanguage=Cpp -no-listener -no-visitor -package weftgrammar -Xexact-output-dir \
         -o "$carry/antlr" "$grammar"
  sha256sum "$grammar" | cut -d' ' -f1 >"$carry/antlr/WeftPlan.g4.sha256"
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

report() {
  [[ -d "$carry/debs" && -d "$carry/wheels" && -d "$carry/antlr" ]] || {
    echo "prepare.sh: $carry is incomplete (debs/, wheels/, antlr/); run bench/gpu/prepare.sh" >&2
    exit 1
  }
  local carry_bytes tree_bytes total
  carry_bytes=$(du -sb "$carry" | cut -f1)
  # What travels besides: tracked and untracked-not-ignored files of the working tree.
  # (a file deleted but still tracked makes stat fail; it does not travel)
  tree_bytes=$(cd "$root" && { git ls-files -z -co --exclude-standard | xargs -0 stat -c %s 2>/dev/null || true; } \
               | awk '{ s += $1 } END { print s + 0 }')
  total=$(( carry_bytes + tree_bytes ))
  echo "carry: bench/gpu/carry"
  echo "  debs:   $(find "$carry/debs" -name '*.deb' | wc -l) files, $(mib "$(du -sb "$carry/debs" | cut -f1)") MiB"
  echo "  wheels: $(cd "$carry/wheels" && ls ./*.whl | xargs -n1 basename | tr '\n' ' ')($(mib "$(du -sb "$carry/wheels" | cut -f1)") MiB)"
  echo "  antlr:  $(find "$carry/antlr" -type f | wc -l) files, $(mib "$(du -sb "$carry/antlr" | cut -f1)") MiB"
  echo "size: carry $(mib "$carry_bytes") MiB + working tree $(mib "$tree_bytes") MiB = $(mib "$total") MiB (limit $limit_mib MiB)"
  if (( total > limit_mib * 1048576 )); then
    echo "prepare.sh: $(mib "$total") MiB would travel, over the device tool's $limit_mib MiB" >&2
    exit 1
  fi
  echo 'device call: run(command="bash bench/gpu/run.sh", carry=["bench/gpu/carry"], timeout_s=600)'
}

if (( ! check_only )); then
  fetch_debs
  fetch_wheels
  generate_parser
fi
report

#!/usr/bin/env bash
# Stands in for the ANTLR tool (-DWEFT_ANTLR4=<this file>) where there is no Java, as on the GPU
# machine: takes grammar/CMakeLists.txt's antlr4 command line and copies the parser that
# bench/gpu/prepare.sh generated from the same WeftPlan.g4 into its -o directory. Refuses when
# the grammar has changed since, so a build never compiles a parser of another grammar.
set -euo pipefail
pregenerated=${WEFT_GPU_ANTLR_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/carry/antlr}
out="" grammar=""
while (($#)); do
  case "$1" in
    -o) out=$2; shift 2 ;;
    -*) shift ;;
    *) grammar=$1; shift ;;
  esac
done
if [[ -z "$out" || -z "$grammar" ]]; then
  echo "antlr4-pregenerated.sh: expected antlr4's '-o DIR ... GRAMMAR' arguments" >&2
  exit 2
fi
if [[ ! -f "$pregenerated/WeftPlan.g4.sha256" ]]; then
  echo "antlr4-pregenerated.sh: no pregenerated parser in $pregenerated (run bench/gpu/prepare.sh)" >&2
  exit 1
fi
want=$(cat "$pregenerated/WeftPlan.g4.sha256")
have=$(sha256sum "$grammar" | cut -d' ' -f1)
if [[ "$want" != "$have" ]]; then
  echo "antlr4-pregenerated.sh: $pregenerated was generated from another $grammar" \
       "(sha256 $want, now $have); rerun bench/gpu/prepare.sh" >&2
  exit 1
fi
mkdir -p "$out"
cp "$pregenerated"/WeftPlan*.cpp "$pregenerated"/WeftPlan*.h "$out"/

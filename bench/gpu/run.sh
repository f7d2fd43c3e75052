#!/usr/bin/env bash
# bench/gpu/run.sh: the GPU kit's one call. Builds weft's CUDA executor on the GPU machine
# against that image's LibTorch and measures it; see the README's "GPU kit" section.
#
#   bench/gpu/run.sh [--dry-run] [--steps LIST] [--skip LIST] [--out DIR] [--budget SECONDS]
#                    [--build-dir DIR] [--workdir DIR] [--jobs N] [--iters N] [--warmup N]
#                    [--wan-iters N] [--wan-warmup N] [--weights auto|seeded|file] [--seed N]
#                    [--python PATH] [--list-steps] [-h|--help]
#
# Steps, in order (LIST: comma-separated names; default all):
#   env        machine, GPUs, toolchain, torch                    -> env.txt
#   deps       unpacks bench/gpu/carry (prepare.sh) into a private prefix; diffusers wheels
#   build      cmake + build of weft-run and gpu_attention_check (CUDA, sm_90, Release)
#   attention  CUDA attention kernels with LSE vs the fp64 CPU reference (bf16, fp32); speed
#   calibrate  weft-run --calibrate --device cuda: the GPU's matmul/attention/elementwise rates and,
#              on >= 2 GPUs, every collective over NCCL -> OUT/machine.json; the model steps'
#              reports then carry the cost model's prediction next to the measured latency
#   probe      do weft-run's seeded weights equal kit.py's? (flux:tiny on the CPU) -> weights mode
#   flux       Flux-dev 1024x1024 bf16, one GPU: weft program (weft-run --model flux:dev, its
#              program exported there on first use, untimed) vs diffusers eager
#   program    the same with weft-run --program FILE: the committed fixture program, else the
#              one the flux step exported, else one exported here
#   meshes     >= 2 GPUs: ulysses=2, ring=2 (allgather, p2p), tp=2 with --check vs one GPU
#   wan        Wan2.1-14B 832x480x81 bf16, one GPU: weft program (weft-run --model wan:14b) vs
#              diffusers eager
# Every step runs under a timeout inside the overall --budget (default 480 s; 7200 s with
# --dry-run) and a failing step does not stop the others. Results: OUT (the device tool's $OUT
# when set, else --out, else bench/gpu/out): summary.txt (one line per measurement, for an issue
# note), results.jsonl (every number), steps.log (each step's output), build.log, env.txt.
# weft-run's program cache is WORKDIR/programs ($WEFT_PROGRAM_CACHE when set).
# Exit status: 0 when no step failed or timed out, 1 otherwise, 2 for bad arguments.
#
# --dry-run (the development machine, no GPU): the same steps on the CPU -- the same build (CUDA
# against the venv's CUDA LibTorch, when it has one) and prefix, tiny Flux and Wan in place of the
# big ones, the meshes as 2 CPU ranks -- so that a GPU call finds no bug the CPU could have.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

all_steps=(env deps build attention calibrate probe flux program meshes wan)

usage() { sed -n '2,37p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die_usage() { echo "run.sh: $*" >&2; echo "run.sh: try --help" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------
# Arguments.
dry_run=0 steps_arg="" skip_arg="" out_arg="" budget="" build_dir="" work="" jobs="" seed=0
iters=10 warmup=2 wan_iters=10 wan_warmup=1 weights_mode=auto python=""
while (($#)); do
  arg=$1 value="" has_value=0
  # --name=value and --name value both work.
  if [[ "$arg" == --*=* ]]; then value=${arg#*=} arg=${arg%%=*} has_value=1; fi
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --list-steps) printf '%s\n' "${all_steps[@]}"; exit 0 ;;
    --dry-run) dry_run=1; shift; continue ;;
    --steps|--skip|--out|--budget|--build-dir|--workdir|--jobs|--iters|--warmup|--wan-iters|--wan-warmup|--weights|--seed|--python) ;;
    *) die_usage "unknown option '$arg'" ;;
  esac
  if ((has_value)); then
    shift
  else
    (($# >= 2)) || die_usage "$arg needs a value"
    value=$2
    shift 2
  fi
  [[ -n "$value" ]] || die_usage "$arg needs a non-empty value"
  case "$arg" in
    --steps) steps_arg=$value ;;
    --skip) skip_arg=$value ;;
    --out) out_arg=$value ;;
    --budget) budget=$value ;;
    --build-dir) build_dir=$value ;;
    --workdir) work=$value ;;
    --jobs) jobs=$value ;;
    --iters) iters=$value ;;
    --warmup) warmup=$value ;;
    --wan-iters) wan_iters=$value ;;
    --wan-warmup) wan_warmup=$value ;;
    --weights) weights_mode=$value ;;
    --seed) seed=$value ;;
    --python) python=$value ;;
  esac
done

for pair in "budget:$budget" "jobs:$jobs" "iters:$iters" "warmup:$warmup" "wan-iters:$wan_iters" \
            "wan-warmup:$wan_warmup" "seed:$seed"; do
  name=${pair%%:*} v=${pair#*:}
  [[ -z "$v" || "$v" =~ ^[0-9]+$ ]] || die_usage "--$name wants a whole number, not '$v'"
done
((iters >= 1 && wan_iters >= 1)) || die_usage "--iters and --wan-iters must be at least 1"
case "$weights_mode" in auto|seeded|file) ;; *) die_usage "--weights must be auto, seeded or file, not '$weights_mode'" ;; esac

known_step() { local s; for s in "${all_steps[@]}"; do [[ "$s" == "$1" ]] && return 0; done; return 1; }
declare -A selected=()
if [[ -n "$steps_arg" ]]; then
  IFS=, read -r -a wanted <<<"$steps_arg"
  for s in "${wanted[@]}"; do
    known_step "$s" || die_usage "unknown step '$s' in --steps (steps: ${all_steps[*]})"
    selected[$s]=1
  done
else
  for s in "${all_steps[@]}"; do selected[$s]=1; done
fi
if [[ -n "$skip_arg" ]]; then
  IFS=, read -r -a unwanted <<<"$skip_arg"
  for s in "${unwanted[@]}"; do
    known_step "$s" || die_usage "unknown step '$s' in --skip (steps: ${all_steps[*]})"
    unset "selected[$s]"
  done
fi

# ---------------------------------------------------------------------------------------------
# Settings of the two modes.
if ((dry_run)); then
  mode="dry-run" device=cpu
  flux_model=flux-tiny flux_weft=flux:tiny wan_model=wan-tiny wan_weft=wan:tiny
  budget=${budget:-7200} jobs=${jobs:-$(( $(nproc) < 2 ? $(nproc) : 2 ))}
  build_dir=${build_dir:-$root/build-gpu-dry}
  python=${python:-$root/.venv/bin/python}
  [[ -x "$python" ]] || python=python3
  # CPU forwards of the tiny models: fewer iterations keep the dry run short.
  ((iters > 3)) && iters=3
  ((wan_iters > 3)) && wan_iters=3
  ((warmup > 1)) && warmup=1
  ((wan_warmup > 1)) && wan_warmup=1
  build_cap=6000
else
  mode="gpu" device=cuda
  flux_model=flux-dev flux_weft=flux:dev wan_model=wan-14b wan_weft=wan:14b
  budget=${budget:-480} jobs=${jobs:-$(nproc)}
  build_dir=${build_dir:-$root/build-gpu}
  python=${python:-python3}
  build_cap=300
fi
OUT_DIR=${out_arg:-${OUT:-$here/out}}
work=${work:-${TMPDIR:-/tmp}/weft-gpu-kit}
carry=$here/carry
weft_run=$build_dir/weft/executor/weft-run
attention_check=$build_dir/gpu_attention_check

mkdir -p "$OUT_DIR" "$work/logs" "$work/state"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
work=$(cd "$work" && pwd)
# Where weft-run --model exports each model's program once (tools/export_program.py) and finds it
# again: under the work directory, so a GPU call and its dry run use the same place.
export WEFT_PROGRAM_CACHE=${WEFT_PROGRAM_CACHE:-$work/programs}
summary=$OUT_DIR/summary.txt results=$OUT_DIR/results.jsonl steps_log=$OUT_DIR/steps.log
state=$work/state
rm -f "$summary" "$results" "$steps_log" "$OUT_DIR/build.log" "$OUT_DIR/env.txt" "$state"/*
start_time=$(date +%s)
deadline=$(( start_time + budget ))
reserve=10  # seconds kept for the summary at the end
exec 3>&1   # the console, also from steps whose output goes to their log

# ---------------------------------------------------------------------------------------------
# Helpers for steps.

# One summary line: summary.txt, the console and the step's log.
say() {
  printf '%s\n' "$*" >>"$summary"
  printf '%s\n' "$*" >&3
  printf '%s\n' "$*"
}
# Every JSON line of a file (or of stdin) into results.jsonl.
record() { grep -h '^{' "$@" >>"$results" || true; }
# A command under the current step's deadline. 124: it ran out of time (timeout kills the whole
# process group: weft-run's ranks and Python's children too).
bounded() {
  local left=$(( step_deadline - $(date +%s) ))
  if ((left <= 0)); then
    echo "run.sh: no time left in this step for: $*" >&2
    return 124
  fi
  timeout -k 5 "$left" "$@"
}
# The environment deps wrote (prefix libraries, pkg-config, Python path), if any.
load_env() { if [[ -f "$state/env.sh" ]]; then source "$state/env.sh"; fi; }
kit() { bounded "$python" "$here/kit.py" "$@"; }
# kit.py's JSON-only commands (line, report-check, report-program: no torch import, well under a
# second) under a short timeout of their own, not the step's deadline: a weft-run that used up
# the step still gets its summary line.
kit_quick() { timeout -k 2 20 "$python" "$here/kit.py" "$@"; }

# ---------------------------------------------------------------------------------------------
# Steps. Each runs in a subshell with `set -e`, its output in its log; return 3 = skipped (the
# step said why with `say`), anything else non-zero = failed.

step_env() {
  local envf=$OUT_DIR/env.txt
  {
    echo "mode: $mode"
    echo "date: $(date -u +%FT%TZ)"
    echo "repo: $root ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo 'no git'),"\
         "$(git -C "$root" status --short 2>/dev/null | wc -l) changed files)"
    echo "uname: $(uname -srm)"
    [[ -f /etc/os-release ]] && echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
    echo "cores: $(nproc)"
    echo "memory: $(awk '/MemTotal|MemAvailable/ {printf "%s %.1f GiB; ", $1, $2/1048576}' /proc/meminfo)"
    echo "disk ($work): $(df -h "$work" | awk 'NR==2 {print $4 " free of " $2}')"
    echo "disk (/dev/shm): $(df -h /dev/shm 2>/dev/null | awk 'NR==2 {print $4 " free of " $2}')"
    for tool in g++ cmake ninja nvcc pkg-config dpkg "$python"; do
      if command -v "$tool" >/dev/null; then
        echo "$tool: $("$tool" --version 2>&1 | grep -m1 -iE 'version|[0-9]+\.[0-9]+' || true)"
      else
        echo "$tool: not found"
      fi
    done
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
                 --format=csv 2>&1 || true
      nvidia-smi topo -m 2>&1 | head -20 || true
    else
      echo "nvidia-smi: not found"
    fi
  } >"$envf" 2>&1
  cat "$envf"
  local torch_info
  torch_info=$(bounded "$python" -c '
import json, torch
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(json.dumps({"kind": "env", "torch": torch.__version__, "cuda": torch.version.cuda, "gpus": n,
                  "gpu": torch.cuda.get_device_name(0) if n else None,
                  "gpu_memory_bytes": torch.cuda.get_device_properties(0).total_memory if n else None}))')
  echo "$torch_info" | tee -a "$envf"
  echo "$torch_info" | record
  local gpus
  gpus=$(echo "$torch_info" | "$python" -c 'import json, sys; print(json.load(sys.stdin)["gpus"])')
  echo "$gpus" >"$state/gpus"
  echo "$torch_info" >"$state/torch.json"
  say "$(kit_quick line env --json "$state/torch.json") $(nproc) cores; $(grep -m1 '^g++' "$envf" | cut -c1-60); mode $mode"
  if [[ "$mode" == gpu ]] && ((gpus == 0)); then
    say "env: FAILED: no GPU visible to torch on a GPU call (use --dry-run on a machine without one)"
    return 1
  fi
}

# Extracts a .deb's files into $2 without root or dpkg where needed (ar + tar, else Python).
unpack_deb() {
  local deb=$1 dest=$2
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$dest"
  elif command -v ar >/dev/null; then
    local member
    member=$(ar t "$deb" | grep '^data\.tar')
    ar p "$deb" "$member" | tar -x -C "$dest" -f - --auto-compress 2>/dev/null || ar p "$deb" "$member" | tar -xJ -C "$dest"
  else
    "$python" - "$deb" "$dest" <<'EOF'
import io, sys, tarfile
data = open(sys.argv[1], "rb").read()
pos = 8  # "!<arch>\n", then 60-byte member headers
while pos < len(data):
    name, size = data[pos:pos + 16].decode().strip().rstrip("/"), int(data[pos + 48:pos + 58])
    body = data[pos + 60:pos + 60 + size]
    if name.startswith("data.tar"):
        tarfile.open(fileobj=io.BytesIO(body)).extractall(sys.argv[2])
        break
    pos += 60 + size + (size & 1)
EOF
  fi
}

step_deps() {
  [[ -d "$carry/debs" && -d "$carry/wheels" && -d "$carry/antlr" ]] || {
    say "deps: FAILED: $carry is missing or incomplete; run bench/gpu/prepare.sh on the development machine and carry bench/gpu/carry"
    return 1
  }
  local prefix=$work/prefix fallback=$work/fallback fallback_lib=$work/fallback-lib
  rm -rf "$prefix" "$fallback" "$fallback_lib"
  mkdir -p "$prefix" "$fallback" "$fallback_lib"
  local deb n=0
  for deb in "$carry"/debs/*.deb; do
    case "$(basename "$deb")" in
      libbz2-1.0_*|libssl3_*|zlib1g_*) unpack_deb "$deb" "$fallback" ;;
      *) unpack_deb "$deb" "$prefix"; n=$((n + 1)) ;;
    esac
  done
  local libdir=$prefix/usr/lib/x86_64-linux-gnu
  # The .pc files name /usr; point them into the prefix.
  local pc
  for pc in "$libdir"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
    [[ -f "$pc" ]] && sed -i -E "s#(^|[=[:space:]]|-I|-L)/usr(/|\$)#\1$prefix/usr\2#g" "$pc"
  done
  # libzip's own needs, where this system has none (a system copy always wins).
  # (ldconfig's list is read once: `ldconfig -p | grep -q` under pipefail fails when grep
  # stops reading early.)
  local missing=() lib system_libs
  system_libs=$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true)
  for lib in libbz2.so.1.0 libssl.so.3 libcrypto.so.3 libz.so.1; do
    if ! grep -qE "^[[:space:]]*${lib//./\\.} " <<<"$system_libs"; then
      missing+=("$lib")
      ln -sf "$(find "$fallback" -name "$lib" | head -1)" "$fallback_lib/$lib"
    fi
  done
  # The carried pkgconf, also where the system has one: the same tool on both machines, so the
  # dry run tests what the GPU call uses.
  local pkgconf=$prefix/bin/pkg-config
  mkdir -p "$prefix/bin"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
    "$libdir" "$prefix/usr/bin/pkgconf" >"$pkgconf"
  chmod +x "$pkgconf"
  # Wheels: pip --target, so nothing of the image changes. Always in the dry run (to exercise
  # it); on the GPU machine when its diffusers is not the pinned one.
  local site=$work/site want have
  want=$(sed -n 's/^diffusers==\([^ #]*\).*/\1/p' "$root/tools/requirements.txt")
  have=$("$python" -c 'import diffusers; print(diffusers.__version__)' 2>/dev/null || echo none)
  rm -rf "$site"
  local wheels_note="diffusers $have already there"
  if [[ "$mode" == dry-run || "$have" != "$want" ]]; then
    bounded "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" "$carry"/wheels/*.whl
    wheels_note="$(cd "$carry/wheels" && ls ./*.whl | xargs -n1 basename | sed 's/-py3.*//' | tr '\n' ' ')from carried wheels"
  fi
  cat >"$state/env.sh" <<EOF
export WEFT_KIT_PREFIX='$prefix'
export WEFT_KIT_PKGCONF='$pkgconf'
export PKG_CONFIG_PATH='$libdir/pkgconfig:$prefix/usr/share/pkgconfig'\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH='$libdir'${missing:+:$fallback_lib}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PYTHONPATH='$site'\${PYTHONPATH:+:\$PYTHONPATH}
export PYTHONUNBUFFERED=1
EOF
  cat "$state/env.sh"
  load_env
  local versions
  versions=$("$pkgconf" --modversion re2 libzip fmt 2>&1 | tr '\n' ' ')
  [[ "$versions" =~ ^0\.0\.0\ 1\.7\.3\ 9\.1\.0 ]] || {
    say "deps: FAILED: pkg-config ($pkgconf) does not see the carried re2, libzip, fmt: $versions"
    return 1
  }
  local diffusers_version
  diffusers_version=$("$python" -c 'import diffusers; print(diffusers.__version__)' 2>&1 | tail -1)
  [[ "$diffusers_version" == "$want" ]] || {
    say "deps: FAILED: $python imports diffusers '$diffusers_version', want $want"
    return 1
  }
  say "deps: $n packages into $prefix ($(du -sh "$prefix" | cut -f1)); pkgconf $("$pkgconf" --version);" \
      "fallback libraries: ${missing[*]:-none needed}; $wheels_note; diffusers $diffusers_version imports"
}

step_build() {
  load_env
  [[ -n "${WEFT_KIT_PREFIX:-}" ]] || { say "build: FAILED: no prefix (the deps step did not run or failed)"; return 1; }
  local torch_cmake
  torch_cmake=$(bounded "$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  local torch_lib
  torch_lib=$(cd "$torch_cmake/../.." && pwd)/lib
  # Headers LibTorch's CUDA and c10d NCCL headers include: the CUDA toolkit's (next to nvcc,
  # else the nvidia wheels'), nccl.h from the toolkit or the nvidia-nccl wheel.
  local includes=("$WEFT_KIT_PREFIX/usr/include") cuda=OFF
  if [[ -f "$torch_lib/libtorch_cuda.so" ]]; then
    cuda=ON
    local cands=() nvcc_path
    nvcc_path=$(command -v nvcc || true)
    [[ -n "$nvcc_path" ]] && cands+=("$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")/include")
    cands+=("${CUDA_HOME:-/usr/local/cuda}/include" /usr/local/cuda/include)
    mapfile -t -O "${#cands[@]}" cands < <("$python" -c '
import glob, os
try:
    import nvidia
    for p in nvidia.__path__:
        for d in sorted(glob.glob(os.path.join(p, "*", "include"))):
            print(d)
except ImportError:
    pass')
    local header found
    for header in cuda_runtime_api.h nccl.h; do
      found=""
      for d in "${cands[@]}"; do
        if [[ -f "$d/$header" ]]; then found=$d; break; fi
      done
      [[ -n "$found" ]] || { say "build: FAILED: no $header in ${cands[*]}"; return 1; }
      [[ " ${includes[*]} " == *" $found "* ]] || includes+=("$found")
    done
  fi
  local cxxflags="" d
  for d in "${includes[@]}"; do cxxflags+=" -isystem $d"; done
  local generator="Unix Makefiles"
  command -v ninja >/dev/null && generator=Ninja
  if [[ -f "$build_dir/CMakeCache.txt" ]] && ! grep -q "^CMAKE_GENERATOR:INTERNAL=$generator\$" "$build_dir/CMakeCache.txt"; then
    rm -rf "$build_dir"
  fi
  export TORCH_CUDA_ARCH_LIST=9.0
  local t0=$SECONDS
  # CUDA_ARCHITECTURES: weft compiles no .cu of its own (LibTorch's kernels are prebuilt); set
  # for any CUDA language a later change may enable. POLICY_VERSION_MINIMUM: a CMake 4 (pip's)
  # refuses package files that ask for policies older than 3.5.
  bounded cmake -S "$here" -B "$build_dir" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
    -DWEFT_ENABLE_CUDA=$cuda -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
    "-DCMAKE_PREFIX_PATH=$torch_cmake;$WEFT_KIT_PREFIX/usr" \
    "-DPKG_CONFIG_EXECUTABLE=$WEFT_KIT_PKGCONF" \
    "-DWEFT_ANTLR4=$here/antlr4-pregenerated.sh" \
    "-DCMAKE_CXX_FLAGS=$cxxflags" "-DWEFT_PYTHON=$(command -v "$python")" \
    --no-warn-unused-cli 2>&1 | tee "$OUT_DIR/build.log"
  # Where each dependency came from: the carried prefix is the point of the kit.
  local cache=$build_dir/CMakeCache.txt from_prefix=() elsewhere=() var
  for var in fmt_DIR nlohmann_json_DIR CLI11_DIR WEFT_ANTLR4_RUNTIME_INCLUDE WEFT_ANTLR4_RUNTIME_LIB \
             pkgcfg_lib_RE2_re2 pkgcfg_lib_LIBZIP_zip; do
    local val
    val=$(sed -n "s/^$var:[A-Z]*=//p" "$cache")
    local short
    case "$var" in
      WEFT_ANTLR4_RUNTIME_INCLUDE) short=antlr4-headers ;;
      WEFT_ANTLR4_RUNTIME_LIB) short=antlr4-runtime ;;
      pkgcfg_lib_RE2_re2) short=re2 ;;
      pkgcfg_lib_LIBZIP_zip) short=libzip ;;
      *) short=${var%_DIR} ;;
    esac
    if [[ "$val" == "$WEFT_KIT_PREFIX"/* ]]; then from_prefix+=("$short"); else elsewhere+=("$var=$val"); fi
  done
  local cpp_count
  cpp_count=$(grep -c '^build .*\.o: CXX_COMPILER' "$build_dir/build.ninja" 2>/dev/null || true)
  cpp_count=${cpp_count:-?}
  bounded cmake --build "$build_dir" -j "$jobs" --target weft-run gpu_attention_check 2>&1 | tee -a "$OUT_DIR/build.log"
  local dt=$((SECONDS - t0))
  local missing_libs
  missing_libs=$(ldd "$weft_run" | grep "not found" || true)
  [[ -z "$missing_libs" ]] || { say "build: FAILED: weft-run cannot load: $missing_libs"; return 1; }
  "$weft_run" --help >"$state/weft-run-help.txt" 2>&1
  local program=no
  grep -q -- '--program' "$state/weft-run-help.txt" && program=yes
  local warnings
  warnings=$(grep -c 'warning:' "$OUT_DIR/build.log" || true)
  local cuda_libs
  cuda_libs=$(ldd "$weft_run" | grep -oE 'lib(torch_cuda|c10_cuda|cudart|nccl)[^ ]*' | sort -u | tr '\n' ' ')
  printf '{"kind": "build", "seconds": %d, "jobs": %s, "generator": "%s", "cuda": "%s", "warnings": %s, "program_flag": "%s"}\n' \
    "$dt" "$jobs" "$generator" "$cuda" "${warnings:-0}" "$program" | record
  say "build: weft-run + gpu_attention_check in ${dt} s (-j $jobs, $generator, $cpp_count objects in the tree), CUDA $cuda" \
      "(${cuda_libs:-no CUDA libraries}), ${warnings:-0} warnings; from the carried prefix: ${from_prefix[*]:-none}${elsewhere:+; NOT carried: ${elsewhere[*]}};" \
      "weft-run --program: $program"
}

step_attention() {
  load_env
  [[ -x "$attention_check" ]] || { say "attention: FAILED: no $attention_check (build step)"; return 1; }
  local args=(--device "$device")
  [[ "$mode" == dry-run ]] && args+=(--quick --iters 2 --warmup 1)
  local rc=0 log=$work/attention.out
  bounded "$attention_check" "${args[@]}" >"$log" 2>&1 || rc=$?
  cat "$log"
  sed -n 's/^json: //p' "$log" | record
  local line
  while IFS= read -r line; do say "$line"; done < <(sed -n 's/^summary: //p' "$log")
  return "$rc"
}

# The machine profile (issue 27): measured here, so that the model steps' weft-run reports predict
# their own latency from it (predicted_latency_ms) -- the cost model checked on a GPU.
step_calibrate() {
  load_env
  [[ -x "$weft_run" ]] || { say "calibrate: FAILED: no $weft_run (build step)"; return 1; }
  local args=(--calibrate --device "$device" -o "$OUT_DIR/machine.json") rc=0 log=$work/calibrate.out
  [[ "$mode" == dry-run ]] && args+=(--quick --nproc 2)
  rm -f "$OUT_DIR/machine.json"
  bounded "$weft_run" "${args[@]}" >"$log" 2>&1 || rc=$?
  cat "$log"
  if ((rc == 0)); then
    say "calibrate: $(sed -n 's/^  \(matmul\|attention\) *bf16: *\(.*\)/\1 bf16 \2/p' "$log" | paste -sd';' -)"
    local groups
    groups=$(grep -E '^    nccl|^    shm' "$log" | head -2 | sed 's/^ *//' | paste -sd';' -)
    say "calibrate: ${groups:-no collectives (one GPU)}"
  fi
  return "$rc"
}

# The step's status from its parts' exit codes: a timeout (124, 137) first, then any failure.
worst_rc() {
  local rc
  for rc in "$@"; do if ((rc == 124 || rc == 137)); then return 124; fi; done
  for rc in "$@"; do if ((rc != 0)); then return 1; fi; done
  return 0
}

# weft-run on one rank of DEVICE with the kit's seed: weft_one DEVICE ARGS...
weft_one() {
  local dev=$1
  shift
  bounded "$weft_run" --nproc 1 --device "$dev" --seed "$seed" "$@"
}

step_probe() {
  load_env
  if [[ "$weights_mode" == file ]]; then
    echo file >"$state/weights"
    say "probe: skipped (--weights file: the big models' weights go through a safetensors file)"
    return 3
  fi
  # The integer arithmetic on the kit's device (CUDA int64 ops on a GPU call), then both sides
  # on the CPU.
  kit selftest --device "$device" | tee "$work/selftest.json"
  record "$work/selftest.json"
  local w=$work/probe
  rm -rf "$w"
  kit diffusers --model flux-tiny --device cpu --dtype fp32 --seed "$seed" --workdir "$w" --iters 1 --warmup 0
  weft_one cpu --model flux:tiny --dtype fp32 --inputs "$w/inputs.safetensors" \
    --output "$w/weft_out.safetensors" --iters 1 --warmup 0
  local rc=0
  kit compare --ref "$w/diffusers_out.safetensors" --out "$w/weft_out.safetensors" --tolerance 1e-4 \
    >"$w/compare.json" || rc=$?
  cat "$w/compare.json"
  record "$w/compare.json"
  local rel
  rel=$("$python" -c 'import json, sys; print("%.1e" % json.load(open(sys.argv[1])).get("rel", float("nan")))' "$w/compare.json")
  if ((rc == 0)); then
    echo seeded >"$state/weights"
    say "probe: weft-run's seeded weights equal kit.py's (flux:tiny fp32 on the CPU, max rel diff $rel):" \
        "the big models use them, no checkpoint file"
  elif [[ "$weights_mode" == seeded ]]; then
    echo seeded >"$state/weights"
    say "probe: weft-run's seeded weights DIFFER from kit.py's (rel $rel) but --weights seeded was given:" \
        "weft vs diffusers differences below are not meaningful"
  else
    echo file >"$state/weights"
    say "probe: weft-run's seeded weights differ from kit.py's (rel $rel; a weft without" \
        "runtime/nn SeededValues): the big models' weights go through a safetensors file"
  fi
}

# The weights mode for a model step: file on >= 2 GPUs when the meshes run (ranks load a bf16
# file; seeded weights are made in fp32 per rank in host memory, 48 GB for Flux-dev each).
weights_for() {
  local m
  m=$(cat "$state/weights" 2>/dev/null || echo "$weights_mode")
  [[ "$m" == auto ]] && m=file
  if [[ "$mode" == gpu && "$(cat "$state/gpus" 2>/dev/null || echo 0)" -ge 2 && -n "${selected[meshes]:-}" ]]; then
    m=file
  fi
  echo "$m"
}

# The comparison of weft's output with diffusers', into $1/$3.json: fails (exit 1) when either
# output is missing, so a step never passes without one. compare_outputs DIR REF OUT NAME
compare_outputs() {
  local w=$1 ref=$1/$2 out=$1/$3 name=$4
  if [[ -f "$ref" && -f "$out" ]]; then
    local rc=0
    kit compare --ref "$ref" --out "$out" >"$w/$name.json" || rc=$?
    cat "$w/$name.json"
    return "$rc"
  fi
  rm -f "$w/$name.json"
  echo "run.sh: no comparison: $( [[ -f "$ref" ]] || printf '%s ' "$ref")$( [[ -f "$out" ]] || printf '%s ' "$out")missing"
  return 1
}

# diffusers eager, then weft-run --model (the model's program, exported into the program cache on
# first use), then the comparison, for one model.
# model_step LABEL KIT_MODEL WEFT_MODEL ITERS WARMUP
model_step() {
  load_env
  local label=$1 kit_model=$2 weft_model=$3 n=$4 k=$5
  local w=$work/$kit_model wmode
  wmode=$(weights_for)
  rm -rf "$w"
  mkdir -p "$w"
  local drc=0 wrc=0 crc=0
  local save=()
  [[ "$wmode" == file ]] && save=(--save-weights)
  # diffusers gets at most 55% of the step, so a hang there leaves weft-run its time.
  (
    step_deadline=$(( $(date +%s) + (step_deadline - $(date +%s)) * 55 / 100 ))
    kit diffusers --model "$kit_model" --device "$device" --dtype bf16 --seed "$seed" --workdir "$w" \
      --iters "$n" --warmup "$k" "${save[@]}"
  ) || drc=$?
  local wargs=()
  [[ -f "$w/inputs.safetensors" ]] && wargs+=(--inputs "$w/inputs.safetensors")
  [[ "$wmode" == file && -f "$w/weights.safetensors" ]] && wargs+=(--weights "$w/weights.safetensors")
  [[ -f "$OUT_DIR/machine.json" ]] && wargs+=(--machine "$OUT_DIR/machine.json")
  if [[ -x "$weft_run" ]]; then
    # Its output also into weft.log, which says whether the program was exported first.
    weft_one "$device" --model "$weft_model" --dtype bf16 "${wargs[@]}" --output "$w/weft_out.safetensors" \
      --iters "$n" --warmup "$k" --report "$w/weft.json" 2>&1 | tee "$w/weft.log" || wrc=$?
    ((wrc != 0)) || kit_quick report-check "$w/weft.json" || wrc=$?
    if ((wrc == 0)) && [[ -f "$OUT_DIR/machine.json" ]]; then
      say "$label: cost model $(timeout 20 "$python" -c 'import json, sys
r = json.load(open(sys.argv[1])); p = r.get("predicted_latency_ms"); m = r["latency_ms"]["median"]
print("predicted %.1f ms, measured %.1f ms (%+.1f%%) on the calibrated profile" % (p, m, (p - m) / m * 100) if p else "made no prediction")' "$w/weft.json" || echo "?")"
    fi
  else
    echo "no $weft_run (build step)"
    wrc=1
  fi
  compare_outputs "$w" diffusers_out.safetensors weft_out.safetensors compare || crc=$?
  kit_quick line model --label "$label" --workdir "$w" --weights "$wmode" --diffusers-rc "$drc" --weft-rc "$wrc" \
    --weft-log "$w/weft.log" --results "$results" >"$w/line.txt" || true
  say "$(cat "$w/line.txt")"
  worst_rc "$drc" "$wrc" "$crc"
}

step_flux() {
  local label="flux-dev 1024x1024 bf16, 1 GPU"
  [[ "$mode" == dry-run ]] && label="flux-tiny (dry run for flux-dev) bf16, CPU"
  model_step "$label" "$flux_model" "$flux_weft" "$iters" "$warmup"
}

step_wan() {
  # The Flux weights file is not needed after the meshes; the disk may not hold both.
  rm -f "$work/$flux_model/weights.safetensors"
  local label="wan2.1-14b 832x480x81 bf16, 1 GPU"
  [[ "$mode" == dry-run ]] && label="wan-tiny (dry run for wan2.1-14b) bf16, CPU"
  model_step "$label" "$wan_model" "$wan_weft" "$wan_iters" "$wan_warmup"
}

step_program() {
  load_env
  if ! grep -q -- '--program' "$state/weft-run-help.txt" 2>/dev/null; then
    if [[ -f "$state/weft-run-help.txt" ]]; then
      say "program: skipped (weft-run --help lists no --program in this tree)"
      return 3
    fi
    say "program: FAILED: no weft-run --help to read (build step)"
    return 1
  fi
  local w=$work/$flux_model config workload
  config=$root/tools/model_configs/$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import kit; print(kit.MODELS[sys.argv[2]][0])' "$here" "$flux_model")
  workload=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["workloads"][0]["name"])' "$config")
  local wargs=() wmode
  wmode=$(weights_for)
  [[ -f "$w/inputs.safetensors" ]] && wargs+=(--inputs "$w/inputs.safetensors")
  [[ "$wmode" == file && -f "$w/weights.safetensors" ]] && wargs+=(--weights "$w/weights.safetensors")
  [[ -x "$weft_run" ]] || { say "program: FAILED: no $weft_run (build step)"; return 1; }
  mkdir -p "$w"
  rm -f "$w/program_compare.json"
  run_program() {
    rm -f "$w/program_out.safetensors" "$w/program.json"
    weft_one "$device" --program "$1" "${wargs[@]}" --output "$w/program_out.safetensors" \
      --iters "$iters" --warmup "$warmup" --report "$w/program.json" || return $?
    kit_quick report-check "$w/program.json"
  }
  # The program, in this order:
  # - the committed one of this config (tests/fixtures/programs) when it takes batch 1: exported
  #   by the pinned torch; an operator this LibTorch lacks fails at load, before any weights are
  #   made;
  # - else the one the flux step's weft-run --model exported with this image's torch (its report
  #   names it), so no second export (a minute for Flux-dev);
  # - else (no flux step) one exported here by the image's torch, at batch 1 (torch specialises
  #   an example size of 1).
  local fixture program="" source="" wrc=0 crc=0 t0 from_flux
  fixture=$root/tests/fixtures/programs/$(basename "$config" .json)/program_bf16.pt2
  if [[ -f "$fixture" ]] && kit program-batch1 "$fixture"; then
    program=$fixture source="committed ${fixture#"$root"/}"
    run_program "$program" || wrc=$?
    if ((wrc != 0 && wrc != 124 && wrc != 137)); then
      echo "run.sh: the committed program failed (exit $wrc); trying another"
      wrc=0 program="" source=""
    fi
  fi
  if [[ -z "$program" ]] && from_flux=$(kit_quick report-program "$w/weft.json"); then
    program=$from_flux source="the flux step's, exported here by weft-run --model"
    run_program "$program" || wrc=$?
  fi
  if [[ -z "$program" ]]; then
    program=$w/program.pt2 t0=$SECONDS
    bounded "$python" "$root/tools/export_program.py" "$config" --workload "$workload" --dtype bf16 -o "$program" || wrc=$?
    source="exported here in $((SECONDS - t0)) s"
    ((wrc != 0)) || run_program "$program" || wrc=$?
  fi
  compare_outputs "$w" diffusers_out.safetensors program_out.safetensors program_compare || crc=$?
  kit_quick line program --label "${flux_model} via --program ($source)" --workdir "$w" --weights "$wmode" \
    --weft-rc "$wrc" --results "$results" >"$w/program_line.txt" || true
  say "$(cat "$w/program_line.txt")"
  worst_rc "$wrc" "$crc"
}

step_meshes() {
  load_env
  local gpus nranks=2 dev=$device
  gpus=$(cat "$state/gpus" 2>/dev/null || echo 0)
  if [[ "$mode" == gpu ]] && ((gpus < 2)); then
    say "meshes: skipped ($gpus GPU; NCCL meshes need >= 2)"
    return 3
  fi
  local w=$work/$flux_model wmode wargs=()
  wmode=$(weights_for)
  [[ -f "$w/inputs.safetensors" ]] && wargs+=(--inputs "$w/inputs.safetensors")
  [[ "$wmode" == file && -f "$w/weights.safetensors" ]] && wargs+=(--weights "$w/weights.safetensors")
  local meshes=("ulysses=2" "ring=2 allgather" "ring=2 p2p" "tp=2") failed=0 i=0 spec
  for spec in "${meshes[@]}"; do
    local mesh=${spec%% *} rotate=${spec#* } tag
    [[ "$rotate" == "$spec" ]] && rotate=""
    tag=${mesh//=/}${rotate:+-$rotate}
    # An equal share of what is left for each remaining mesh, so one hang costs only its share.
    local left=$(( step_deadline - $(date +%s) )) share rc=0
    share=$(( left / (${#meshes[@]} - i) ))
    i=$((i + 1))
    rm -f "$w/mesh-$tag.json"
    (
      step_deadline=$(( $(date +%s) + share ))
      bounded "$weft_run" --nproc "$nranks" --device "$dev" --seed "$seed" --model "$flux_weft" --dtype bf16 \
        --mesh "$mesh" ${rotate:+--rotate "$rotate"} --check "${wargs[@]}" --iters "$iters" --warmup "$warmup" \
        --report "$w/mesh-$tag.json"
    ) || rc=$?
    # An exit 0 without a passed --check in the report is a failure too.
    ((rc != 0)) || kit_quick report-check "$w/mesh-$tag.json" --want-check || rc=$?
    kit_quick line mesh --label "$flux_model mesh $mesh${rotate:+ ($rotate)} on $nranks $( [[ $dev == cuda ]] && echo GPUs || echo 'CPU ranks')" \
      --report "$w/mesh-$tag.json" --baseline "$w/weft.json" --rc "$rc" --results "$results" >"$w/mesh-$tag.txt" || true
    say "$(cat "$w/mesh-$tag.txt")"
    ((rc == 0)) || failed=1
  done
  ((failed == 0))
}

# ---------------------------------------------------------------------------------------------
# The runner.
declare -A caps=([env]=30 [deps]=90 [build]=$build_cap [attention]=120 [calibrate]=120 [probe]=90 [flux]=200 [program]=200 [meshes]=300 [wan]=300)
# Below this many seconds left, a step is not started.
declare -A mins=([env]=5 [deps]=10 [build]=60 [attention]=20 [calibrate]=30 [probe]=20 [flux]=60 [program]=60 [meshes]=60 [wan]=100)
if [[ "$mode" == dry-run ]]; then mins=([env]=5 [deps]=5 [build]=30 [attention]=10 [calibrate]=10 [probe]=10 [flux]=10 [program]=10 [meshes]=10 [wan]=10); fi
declare -A status=()
any_failed=0

{
  echo "weft GPU kit, $mode, $(date -u +%FT%TZ), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo 'no git')"\
       "(+$(git -C "$root" status --short 2>/dev/null | wc -l) changed files), budget ${budget} s"
} | tee -a "$summary"

run_step() {
  local name=$1
  if [[ -z "${selected[$name]:-}" ]]; then
    status[$name]="not selected"
    return
  fi
  local now left cap
  now=$(date +%s)
  left=$(( deadline - reserve - now ))
  cap=${caps[$name]}
  if ((left < ${mins[$name]})); then
    status[$name]="skipped: ${left} s of the budget left"
    say "$name: skipped (${left} s of the budget left, needs ${mins[$name]} s)"
    any_failed=1
    return
  fi
  step_deadline=$(( now + (cap < left ? cap : left) ))
  local log=$work/logs/$name.log t0=$SECONDS rc=0
  printf '== %s (up to %d s) ...\n' "$name" "$(( step_deadline - now ))" >&3
  set +e
  ( set -euo pipefail; "step_$name" ) >"$log" 2>&1
  rc=$?
  set -e
  local dt=$((SECONDS - t0)) why
  case $rc in
    0) status[$name]="ok (${dt} s)" ;;
    3) status[$name]="skipped (${dt} s)" ;;
    124|137) status[$name]="TIMEOUT after ${dt} s"; any_failed=1 ;;
    *) status[$name]="FAILED (exit $rc, ${dt} s)"; any_failed=1 ;;
  esac
  if ((rc != 0 && rc != 3)); then
    why=$(grep -v '^\s*$' "$log" | tail -1 | cut -c1-300)
    say "$name: ${status[$name]}: $why"
  fi
  {
    echo "======== $name: ${status[$name]}"
    cat "$log"
  } >>"$steps_log"
}

for s in "${all_steps[@]}"; do run_step "$s"; done

# steps.log comes back only under 16 MiB: keep its end.
if (( $(stat -c %s "$steps_log" 2>/dev/null || echo 0) > 15000000 )); then
  tail -c 15000000 "$steps_log" >"$steps_log.tmp" && mv "$steps_log.tmp" "$steps_log"
fi
if [[ -f "$OUT_DIR/build.log" ]] && (( $(stat -c %s "$OUT_DIR/build.log") > 15000000 )); then
  tail -c 15000000 "$OUT_DIR/build.log" >"$OUT_DIR/build.log.tmp" && mv "$OUT_DIR/build.log.tmp" "$OUT_DIR/build.log"
fi
{
  echo "steps: $(for s in "${all_steps[@]}"; do printf '%s %s; ' "$s" "${status[$s]:-?}"; done)"
  echo "total: $(( $(date +%s) - start_time )) s of ${budget} s; results in $OUT_DIR"
} | tee -a "$summary"
echo
echo "---- $summary"
cat "$summary"
exit "$any_failed"

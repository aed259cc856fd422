#!/usr/bin/env bash
# The device checks, run on the GPU machine over a pack made here by pack.sh:
#
#   scripts/device/check.sh PACK OUTDIR [BUDGET_S]       # e.g. .device/pack "$OUT" 300
#
# Each step is bounded in time, and the steps together by BUDGET_S (300 s by default, so
# a second run fits the same 15-minute lease after a fix); steps are in order of what
# matters most, and one the budget cannot hold any more is reported as skipped:
#   environment      device, driver, CUDA, NCCL, torch, Python, OS, compilers
#   pack_libraries   every binary of the pack loads here (ldd)
#   extension_build  the PyTorch backend compiled against this machine's torch (in the
#                    background, beside the NCCL steps)
#   nccl_*           strata-nccl-perf on real NCCL: ranks on the one GPU as separate hosts
#                    (NCCL_HOSTID), through the plugin (NCCL_NET_PLUGIN=strata) and through
#                    NCCL's own Socket transport; every result checked; and for each run
#                    through the plugin, that NCCL's log shows it loaded and chose strata
#   device_*         strata-device-check: every collective on device buffers through
#                    libstrata (NCCL inside each region, the shard staged across), 4 ranks
#                    in 2 regions, checked; then a 256 MiB allreduce timed across an
#                    emulated 1 Gbit/s, 5 ms WAN, with the bytes copied device<->host
#   device_codecs    strata-codec-check: libstrata-cuda's value codecs byte for byte against
#                    the CPU's, and their throughput beside the device's own copy
#   torch_*          python/tests/test_cuda.py: collectives on CUDA tensors, DDP beside
#                    NCCL, the compressing hook
# OUTDIR gets summary.md (the page for BENCHMARKS.md), results.json and logs.tar.gz.
# Exits 0 when every step passed.
set -uo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.."
repo=$PWD

if [[ ${1:-} == --step ]]; then  # one step's body, run by `step` below under its time limit
  case $2 in
    environment)
      echo "date: $(date -u '+%F %T UTC')"
      echo "host: $(hostname), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
      (. /etc/os-release && echo "os: $PRETTY_NAME, kernel $(uname -r)")
      echo "glibc: $(ldd --version | head -1)"
      if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv,noheader | sed 's/^/gpu: /'
      else
        echo "gpu: nvidia-smi not found"
      fi
      command -v nvcc >/dev/null && echo "nvcc: $(nvcc --version | grep -o 'release [0-9.]*')"
      "$PY" - <<'PY'
import sys, torch
print("python:", sys.version.split()[0], sys.executable)
print("torch:", torch.__version__, "built for CUDA", torch.version.cuda)
if torch.cuda.is_available():
    print("torch device:", torch.cuda.get_device_name(0), "capability", torch.cuda.get_device_capability(0))
    print("torch's NCCL:", ".".join(map(str, torch.cuda.nccl.version())))
else:
    print("torch device: none visible")
PY
      echo "nccl library: ${NCCL_LIB_DIR:-not found}"
      echo "compilers: $(g++ --version 2>/dev/null | head -1); $(cmake --version | head -1); ninja $(ninja --version 2>/dev/null)"
      echo "carried libraries used: ${CARRIED_USED:-none}; the image's own: ${CARRIED_SKIPPED:-none}"
      ;;
    pack_libraries)
      bad=0
      for f in "$PACK"/bin/* "$PACK"/lib/*.so*; do
        [[ -L $f ]] && continue
        missing=$(ldd "$f" 2>&1 | grep -E 'not found|version .* not found') && { echo "${f#$PACK/}: $missing"; bad=1; }
      done
      ((bad == 0)) && echo "every binary of the pack resolves its libraries"
      exit $bad
      ;;
    pytest)  # 77 (skipped) when no test passed: pytest succeeds when every test skips
      env PYTHONPATH="$WORK/ext/python" "$PY" -m pytest -q -s -rs -p no:cacheprovider --timeout="$4" \
        python/tests/test_cuda.py -k "$3" | tee "$WORK/pytest.out"
      rc=${PIPESTATUS[0]}
      ((rc == 0)) && ! grep -qE '[0-9]+ passed' "$WORK/pytest.out" && { echo "no test ran: $(tail -1 "$WORK/pytest.out")"; exit 77; }
      exit $rc
      ;;
    extension_build)
      cmake -S python -B "$WORK/ext" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_TORCH_PYTHON="$PY" \
        -Dstrata_DIR="$PACK/lib/cmake/strata" && cmake --build "$WORK/ext" --parallel "$(nproc)"
      ;;
  esac
  exit
fi

[[ $# -ge 2 ]] || { echo "usage: scripts/device/check.sh PACK OUTDIR [BUDGET_S]" >&2; exit 2; }
PACK=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && OUTDIR=$(cd "$2" && pwd)
budget=${3:-300}
WORK=$(mktemp -d /tmp/strata-check.XXXXXX)
logs=$WORK/logs
mkdir -p "$logs" "$WORK/json"
steps=$WORK/steps.tsv
: >"$steps"
PY=${STRATA_CHECK_PYTHON:-$(command -v python3)}  # the Python whose torch the extension is built for
export PACK WORK PY

# NCCL from the nvidia-nccl wheel torch uses; the carried system libraries only where
# the image has no library of that name (pack.sh).
NCCL_LIB_DIR=$("$PY" -c 'import os, nvidia.nccl as m; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
mkdir -p "$WORK/libs"
CARRIED_USED="" CARRIED_SKIPPED=""
for f in "$PACK"/lib/system/*.so*; do
  so=$(basename "$f")
  if ldconfig -p | grep -q "^[[:space:]]*$so "; then
    CARRIED_SKIPPED+="$so "
  else
    ln -s "$f" "$WORK/libs/$so"
    CARRIED_USED+="$so "
  fi
done
export NCCL_LIB_DIR CARRIED_USED CARRIED_SKIPPED
export LD_LIBRARY_PATH=$PACK/lib:$WORK/libs${NCCL_LIB_DIR:+:$NCCL_LIB_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[[ $CARRIED_USED == *libucs.so.0* ]] && export UCX_MODULE_DIR=$PACK/lib/system/ucx
export STRATA_TIMEOUT_S=60
t0=$SECONDS

record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$steps"
  echo "== $1: $2 (${3} s)${4:+ $4}"
}

# step NAME CAP COMMAND...: runs it with its output in logs/NAME.log, for at most CAP
# seconds and what is left of the budget.
step() {
  local name=$1 cap=$2
  shift 2
  local left=$((budget - (SECONDS - t0) - 10))
  if ((left < 15)); then
    record "$name" skipped 0 "the budget of $budget s was spent"
    return 1
  fi
  local limit=$((cap < left ? cap : left)) start=$SECONDS rc
  timeout -k 10 "$limit" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  local took=$((SECONDS - start))
  case $rc in
    0) record "$name" pass "$took" "" ;;
    77) record "$name" skipped "$took" "$(tail -1 "$logs/$name.log" | cut -c1-160)" ;;
    124 | 137) record "$name" timeout "$took" "stopped after $limit s" ;;
    *) record "$name" fail "$took" "exit $rc: $(grep -m1 -iE 'error|fail|wrong|not found|assert' "$logs/$name.log" | cut -c1-200)" ;;
  esac
  return $rc
}

# nccl NAME CAP NET [VAR=VALUE...] -- [strata-nccl-perf args]: one sweep on real NCCL; for
# the plugin, also whether NCCL's own log shows that it loaded and used strata, and across
# regions that the striped path carried it.
nccl() {
  local name=$1 cap=$2 net=$3
  shift 3
  local vars=()
  while [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  local netvars=(NCCL_NET_PLUGIN=none NCCL_NET=Socket)
  [[ $net == strata ]] && netvars=(NCCL_NET_PLUGIN="$PACK/lib/libnccl-net-strata.so" NCCL_NET=strata)
  step "$name" "$cap" env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE="$logs/$name.nccl.%p.log" \
    NCCL_SOCKET_IFNAME=lo STRATA_NET_IF=lo "${netvars[@]}" "${vars[@]}" \
    "$PACK/bin/strata-nccl-perf" --label "$net" --timeout 60 --json "$WORK/json/$name.json" "$@"
  local rc=$?
  [[ $net == strata && $rc != 77 ]] || return $rc
  local nlogs=("$logs/$name".nccl.*.log)
  if grep -qs 'Loaded net plugin strata' "${nlogs[@]}" && grep -qs 'Using network strata' "${nlogs[@]}"; then
    record "$name.plugin" pass 0 "NCCL: $(grep -ohs 'Loaded net plugin strata[^;]*' "${nlogs[@]}" | head -1)"
  else
    record "$name.plugin" fail 0 "NCCL's log does not show the plugin loaded and chosen"
  fi
  if [[ " $* " == *" --regions 2 "* ]]; then
    grep -qs 'striped' "${nlogs[@]}" && record "$name.striped" pass 0 "connections across regions took the striped path" ||
      record "$name.striped" fail 0 "no striped connection in NCCL's log"
  fi
  return $rc
}

# device_step NAME CAP [VAR=VALUE...] -- [strata-device-check args]
device_step() {
  local name=$1 cap=$2
  shift 2
  local vars=()
  while [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  step "$name" "$cap" env NCCL_SOCKET_IFNAME=lo NCCL_NET_PLUGIN=none STRATA_TRANSPORT=tcp "${vars[@]}" \
    "$PACK/bin/strata-device-check" --job-timeout $((cap - 5)) "$@"
}

pytest_step() {
  step "$1" "$2" "$self" --step pytest "$3" "$2"
}

step environment 60 "$self" --step environment
step pack_libraries 30 "$self" --step pack_libraries
step extension_build 240 "$self" --step extension_build &
build_pid=$!

sweep=(-t all -f 4 -n 5 -w 1)
nccl nccl_strata_2r 75 strata -- --ranks 2 --regions 2 "${sweep[@]}" -b 8 -e 256M
nccl nccl_socket_2r 75 socket -- --ranks 2 --regions 2 "${sweep[@]}" -b 8 -e 256M
step device_codecs 60 "$PACK/bin/strata-codec-check"
device_step device_buffers 60 -- --ranks 4 --regions 2 --large 1000003
device_step device_wan_256m 90 STRATA_WAN_EMULATE=rate=1gbit,delay=5ms -- --ranks 4 --regions 2 --large 1000 \
  --time-bytes 268435456 --time-iters 3
wait $build_pid
if grep -q $'^extension_build\tpass' "$steps"; then
  pytest_step torch_collectives 120 collectives
  pytest_step torch_ddp_vs_nccl 90 ddp
  pytest_step torch_compress_hook 60 hook
else
  for s in torch_collectives torch_ddp_vs_nccl torch_compress_hook; do record $s skipped 0 "no extension"; done
fi
nccl nccl_strata_cut 45 strata STRATA_WAN_EMULATE=cut=40 -- --ranks 2 --regions 2 -t all_reduce,sendrecv -f 4 -n 5 -w 1 -b 1M -e 64M
nccl nccl_strata_tls 45 strata STRATA_WAN_TLS=1 -- --ranks 2 --regions 2 -t all_reduce,sendrecv "${sweep[@]:2}" -b 8 -e 64M
nccl nccl_strata_wan 60 strata STRATA_WAN_EMULATE=delay=2ms,window=4m -- --ranks 2 --regions 2 "${sweep[@]}" -b 8 -e 64M
nccl nccl_strata_4r 60 strata -- --ranks 4 --regions 2 "${sweep[@]}" -b 8 -e 64M
nccl nccl_socket_4r 60 socket -- --ranks 4 --regions 2 "${sweep[@]}" -b 8 -e 64M

"$PY" "$repo/scripts/device/summarize.py" "$WORK" "$PACK" >"$OUTDIR/summary.md"
cp "$WORK/results.json" "$OUTDIR/results.json" 2>/dev/null
tar -czf "$OUTDIR/logs.tar.gz" -C "$WORK" logs json steps.tsv
echo "== total $((SECONDS - t0)) s of $budget; summary:"
cat "$OUTDIR/summary.md"
! grep -qP '\t(fail|timeout)\t' "$steps"

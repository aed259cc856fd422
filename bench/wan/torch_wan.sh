#!/usr/bin/env bash
# PyTorch across two regions of the WAN lab: torch.distributed.all_reduce through "gloo" and
# "strata" at 1-256 MiB, then DDP step time of examples/torch/train.py with gloo, strata
# exact and strata compressed (top-k 1% + int8), all in one run on the same namespaces
# (netns.sh: 2 regions, HTB RATE both ways, DELAY_MS one way in the router, 2 ranks per
# region; ranks of a region talk over its loopback).
#
# Usage: bench/wan/torch_wan.sh [RATE] [SIZES] [DDP_STEPS] [DELAY_MS]   defaults: 200mbit 1M,4M,16M,64M,256M 40 0
# Needs root, the project's .venv and a build with the backend (cmake --preset ci).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RATE=${1:-200mbit} SIZES=${2:-1M,4M,16M,64M,256M} STEPS=${3:-40} DELAY=${4:-0}
PY=$root/.venv/bin/python
export PYTHONPATH=$root/build/python
[[ -x $PY && -e $root/build/python/strata/__init__.py ]] || { echo "torch_wan.sh: build the backend first (scripts/test.sh or cmake --preset ci)" >&2; exit 2; }

cleanup() {
  for ns in strata-r0 strata-r1; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  done
  "$here/netns.sh" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$here/netns.sh" up 2 "$RATE" --delay "$DELAY" >/dev/null

port=29600
# Runs "$@" as 4 ranks, 2 per region, rank 0 printing; bounded in time.
ranks() {
  port=$((port + 1))
  local pids=()
  for rank in 0 1 2 3; do
    local k=$((rank / 2))
    ip netns exec "strata-r$k" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR=10.77.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=wan0 STRATA_SOCKET_IFADDR=10.77.0.$((k + 1)) \
      STRATA_REGION=r$k STRATA_HOST=r$k-host STRATA_TRANSPORT=tcp STRATA_TIMEOUT_S=300 OMP_NUM_THREADS=1 \
      timeout 900 "$PY" "$@" &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}

echo "## all_reduce, 4 ranks in 2 regions, $RATE each way between them (median of 3, slowest rank)"
echo "backend  size       time        busbw"
for b in gloo strata; do ranks "$here/torch_allreduce.py" --backend "$b" --sizes "$SIZES" 2>&1 | grep -E "^(gloo|strata) "; done

echo "## DDP step, examples/torch/train.py --hidden 2048 (4.3M parameters, 17 MB of gradients), $STEPS steps"
for args in "--backend gloo" "--backend strata" "--backend strata --compress topk:0.01+int8 --warmup 0"; do
  ranks "$root/examples/torch/train.py" --steps "$STEPS" --hidden 2048 --print-every 1000 $args 2>&1 | grep "final:"
done

#!/usr/bin/env bash
# DiLoCo against DDP across two shaped regions (issue figures in BENCHMARKS.md, "DiLoCo"):
# examples/torch/diloco.py, 4 ranks (2 per region in the WAN lab, netns.sh: HTB RATE both
# ways between the regions, DELAY_MS one way in the router), the same inner steps for
# every run: DDP exact, DDP top-k 1% + int8, DiLoCo (H = 50) exact, DiLoCo int4, streaming
# DiLoCo int4 (5 fragments, each overlapping 5 inner steps), and streaming DiLoCo exact to
# set beside DiLoCo exact (how much of the outer sync's wait streaming hides; int4 syncs
# are too small to wait on here). Prints a table; writes each
# run's JSON and the loss curves (PNG) to OUT.
#
# Usage: bench/wan/diloco_wan.sh [RATE] [DELAY_MS] [STEPS] [OUT]   defaults: 100mbit 25 500 bench-diloco
# Needs root, the project's .venv and a build with the backend (cmake --preset ci).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RATE=${1:-100mbit} DELAY=${2:-25} STEPS=${3:-500} OUT=${4:-bench-diloco}
DELAY=${DELAY%ms}
PY=$root/.venv/bin/python
export PYTHONPATH=$root/build/python
[[ -x $PY && -e $root/build/python/strata/__init__.py ]] || { echo "diloco_wan.sh: build the backend first" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

source "$here/ns_jobs.sh"
ns_trap
"$here/netns.sh" up 2 "$RATE" --delay "$DELAY" >/dev/null

port=29700
run() {  # NAME ARGS...: 4 ranks, rank 0 writes OUT/NAME.json; bounded in time
  local name=$1 rc=0
  shift
  port=$((port + 1))
  for rank in 0 1 2 3; do
    local k=$((rank / 2))
    ip netns exec "strata-r$k" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR=10.77.0.1 MASTER_PORT=$port STRATA_SOCKET_IFADDR=10.77.0.$((k + 1)) \
      STRATA_REGION=r$k STRATA_HOST=r$k-host STRATA_TRANSPORT=tcp STRATA_TIMEOUT_S=300 OMP_NUM_THREADS=1 \
      timeout 1200 "$PY" "$root/examples/torch/diloco.py" --steps "$STEPS" --json "$OUT/$name.json" "$@" \
      > "$OUT/$name.rank$rank.log" 2>&1 &
    PIDS+=($!)
  done
  ns_wait_job || rc=$?
  [[ $rc == 0 ]] || { echo "diloco_wan.sh: run $name failed (logs in $OUT)" >&2; return $rc; }
  echo "$name done"
}

run ddp-exact --mode ddp
run ddp-topk --mode ddp --compress topk:0.01+int8
run diloco-exact --mode diloco --sync-every 50
run diloco-int4 --mode diloco --sync-every 50 --compress int4
run streaming-int4 --mode diloco --sync-every 50 --compress int4 --fragments 5 --delay 5
run streaming-exact --mode diloco --sync-every 50 --fragments 5 --delay 5
"$PY" "$here/diloco_report.py" "$OUT" "RATE $RATE both ways, $DELAY ms one way (the lab's router), $STEPS inner steps"

#!/usr/bin/env bash
# A kill across a slow WAN: how long the survivors take to shrink and run their next call
# (strata-wan-shrink), and how long the first communicator took to create (its probe).
#
# Usage: bench/wan/shrink_wan.sh [RATE] [DELAY_MS] [VICTIM]      defaults: 1mbit 25 3
# 2 regions x 2 ranks in the WAN lab (netns.sh), TCP inside a region; every rank logs at
# STRATA_DEBUG=info to OUT (a fresh /tmp/strata-shrink.*), whose rank-0 log tells how the
# figures were had (probed, then inherited by the shrunk communicator). Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RATE=${1:-1mbit} DELAY=${2:-25} VICTIM=${3:-3}
BIN=$root/build/bench/wan/strata-wan-shrink
[[ -x $BIN ]] || { echo "shrink_wan.sh: build first (cmake --build --preset default)" >&2; exit 2; }
OUT=$(mktemp -d /tmp/strata-shrink.XXXXXX)
source "$here/ns_jobs.sh"
ns_trap
"$here/netns.sh" up 2 "$RATE" --delay "$DELAY" >/dev/null
for rank in 0 1 2 3; do
  k=$((rank / 2))
  ip netns exec "strata-r$k" env STRATA_RANK=$rank STRATA_WORLD_SIZE=4 STRATA_ROOT=10.77.0.1:29600 \
    STRATA_REGION=r$k STRATA_HOST=r$k-host STRATA_SOCKET_IFADDR=10.77.0.$((k + 1)) STRATA_TRANSPORT=tcp \
    STRATA_TIMEOUT_S=120 STRATA_DEBUG=info STRATA_PROBE_CACHE_S=0 \
    timeout 180 "$BIN" --victim "$VICTIM" --at 5 >"$OUT/rank$rank.log" 2>&1 &
  PIDS+=($!)
done
rc=0
for i in "${!PIDS[@]}"; do
  s=0
  wait "${PIDS[$i]}" || s=$?
  if (( i == VICTIM )); then (( s == 137 )) || { echo "shrink_wan.sh: the victim exited with $s" >&2; rc=1; }
  elif (( s != 0 )); then echo "shrink_wan.sh: rank $i exited with $s (log $OUT/rank$i.log)" >&2; rc=1; fi
done
PIDS=()
echo "# $RATE both ways, $DELAY ms one way; logs in $OUT"
grep -h "link probing\|link figures (" "$OUT/rank0.log" | sed 's/^/# /' | cut -c1-200
grep -h "SHRINK" "$OUT"/rank*.log
exit $rc

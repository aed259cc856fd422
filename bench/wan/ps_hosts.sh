#!/usr/bin/env bash
# Dedicated parameter servers against the flat algorithms when every process has a NIC of
# its own: N worker "hosts" and S server "hosts", each a network namespace whose link is
# shaped with HTB (netns.sh; all in one region, so the collectives run flat). A worker's
# link carries the vector once each way with param_server and 2(N-1)/N of it with the
# ring, so with S = N servers param_server should approach N/(2(N-1)) of the ring's time.
#
# Usage: bench/wan/ps_hosts.sh [-N 4] [-S 4] [--rate 200mbit] [--size 16M] [-n 3]
#                              [--algos "ring direct halving_doubling param_server"]
# Prints strata-perf's line per algorithm and a markdown table of times against the ring.
# Needs root (namespaces), iproute2 and a build (build/tools/strata-perf).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
N=4 S=4 RATE=200mbit SIZE=16M ITERS=3 PORT=29800 LIMIT=600
ALGOS="ring direct halving_doubling param_server"
die() { echo "ps_hosts.sh: error: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -N) N=$2; shift 2 ;;
    -S) S=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    --algos) ALGOS=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces)"
PERF=$root/build/tools/strata-perf
[[ -x $PERF ]] || die "build first: scripts/demo.sh or cmake --build --preset default"
OUT=$(mktemp -d /tmp/strata-ps-hosts.XXXXXX)

source "$here/ns_jobs.sh"
ns_trap
"$here/netns.sh" up $((N + S)) "$RATE" >/dev/null

launch=0
# One job: N workers running strata-perf "$@", S servers (the same binary, STRATA_ROLE=server).
run_job() {
  local k role index
  launch=$((launch + 1))
  PIDS=()
  for ((k = 0; k < N + S; k++)); do
    if ((k < N)); then role=worker index=$k; else role=server index=$((k - N)); fi
    # STRATA_REGION stays unset: one region, flat collectives; each namespace is a host.
    ip netns exec "strata-r$k" env STRATA_RANK=$index STRATA_WORLD_SIZE=$N STRATA_SERVERS=$S STRATA_ROLE=$role \
      STRATA_ROOT=10.77.0.1:$((PORT + launch)) STRATA_HOST=h$k STRATA_SOCKET_IFADDR=10.77.0.$((k + 1)) \
      STRATA_TRANSPORT=tcp STRATA_TIMEOUT_S=$LIMIT \
      timeout -k 5 $LIMIT "$PERF" "$@" >"$OUT/job$launch-$role$index.log" 2>&1 &
    PIDS+=($!)
  done
  ns_wait_job || { tail -n 5 "$OUT/job$launch-"*.log >&2; die "job $launch ($*) failed"; }
}

echo "# N=$N workers, S=$S servers, each host shaped to $RATE both ways, $SIZE f32 allreduce, logs in $OUT"
for a in $ALGOS; do
  run_job -t all_reduce --algo "$a" -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 1 -c 1 --transport tcp
  line=$(grep -E '^ +[0-9]+ ' "$OUT/job$launch-worker0.log" | tail -1)
  echo "$a $line" | tee -a "$OUT/summary"
done
echo
echo "| algorithm | time (ms) | vs ring | wrong |"
echo "|---|---:|---:|---:|"
python3 - "$OUT/summary" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
# strata-perf columns: size count type redop root time algbw busbw #wrong (out of place) ...
t = {r[0]: float(r[6]) for r in rows}
ring = t.get("ring")
for r in rows:
    ratio = f"{t[r[0]] / ring:.2f}x" if ring else "-"
    print(f"| {r[0]} | {t[r[0]] / 1000:.0f} | {ratio} | {r[9]} |")
PY

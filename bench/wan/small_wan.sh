#!/usr/bin/env bash
# Small allreduces across the WAN lab's regions beside the same call inside one region:
# 4 B to 16 KiB, median of each size's calls (strata-perf --median), R regions x P ranks
# through the router with a delay matrix, then the P ranks of region 0 alone (the same
# sizes, the same layout within the region). What a small call across regions can cost at
# least is the slowest pair's one-way delay (one round: every region hears every other
# once) plus the call inside a region; the table prints both and their ratio.
#
# Usage: bench/wan/small_wan.sh [-R 3] [-P 2] [--rate 150mbit] [--matrix M] [-n 40]
#   M defaults to "0,10,40;10,0,80;40,80,0" (one-way ms, row = from); -R must match it.
# Needs root and a build (build/tools/strata-perf).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
R=3 P=2 RATE=150mbit M="0,10,40;10,0,80;40,80,0" N=40 PERF=$root/build/tools/strata-perf
while [[ $# -gt 0 ]]; do
  case "$1" in
    -R) R=$2; shift 2 ;;
    -P) P=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --matrix) M=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "small_wan.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ -x $PERF ]] || { echo "small_wan.sh: build first" >&2; exit 2; }
OUT=$(mktemp -d /tmp/strata-small.XXXXXX)
source "$here/ns_jobs.sh"
ns_trap
"$here/netns.sh" up "$R" "$RATE" --matrix "$M" >/dev/null

job() {  # job NAME WORLD: WORLD ranks, rank r in region r / P; rank 0's table in OUT/NAME
  local name=$1 world=$2 port=$((29800 + RANDOM % 100)) rank k
  for ((rank = 0; rank < world; rank++)); do
    k=$((rank / P))
    ip netns exec "strata-r$k" env STRATA_RANK=$rank STRATA_WORLD_SIZE="$world" STRATA_ROOT=10.77.0.1:$port \
      STRATA_REGION=r$k STRATA_HOST=r$k-host STRATA_SOCKET_IFADDR=10.77.0.$((k + 1)) STRATA_TRANSPORT=tcp \
      STRATA_TIMEOUT_S=120 STRATA_PROBE_CACHE_S=0 timeout 300 "$PERF" -b 4 -e 16K -f 4 -n "$N" -w 5 --median --transport tcp \
      >"$OUT/$name.rank$rank" 2>&1 &
    PIDS+=($!)
  done
  ns_wait_job || { tail -5 "$OUT/$name.rank0" >&2; echo "small_wan.sh: job $name failed (logs in $OUT)" >&2; exit 1; }
}
job wan $((R * P))
job region "$P"
python3 - "$OUT" "$M" <<'PY'
import sys
out, m = sys.argv[1], sys.argv[2]
worst = max(float(c) for row in m.split(";") for c in row.split(","))
def rows(name):
    r = {}
    for line in open(f"{out}/{name}.rank0"):
        f = line.split()
        if f and not line.startswith("#") and f[0].isdigit():
            r[int(f[0])] = float(f[5]) / 1000  # out-of-place median, ms
    return r
wan, region = rows("wan"), rows("region")
print(f"# slowest one-way delay {worst:g} ms (matrix {m})")
print("| bytes | across regions (ms) | inside one region (ms) | bound: slowest one-way + region (ms) | ratio |")
print("|---:|---:|---:|---:|---:|")
for n in sorted(wan):
    b = worst + region.get(n, 0)
    print(f"| {n} | {wan[n]:.2f} | {region.get(n, 0):.3f} | {b:.2f} | {wan[n] / b:.2f} |")
PY

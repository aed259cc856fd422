#!/usr/bin/env bash
# The cost model against the WAN lab: strata-plan's predictions, from a topology file
# that gives the lab's own figures (one-way delay, rate, loss per pair, as netns.sh
# applies them), beside what strata-perf measures through the lab in the same run.
#
# Usage: bench/wan/plan_check.sh [-R 3] [-P 2] [--rate 150mbit] [--matrix M | --delay MS]
#                                [--loss PCT] [-b 4K] [-e 16M] [-n 3] [--out DIR]
# Writes DIR/lab.textproto, DIR/perf.json and DIR/plan.txt (strata-plan --markdown's
# predicted-against-measured table at the end). Needs root and a build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
R=3 P=2 RATE=150mbit LAB=() MIN=4K MAX=16M N=3 OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -R) R=$2; shift 2 ;;
    -P) P=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --matrix|--delay|--loss) LAB+=("$1" "$2"); shift 2 ;;
    -b) MIN=$2; shift 2 ;;
    -e) MAX=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "plan_check.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ ${#LAB[@]} -gt 0 ]] || LAB=(--matrix "0,10,40;10,0,80;40,80,0")
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/strata-plan-check.XXXXXX)
mkdir -p "$OUT"
source "$here/ns_jobs.sh"
ns_trap
"$here/netns.sh" up "$R" "$RATE" "${LAB[@]}" >/dev/null
python3 "$here/lab_topology.py" /run/strata-wan-lab/lab.env "$P" >"$OUT/lab.textproto"
W=$((R * P))
for ((rank = 0; rank < W; rank++)); do
  k=$((rank / P))
  ip netns exec "strata-r$k" env STRATA_RANK=$rank STRATA_WORLD_SIZE=$W STRATA_ROOT=10.77.0.1:29900 \
    STRATA_REGION=r$k STRATA_HOST=r$k-host STRATA_SOCKET_IFADDR=10.77.0.$((k + 1)) STRATA_TRANSPORT=tcp \
    STRATA_TIMEOUT_S=600 STRATA_PROBE_CACHE_S=0 \
    timeout 1200 "$root/build/tools/strata-perf" -b "$MIN" -e "$MAX" -f 4 -n "$N" -w 1 --transport tcp \
    --json "$OUT/perf.json" >"$OUT/rank$rank.log" 2>&1 &
  PIDS+=($!)
done
ns_wait_job || { tail -5 "$OUT/rank0.log" >&2; echo "plan_check.sh: the run failed (logs in $OUT)" >&2; exit 1; }
"$root/build/tools/strata-plan" --file "$OUT/lab.textproto" -b "$MIN" -e "$MAX" -f 4 \
  --measured "$OUT/perf.json" --markdown >"$OUT/plan.txt"
grep -E "^# WAN path" "$OUT/rank0.log" || true
sed -n '/measured/,$p' "$OUT/plan.txt"
echo "# files in $OUT"

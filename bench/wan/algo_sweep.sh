#!/usr/bin/env bash
# Every algorithm against the cost model on the shaped region namespaces: for each
# collective, the hierarchical plan (what STRATA_ALGO=auto runs across regions) and every
# flat algorithm over all ranks (STRATA_ALGO=flat, strata-perf --algo all), a size sweep
# each, in rounds; then strata-plan, run by the same ranks with the same probed figures
# (one probe, cached), sets the model's predictions and picks against the medians.
#
# Usage: bench/wan/algo_sweep.sh [-R N] [-P N] [--rate 200mbit] [--rounds 3]
#                                [-t "all_reduce reduce_scatter all_gather broadcast"]
#                                [--sweeps "1K:64K:40 512K:4M:3"] [-f 8] [--transport tcp] [--out DIR]
#   --sweeps  size ranges FROM:TO:ITERS, each run in every round; small messages need many
#             iterations for a stable median, large ones take seconds each
# Prints strata-plan's markdown tables at the end; the runs stay in DIR.
# Needs root (namespaces), iproute2 and a build (build/tools/strata-perf, strata-plan).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
R=2 P=2 RATE=200mbit ROUNDS=3 COLLS="all_reduce reduce_scatter all_gather broadcast"
SWEEPS="1K:64K:40 512K:4M:3" FACTOR=8 TRANSPORT=tcp OUT="" PORT=29600 LIMIT=900
die() { echo "algo_sweep.sh: error: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -R) R=$2; shift 2 ;;
    -P) P=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    -t) COLLS=$2; shift 2 ;;
    --sweeps) SWEEPS=$2; shift 2 ;;
    -f) FACTOR=$2; shift 2 ;;
    --transport) TRANSPORT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces)"
PERF=$root/build/tools/strata-perf PLAN=$root/build/tools/strata-plan
[[ -x $PERF && -x $PLAN ]] || die "build first: scripts/demo.sh or cmake --build --preset default"
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/strata-algo-sweep.XXXXXX)
mkdir -p "$OUT/runs" "$OUT/logs" "$OUT/cache"
W=$((R * P))

source "$here/ns_jobs.sh"
ns_trap
"$here/netns.sh" up "$R" "$RATE" >/dev/null

# Runs one job of W ranks, contiguous regions; "$1" is STRATA_ALGO, the rest the command.
launch=0
run_job() {
  local algo=$1 rank k; shift
  launch=$((launch + 1))
  PIDS=()
  for ((rank = 0; rank < W; rank++)); do
    k=$((rank / P))
    # One probe for every job: the figures the model uses are the ones cached here.
    ip netns exec "strata-r$k" env STRATA_RANK=$rank STRATA_WORLD_SIZE=$W STRATA_ROOT=10.77.0.1:$((PORT + launch)) \
      STRATA_REGION=r$k STRATA_HOST=r$k-host STRATA_SOCKET_IFADDR=10.77.0.$((k + 1)) STRATA_ALGO="$algo" \
      STRATA_TRANSPORT="$TRANSPORT" STRATA_TIMEOUT_S=$LIMIT XDG_CACHE_HOME="$OUT/cache" STRATA_PROBE_CACHE_S=86400 \
      timeout -k 5 $LIMIT "$@" >"$OUT/logs/job$launch-rank$rank.log" 2>&1 &
    PIDS+=($!)
  done
  ns_wait_job || { tail -n 5 "$OUT/logs/job$launch-rank"*.log >&2; die "job $launch ($*) failed"; }
}

MIN=${SWEEPS%%:*} last=${SWEEPS##* } MAX=${last#*:}; MAX=${MAX%%:*}
# The first job probes and caches the figures; strata-plan prints them again at the end.
run_job auto "$PLAN" --live -t all -b "$MIN" -e "$MAX" -f "$FACTOR"
for ((round = 1; round <= ROUNDS; round++)); do
  for t in $COLLS; do
    for range in $SWEEPS; do
      IFS=: read -r lo hi iters <<<"$range"
      echo "# round $round: $t $lo-$hi"
      sweep=(-b "$lo" -e "$hi" -f "$FACTOR" -n "$iters" -w $(( iters > 5 ? 5 : 1 )) -c 0 --transport "$TRANSPORT")
      tag=$t-$lo-$round
      run_job hier "$PERF" -t "$t" "${sweep[@]}" --json "$OUT/runs/$tag-hier.json"
      # Rows of the plan's runs carry no algorithm: label them for strata-plan's hier column.
      sed -i 's/{"size":/{"algorithm":"hier","size":/g' "$OUT/runs/$tag-hier.json"
      run_job flat "$PERF" -t "$t" --algo all "${sweep[@]}" --json "$OUT/runs/$tag-flat.json"
    done
  done
done
run_job auto "$PLAN" --live -t all -b "$MIN" -e "$MAX" -f "$FACTOR" --markdown --measured "$OUT"/runs/*.json
cat "$OUT/logs/job$launch-rank0.log"
echo "# runs and logs: $OUT"

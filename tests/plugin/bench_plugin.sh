#!/usr/bin/env bash
# Throughput of libnccl-net-strata.so as the harness drives it, beside raw TCP (iperf3)
# measured in the same run.
#
#   tests/plugin/bench_plugin.sh loopback [ROUNDS]   4 MiB messages over 127.0.0.1 on each
#                                                    same-region path (UCX as UCX picks, UCX
#                                                    without CMA, UCX over TCP, the plugin's
#                                                    TCP stream), alternating with iperf3 -c
#                                                    127.0.0.1, ROUNDS times (3); medians and
#                                                    ratios to iperf3 as a Markdown table
#   tests/plugin/bench_plugin.sh wan [RATE] [LOSS]   two regions of the WAN lab (bench/wan/netns.sh
#                                                    up 2 RATE --delay 25 --loss LOSS, default
#                                                    200mbit, 0%; needs root), the striped path
#                                                    with 1, 4 and 8 streams; the lab is always
#                                                    torn down at exit
#   tests/plugin/bench_plugin.sh tls [ROUNDS] [RATE]  the striped path in clear text and in
#                                                    TLS (STRATA_WAN_TLS=1, keyed by the job's
#                                                    secret), alternating ROUNDS times: on
#                                                    loopback (4 streams), then, as root, on two
#                                                    regions of the lab (RATE, 25 ms one way, 4
#                                                    streams); medians and TLS/clear ratios
#
# Environment: BUILD (default build), SECONDS_PER_RUN (5 loopback, 10 wan), WINDOW (8).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
HARNESS=$BUILD/tests/plugin/strata-plugin-harness
PLUGIN=$BUILD/plugins/nccl-net/libnccl-net-strata.so
WINDOW=${WINDOW:-8}
[[ -x $HARNESS && -f $PLUGIN ]] || { echo "build first: cmake --build --preset default" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "iperf3 not found" >&2; exit 1; }

gbits() { sed -n 's/.* (\([0-9.]*\) MB\/s).*/\1/p' | awk '{printf "%.4f\n", $1 * 8 / 1000}'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

iperf_gbits() {  # iperf_gbits NS_CLIENT NS_SERVER ADDR SECONDS
  local client=() server=() port=$((5300 + RANDOM % 500))
  [[ -n $1 ]] && client=(ip netns exec "$1")
  [[ -n $2 ]] && server=(ip netns exec "$2")
  timeout $(($4 + 20)) "${server[@]}" iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.5
  timeout $(($4 + 15)) "${client[@]}" iperf3 -c "$3" -p "$port" -t "$4" -J |
    python3 -c 'import json,sys; print("%.4f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))'
  wait "$spid" 2>/dev/null || true
}

# One loopback bench run, extra environment as NAME=VALUE arguments; prints Gbit/s.
plugin_gbits() {
  local env=() kv
  for kv in "$@"; do env+=(--env "$kv"); done
  "$HARNESS" --plugin "$PLUGIN" --version 11 --case bench --if lo --size 4194304 \
    --window "$WINDOW" --seconds "${SECONDS_PER_RUN:-5}" "${env[@]}" 2>/dev/null | grep '^bench' | gbits
}

loopback() {
  # Same-region paths side by side, each round alternating with iperf3 -c 127.0.0.1.
  # UCX's own choice on one host is shared memory (posix FIFO, CMA for large messages);
  # the ^cma row keeps shared memory without CMA; UCX_TLS=tcp forces UCX onto TCP.
  local rounds=${1:-3} secs=${SECONDS_PER_RUN:-5} i k
  local labels=("UCX (default: shared memory)" "UCX, UCX_TLS=^cma" "UCX, UCX_TLS=tcp"
                "plugin TCP (STRATA_NET_INTRA=tcp)")
  local short=(ucx ucx-nocma ucx-tcp tcp)
  local envs=("STRATA_NET_INTRA=ucx" "STRATA_NET_INTRA=ucx UCX_TLS=^cma"
              "STRATA_NET_INTRA=ucx UCX_TLS=tcp" "STRATA_NET_INTRA=tcp")
  local -a results
  local iperf=()
  for ((i = 1; i <= rounds; i++)); do
    local line="round $i:"
    for k in "${!labels[@]}"; do
      # shellcheck disable=SC2086  # envs[k] is a list of NAME=VALUE words
      results[$((k * 100 + i))]=$(plugin_gbits ${envs[$k]})
      line+=$(printf '  %s %.2f' "${short[$k]}" "${results[$((k * 100 + i))]}")
    done
    iperf+=("$(iperf_gbits "" "" 127.0.0.1 "$secs")")
    printf '%s  iperf3 %.2f Gbit/s\n' "$line" "${iperf[-1]}"
  done
  local y
  y=$(printf '%s\n' "${iperf[@]}" | median)
  printf '\n| path | median Gbit/s | / iperf3 |\n|---|---:|---:|\n'
  for k in "${!labels[@]}"; do
    local xs=() x
    for ((i = 1; i <= rounds; i++)); do xs+=("${results[$((k * 100 + i))]}"); done
    x=$(printf '%s\n' "${xs[@]}" | median)
    printf '| %s | %.2f | %.2f |\n' "${labels[$k]}" "$x" "$(python3 -c "print($x/$y)")"
  done
  printf '| iperf3 -c 127.0.0.1 (one TCP flow) | %.2f | 1.00 |\n' "$y"
}

wan() {
  local rate=${1:-200mbit} loss=${2:-0} secs=${SECONDS_PER_RUN:-10}
  [[ $(id -u) -eq 0 ]] || { echo "wan mode needs root (network namespaces)" >&2; exit 1; }
  trap '"$ROOT/bench/wan/netns.sh" down >/dev/null 2>&1 || true' EXIT INT TERM
  "$ROOT/bench/wan/netns.sh" up 2 "$rate" --delay 25 --loss "$loss" >/dev/null
  local b
  b=$(iperf_gbits strata-r0 strata-r1 10.77.0.2 "$secs")
  printf 'iperf3 r0 -> r1 (one TCP flow; lab %s, 25 ms one way, %s%% loss): %.1f Mbit/s\n' "$rate" "$loss" \
    "$(python3 -c "print($b*1000)")"
  run() {  # run LABEL REGION1 STREAMS: the same-region row over the plugin's TCP path
    local out
    out=$(timeout $((secs + 60)) "$HARNESS" --plugin "$PLUGIN" --version 11 --case bench --netns strata-r0,strata-r1 \
            --regions r0,"$2" --size 4194304 --window "$WINDOW" --seconds "$secs" \
            --env STRATA_WAN_STREAMS="$3" --env STRATA_NET_INTRA=tcp 2>/dev/null | grep '^bench') ||
      { printf '%-44s failed\n' "$1"; return 0; }
    printf '%-44s %8.1f Mbit/s\n' "$1" "$(python3 -c "print($(echo "$out" | gbits)*1000)")"
  }
  run "direct (same region, plugin TCP)" r0 1
  run "striped, 1 stream" r1 1
  run "striped, 4 streams" r1 4
  run "striped, 8 streams" r1 8
}

# One striped bench run: striped_gbits NETNS_PAIR NAME=VALUE...; prints Gbit/s. An empty
# NETNS_PAIR runs both processes here, over lo.
striped_gbits() {
  local where=(--if lo) env=() kv
  [[ -n $1 ]] && where=(--netns "$1")
  shift
  for kv in "$@"; do env+=(--env "$kv"); done
  "$HARNESS" --plugin "$PLUGIN" --version 11 --case bench "${where[@]}" --regions r0,r1 --size 4194304 \
    --window "$WINDOW" --seconds "${SECONDS_PER_RUN:-5}" "${env[@]}" 2>/dev/null | grep '^bench' | gbits
}

# Clear and TLS runs alternating (clear, TLS, TLS, clear, ...): tls_rounds LABEL ROUNDS
# NETNS_PAIR NAME=VALUE...; prints each run and the medians as a Markdown table row.
tls_rounds() {
  local label=$1 rounds=$2 ns=$3 i clear=() tls=() x
  shift 3
  for ((i = 1; i <= rounds; i++)); do
    for mode in $( ((i % 2)) && echo "0 1" || echo "1 0"); do
      x=$(striped_gbits "$ns" STRATA_JOB_SECRET=bench-tls STRATA_WAN_TLS="$mode" "$@")
      if ((mode)); then tls+=("$x"); else clear+=("$x"); fi
      printf '  round %d, %s: %.3f Gbit/s\n' "$i" "$( ((mode)) && echo TLS || echo clear)" "$x" >&2
    done
  done
  local c t
  c=$(printf '%s\n' "${clear[@]}" | median)
  t=$(printf '%s\n' "${tls[@]}" | median)
  printf '| %s | %s | %s | %.4f | %.4f | %.3f |\n' "$label" "$(printf '%.4f ' "${clear[@]}")" \
    "$(printf '%.4f ' "${tls[@]}")" "$c" "$t" "$(python3 -c "print($t/$c)")"
}

tls() {
  local rounds=${1:-3} rate=${2:-200mbit}
  printf '| path | clear, runs (Gbit/s) | TLS, runs | clear median | TLS median | TLS / clear |\n'
  printf '|---|---|---|---:|---:|---:|\n'
  tls_rounds "loopback, 4 streams" "$rounds" "" STRATA_WAN_STREAMS=4
  [[ $(id -u) -eq 0 ]] || { echo "the shaped run needs root (network namespaces)" >&2; return; }
  trap '"$ROOT/bench/wan/netns.sh" down >/dev/null 2>&1 || true' EXIT INT TERM
  "$ROOT/bench/wan/netns.sh" up 2 "$rate" --delay 25 >/dev/null
  tls_rounds "lab $rate, 25 ms one way, 4 streams" "$rounds" strata-r0,strata-r1 STRATA_WAN_STREAMS=4
}

case ${1:-} in
  loopback) shift; loopback "$@" ;;
  wan) shift; wan "$@" ;;
  tls) shift; tls "$@" ;;
  *) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

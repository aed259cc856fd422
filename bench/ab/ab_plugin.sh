#!/usr/bin/env bash
# A/B throughput of two builds of the NCCL net plugin (each build's harness driving its
# own libnccl-net-strata.so, 4 MiB messages over loopback) in alternating order (ABBA),
# on three paths: the plugin's direct TCP stream, UCX (same region), and the striped
# cross-region path (4 streams, CRC32C, acknowledgements). Prints each path's median
# Gbit/s per build and their ratio.
#
#   bench/ab/ab_plugin.sh OLD_BUILD_DIR NEW_BUILD_DIR ROUNDS      (SECONDS_PER_RUN, default 3)
set -euo pipefail
if [ $# -ne 3 ]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
a=$1 b=$2 rounds=$3 secs=${SECONDS_PER_RUN:-3}
paths=(tcp ucx striped)
declare -A args=([tcp]="--env STRATA_NET_INTRA=tcp" [ucx]="--env STRATA_NET_INTRA=ucx"
                 [striped]="--regions us-east,eu-west --env STRATA_WAN_STREAMS=4")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {  # run BUILD PATH: prints Gbit/s
  # shellcheck disable=SC2086  # args holds several words
  timeout 120 "$1/tests/plugin/strata-plugin-harness" --plugin "$1/plugins/nccl-net/libnccl-net-strata.so" \
    --version 11 --case bench --if lo --size 4194304 --window 8 --seconds "$secs" ${args[$2]} 2>/dev/null |
    sed -n 's/.* (\([0-9.]*\) MB\/s).*/\1/p' | awk '{printf "%.4f\n", $1 * 8 / 1000}'
}
for r in $(seq 1 "$rounds"); do
  order="a b"
  [ $((r % 2)) -eq 0 ] && order="b a"
  for which in $order; do
    dir=$a
    [ "$which" = b ] && dir=$b
    for p in "${paths[@]}"; do echo "$which $p $(run "$dir" "$p")" >> "$out"; done
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
g = collections.defaultdict(list)
for line in open(sys.argv[1]):
    which, path, gbits = line.split()
    g[(path, which)].append(float(gbits))
print(f"{'path':>8} {'A Gbit/s':>9} {'B Gbit/s':>9} {'B/A':>6}")
for path in ("tcp", "ucx", "striped"):
    a, b = statistics.median(g[(path, "a")]), statistics.median(g[(path, "b")])
    print(f"{path:>8} {a:9.2f} {b:9.2f} {b / a:6.3f}")
PY

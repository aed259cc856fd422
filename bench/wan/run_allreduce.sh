#!/usr/bin/env bash
# Allreduce across regions of the WAN lab (network namespaces routed through a router that
# delays, drops and shapes in the kernel's path, see netns.sh), compared with what iperf3
# moves over the same path in the same run and the bandwidth lower bound.
#
# Usage: bench/wan/run_allreduce.sh [options]
#   -R, --regions N      regions (namespaces strata-r0..)                 [2]
#   -P, --per-region N   ranks per region                                 [2]
#   --interleave         rank r in region r % R (default: region r / P, contiguous)
#   --peer gloo          run Gloo's best allreduce (strata-peer-gloo) instead of strata-perf
#   --rate RATE          HTB rate of each region's link (tc units)        [200mbit]
#   --one-way            shape only region egress (default: both directions)
#   --pair I:J:RATE      regions I and J send each other at most RATE (repeatable; netns.sh)
#   --topo FILE          STRATA_TOPO_FILE for the ranks (figures that override the probe's)
#   --algo A             STRATA_ALGO: hier, flat or auto                  [hier]
#   --streams K          STRATA_WAN_STREAMS (TCP streams per WAN peer)     [unset: auto]
#   --delay MS           one-way delay of every pair of regions (netns.sh)  [0]
#   --matrix M           one-way delays per ordered pair, "0,10,40;10,0,80;40,80,0" (netns.sh)
#   --jitter MS          per-packet jitter, order kept (netns.sh)
#   --loss PCT           random loss each way (netns.sh)                    [0]
#   --loss-pair I:J:PCT  loss from region I to J only (repeatable; netns.sh)
#   --queue-ms MS        the bottleneck's buffer (netns.sh)                 [50]
#   --transport T        intra-region transport, tcp or ucx               [tcp]
#   --size BYTES         message size (strata-perf -b/-e)                  [64M]
#   -d, --dtype T        strata-perf -d                                    [float]
#   -n, --iters N        timed iterations                                  [3]
#   -w, --warmup N       warmup iterations                                 [1]
#   --port PORT          rendezvous port on 10.77.0.1                      [29500]
#   --iperf-time S       iperf3 -t (after 1 s left out: -O 1)              [5]
#   --iperf-streams K    iperf3 -P                                         [4]
#   --no-iperf           skip iperf3; needs --bandwidth
#   --bandwidth BPS      use this raw throughput (bits/s) instead of iperf3
#   --timeout S          wall-clock limit for the ranks                    [300]
#   --env NAME=VALUE     one more variable for every rank (repeatable)
#   --logs DIR           where rank logs go                  [mktemp -d; kept]
#   --keep               leave the namespaces up at exit
#   --perf PATH          strata-perf binary              [build/tools/strata-perf]
#   --gloo PATH          Gloo peer binary      [build/bench/peers/strata-peer-gloo]
# Extra arguments after -- go to strata-perf (or strata-peer-gloo with --peer gloo).
#
# Needs root (namespaces), iproute2, iperf3, python3 (for parsing).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

R=2 P=2 RATE=200mbit ONEWAY="" ALGO=hier STREAMS="" TRANSPORT=tcp LAB=() IPERF_P=4
SIZE=64M DTYPE=float ITERS=3 WARMUP=1 PORT=29500 IPERF_T=5 NO_IPERF=0 BW_BPS="" TIMEOUT=300
PAIRS=() TOPO="" LOGS="" KEEP=0 PERF="$root/build/tools/strata-perf" INTERLEAVE=0 PEER=strata
GLOO="$root/build/bench/peers/strata-peer-gloo"
EXTRA=() USER_ENV=()

die() { echo "run_allreduce.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    -R|--regions) R=$2; shift 2 ;;
    -P|--per-region) P=$2; shift 2 ;;
    --interleave) INTERLEAVE=1; shift ;;
    --peer) PEER=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --one-way) ONEWAY=--one-way; shift ;;
    --pair) PAIRS+=(--pair "$2"); shift 2 ;;
    --topo) TOPO=$(realpath "$2"); shift 2 ;;
    --algo) ALGO=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --delay|--matrix|--jitter|--loss|--loss-pair|--queue-ms) LAB+=("$1" "$2"); shift 2 ;;
    --iperf-streams) IPERF_P=$2; shift 2 ;;
    --env) [[ $2 == *=* ]] || die "--env needs NAME=VALUE, got '$2'"; USER_ENV+=("$2"); shift 2 ;;
    --transport) TRANSPORT=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    -d|--dtype) DTYPE=$2; shift 2 ;;
    -n|--iters) ITERS=$2; shift 2 ;;
    -w|--warmup) WARMUP=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --iperf-time) IPERF_T=$2; shift 2 ;;
    --no-iperf) NO_IPERF=1; shift ;;
    --bandwidth) BW_BPS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --logs) LOGS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --perf) PERF=$2; shift 2 ;;
    --gloo) GLOO=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces)"
[[ $R =~ ^[0-9]+$ ]] && (( R >= 2 )) || die "-R must be an integer >= 2, got '$R'"
[[ $P =~ ^[0-9]+$ ]] && (( P >= 1 )) || die "-P must be an integer >= 1, got '$P'"
[[ $ALGO =~ ^(hier|flat|auto)$ ]] || die "--algo must be hier, flat or auto, got '$ALGO'"
[[ $TRANSPORT =~ ^(tcp|ucx)$ ]] || die "--transport must be tcp or ucx, got '$TRANSPORT'"
[[ -z $STREAMS || $STREAMS =~ ^[0-9]+$ ]] || die "--streams must be an integer, got '$STREAMS'"
[[ $PORT =~ ^[0-9]+$ ]] && (( PORT >= 1024 && PORT <= 65535 )) || die "--port must be 1024..65535"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout must be whole seconds, got '$TIMEOUT'"
[[ $IPERF_T =~ ^[0-9]+$ ]] && (( IPERF_T >= 1 && IPERF_T <= 120 )) || die "--iperf-time must be 1..120"
[[ $PEER =~ ^(strata|gloo)$ ]] || die "--peer must be gloo (or strata, the default), got '$PEER'"
if [[ $PEER == gloo ]]; then
  [[ -x $GLOO ]] || die "$GLOO not found; it is built with the default preset when Gloo is installed"
  [[ $DTYPE == float ]] || die "--peer gloo measures float only, got -d '$DTYPE'"
else
  [[ -x $PERF ]] || die "$PERF not found; build first: cmake --preset default && cmake --build --preset default"
fi
command -v python3 >/dev/null || die "python3 is needed to parse results"
if (( NO_IPERF )); then
  [[ -n $BW_BPS ]] || die "--no-iperf needs --bandwidth BITS_PER_S"
else
  command -v iperf3 >/dev/null || die "iperf3 not found (apt-get install iperf3) or use --no-iperf --bandwidth"
fi

# Message size in bytes (K/M/G suffixes, binary, as strata-perf reads them).
N=$(python3 -c '
import re,sys
m=re.fullmatch(r"(\d+)([KMG]?)B?", sys.argv[1].upper())
if not m: sys.exit("bad size")
print(int(m.group(1)) << {"":0,"K":10,"M":20,"G":30}[m.group(2)])' "$SIZE") || die "--size must be like 64M, got '$SIZE'"

[[ -n $LOGS ]] || LOGS=$(mktemp -d /tmp/strata-wan.XXXXXX)
mkdir -p "$LOGS"

PIDS=()
IPERF_PID=""
GLOO_STORE=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local p
  for p in "${PIDS[@]}" $IPERF_PID; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${PIDS[@]}" $IPERF_PID; do kill -KILL "$p" 2>/dev/null || true; done
  # Children of 'timeout' that outlived it (should not happen; by pid only).
  local ns
  for ((k = 0; k < R; k++)); do
    ns=strata-r$k
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  done
  [[ -z $GLOO_STORE ]] || rm -rf -- "$GLOO_STORE"
  if (( KEEP )); then echo "# namespaces kept (bench/wan/netns.sh down removes them)"
  else "$here/netns.sh" down >/dev/null 2>&1 || true; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$here/netns.sh" up "$R" "$RATE" $ONEWAY "${PAIRS[@]}" "${LAB[@]}"

# ---- raw throughput region 0 -> region 1
if (( NO_IPERF )); then
  B_BPS=$BW_BPS
else
  # The first second (slow start: half a second to fill 1 Gbit/s at 50 ms, longer under
  # loss) is left out: it made B up to 10% low and every T / bound as much too kind.
  ip netns exec strata-r1 timeout $((IPERF_T + 21)) iperf3 -s -1 -B 10.77.0.2 -p 5201 \
    >"$LOGS/iperf3-server.log" 2>&1 &
  IPERF_PID=$!
  # Wait for the server to listen (bounded).
  for _ in $(seq 50); do
    ip netns exec strata-r1 ss -ltn 2>/dev/null | grep -q '10.77.0.2:5201' && break
    sleep 0.1
  done
  ip netns exec strata-r0 timeout $((IPERF_T + 16)) iperf3 -c 10.77.0.2 -p 5201 -t "$IPERF_T" -O 1 -P "$IPERF_P" -J \
    >"$LOGS/iperf3.json" 2>"$LOGS/iperf3-client.err" || die "iperf3 failed; see $LOGS/iperf3*"
  wait "$IPERF_PID" 2>/dev/null || true
  IPERF_PID=""
  B_BPS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"])' \
    "$LOGS/iperf3.json") || die "cannot parse $LOGS/iperf3.json"
fi
echo "# iperf3 strata-r0 -> strata-r1, $IPERF_P streams: $(python3 -c "print(f'{$B_BPS/1e6:.1f}')") Mbit/s"

# ---- ranks
W=$((R * P))
LAYOUT=$( (( INTERLEAVE )) && echo interleaved || echo contiguous)
if [[ $PEER == gloo ]]; then
  # Gloo meets through a FileStore: the filesystem is shared across namespaces.
  GLOO_STORE=$(mktemp -d /tmp/strata-gloo-wan.XXXXXX)
  ENVS=("STRATA_WORLD_SIZE=$W")
  PROG=$GLOO
  ARGS=(-b "$N" -e "$N" -n "$ITERS" -w "$WARMUP" --store-dir "$GLOO_STORE" --timeout "$TIMEOUT"
        "${EXTRA[@]}")
  echo "# ranks: gloo R=$R P=$P world=$W layout=$LAYOUT size=$N B logs=$LOGS"
else
  # Every run probes afresh: the lab's paths change from run to run, and a cached figure
  # from another run's path would be taken for this one's.
  ENVS=("STRATA_WORLD_SIZE=$W" "STRATA_ROOT=10.77.0.1:$PORT" "STRATA_ALGO=$ALGO"
        "STRATA_TRANSPORT=$TRANSPORT" "STRATA_TIMEOUT_S=$TIMEOUT" "STRATA_PROBE_CACHE_S=0")
  [[ -n $STREAMS ]] && ENVS+=("STRATA_WAN_STREAMS=$STREAMS")
  [[ -n $TOPO ]] && ENVS+=("STRATA_TOPO_FILE=$TOPO")
  PROG=$PERF
  ARGS=(-b "$N" -e "$N" -n "$ITERS" -w "$WARMUP" -d "$DTYPE" --transport "$TRANSPORT" "${EXTRA[@]}")
  echo "# ranks: R=$R P=$P world=$W layout=$LAYOUT algo=$ALGO transport=$TRANSPORT" \
       "streams=${STREAMS:-auto} lab=${LAB[*]:-none} size=$N B logs=$LOGS"
fi
ENVS+=("${USER_ENV[@]}")
echo "# env: ${ENVS[*]}"
echo "# cmd: $PROG ${ARGS[*]}"

# Rank 0 serves strata's rendezvous on 10.77.0.1: it is in region 0 in either layout.
for ((rank = 0; rank < W; rank++)); do
  if (( INTERLEAVE )); then k=$((rank % R)); else k=$((rank / P)); fi
  ip netns exec "strata-r$k" env "${ENVS[@]}" STRATA_RANK=$rank STRATA_REGION=r$k \
    STRATA_HOST=r$k-host STRATA_SOCKET_IFADDR=10.77.0.$((k + 1)) \
    timeout -k 5 $((TIMEOUT + 30)) "$PROG" "${ARGS[@]}" >"$LOGS/rank$rank.log" 2>&1 &
  PIDS+=($!)
done

# Wait for every rank, bounded.
deadline=$((SECONDS + TIMEOUT + 40))
failed=0
for i in "${!PIDS[@]}"; do
  p=${PIDS[$i]}
  while kill -0 "$p" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
  if kill -0 "$p" 2>/dev/null; then
    echo "run_allreduce.sh: rank $i still running after the deadline; killing" >&2
    failed=1
    continue
  fi
  rc=0
  wait "$p" || rc=$?
  if (( rc != 0 )); then
    echo "run_allreduce.sh: rank $i exited with status $rc; last lines of $LOGS/rank$i.log:" >&2
    tail -5 "$LOGS/rank$i.log" >&2 || true
    failed=1
  fi
done
PIDS=()

cat "$LOGS/rank0.log"
(( failed == 0 )) || die "some ranks failed (logs in $LOGS)"

# ---- summary
python3 - "$LOGS/rank0.log" "$N" "$B_BPS" "$R" "$P" "$PEER" "$ALGO" "$LAYOUT" <<'EOF'
import sys
log, n, b_bps, r, p, peer, algo, layout = sys.argv[1:9]
n, b_bps, r, p = int(n), float(b_bps), int(r), int(p)
row = None
for line in open(log):
    f = line.split()
    if f and not line.startswith("#") and f[0] == str(n):
        row = f
if row is None:
    sys.exit("run_allreduce.sh: no result row for size %d in %s" % (n, log))
# nccl-tests' 13 columns, then wanB/rank ("-" for Gloo); Gloo names its algorithm after "#".
t_oop, t_ip = float(row[5]) * 1e-6, float(row[9]) * 1e-6
wan = row[13] if len(row) > 13 else "-"
gloo_algo = row[row.index("#") + 1] if "#" in row[:-1] else "?"
b = b_bps / 8.0                                   # bytes/s
bound = 2.0 * (r - 1) / r * n / b
print("# ---- summary")
print(f"# path throughput B (iperf3 r0->r1): {b_bps/1e6:9.1f} Mbit/s = {b/1e6:8.2f} MB/s")
print(f"# message N                        : {n} B")
print(f"# allreduce time T (out-of-place)  : {t_oop*1e3:9.1f} ms   (in-place {t_ip*1e3:.1f} ms)")
print(f"# lower bound 2(R-1)/R * N / B     : {bound*1e3:9.1f} ms   (R={r})")
print(f"# T / bound                        : {t_oop/bound:9.2f}      (in-place {t_ip/bound:.2f})")
print(f"# busbw {row[7]} GB/s out-of-place, {row[11]} GB/s in-place; #wrong {row[8]} / {row[12]}")
if peer == "gloo":
    what, wan_txt = f"gloo {gloo_algo}", ""
else:
    what, wan_txt = f"strata {algo}", f" wanB/rank={wan}"
    if wan != "-":
        # Each region must send 2(R-1)/R * N over its link; its P ranks share that.
        ideal = 2.0 * (r - 1) / r * n / p
        print(f"# WAN bytes sent per rank per call : {float(wan):9.0f} B    "
              f"({float(wan)/n:.3f} N; even share of the bound 2(R-1)/(R*P) N = {ideal/n:.3f} N)")
print(f"# SUMMARY {what} R={r} P={p} {layout} N={n}: T={t_oop*1e3:.1f} ms"
      f" bound={bound*1e3:.1f} ms T/bound={t_oop/bound:.2f}{wan_txt}")
EOF

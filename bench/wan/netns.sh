#!/usr/bin/env bash
# The WAN lab: regions in network namespaces, routed through a router namespace that
# delays, drops and shapes what crosses between them in the kernel's own path.
#
#   netns.sh up R RATE [options]     create strata-r0..strata-r{R-1} and the router strata-hub
#   netns.sh down                    stop the router, remove every strata-* namespace and veth
#   netns.sh status                  namespaces, routes, qdiscs, the router's rules and counters
#
# Options of 'up' (delays are one way, in ms; a pair's round trip is the sum of both ways):
#   --delay MS          every ordered pair of regions                              [0]
#   --matrix M          per ordered pair: rows "from", columns "to", e.g. "0,10,40;10,0,80;40,80,0"
#   --jitter MS         each packet's delay varies by up to ±MS (uniform), never reordered
#   --loss PCT          random loss, each direction of every pair, in percent     [0]
#   --loss-pair I:J:PCT loss from region I to region J only (repeatable; overrides --loss)
#   --queue-ms MS       the bottleneck's buffer, in ms at RATE (bfifo)              [50]
#   --one-way           shape only what regions send (default: what they receive too)
#   --pair I:J:RATE2    regions I and J send each other at most RATE2 (repeatable)
#   --lifetime S        the router stops itself after S seconds                   [3600]
#
# Layout: region i has one veth "wan0" with 10.77.0.<i+1>/32, routed to 10.77.0.0/24 via
# the router's address 10.77.0.254 on the other end (h<i> in strata-hub). The router
# forwards between its h<i>; iptables there sends each ordered pair's packets to an
# NFQUEUE queue of its own (i*R+j), held by strata-wan-router for that pair's delay. Each
# region's egress is shaped with HTB to RATE on wan0 and, unless --one-way, its ingress on
# h<i>, each over a bfifo of --queue-ms. Loss is an XDP program on h<i> (router/lab_loss.c)
# that drops each packet of a lossy pair with its probability as it enters the router; a
# region that sends with loss sends MSS-sized packets (TSO and GSO off on wan0), so a loss
# drops one segment as on a real path, not a 64 KiB burst, and h<i> merges them again
# (GRO) behind the drop, so the delay line still handles few packets. Traffic between ranks
# of one region stays on that namespace's own addresses and is not shaped, delayed or dropped.
#
# Needs root, iproute2, iptables, a kernel with netns, veth, sch_htb and NFQUEUE, and
# build/bench/wan/strata-wan-router (STRATA_WAN_ROUTER names another); with loss also
# ethtool, clang (to build the XDP program) and XDP on veth.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PREFIX=strata-r
HUB=strata-hub
SUBNET=10.77.0
GW=10.77.0.254
MAX_REGIONS=32
RUN=/run/strata-wan-lab
ROUTER=${STRATA_WAN_ROUTER:-$root/build/bench/wan/strata-wan-router}

die() { echo "netns.sh: error: $*" >&2; exit 1; }

usage() {
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

need_root() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces and tc need CAP_NET_ADMIN)"
  local t
  for t in ip tc iptables; do command -v $t >/dev/null || die "'$t' not found (scripts/setup-deps.sh installs it)"; done
}

ours() {  # our namespaces, one per line
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^(${PREFIX}[0-9]+|${HUB})\$" || true
}

stop_router() {
  local p
  if [[ -f $RUN/router.pid ]]; then
    p=$(cat "$RUN/router.pid")
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
      kill -KILL "$p" 2>/dev/null || true
    fi
    rm -f "$RUN/router.pid"
  fi
  # Anything else still running in the router's namespace (by pid only).
  if ip netns list 2>/dev/null | grep -q "^$HUB\b"; then
    for p in $(ip netns pids "$HUB" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  fi
}

down() {
  local ns n=0
  stop_router
  for ns in $(ours); do
    ip netns del "$ns" 2>/dev/null || echo "netns.sh: warning: could not delete namespace $ns" >&2
    n=$((n + 1))
  done
  # A failed 'up' can leave veth ends in the root namespace.
  local dev
  for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
               grep -E '^strata-(v|h)[0-9]+$' || true); do
    ip link del "$dev" 2>/dev/null || true
  done
  rm -f "$RUN/lab.env" "$RUN/lab_loss.o" "$RUN/lab_loss_table.h"
  echo "netns.sh: removed $n namespace(s)"
}

# Bytes a queue of MS milliseconds holds at RATE (tc units), at least 64 KiB.
queue_bytes() {
  python3 - "$1" "$2" <<'EOF'
import re, sys
rate, ms = sys.argv[1], float(sys.argv[2])
m = re.fullmatch(r"([0-9.]+)([kmgt]?)(bit|bps)", rate)
v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
bps = v if m.group(3) == "bit" else v * 8
print(max(65536, int(bps / 8 * ms / 1000)))
EOF
}

shape() {  # shape NS DEV RATE QBYTES [nested]: HTB root qdisc limiting DEV's egress to RATE
  local ns=$1 dev=$2 rate=$3 qbytes=$4 parent=1:
  ip netns exec "$ns" tc qdisc replace dev "$dev" root handle 1: htb default 10 ||
    die "tc htb on $ns/$dev failed (is sch_htb available?)"
  if [[ ${5:-} == nested ]]; then  # a parent at RATE that slow pairs' classes go under too
    ip netns exec "$ns" tc class replace dev "$dev" parent 1: classid 1:1 htb \
      rate "$rate" ceil "$rate" burst 64k cburst 64k quantum 60000 || die "tc class on $ns/$dev failed"
    parent=1:1
  fi
  # burst/cburst ~ a few ms at the rate keeps HTB accurate without starving TCP.
  ip netns exec "$ns" tc class replace dev "$dev" parent "$parent" classid 1:10 htb \
    rate "$rate" ceil "$rate" burst 64k cburst 64k quantum 60000 ||
    die "tc class on $ns/$dev with rate '$rate' failed"
  # The bottleneck's buffer in bytes: GSO packets make a packet count meaningless.
  ip netns exec "$ns" tc qdisc replace dev "$dev" parent 1:10 handle 10: bfifo limit "$qbytes" ||
    die "tc bfifo on $ns/$dev failed"
}

# slow_pair NS J RATE QBYTES: what region NS sends region J in its own class, under the
# parent class shape made at the region's rate, so the pair shares the region's link and
# is also held to RATE2.
slow_pair() {
  local ns=$1 j=$2 rate=$3 qbytes=$4 dev=wan0 cls=$((100 + $2))
  ip netns exec "$ns" tc class replace dev "$dev" parent 1:1 classid "1:$cls" htb \
    rate "$rate" ceil "$rate" burst 64k cburst 64k quantum 60000 || die "tc class for the pair on $ns failed"
  ip netns exec "$ns" tc qdisc replace dev "$dev" parent "1:$cls" handle "$cls:" bfifo limit "$qbytes"
  ip netns exec "$ns" tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 \
    match ip dst "${SUBNET}.$((j + 1))/32" flowid "1:$cls" || die "tc filter for the pair on $ns failed"
}

reachable() {  # reachable NS ADDR
  local out
  if command -v ping >/dev/null; then
    # Several tries: a lossy lab may drop one ping or its answer.
    ip netns exec "$1" ping -c 20 -i 0.05 -w 5 -q "$2" 2>/dev/null | grep -qE ' [1-9][0-9]* (packets )?received'
    return
  fi
  out=$(ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1) && return 0
  [[ $out == *"refused"* ]]
}

valid_rate() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?([kmgt]?(bit|bps))$ ]]; }
valid_num() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

up() {
  local r=${1:-} rate=${2:-} oneway="" pairs=() lossp=() a delay=0 matrix="" jitter=0 loss=0 qms=50
  local lifetime=3600
  shift 2 || true
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --one-way) oneway=--one-way; shift ;;
      --pair) [[ $# -ge 2 ]] || die "--pair needs I:J:RATE"; pairs+=("$2"); shift 2 ;;
      --delay) [[ $# -ge 2 ]] || die "--delay needs MS"; delay=$2; shift 2 ;;
      --matrix) [[ $# -ge 2 ]] || die "--matrix needs rows"; matrix=$2; shift 2 ;;
      --jitter) [[ $# -ge 2 ]] || die "--jitter needs MS"; jitter=$2; shift 2 ;;
      --loss) [[ $# -ge 2 ]] || die "--loss needs PCT"; loss=$2; shift 2 ;;
      --loss-pair) [[ $# -ge 2 ]] || die "--loss-pair needs I:J:PCT"; lossp+=("$2"); shift 2 ;;
      --queue-ms) [[ $# -ge 2 ]] || die "--queue-ms needs MS"; qms=$2; shift 2 ;;
      --lifetime) [[ $# -ge 2 ]] || die "--lifetime needs S"; lifetime=$2; shift 2 ;;
      *) die "unknown option '$1'" ;;
    esac
  done
  [[ $r =~ ^[0-9]+$ ]] && (( r >= 1 && r <= MAX_REGIONS )) ||
    die "R must be an integer in [1, $MAX_REGIONS], got '${r}'"
  valid_rate "$rate" || die "RATE must look like 200mbit, 1gbit or 500kbit (tc units), got '${rate}'"
  for a in "${pairs[@]}"; do
    [[ $a =~ ^([0-9]+):([0-9]+):(.+)$ ]] && (( BASH_REMATCH[1] < r && BASH_REMATCH[2] < r )) &&
      (( BASH_REMATCH[1] != BASH_REMATCH[2] )) && valid_rate "${BASH_REMATCH[3]}" ||
      die "--pair must be I:J:RATE with two different regions below $r and a tc rate, got '$a'"
  done
  valid_num "$delay" || die "--delay must be milliseconds (a number), got '$delay'"
  valid_num "$jitter" || die "--jitter must be milliseconds (a number), got '$jitter'"
  valid_num "$loss" || die "--loss must be a percentage, got '$loss'"
  valid_num "$qms" || die "--queue-ms must be milliseconds, got '$qms'"
  [[ $lifetime =~ ^[0-9]+$ ]] && (( lifetime >= 1 )) || die "--lifetime must be whole seconds, got '$lifetime'"
  [[ -x $ROUTER ]] || die "$ROUTER not found: build it (cmake --build --preset default --target strata-wan-router; needs libnetfilter-queue-dev)"
  command -v python3 >/dev/null || die "python3 is needed"

  # The per-pair figures, checked and expanded by python: one line "i j delay_ms loss_pct".
  local plan
  plan=$(python3 - "$r" "$delay" "$matrix" "$jitter" "$loss" "${lossp[@]}" <<'EOF'
import sys
r, delay, matrix, jitter, loss = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
def fail(msg):
    sys.exit("netns.sh: error: " + msg)
d = [[delay] * r for _ in range(r)]
if matrix:
    rows = matrix.split(";")
    if len(rows) != r: fail(f"--matrix needs {r} rows separated by ';', got {len(rows)}")
    for i, row in enumerate(rows):
        cells = row.split(",")
        if len(cells) != r: fail(f"--matrix row {i} needs {r} values, got {len(cells)}")
        for j, c in enumerate(cells):
            try: d[i][j] = float(c)
            except ValueError: fail(f"--matrix row {i} column {j} is not a number: '{c}'")
            if d[i][j] < 0 or d[i][j] > 10000: fail(f"--matrix row {i} column {j} must be 0..10000 ms")
if delay > 10000: fail("--delay must be at most 10000 ms")
if not 0 <= loss < 100: fail("--loss must be a percentage below 100")
l = [[loss] * r for _ in range(r)]
for a in sys.argv[6:]:
    f = a.split(":")
    try:
        i, j, p = int(f[0]), int(f[1]), float(f[2])
        ok = len(f) == 3 and 0 <= i < r and 0 <= j < r and i != j and 0 <= p < 100
    except (ValueError, IndexError):
        ok = False
    if not ok: fail(f"--loss-pair must be I:J:PCT with two different regions below {r}, got '{a}'")
    l[i][j] = p
for i in range(r):
    for j in range(r):
        if i != j:
            if jitter > d[i][j]: fail(f"--jitter {jitter} ms exceeds the delay {d[i][j]} ms from {i} to {j}")
            print(i, j, d[i][j], l[i][j])
EOF
) || exit 1

  # Idempotent: start from a clean slate, so a second 'up' applies the new figures.
  if [[ -n $(ours) ]]; then down >/dev/null; fi
  mkdir -p "$RUN"
  trap 'echo "netns.sh: setup failed; cleaning up" >&2; down >/dev/null 2>&1 || true' ERR

  local qbytes
  qbytes=$(queue_bytes "$rate" "$qms")
  ip netns add "$HUB" || die "cannot create namespace $HUB"
  ip -n "$HUB" link set lo up
  ip netns exec "$HUB" sysctl -qw net.ipv4.ip_forward=1

  local i j ns nested prate d p lossy=()
  for ((i = 0; i < r; i++)); do
    ns=${PREFIX}${i}
    ip netns add "$ns" || die "cannot create namespace $ns"
    ip -n "$ns" link set lo up
    ip link add "strata-v$i" type veth peer name "strata-h$i" || die "cannot create veth pair (veth module?)"
    ip link set "strata-v$i" netns "$ns"
    ip link set "strata-h$i" netns "$HUB"
    ip -n "$ns" link set "strata-v$i" name wan0
    ip -n "$HUB" link set "strata-h$i" name "h$i"
    ip -n "$HUB" addr add "$GW/32" dev "h$i"
    ip -n "$HUB" link set "h$i" up
    ip -n "$HUB" route add "${SUBNET}.$((i + 1))/32" dev "h$i"
    ip -n "$ns" addr add "${SUBNET}.$((i + 1))/32" dev wan0
    ip -n "$ns" link set wan0 up
    ip -n "$ns" route add "$GW/32" dev wan0
    ip -n "$ns" route add "${SUBNET}.0/24" via "$GW" dev wan0
    nested=""
    for a in "${pairs[@]}"; do [[ $a == "$i:"* || $a == *":$i:"* ]] && nested=nested; done
    shape "$ns" wan0 "$rate" "$qbytes" $nested
    [[ $oneway == --one-way ]] || shape "$HUB" "h$i" "$rate" "$qbytes"
    ip netns exec "$HUB" iptables -N "from$i"
    ip netns exec "$HUB" iptables -A FORWARD -i "h$i" -j "from$i"
  done
  for a in "${pairs[@]}"; do
    IFS=: read -r i j prate <<<"$a"
    slow_pair "${PREFIX}$i" "$j" "$prate" "$qbytes"
    slow_pair "${PREFIX}$j" "$i" "$prate" "$qbytes"
  done

  local queues=() lossy_from=() loss_pairs=""
  while read -r i j d p; do
    if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$p"; then
      loss_pairs+=$(python3 -c "
import sys
i, j, p = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
be = lambda k: (k + 1) << 24 | 77 << 8 | 10   # 10.77.0.(k+1) as the kernel holds it
print(f'LAB_PAIR({be(i)}u, {be(j)}u, {min(int(p / 100 * 2**32), 2**32 - 1)}u) ', end='')" "$i" "$j" "$p")
      lossy_from[$i]=1
    fi
    ip netns exec "$HUB" iptables -A "from$i" -o "h$j" -j NFQUEUE --queue-num $((i * r + j))
    queues+=(--queue "$((i * r + j)):$(python3 -c "print(int(float('$d') * 1000))"):$(python3 -c "print(int(float('$jitter') * 1000))")")
  done <<<"$plan"
  if [[ -n $loss_pairs ]]; then
    command -v ethtool >/dev/null || die "'ethtool' not found: loss needs it (scripts/setup-deps.sh installs it)"
    command -v clang >/dev/null || die "'clang' not found: loss needs it (scripts/setup-deps.sh installs it)"
    echo "#define LAB_LOSS_PAIRS $loss_pairs" >"$RUN/lab_loss_table.h"
    clang -O2 -target bpf -I"$RUN" -I/usr/include/"$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)" \
      -c "$here/router/lab_loss.c" -o "$RUN/lab_loss.o" || die "cannot compile the loss program"
    for i in "${!lossy_from[@]}"; do
      # MSS-sized packets from a lossy region, so that a loss drops one segment; the
      # router's end merges them again (GRO) after the loss, before the delay line.
      ip netns exec "${PREFIX}$i" ethtool -K wan0 tso off >/dev/null
      ip netns exec "$HUB" ethtool -K "h$i" gro on >/dev/null
      ip -n "$HUB" link set dev "h$i" xdp obj "$RUN/lab_loss.o" sec xdp ||
        die "cannot attach the loss program to $HUB/h$i (XDP on veth)"
    done
  fi
  if (( r > 1 )); then
    rm -f "$RUN/router.ready"
    ip netns exec "$HUB" "$ROUTER" "${queues[@]}" --lifetime "$lifetime" --realtime ${STRATA_LAB_ROUTER_ARGS:-} \
      --ready "$RUN/router.ready" --stats "$RUN/router-stats.json" >"$RUN/router.log" 2>&1 &
    echo $! >"$RUN/router.pid"
    for _ in $(seq 100); do [[ -f $RUN/router.ready ]] && break; kill -0 "$(cat "$RUN/router.pid")" 2>/dev/null || break; sleep 0.05; done
    [[ -f $RUN/router.ready ]] || { cat "$RUN/router.log" >&2; die "the router did not start (log above)"; }
  fi
  trap - ERR
  {
    echo "LAB_REGIONS=$r"
    echo "LAB_RATE=$rate"
    echo "LAB_JITTER_MS=$jitter"
    echo "LAB_QUEUE_BYTES=$qbytes"
    echo "LAB_PAIRS=\"$(tr '\n' ';' <<<"$plan")\""  # i j delay_ms loss_pct;...
  } >"$RUN/lab.env"

  # Region 0 reaches every other region, through the router.
  for ((i = 1; i < r; i++)); do
    reachable "${PREFIX}0" "${SUBNET}.$((i + 1))" ||
      { down >/dev/null; die "${PREFIX}0 cannot reach ${SUBNET}.$((i + 1)) after setup"; }
  done
  local what="egress shaped to $rate$([[ $oneway == --one-way ]] && echo ' (one way)' || echo ' (both ways)')"
  [[ -n $matrix ]] && what+=", one-way delays $matrix ms" || what+=", one-way delay $delay ms"
  [[ $jitter != 0 ]] && what+=" ±$jitter ms"
  [[ $loss != 0 || ${#lossp[@]} -gt 0 ]] && what+=", loss $loss% ${lossp[*]}"
  echo "netns.sh: $r region(s) up: ${PREFIX}0..${PREFIX}$((r - 1)) = ${SUBNET}.1..${SUBNET}.$r, $what" \
       "${pairs[*]:+; slow pairs ${pairs[*]}}"
}

status() {
  local ns
  [[ -f $RUN/lab.env ]] && cat "$RUN/lab.env"
  if [[ -f $RUN/router.pid ]] && kill -0 "$(cat "$RUN/router.pid")" 2>/dev/null; then
    echo "router: pid $(cat "$RUN/router.pid")"
  else
    echo "router: not running"
  fi
  for ns in $(ours); do
    echo "== $ns"
    ip -n "$ns" -brief addr show | grep -v '^lo ' || true
    ip netns exec "$ns" tc -s qdisc show | grep -E -A2 'htb|bfifo' || true
  done
  if ip netns list 2>/dev/null | grep -q "^$HUB\b"; then
    ip netns exec "$HUB" iptables -L -v -n -x 2>/dev/null | grep -E 'Chain from|DROP|NFQUEUE' || true
    ip netns exec "$HUB" cat /proc/net/netfilter/nfnetlink_queue 2>/dev/null || true
    ip -n "$HUB" -d link show 2>/dev/null | grep -B1 'prog/xdp' || true
  fi
}

cmd=${1:-}
shift || true
case "$cmd" in
  up)     need_root; [[ $# -ge 2 ]] || usage; up "$@" ;;
  down)   need_root; [[ $# -eq 0 ]] || usage; down ;;
  status) need_root; status ;;
  *)      usage ;;
esac

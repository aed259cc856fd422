#!/usr/bin/env bash
# Emulated regions in network namespaces, for WAN benchmarks of strata on one machine.
#
#   netns.sh up R RATE [--one-way] [--pair I:J:RATE2]...
#                                    create strata-r0..strata-r{R-1} and the hub strata-hub
#   netns.sh down                    remove every strata-* namespace and leftover veth
#   netns.sh status                  show namespaces, addresses and qdiscs
#
# Layout: region i lives in namespace strata-r<i>, with one veth "wan0" (10.77.0.<i+1>/24)
# whose peer "h<i>" sits in strata-hub on the bridge "br0", so every region reaches every
# other through the hub.  Each region's egress is shaped with HTB to RATE on wan0; unless
# --one-way is given, the hub side h<i> is shaped too, so what enters a region is also
# limited to RATE (both directions).  --pair I:J:RATE2 also limits what regions I and J send
# each other to RATE2 (each direction, inside the region's RATE): a slow pair of regions
# in an otherwise even matrix.  Traffic between ranks of the same region stays on
# that namespace's loopback route and is not shaped.  netem is not used (not available).
#
# Needs root, iproute2 (ip, tc) and a kernel with netns, veth, bridge and sch_htb.
set -euo pipefail

PREFIX=strata-r
HUB=strata-hub
SUBNET=10.77.0
MAX_REGIONS=200

die() { echo "netns.sh: error: $*" >&2; exit 1; }

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

need_root() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces and tc need CAP_NET_ADMIN)"
  command -v ip >/dev/null || die "'ip' (iproute2) not found"
  command -v tc >/dev/null || die "'tc' (iproute2) not found"
}

ours() {  # our namespaces, one per line
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^(${PREFIX}[0-9]+|${HUB})\$" || true
}

down() {
  local ns n=0
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
  echo "netns.sh: removed $n namespace(s)"
}

shape() {  # shape NS DEV RATE [nested]: HTB root qdisc limiting DEV's egress to RATE
  local ns=$1 dev=$2 rate=$3 parent=1:
  ip netns exec "$ns" tc qdisc replace dev "$dev" root handle 1: htb default 10 ||
    die "tc htb on $ns/$dev failed (is sch_htb available?)"
  if [[ ${4:-} == nested ]]; then  # a parent at RATE that slow pairs' classes go under too
    ip netns exec "$ns" tc class replace dev "$dev" parent 1: classid 1:1 htb \
      rate "$rate" ceil "$rate" burst 64k cburst 64k quantum 60000 || die "tc class on $ns/$dev failed"
    parent=1:1
  fi
  # burst/cburst ~ a few ms at the rate keeps HTB accurate without starving TCP.
  ip netns exec "$ns" tc class replace dev "$dev" parent "$parent" classid 1:10 htb \
    rate "$rate" ceil "$rate" burst 64k cburst 64k quantum 60000 ||
    die "tc class on $ns/$dev with rate '$rate' failed"
  # A bounded FIFO under the class (HTB's default leaf is pfifo with txqueuelen packets).
  ip netns exec "$ns" tc qdisc replace dev "$dev" parent 1:10 handle 10: pfifo limit 1000 ||
    die "tc pfifo on $ns/$dev failed"
}

# slow_pair NS J RATE2: what region NS sends region J in its own class, under the parent
# class shape_nested made at the region's rate, so the pair shares the region's link and
# is also held to RATE2.
slow_pair() {
  local ns=$1 j=$2 rate=$3 dev=wan0 cls=$((100 + $2))
  ip netns exec "$ns" tc class replace dev "$dev" parent 1:1 classid "1:$cls" htb \
    rate "$rate" ceil "$rate" burst 64k cburst 64k quantum 60000 || die "tc class for the pair on $ns failed"
  ip netns exec "$ns" tc qdisc replace dev "$dev" parent "1:$cls" handle "$cls:" pfifo limit 1000
  ip netns exec "$ns" tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 \
    match ip dst "${SUBNET}.$((j + 1))/32" flowid "1:$cls" || die "tc filter for the pair on $ns failed"
}

reachable() {  # reachable NS ADDR
  local out
  if command -v ping >/dev/null; then
    ip netns exec "$1" ping -c1 -W2 "$2" >/dev/null 2>&1
    return
  fi
  out=$(ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1) && return 0
  [[ $out == *"refused"* ]]
}

valid_rate() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?([kmgt]?(bit|bps))$ ]]; }

up() {
  local r=${1:-} rate=${2:-} oneway="" pairs=() a
  shift 2 || true
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --one-way) oneway=--one-way; shift ;;
      --pair) [[ $# -ge 2 ]] || die "--pair needs I:J:RATE"; pairs+=("$2"); shift 2 ;;
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

  # Idempotent: start from a clean slate, so a second 'up' applies the new R and RATE.
  if [[ -n $(ours) ]]; then down >/dev/null; fi
  trap 'echo "netns.sh: setup failed; cleaning up" >&2; down >/dev/null 2>&1 || true' ERR

  ip netns add "$HUB" || die "cannot create namespace $HUB"
  ip -n "$HUB" link set lo up
  ip -n "$HUB" link add br0 type bridge || die "cannot create bridge in $HUB (bridge module?)"
  ip -n "$HUB" link set br0 up

  local i j ns nested prate
  for ((i = 0; i < r; i++)); do
    ns=${PREFIX}${i}
    ip netns add "$ns" || die "cannot create namespace $ns"
    ip -n "$ns" link set lo up
    ip link add "strata-v$i" type veth peer name "strata-h$i" || die "cannot create veth pair (veth module?)"
    ip link set "strata-v$i" netns "$ns"
    ip link set "strata-h$i" netns "$HUB"
    ip -n "$ns" link set "strata-v$i" name wan0
    ip -n "$HUB" link set "strata-h$i" name "h$i"
    ip -n "$HUB" link set "h$i" master br0
    ip -n "$HUB" link set "h$i" up
    ip -n "$ns" addr add "${SUBNET}.$((i + 1))/24" dev wan0
    ip -n "$ns" link set wan0 up
    nested=""
    for a in "${pairs[@]}"; do [[ $a == "$i:"* || $a == *":$i:"* ]] && nested=nested; done
    shape "$ns" wan0 "$rate" $nested
    [[ $oneway == --one-way ]] || shape "$HUB" "h$i" "$rate"
  done
  for a in "${pairs[@]}"; do
    IFS=: read -r i j prate <<<"$a"
    slow_pair "${PREFIX}$i" "$j" "$prate"
    slow_pair "${PREFIX}$j" "$i" "$prate"
  done
  trap - ERR

  # Quick reachability check from region 0 to every other region: a TCP connect to a
  # closed port answers "connection refused" at once when the address is reachable.
  for ((i = 1; i < r; i++)); do
    reachable "${PREFIX}0" "${SUBNET}.$((i + 1))" ||
      { down >/dev/null; die "${PREFIX}0 cannot reach ${SUBNET}.$((i + 1)) after setup"; }
  done
  echo "netns.sh: $r region(s) up: ${PREFIX}0..${PREFIX}$((r - 1)) = ${SUBNET}.1..${SUBNET}.$r," \
       "egress shaped to $rate$([[ $oneway == --one-way ]] && echo ' (one way)' || echo ' (both ways)')" \
       "${pairs[*]:+; slow pairs ${pairs[*]}}"
}

status() {
  local ns
  for ns in $(ours); do
    echo "== $ns"
    ip -n "$ns" -brief addr show | grep -v '^lo ' || true
    ip netns exec "$ns" tc qdisc show | grep -E 'htb|pfifo' || true
    ip netns exec "$ns" tc class show dev wan0 2>/dev/null || true
  done
}

cmd=${1:-}
shift || true
case "$cmd" in
  up)     need_root; [[ $# -ge 2 ]] || usage; up "$@" ;;
  down)   need_root; [[ $# -eq 0 ]] || usage; down ;;
  status) need_root; status ;;
  *)      usage ;;
esac

#!/usr/bin/env bash
# The WAN lab's own check: what netns.sh says it applies, measured from the regions.
#
#   bench/wan/lab_check.sh [--rate RATE] [--min-share F] [--quick]
#
# 1. rate:  2 regions at RATE (1gbit), no delay: iperf3 with 4 streams must reach F (0.9)
#           of RATE through the router (and what it moves both ways at once is told).
# 2. delay: 3 regions with an uneven one-way matrix (5/15/30 ms, not symmetric) and ±1 ms
#           jitter: each ordered pair's ping round trip must be the sum of its two ways
#           (median within -1/+1.5 ms of it, none below it by more than the two ways' jitter, and
#           nine in ten within the jitter and 3 ms of forwarding: a 2-core host running the
#           router under CI's load holds a sample now and then; the maximum is told), and
#           UDP through a jittered path arrives in order (the router never reorders) and, but for
#           what a loaded host drops (under 0.3%), complete.
# 3. loss:  2 regions, 10 ms, 2% loss from region 0 to region 1 only: iperf3's UDP loss
#           must be 2% ± 0.6 one way and below 0.3% the other.
# Prints one line per figure, "ok" or "FAIL", and exits 1 if any failed; 77 (skip) when
# it cannot run here (not root, no router binary, a tool missing). Bounded: every command
# runs under timeout, and the lab is torn down on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RATE=1gbit SHARE=0.9 QUICK=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rate) RATE=$2; shift 2 ;;
    --min-share) SHARE=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lab_check.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
skip() { echo "lab_check.sh: skipped: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
for t in ip tc iptables iperf3 ping ethtool python3; do command -v $t >/dev/null || skip "'$t' is not installed"; done
root=$(cd "$here/../.." && pwd)
[[ -x ${STRATA_WAN_ROUTER:-$root/build/bench/wan/strata-wan-router} ]] || skip "strata-wan-router is not built"

trap '"$here/netns.sh" down >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
failed=0
verdict() {  # verdict NAME OK_EXPR TEXT
  if python3 -c "import sys; sys.exit(0 if ($2) else 1)"; then echo "ok    $1: $3"
  else echo "FAIL  $1: $3"; failed=1; fi
}
T=$(( QUICK ? 2 : 4 ))

# iperf3 from region $1 to region $2; prints the JSON's end section fields asked for.
iperf() {
  local from=$1 to=$2; shift 2
  local addr=10.77.0.$((to + 1)) port=$((5201 + to))
  ip netns exec "strata-r$to" timeout $((T + 20)) iperf3 -s -1 -B "$addr" -p $port >/dev/null 2>&1 &
  local srv=$!
  for _ in $(seq 50); do ip netns exec "strata-r$to" ss -ltn 2>/dev/null | grep -q "$addr:$port" && break; sleep 0.1; done
  ip netns exec "strata-r$from" timeout $((T + 15)) iperf3 -c "$addr" -p $port -t "$T" -J "$@" || true
  wait "$srv" 2>/dev/null || true
}

# 1. rate
"$here/netns.sh" up 2 "$RATE" >/dev/null
bps=$(iperf 0 1 -P 4 | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])')
rate_bps=$(python3 - "$RATE" <<'EOF'
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmgt]?)(bit|bps)", sys.argv[1])
v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
print(v if m.group(3) == "bit" else v * 8)
EOF
)
verdict rate "$bps >= $SHARE * $rate_bps" "iperf3 4 streams $(python3 -c "print(f'{$bps/1e6:.0f}')") Mbit/s through the router at $RATE, 0 ms (need >= $SHARE of it)"
# Both ways at once, as an allreduce loads the path (two iperf3 processes: an iperf3
# older than 3.16 runs --bidir on one thread, which under loss measured itself, 629 / 509
# Mbit/s where two processes moved 791 / 779).
both=$(mktemp -d /tmp/strata-lab-check.XXXXXX)
iperf 0 1 -P 4 -O 1 >"$both/fwd.json" &
iperf 1 0 -P 4 -O 1 >"$both/rev.json"
wait
received() {  # a run that did not report counts as 0
  python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"])
except Exception: print(0.0)' "$1"
}
fwd=$(received "$both/fwd.json") rev=$(received "$both/rev.json")
rm -rf -- "$both"
# Told, not judged: on this 2-core host the four iperf3 processes and the router compete
# for the cores, and one way once moved 450 Mbit/s where three runs before moved 953-955.
echo "info  rate both ways: iperf3 4 streams each way at once, $(python3 -c "print(f'{$fwd/1e6:.0f} / {$rev/1e6:.0f}')") Mbit/s at $RATE"

# 2. delay matrix, jitter, order
M="0,5,15;7,0,30;20,25,0"
"$here/netns.sh" up 3 "$RATE" --matrix "$M" --jitter 1 >/dev/null
for pair in "0 1" "0 2" "1 2"; do
  read -r i j <<<"$pair"
  want=$(python3 -c "m=[[float(c) for c in r.split(',')] for r in '$M'.split(';')]; print(m[$i][$j]+m[$j][$i])")
  # Per-sample times, so the verdict rests on the median: under CI's load the router, a user
  # process on 2 cores, once held two of twenty samples 5-6 ms and pulled the mean 1.5 ms off.
  # Forwarding only adds (an idle host's median sits 0.6-0.8 ms above the matrix), so the
  # median may sit 1.5 ms above and 1 ms below.
  read -r mn med p90 mx < <(ip netns exec "strata-r$i" timeout 20 ping -c 20 -i 0.05 "10.77.0.$((j + 1))" |
    python3 -c '
import re,sys; t=sorted(float(m) for m in re.findall(r"time=([0-9.]+) ms", sys.stdin.read()))
print(*(f"{v:.3f}" for v in (t[0], t[len(t)//2], t[(9*len(t))//10 - 1], t[-1])) if len(t) >= 15 else "0 0 0 0")')
  verdict "delay $i<->$j" "$mn >= $want - 2.2 and $p90 <= $want + 5 and $want - 1.0 <= $med <= $want + 1.5" \
    "ping round trip min/median/p90/max $mn/$med/$p90/$mx ms; the matrix says $want ms, each way ±1 ms of jitter"
done
# Not one datagram out of order; lost ones within what the loss check below allows where
# the lab drops nothing (a run on this 2-core machine once lost 52 of ~18000, 0.29%).
read -r ooo lost pct < <(iperf 0 2 -u -b 50M -l 1400 | python3 -c '
import json,sys; e=json.load(sys.stdin)["end"]
print(sum(s["udp"].get("out_of_order", 0) for s in e["streams"]), e["sum"]["lost_packets"], e["sum"]["lost_percent"])')
verdict "order" "$ooo == 0 and $pct < 0.3" "UDP at 50 Mbit/s across the jittered 15 ms path: $ooo datagrams out of order, $lost lost"

# 3. loss, one direction
"$here/netns.sh" up 2 "$RATE" --delay 10 --loss-pair 0:1:2 >/dev/null
# The receiver's count (iperf3 reports it to the client at the end); a run whose report
# did not come back, or that received nothing, counts as no measurement. A measurement off
# the mark is taken once more (a CI run once saw 0.00% where the lab dropped 2%, which
# four runs by hand did not repeat): both are printed, the second decides.
udp_loss() {  # udp_loss FROM TO: lost percent, or "nan"
  iperf "$1" "$2" -u -b 50M -l 1400 | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)["end"]["sum_received"]
    print(r["lost_percent"] if r.get("packets", 0) > 0 else "nan")
except Exception:
    print("nan")'
}
pct() { python3 -c "print(f'{float(\"$1\"):.2f}')"; }
for dir in "0 1 2.0" "1 0 0.0"; do
  read -r i j want <<<"$dir"
  if [[ $want == 0.0 ]]; then ok="x < 0.3"; else ok="abs(x - $want) <= 0.6"; fi
  lost=$(udp_loss "$i" "$j") tries=""
  if ! python3 -c "import sys; x = float('$lost'); sys.exit(0 if $ok else 1)"; then
    tries="first run $(pct "$lost")%, again: "
    lost=$(udp_loss "$i" "$j")
  fi
  verdict "loss $i->$j" "(lambda x: $ok)(float('$lost'))" "UDP loss ${tries}$(pct "$lost")%, the lab applies $want%"
done
exit $failed

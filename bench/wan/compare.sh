#!/usr/bin/env bash
# One comparison in the WAN lab (netns.sh): strata's hierarchical allreduce, its flat
# ring, and Gloo's best algorithm, with ranks in region order and interleaved, all against
# the same lower bound 2(R-1)/R * N / B with B measured once by iperf3 (4 streams) at the
# start, on the same path.
#
# Usage: bench/wan/compare.sh [-R N] [-P N] [--size 64M] [-n ITERS] [--rate 200mbit]
#                             [--delay MS | --matrix M] [--loss PCT] [--jitter MS] [--only LIST]
#   --only LIST   comma-separated subset of: hier,flat,gloo,hier-il,flat-il,gloo-il,
#                 hier-z (hier with --compress SPEC)
#   --compress S  the codec of hier-z                                 [topk:0.01+int8]
#   --transport T intra-region transport of the strata variants         [tcp]
# Prints the run_allreduce.sh summary of each variant and a markdown table at the end.
# Needs what run_allreduce.sh needs (root, iproute2, iperf3, python3, a build).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
R=2 P=2 SIZE=64M ITERS=3 RATE=200mbit LAB=() COMPRESS=topk:0.01+int8 TRANSPORT=tcp
ONLY="hier,flat,flat-il,gloo,gloo-il"
die() { echo "compare.sh: error: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -R) R=$2; shift 2 ;;
    -P) P=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --delay|--matrix|--loss|--jitter|--loss-pair|--queue-ms) LAB+=("$1" "$2"); shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --compress) COMPRESS=$2; shift 2 ;;
    --transport) TRANSPORT=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

common=(-R "$R" -P "$P" --size "$SIZE" -n "$ITERS" --rate "$RATE")
common+=("${LAB[@]}")
out=$(mktemp /tmp/strata-wan-compare.XXXXXX)
echo "# summaries collect in $out"

B=""
for v in ${ONLY//,/ }; do
  case "$v" in
    hier) args=(--algo hier --transport "$TRANSPORT") ;;
    hier-z) args=(--algo hier --transport "$TRANSPORT" -- --compress "$COMPRESS") ;;
    flat) args=(--algo flat --transport "$TRANSPORT") ;;
    gloo) args=(--peer gloo --timeout 1500) ;;
    hier-il) args=(--algo hier --interleave --transport "$TRANSPORT") ;;
    flat-il) args=(--algo flat --interleave --transport "$TRANSPORT") ;;
    gloo-il) args=(--peer gloo --interleave --timeout 1500) ;;
    *) die "unknown variant '$v'" ;;
  esac
  if [[ -z $B ]]; then
    log=$("$here/run_allreduce.sh" "${common[@]}" "${args[@]}" 2>&1) || { echo "$log" | tail -20 >&2; die "variant $v failed"; }
    B=$(sed -n 's/^# iperf3 .*: \([0-9.]*\) Mbit\/s$/\1/p' <<<"$log")
    [[ -n $B ]] || die "no iperf3 figure in the first run's output"
  else
    log=$("$here/run_allreduce.sh" "${common[@]}" --no-iperf \
          --bandwidth "$(python3 -c "print(int($B * 1e6))")" "${args[@]}" 2>&1) || { echo "$log" | tail -20 >&2; echo "variant $v failed" >&2; continue; }
  fi
  [[ $v == hier-z ]] && log=$(sed "s/^# SUMMARY strata hier /# SUMMARY strata hier+$COMPRESS /" <<<"$log")
  grep -E '^# (SUMMARY|WAN bytes sent per rank per call :)' <<<"$log"
  grep '^# SUMMARY' <<<"$log" >>"$out"
done

echo
echo "B = $B Mbit/s (iperf3, 4 streams, measured once), R=$R, P=$P, N=$SIZE, lab: ${LAB[*]:-no delay}"
echo
echo "| variant | ranks | T (ms) | bound (ms) | T/bound | WAN bytes/rank |"
echo "|---|---|---:|---:|---:|---:|"
python3 - "$out" <<'EOF'
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r"# SUMMARY (\S+ \S+) R=\d+ P=\d+ (\S+) N=\d+: T=([\d.]+) ms bound=([\d.]+) ms T/bound=([\d.]+)(?: wanB/rank=(\S+))?", line)
    if m:
        what, layout, t, bound, ratio, wan = m.groups()
        print(f"| {what} | {layout} | {float(t):.0f} | {float(bound):.0f} | {ratio} | {wan or '-'} |")
EOF

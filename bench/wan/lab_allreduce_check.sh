#!/usr/bin/env bash
# CI: an allreduce across two regions of the WAN lab with the kernel seeing the delay and
# the loss (20 ms one way, 2% loss each way, 200 Mbit/s), at an odd element count, checked
# exactly by strata-perf against its reference (a wrong element fails the rank and so this
# script). 77 (skip) where the lab cannot run. Bounded by run_allreduce.sh's --timeout.
#
# Usage: bench/wan/lab_allreduce_check.sh [STRATA_PERF]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PERF=${1:-$root/build/tools/strata-perf}
skip() { echo "lab_allreduce_check.sh: skipped: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
for t in ip tc iptables ethtool clang python3; do command -v $t >/dev/null || skip "'$t' is not installed"; done
[[ -x ${STRATA_WAN_ROUTER:-$root/build/bench/wan/strata-wan-router} ]] || skip "strata-wan-router is not built"
[[ -x $PERF ]] || skip "$PERF is not built"
# 1,000,001 floats: odd, so no level divides it evenly. Three checked calls and the
# summary; B is given, not measured (this checks results, not speed).
out=$("$here/run_allreduce.sh" -R 2 -P 2 --rate 200mbit --delay 20 --loss 2 --size 4000004 -n 3 -w 1 \
        --no-iperf --bandwidth 190000000 --timeout 120 --perf "$PERF" 2>&1) || { echo "$out" | tail -30; exit 1; }
grep -E "#wrong|SUMMARY" <<<"$out"
grep -qE "#wrong 0 / 0" <<<"$out" || { echo "lab_allreduce_check.sh: results differ from the reference"; exit 1; }

#!/usr/bin/env bash
# Builds strata and runs the demo: nccl-tests-style allreduce sweeps on 4 local ranks
# split into 2 regions, with the link between the regions emulated inside the process
# (STRATA_WAN_EMULATE, default 1 Gbit/s and 5 ms one way): the hierarchical plan, the
# flat ring for comparison, and the hierarchical plan with top-k 1% + int8 compression
# across regions. The last column is the bytes each rank sent over the WAN per call.
# Extra arguments go to every strata-perf run after the demo's own, so they override them
# (strata-perf takes the last of a repeated flag); RANKS and TRANSPORT override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cmake --preset default
cmake --build --preset default --parallel 2 --target strata-perf strata-run
ranks=${RANKS:-4}
transport=${TRANSPORT:-ucx}
export STRATA_WAN_EMULATE=${STRATA_WAN_EMULATE-rate=1gbit,delay=5ms}
perf=(build/tools/strata-perf --ranks "$ranks" --regions 2 --transport "$transport" -n 5 -w 1)
echo "## $ranks ranks in 2 regions over $transport, WAN emulated: $STRATA_WAN_EMULATE"
echo "## hierarchical allreduce (chosen automatically across regions)"
"${perf[@]}" -b 4 -e 64M -f 16 "$@"
echo "## flat ring across the same regions (STRATA_ALGO=flat)"
STRATA_ALGO=flat "${perf[@]}" -b 1M -e 64M -f 8 "$@"
echo "## hierarchical with top-k 1% + int8 and error feedback across regions"
"${perf[@]}" -b 1M -e 64M -f 8 --compress topk:0.01+int8 "$@"

#!/usr/bin/env bash
# Builds strata and runs the demo: an nccl-tests-style allreduce sweep on local ranks,
# over UCX and then over plain TCP. Extra arguments go to strata-perf.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cmake --preset default
cmake --build --preset default --parallel 2 --target strata-perf strata-run
ranks=${RANKS:-4}
for transport in ucx tcp; do
  echo "## strata-perf --ranks $ranks --transport $transport"
  build/tools/strata-perf --ranks "$ranks" --transport "$transport" -b 8 -e 64M -f 4 -n 10 "$@"
done

#!/usr/bin/env bash
# Trains the example model with DDP over strata on 4 local ranks in 2 emulated regions,
# exact and then compressed (top-k 1% + int8, error feedback, momentum correction),
# printing loss and step time. Installs what is missing (Debian packages, the project's
# .venv with torch) and builds the backend first. Extra arguments go to train.py;
# STRATA_WAN_EMULATE shapes the link between the regions.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup-deps.sh
scripts/python-env.sh
cmake --preset ci >/dev/null
cmake --build --preset ci --parallel 2 --target strata_python
export PYTHONPATH=$PWD/build/python
export STRATA_WAN_EMULATE=${STRATA_WAN_EMULATE-rate=200mbit,delay=5ms}
run() { .venv/bin/torchrun --nproc-per-node 4 examples/torch/train.py --regions 2 "$@"; }
echo "## exact (WAN emulated: $STRATA_WAN_EMULATE)"
run "$@"
echo "## compressed: top-k 1% + int8"
run --compress topk:0.01+int8 "$@"

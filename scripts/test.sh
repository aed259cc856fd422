#!/usr/bin/env bash
# Builds strata with warnings as errors and runs every test (unit, multiprocess).
# Installs missing Debian packages first. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cmake --preset ci
cmake --build --preset ci --parallel 2
ctest --preset ci "$@"

#!/usr/bin/env bash
# Builds strata and runs every test, in the stages CI runs (each prints its time):
#   main  the release build with warnings as errors: unit, multiprocess and plugin tests,
#         every fuzz target replaying its seed corpus and regression inputs, and the
#         PyTorch backend's pytest suites (in the .venv scripts/python-env.sh makes)
#   asan  a clang build under AddressSanitizer and UndefinedBehaviorSanitizer: the unit,
#         multiprocess and plugin suites
#   fuzz  every libFuzzer target of that build, STRATA_FUZZ_SECONDS (20) each
#   tsan  a clang build under ThreadSanitizer: the tests of the threaded core (label engine)
# STRATA_TEST_STAGES picks stages (default main,asan,fuzz,tsan). Arguments go to the main
# stage's ctest. Installs missing Debian packages and the Python environment first. CI
# runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
scripts/python-env.sh
stages=",${STRATA_TEST_STAGES:-main,asan,fuzz,tsan},"
has() { [[ $stages == *",$1,"* ]]; }
stage_start=0
begin() { stage_start=$SECONDS; echo "=== stage $1"; }
end() { echo "=== stage $1 took $((SECONDS - stage_start)) s"; }

if has main; then
  begin main
  cmake --preset ci
  cmake --build --preset ci --parallel 2
  ctest --preset ci "$@"
  end main
fi
if has asan || has fuzz; then
  begin asan-build
  cmake --preset asan -DSTRATA_FUZZ_SECONDS="${STRATA_FUZZ_SECONDS:-20}"
  cmake --build --preset asan --parallel 2
  end asan-build
fi
if has asan; then
  begin asan
  ctest --preset asan
  end asan
fi
if has fuzz; then
  begin fuzz
  ctest --preset fuzz
  end fuzz
fi
if has tsan; then
  begin tsan
  cmake --preset tsan
  cmake --build --preset tsan --parallel 2 --target test_transport_conformance test_c_api test_wan_link \
    test_collectives test_failures test_job_end test_shrink
  ctest --preset tsan
  end tsan
fi

#!/usr/bin/env bash
# run_fuzzer.sh FUZZER WORKDIR SECONDS CORPUS... : one bounded libFuzzer run. New inputs go
# to WORKDIR/corpus (never into the repository's seeds), a crashing input to
# WORKDIR/artifacts, and the last lines say how many inputs ran and how fast.
set -uo pipefail
fuzzer=$1 work=$2 seconds=$3
shift 3
mkdir -p "$work/corpus" "$work/artifacts"
dirs=()
for d in "$@"; do [ -d "$d" ] && dirs+=("$d"); done
"$fuzzer" "$work/corpus" "${dirs[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=8192 -print_final_stats=1 -artifact_prefix="$work/artifacts/" 2>"$work/log"
status=$?
grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb)" "$work/log"
if [ "$status" -ne 0 ]; then
  tail -60 "$work/log"
  echo "fuzzer failed: the input is in $work/artifacts; once fixed, keep it under tests/fuzz/regressions/$(basename "$work")/"
fi
exit "$status"

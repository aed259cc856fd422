#!/usr/bin/env bash
# One sitting of the cross-region figures in the WAN lab (BENCHMARKS.md, "Across regions
# in the WAN lab"): every case run REPEAT times, medians of T/bound, each B measured by
# iperf3 (4 streams) on the case's own path at its first run. Prints Markdown tables; logs
# and summaries go to OUT.
#
# Usage: bench/wan/lab_sitting.sh [OUT] [REPEAT]          defaults: a fresh /tmp dir, 3
# Needs root and a build (strata-perf, strata-peer-gloo, strata-wan-router).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$(mktemp -d /tmp/strata-lab-sitting.XXXXXX)} REPEAT=${2:-3}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
MATRIX="0,10,40;10,0,80;40,80,0"
echo "# lab sitting $(date -u +%FT%TZ), logs in $OUT"

# case NAME REPEATS ARGS...: run_allreduce.sh REPEATS times; B from the first run's
# iperf3; each run's summary line in OUT/NAME.sum
case_runs() {
  local name=$1 reps=$2 i b="" log
  shift 2
  : >"$OUT/$name.sum"
  for ((i = 1; i <= reps; i++)); do
    if [[ -z $b ]]; then
      log=$("$here/run_allreduce.sh" --logs "$OUT/$name.$i" "$@" 2>&1) || { echo "$log" | tail -5 >&2; echo "case $name failed" >&2; return 0; }
      b=$(sed -n 's/^# iperf3 .*: \([0-9.]*\) Mbit\/s$/\1/p' <<<"$log")
    else
      log=$("$here/run_allreduce.sh" --logs "$OUT/$name.$i" --no-iperf --bandwidth "$(python3 -c "print(int($b * 1e6))")" \
            "$@" 2>&1) || { echo "$log" | tail -5 >&2; echo "case $name run $i failed" >&2; continue; }
    fi
    { grep '^# SUMMARY' <<<"$log"; grep '^# T / bound' <<<"$log"; grep '^# WAN path' <<<"$log" || true; } >>"$OUT/$name.sum"
  done
  echo "B=$b" >>"$OUT/$name.sum"
}

row() {  # row NAME LABEL: median T/bound (and in place) of NAME's runs
  python3 - "$OUT/$1.sum" "$2" <<'EOF'
import re, statistics, sys
path, label = sys.argv[1:3]
oop, ip, b, ms = [], [], "?", []
for line in open(path):
    m = re.match(r"# T / bound\s*:\s*([\d.]+)\s*\(in-place ([\d.]+)\)", line)
    if m: oop.append(float(m.group(1))); ip.append(float(m.group(2)))
    m = re.search(r" T=([\d.]+) ms", line)
    if m: ms.append(float(m.group(1)))
    if line.startswith("B="): b = line.strip()[2:]
if not oop:
    print(f"| {label} | failed | | | |"); sys.exit()
print(f"| {label} | {b} | {statistics.median(ms):.0f} | {statistics.median(oop):.2f} ({min(oop):.2f}-{max(oop):.2f}) | {statistics.median(ip):.2f} | {len(oop)} |")
EOF
}

"$here/lab_check.sh" | tee "$OUT/lab_check.txt"

echo
echo "| case | B (Mbit/s, iperf3 4 streams) | T median (ms) | T/bound median (range) | in place | runs |"
echo "|---|---:|---:|---:|---:|---:|"
common=(-R 2 -P 2 --rate 1gbit --delay 25 --size 64M -n 5 -w 2)
case_runs hier25 "$REPEAT" "${common[@]}"; row hier25 "strata hier, 2x2, 1 Gbit/s, 25 ms"
case_runs flat25 1 "${common[@]}" --algo flat; row flat25 "strata flat ring, same"
case_runs gloo25 1 "${common[@]}" --peer gloo -n 3 -w 1 --timeout 900; row gloo25 "Gloo's best, same"
case_runs hier25l "$REPEAT" "${common[@]}" --loss 1; row hier25l "strata hier, 2x2, 1 Gbit/s, 25 ms, 1% loss"
case_runs flat25l 1 "${common[@]}" --loss 1 --algo flat; row flat25l "strata flat ring, same"
case_runs gloo25l 1 "${common[@]}" --loss 1 --peer gloo -n 3 -w 1 --timeout 900; row gloo25l "Gloo's best, same"
m3=(-R 3 -P 2 --rate 150mbit --matrix "$MATRIX" --size 64M -n 3 -w 1)
case_runs hier3 "$REPEAT" "${m3[@]}"; row hier3 "strata hier, 3x2, 150 Mbit/s, 10/40/80 ms"
case_runs flat3 1 "${m3[@]}" --algo flat; row flat3 "strata flat ring, same"
case_runs gloo3 1 "${m3[@]}" --peer gloo -n 2 -w 1 --timeout 1500; row gloo3 "Gloo's best, same"
z=(-R 2 -P 2 --rate 150mbit --delay 25 --size 64M -n 5 -w 2 --transport ucx)
case_runs exact150 "$REPEAT" "${z[@]}"; row exact150 "exact, 2x2, 150 Mbit/s, 25 ms (UCX inside regions)"
case_runs topk150 "$REPEAT" "${z[@]}" -- --compress topk:0.01+int8; row topk150 "top-k 1% + int8, same"

echo
echo "| 1 MiB allreduce, 2x2, 200 Mbit/s, 0 ms | T median (ms) | share of the loss-free rate |"
echo "|---|---:|---:|"
for loss in 0 1 5 10; do
  case_runs mib$loss "$REPEAT" -R 2 -P 2 --rate 200mbit --loss "$loss" --size 1M -n 60 -w 5 --no-iperf --bandwidth 190000000
done
python3 - "$OUT" <<'EOF'
import re, statistics, sys
out = sys.argv[1]
def med(name):
    ms = [float(m.group(1)) for line in open(f"{out}/{name}.sum") for m in [re.search(r" T=([\d.]+) ms", line)] if m]
    return statistics.median(ms) if ms else float("nan")
base = med("mib0")
for loss in (0, 1, 5, 10):
    t = med(f"mib{loss}")
    print(f"| {loss}% loss | {t:.1f} | {base / t * 100:.0f}% |")
EOF

echo
"$here/small_wan.sh" -R 3 -P 2 --rate 150mbit --matrix "$MATRIX" | tee "$OUT/small.txt"
echo
"$here/shrink_wan.sh" 1mbit 25 | tee "$OUT/shrink_1mbit.txt"
"$here/shrink_wan.sh" 100kbit 25 | tee "$OUT/shrink_100kbit.txt"

#!/usr/bin/env bash
# A/B timing of two strata-perf builds on this machine, for changes that must not slow
# anything down: runs both with the same arguments in alternating order (ABBA, so neither
# always follows the other; a 4-rank run can slow the run right after it), then prints
# each size's median and best out-of-place time per build and their ratios.
#
#   bench/ab/ab_perf.sh OLD/strata-perf NEW/strata-perf ROUNDS -- STRATA-PERF ARGS...
#   bench/ab/ab_perf.sh /tmp/before/build/tools/strata-perf build/tools/strata-perf 10 -- \
#       --ranks 2 --transport tcp -b 8 -e 64M -f 8 -n 40 -w 5 -z 2 -c 0
set -euo pipefail
if [ $# -lt 4 ] || [ "$4" != "--" ]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
a=$1 b=$2 rounds=$3
shift 4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  order="a b"
  [ $((r % 2)) -eq 0 ] && order="b a"
  for which in $order; do
    bin=$a
    [ "$which" = b ] && bin=$b
    timeout 600 "$bin" "$@" --json "$out/${which}_$r.json" > "$out/${which}_$r.log" 2>&1 ||
      { echo "ab_perf: run $r of $bin failed:" >&2; tail -5 "$out/${which}_$r.log" >&2; exit 1; }
  done
done
python3 - "$out" <<'PY'
import collections, glob, json, statistics, sys
times = collections.defaultdict(lambda: collections.defaultdict(list))
for path in glob.glob(sys.argv[1] + "/*.json"):
    which = path.rsplit("/", 1)[1].split("_")[0]
    for row in json.load(open(path))["results"]:
        times[row["size"]][which].append(row["out_of_place"]["time"])
# Medians, and the best run of each: on two shared cores small messages come out
# bimodal (both ranks on their own core, or not), and the median of a bimodal sample
# jumps between the modes; the best run compares the good mode alone.
ratios, best = [], []
print(f"{'bytes':>10} {'A us':>10} {'B us':>10} {'B/A':>6} {'A best':>10} {'B best':>10} {'B/A':>6}")
for size in sorted(times):
    a, b = statistics.median(times[size]["a"]), statistics.median(times[size]["b"])
    amin, bmin = min(times[size]["a"]), min(times[size]["b"])
    ratios.append(b / a)
    best.append(bmin / amin)
    print(f"{size:>10} {a:10.1f} {b:10.1f} {b / a:6.3f} {amin:10.1f} {bmin:10.1f} {bmin / amin:6.3f}")
print(f"median B/A over sizes: {statistics.median(ratios):.3f} (medians), {statistics.median(best):.3f} (best runs)")
PY

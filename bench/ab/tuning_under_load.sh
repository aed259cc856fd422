#!/usr/bin/env bash
# Whether the online tuner undoes a probe taken at a bad moment. The link probe runs once
# while one core spins (a busy loop started just before the communicator is created) and
# its figures are cached; then, without the load, REPEATS rounds each of two runs from
# those figures: the model's pick alone (STRATA_TUNE=0) and the tuner. Each run forces
# every algorithm in turn and then lets the library choose (strata-perf --algo all+auto),
# so the choice is set against the fastest algorithm in the same processes: runs apart
# differ by up to 2x on this machine, algorithms within one run far less. strata-perf's
# warm-up calls (-w 50) cover the tuner's exploration (21 calls per size, 7 more per tied candidate beyond three), so the timed
# calls are what it kept. Each time is the better of the out-of-place and in-place means
# of 40 calls. Prints per size the algorithm with the lowest median over the rounds and
# each choice's median against it. STRATA_BENCH_KEEP=DIR keeps the JSON files there.
#
#   bench/ab/tuning_under_load.sh [RANKS] [TRANSPORT] [REPEATS] [-- STRATA-PERF SIZE ARGS]
#   bench/ab/tuning_under_load.sh 3 ucx 3 -- -b 8 -e 8M -f 2
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks=${1:-3} transport=${2:-ucx} repeats=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
sizes=(-b 8 -e 8M -f 2)
if [ "${1:-}" = "--" ]; then shift; sizes=("$@"); fi
perf=build/tools/strata-perf plan=build/tools/strata-plan
[ -x "$perf" ] && [ -x "$plan" ] || { echo "build first: cmake --build build" >&2; exit 2; }

out=$(mktemp -d)
export XDG_CACHE_HOME=$out/cache STRATA_PROBE_CACHE_S=3600
busy=""
trap '[ -n "$busy" ] && kill "$busy" 2>/dev/null; [ -n "${STRATA_BENCH_KEEP:-}" ] && cp -r "$out" "$STRATA_BENCH_KEEP"; rm -rf "$out"' EXIT

timeout 30 bash -c 'while :; do :; done' &
busy=$!
sleep 0.2  # the loop has the core before the ranks start
timeout 120 "$plan" --ranks "$ranks" --transport "$transport" -b 8 -e 8 --no-learn > "$out/probe.txt" 2>&1
kill "$busy"; wait "$busy" 2>/dev/null || true; busy=""
echo "# probe under load (one core spinning):"
grep -E '^  (shm|net) |probe' "$out/probe.txt" | sed 's/^/#   /'

common=(--ranks "$ranks" --transport "$transport" "${sizes[@]}" -n 40 -w 50 -c 0 --algo all+auto)
for r in $(seq 1 "$repeats"); do
  STRATA_TUNE=0 timeout 1200 "$perf" "${common[@]}" --json "$out/model_$r.json" > /dev/null 2>&1
  STRATA_TUNE=1 timeout 1200 "$perf" "${common[@]}" --json "$out/tuned_$r.json" > /dev/null 2>&1
done

python3 - "$out" "$repeats" <<'PY'
import collections, json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
# times[run set][size][algorithm or "auto"]: one time per round. The fastest algorithm of
# a size is the one with the lowest median over the rounds, and the choice is set against
# it median to median (a per-round minimum over seven noisy algorithms would be biased low).
times = {n: collections.defaultdict(lambda: collections.defaultdict(list)) for n in ("model", "tuned")}
for name, per_size in times.items():
    for r in range(1, repeats + 1):
        for row in json.load(open(f"{out}/{name}_{r}.json"))["results"]:
            # The better of the out-of-place and in-place means: a descheduled rank (3 ranks
            # spin on 2 cores) stretches one group of calls now and then.
            t = min(row["out_of_place"]["time"], row["in_place"]["time"])
            per_size[row["size"]][row.get("algorithm", "auto")].append(t)
def against_best(per_size, size):
    med = {a: statistics.median(v) for a, v in per_size[size].items()}
    algo = min((a for a in med if a != "auto"), key=med.get)
    return algo, med[algo], med["auto"] / med[algo]
sizes = sorted(times["tuned"])
print(f"# {'size':>9} {'fastest':>19} {'best us':>8} {'model/best':>10} {'tuned/best':>10}")
ok = {"model": 0, "tuned": 0}
for s in sizes:
    _, _, m = against_best(times["model"], s)
    algo, best, t = against_best(times["tuned"], s)
    ok["model"] += m <= 1.15
    ok["tuned"] += t <= 1.15
    print(f"  {s:>9} {algo:>19} {best:8.1f} {m:10.2f} {t:10.2f}")
n = len(sizes)
print(f"# within 1.15x of the fastest of the same runs: tuned at {ok['tuned']} of {n} sizes "
      f"({100 * ok['tuned'] / n:.0f}%), the model alone at {ok['model']} of {n} ({100 * ok['model'] / n:.0f}%)")
PY

#!/usr/bin/env bash
# Whether the online tuner undoes a probe taken at a bad moment. The link probe runs once
# while one core spins (a busy loop started just before the communicator is created) and
# its figures are cached; then, without the load, in REPEATS rounds (interleaved):
# every algorithm forced (--algo all), the model's pick alone (STRATA_TUNE=0) and the
# tuned automatic choice, all from the same cached figures. strata-perf's warm-up calls
# (-w 30) cover the tuner's exploration (21 calls per size), so the timed calls are what
# it kept. Prints per size the fastest algorithm and both automatic choices against it,
# medians over the rounds.
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
trap '[ -n "$busy" ] && kill "$busy" 2>/dev/null; rm -rf "$out"' EXIT

timeout 30 bash -c 'while :; do :; done' &
busy=$!
sleep 0.2  # the loop has the core before the ranks start
timeout 120 "$plan" --ranks "$ranks" --transport "$transport" -b 8 -e 8 --no-learn > "$out/probe.txt" 2>&1
kill "$busy"; wait "$busy" 2>/dev/null || true; busy=""
echo "# probe under load (one core spinning):"
grep -E '^  (shm|net) |probe' "$out/probe.txt" | sed 's/^/#   /'

common=(--ranks "$ranks" --transport "$transport" "${sizes[@]}" -n 20 -w 30 -c 0)
for r in $(seq 1 "$repeats"); do
  timeout 900 "$perf" "${common[@]}" --algo all --json "$out/all_$r.json" > /dev/null 2>&1
  STRATA_TUNE=0 timeout 600 "$perf" "${common[@]}" --json "$out/model_$r.json" > /dev/null 2>&1
  STRATA_TUNE=1 timeout 600 "$perf" "${common[@]}" --json "$out/tuned_$r.json" > /dev/null 2>&1
done

python3 - "$out" "$repeats" <<'PY'
import collections, json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def load(name):
    per = collections.defaultdict(list)  # (size, algorithm) -> times
    for r in range(1, repeats + 1):
        for row in json.load(open(f"{out}/{name}_{r}.json"))["results"]:
            per[(row["size"], row.get("algorithm", "auto"))].append(row["out_of_place"]["time"])
    return {k: statistics.median(v) for k, v in per.items()}
every, model, tuned = load("all"), load("model"), load("tuned")
sizes = sorted({s for s, _ in every})
print(f"# {'size':>9} {'fastest':>19} {'time us':>9} {'model/best':>10} {'tuned/best':>10}")
ok = n = 0
for s in sizes:
    algo, best = min(((a, t) for (z, a), t in every.items() if z == s), key=lambda x: x[1])
    m, t = model[(s, "auto")] / best, tuned[(s, "auto")] / best
    n += 1
    ok += t <= 1.15
    print(f"  {s:>9} {algo:>19} {best:9.1f} {m:10.2f} {t:10.2f}")
print(f"# tuned within 1.15x of the fastest at {ok} of {n} sizes ({100 * ok / n:.0f}%); "
      f"model alone at {sum(model[(s, 'auto')] <= 1.15 * min(t for (z, a), t in every.items() if z == s) for s in sizes)} of {n}")
PY

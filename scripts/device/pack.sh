#!/usr/bin/env bash
# Prepares the trip to the GPU machine: builds what the device checks run (libstrata, the
# NCCL plugin, strata-nccl-perf, the tools), installs it stripped into a pack with every
# shared library it loads that the machine's image lacks (device-libs.txt lists what it
# has), and checks the pack: every binary resolves each library it needs from the pack or
# that list, needs no newer C or C++ runtime than the image's, and the packed plugin moves
# data here through the packed UCX. Prints the pack's size beside the 64 MiB a device
# call carries. The PyTorch extension is not packed: check.sh compiles it there against
# the device's own torch, from python/ and the pack's headers and CMake files.
#
#   scripts/device/pack.sh                      # build (preset ci) and pack into .device/pack
#   scripts/device/pack.sh --dry-check --build build   # CI: pack an existing build into a temp dir, check, remove
#
# Then, on the GPU machine (the device tool; carry .device):
#   scripts/device/check.sh .device/pack "$OUT"
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=build
out=.device/pack
dry=0
while (($#)); do
  case $1 in
    --dry-check) dry=1 ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "pack.sh: unknown argument '$1' (--dry-check, --build DIR, --out DIR)" >&2; exit 2 ;;
  esac
  shift
done
fail() { echo "pack.sh: $*" >&2; exit 1; }
# Where this machine's loader finds a soname (awk reads everything: no SIGPIPE under pipefail).
here() { ldconfig -p | awk -v s="$1" '$1 == s && /x86-64/ && !found {print $NF; found = 1}'; }

if ((dry)); then
  [[ -f $build/CMakeCache.txt ]] || fail "--dry-check needs a configured, built tree at $build"
  out=$(mktemp -d /tmp/strata-pack.XXXXXX)
  trap 'rm -rf "$out"' EXIT
else
  scripts/setup-deps.sh
  scripts/python-env.sh
  cmake --preset ci >/dev/null
  cmake --build --preset ci --parallel 2
  rm -rf "$out"
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
cmake --install "$build" --prefix "$out" --strip >/dev/null
for need in bin/strata-nccl-perf bin/strata-device-check bin/strata-codec-check lib/libstrata-cuda.so lib/libnccl-net-strata.so lib/libstrata.so include/strata/strata.hpp \
            lib/cmake/strata/strataConfig.cmake; do
  [[ -e $out/$need ]] || fail "the pack lacks $need (is CUDA's toolkit with NCCL there for strata-nccl-perf?)"
done

# Carried system libraries go to lib/system: check.sh uses each only where the device's
# loader has no library of that name, so the image's own libz or OpenSSL stay in charge
# of its Python. UCX finds its transport modules in ucx/ beside libucs; only the memory
# one is useful there (cross-memory attach): the RDMA ones would drag in libibverbs for
# a machine without an RDMA NIC.
sys=$out/lib/system
ucx_dir=$(dirname "$(here libucs.so.0)")/ucx
mkdir -p "$sys/ucx"
cp -L "$ucx_dir/libuct_cma.so.0" "$sys/ucx/"

mapfile -t provided < <(grep -v '^[#!]' scripts/device/device-libs.txt | sed '/^$/d')
glibc_floor=$(awk '$1 == "!glibc" {print $2}' scripts/device/device-libs.txt)
glibcxx_floor=$(awk '$1 == "!glibcxx" {print $2}' scripts/device/device-libs.txt)
is_provided() { local s; for s in "${provided[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }
# The newest version of a symbol-version family (GLIBC_2 -> 2.34) a file requires.
newest() { { objdump -T "$1" | grep -o "$2\.[0-9.]*" || true; } | sed "s/^${2%_*}_//" | sort -uV | tail -1; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
elves() { find "$out/bin" "$out/lib" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print; }

# Carry what is needed and missing, and what that needs in turn.
manifest=$out/MANIFEST.txt
: >"$manifest"
queue=($(elves))
while ((${#queue[@]})); do
  f=${queue[0]}
  queue=("${queue[@]:1}")
  for so in $(needed "$f"); do
    is_provided "$so" && continue
    [[ -e $out/lib/$so || -e $sys/$so ]] && continue
    src=$(here "$so")
    [[ -n $src ]] || fail "$(basename "$f") needs $so, which neither this machine nor device-libs.txt has"
    cp -L "$src" "$sys/$so"
    real=$(readlink -f "$src")
    pkg=$({ dpkg -S "$real" || dpkg -S "${real#/usr}"; } 2>/dev/null | cut -d: -f1 | sort -u | tr '\n' ' ' || true)
    echo "lib/system/$so  from ${pkg:-?}($src), for $(basename "$f")" >>"$manifest"
    queue+=("$sys/$so")
  done
done

# The check proper: each ELF's needs met by the pack or the image, symbol versions within
# the image's runtimes.
bad=0
max_glibc=0 max_glibcxx=0
for f in $(elves); do
  for so in $(needed "$f"); do
    if ! is_provided "$so" && [[ ! -e $out/lib/$so && ! -e $sys/$so ]]; then
      echo "pack.sh: ${f#$out/} needs $so: not packed and not on the device's list" >&2
      bad=1
    fi
  done
  g=$(newest "$f" GLIBC_2)
  x=$(newest "$f" GLIBCXX_3)
  [[ -n $g ]] && max_glibc=$(printf '%s\n' "$max_glibc" "$g" | sort -V | tail -1)
  [[ -n $x ]] && max_glibcxx=$(printf '%s\n' "$max_glibcxx" "$x" | sort -V | tail -1)
done
[[ $(printf '%s\n' "$max_glibc" "$glibc_floor" | sort -V | tail -1) == "$glibc_floor" ]] ||
  { echo "pack.sh: the pack needs glibc $max_glibc, the device's floor is $glibc_floor" >&2; bad=1; }
[[ $(printf '%s\n' "$max_glibcxx" "$glibcxx_floor" | sort -V | tail -1) == "$glibcxx_floor" ]] ||
  { echo "pack.sh: the pack needs GLIBCXX_$max_glibcxx, the device's floor is $glibcxx_floor" >&2; bad=1; }
((bad == 0)) || fail "the pack would not load on the GPU machine"

# The packed plugin and UCX, loaded from the pack alone, move data between two forked
# ranks here (same region over UCX, and the striped path between regions).
harness=$build/tests/plugin/strata-plugin-harness
if [[ -x $harness ]]; then
  for case in transfer crossregion; do
    LD_LIBRARY_PATH=$out/lib:$sys UCX_MODULE_DIR=$sys/ucx timeout 120 \
      "$harness" --plugin "$out/lib/libnccl-net-strata.so" --version 11 --case $case >"$out/harness.log" 2>&1 ||
      { cat "$out/harness.log" >&2; fail "the packed plugin failed the harness's $case case"; }
    rm -f "$out/harness.log"
  done
fi

pack_bytes=$(du -sb "$out" | cut -f1)
# What else travels with a device call: the tracked and untracked-not-ignored files.
tree_bytes=$({ git ls-files -z -co --exclude-standard 2>/dev/null | xargs -0 -r stat -c %s 2>/dev/null || true; } |
  awk '{s += $1} END {print s + 0}')
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
{
  echo "# strata device pack: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+changes'), $(date -u +%F)"
  echo "# needs glibc >= $max_glibc, GLIBCXX_$max_glibcxx (the image's floors: $glibc_floor, $glibcxx_floor)"
  echo "# carried system libraries:"
} | cat - "$manifest" >"$manifest.new" && mv "$manifest.new" "$manifest"
echo "pack: $(mib "$pack_bytes") in $(find "$out" -type f | wc -l) files; with the working tree ($(mib "$tree_bytes")) $(mib $((pack_bytes + tree_bytes))) of the 64 MiB a device call carries"
echo "pack: needs glibc >= $max_glibc and GLIBCXX_$max_glibcxx; carried: $(grep -c '^lib/system/' "$manifest") system libraries (MANIFEST.txt)"
(( pack_bytes + tree_bytes < 48 * 1048576 )) || fail "pack and working tree exceed 48 MiB: too little room under the 64 MiB limit"
((dry)) && echo "pack: dry check passed" || echo "pack: ready in ${out#$root/}; on the GPU machine: scripts/device/check.sh ${out#$root/} \"\$OUT\" (carry .device)"

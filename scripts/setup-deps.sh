#!/usr/bin/env bash
# Installs the Debian packages strata needs, only those that are missing.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libboost-dev libboost-system-dev libprotobuf-dev
      protobuf-compiler libucx-dev ucx-utils libgtest-dev libgmock-dev libbenchmark-dev
      libcli11-dev libssl-dev openssl libgloo-dev openmpi-bin libopenmpi-dev iperf3 iproute2 iptables python3
      clang libclang-rt-dev  # clang: the sanitizer builds and libFuzzer (scripts/test.sh)
      # openssl: the TLS tests make their certificate authorities with its command line
      nlohmann-json3-dev     # JSON in the tools (strata-perf --json, strata-plan --measured)
      # iptables: partitions and idle-flow middleboxes between network namespaces (tests/support/netns.hpp)
      libnetfilter-queue-dev libmnl-dev ethtool iputils-ping  # the WAN lab (bench/wan/netns.sh): its
                             # delay line, MSS-sized packets where a path is lossy, its own check
      gdb                    # the stacks of a test rank that ran out of time (tests/support/fork_ranks.cpp)
      python3-venv)          # the Python environment of the PyTorch backend (scripts/python-env.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup-deps: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

#!/usr/bin/env python3
"""A topology file (proto/topology.proto, text format) with the WAN lab's own figures.

Usage: lab_topology.py /run/strata-wan-lab/lab.env RANKS_PER_REGION > lab.textproto

Reads what netns.sh applied (regions, rate, per-pair one-way delay and loss) and writes
the placements of R regions x P ranks (one host per region, rank r in region r / P, as the
lab's scripts place them) and one wan entry per ordered pair, for strata-plan --file.
"""
import re
import shlex
import sys


def rate_mbps(rate):
    m = re.fullmatch(r"([0-9.]+)([kmgt]?)(bit|bps)", rate)
    if not m:
        sys.exit(f"lab_topology.py: cannot read the rate '{rate}'")
    v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    return (v if m.group(3) == "bit" else v * 8) / 1e6


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    env = {}
    for line in open(sys.argv[1]):
        if "=" in line:
            k, v = line.rstrip("\n").split("=", 1)
            env[k] = shlex.split(v)[0] if v else ""
    regions, per = int(env["LAB_REGIONS"]), int(sys.argv[2])
    print("# The WAN lab's figures as netns.sh applied them (bench/wan/lab_topology.py).")
    print("# proto-file: proto/topology.proto")
    print("# proto-message: strata.topology.wire.Topology\n")
    for r in range(regions * per):
        k = r // per
        print(f'placement {{ rank: {r} region: "r{k}" host: "r{k}-host" }}')
    mbps = rate_mbps(env["LAB_RATE"])
    for pair in env["LAB_PAIRS"].split(";"):
        if not pair.strip():
            continue
        i, j, delay, loss = pair.split()
        print(f'wan {{ from_region: "r{i}" to_region: "r{j}" latency_ms: {float(delay):g} '
              f'bandwidth_mbps: {mbps:g} loss_percent: {float(loss):g} }}')


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Plot allreduce bus bandwidth against message size from the runs compare.py kept.

    python3 bench/peers/compare.py --build-dir build --ranks 2 4 --repeat 3 --keep runs/ > table.md
    .venv/bin/python bench/peers/plot_busbw.py runs/ bench/busbw.png

One panel per rank count, one line per program (the median over its repeats, as in
compare.py's table), both axes logarithmic. Needs matplotlib (python/requirements.txt).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def load(folder: Path, column: str) -> dict[int, dict[str, dict[int, float]]]:
    """{ranks: {program: {size: median busbw GB/s}}} from compare.py's PROG-nN-rR.json files."""
    samples: dict[int, dict[str, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for path in sorted(folder.glob("*.json")):
        m = re.fullmatch(r"(.+)-n(\d+)-r\d+\.json", path.name)
        if not m:
            continue
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            sys.exit(f"plot_busbw: {path} is not JSON: {e}")
        for row in doc.get("results", []):
            cell = row.get(column) or {}
            if cell.get("bus_bw") is not None and not cell.get("nwrong"):
                samples[int(m[2])][m[1]][int(row["size"])].append(float(cell["bus_bw"]))
    return {n: {p: {s: statistics.median(v) for s, v in by_size.items()} for p, by_size in progs.items()}
            for n, progs in samples.items()}


def size_label(b: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b / scale:g} {unit}"
    return f"{b:g} B"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", type=Path, help="the folder compare.py --keep wrote")
    ap.add_argument("png", type=Path, help="the plot to write")
    ap.add_argument("--column", choices=["in_place", "out_of_place"], default="in_place")
    ap.add_argument("--title", default="allreduce, float sum: bus bandwidth (median of repeats)")
    a = ap.parse_args()
    data = load(a.runs, a.column)
    if not data:
        sys.exit(f"plot_busbw: no compare.py runs (PROG-nN-rR.json) in {a.runs}")

    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    ranks = sorted(data)
    fig, axes = plt.subplots(1, len(ranks), figsize=(6.5 * len(ranks), 4.5), squeeze=False, sharey=True)
    for ax, n in zip(axes[0], ranks):
        for prog in sorted(data[n]):
            pts = sorted(data[n][prog].items())
            ax.plot([s for s, _ in pts], [bw for _, bw in pts], marker="o", markersize=3,
                    linewidth=2.2 if prog.startswith("strata") else 1.2, label=prog)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda b, _: size_label(b)))
        ax.tick_params(axis="x", labelrotation=45)
        ax.set_title(f"{n} ranks")
        ax.set_xlabel("message size")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("bus bandwidth (GB/s)")
    fig.suptitle(a.title)
    fig.tight_layout()
    a.png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.png, dpi=110)
    print(f"plot_busbw: wrote {a.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

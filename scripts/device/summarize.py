"""The one-page summary of a device check (check.sh): what ran on which machine, each
step's result, and NCCL's bus bandwidth through strata's plugin beside NCCL's own Socket
transport. Also writes WORK/results.json with every step and every measured row.

    python3 summarize.py WORK PACK > summary.md
"""
import json
import sys
from pathlib import Path

work, pack = Path(sys.argv[1]), Path(sys.argv[2])


def read_steps():
    steps = []
    for line in (work / "steps.tsv").read_text().splitlines():
        name, status, seconds, note = (line.split("\t") + [""] * 4)[:4]
        steps.append({"step": name, "status": status, "seconds": int(seconds or 0), "note": note})
    return steps


def read_runs():
    """{(step, collective): {size: row}} from strata-nccl-perf's JSON files."""
    runs = {}
    for f in sorted((work / "json").glob("*.json")):
        try:
            doc = json.loads(f.read_text())
        except ValueError:
            continue
        for run in doc.get("runs", []):
            runs[(f.stem, run["collective"])] = {r["size"]: r for r in run["results"]}
    return runs


def environment():
    log = work / "logs" / "environment.log"
    return log.read_text().strip().splitlines() if log.exists() else ["(no environment step)"]


def busbw(row):
    return row["out_of_place"]["bus_bw"] if row else None


def wrong(rows):
    total = 0
    for r in rows:
        for g in ("out_of_place", "in_place"):
            total += (r.get(g) or {}).get("nwrong") or 0
    return total


def size_text(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def cell(v):
    return "-" if v is None else f"{v:.2f}"


def table(runs, title, columns):
    """columns: [(heading, step)]; one row per collective and size."""
    present = [(h, s) for h, s in columns if any(k[0] == s for k in runs)]
    if not present:
        return []
    out = [f"### {title}", "", "| collective | size | " + " | ".join(h for h, _ in present) + " | #wrong |",
           "|---|---:|" + "---:|" * len(present) + "---:|"]
    colls = []
    for (s, c) in runs:
        if c not in colls and any(s == step for _, step in present):
            colls.append(c)
    for c in colls:
        sizes = sorted({size for _, s in present for size in runs.get((s, c), {})})
        for size in sizes:
            rows = [runs.get((s, c), {}).get(size) for _, s in present]
            out.append(f"| {c} | {size_text(size)} | " + " | ".join(cell(busbw(r)) for r in rows) +
                       f" | {wrong([r for r in rows if r])} |")
    return out + [""]


steps = read_steps()
runs = read_runs()
manifest = (pack / "MANIFEST.txt").read_text().splitlines()[:1] if (pack / "MANIFEST.txt").exists() else []
passed = sum(s["status"] == "pass" for s in steps)
lines = ["## On a GPU: device check", ""]
lines += ["```"] + environment() + [m.lstrip("# ") for m in manifest] + ["```", ""]
lines += [f"{passed} of {len(steps)} steps passed, {sum(s['seconds'] for s in steps if '.' not in s['step'])} s in all.", ""]
lines += ["| step | result | s | note |", "|---|---|---:|---|"]
for s in steps:
    note = s["note"].replace("|", "\\|")
    lines.append(f"| {s['step']} | {s['status']} | {s['seconds']} | {note} |")
lines.append("")
lines += ["NCCL busbw in GB/s (out of place; nccl-tests' definition), every rank on the one GPU as a host of",
          "its own (NCCL_HOSTID), so every byte crosses NCCL's network; #wrong counts both groups of every column.", ""]
lines += table(runs, "2 ranks in 2 regions (every byte on the striped WAN path)",
               [("NCCL Socket", "nccl_socket_2r"), ("strata", "nccl_strata_2r"),
                ("strata, WAN emulated", "nccl_strata_wan"), ("strata, TLS", "nccl_strata_tls"),
                ("strata, a stream cut", "nccl_strata_cut")])
lines += table(runs, "4 ranks in 2 regions (UCX inside a region)",
               [("NCCL Socket", "nccl_socket_4r"), ("strata", "nccl_strata_4r")])
# strata-device-check's own lines: its verdict, and each rank's timing and copied bytes.
for name in ("device_codecs", "device_buffers", "device_wan_256m"):
    log = work / "logs" / f"{name}.log"
    if log.exists():
        found = [l for l in log.read_text().splitlines()
                 if any(w in l for w in ("strata-device-check:", "on device:", "strata-codec-check:", "DIFFERENT",
                                         "device copy", "encode "))]
        lines += ["", f"{name}:", ""] + [f"    {l}" for l in found[:16]]
print("\n".join(lines))

(work / "results.json").write_text(json.dumps(
    {"environment": environment(), "pack": manifest, "steps": steps,
     "runs": [{"step": s, "collective": c, "results": list(r.values())} for (s, c), r in runs.items()]}, indent=1))

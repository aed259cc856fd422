#!/usr/bin/env python3
"""Run strata-perf and the peer benchmarks (Gloo, Open MPI) back to back and
print their allreduce bus bandwidth side by side, as markdown.

    python3 bench/peers/compare.py --build-dir build --ranks 2 4 --repeat 3 > out.md

Programs (each writes --json; all share the nccl-tests sweep flags):
  strata-ucx  strata-perf --ranks N --transport ucx
  strata-tcp  strata-perf --ranks N --transport tcp
  gloo        strata-peer-gloo, N processes spawned here (STRATA_RANK, ...)
  mpi-sm      mpirun ... --mca pml ob1 --mca btl self,vader strata-peer-mpi
  mpi-tcp     mpirun ... --mca pml ob1 --mca btl self,tcp
                         --mca btl_tcp_if_include lo strata-peer-mpi

Every run is repeated --repeat times; the repeats are interleaved (repeat 1 of
every program and rank count, then repeat 2, ...; the program order rotates)
so that background noise hits every program alike. A cell is the median over
the repeats. Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

PROGRAMS = ["strata-ucx", "strata-tcp", "gloo", "mpi-sm", "mpi-tcp"]
BINARIES = {"strata-perf": "tools/strata-perf",
            "strata-peer-gloo": "bench/peers/strata-peer-gloo",
            "strata-peer-mpi": "bench/peers/strata-peer-mpi"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_size(text: str) -> int:
    """nccl-tests size syntax: digits with an optional K/M/G/T suffix (powers of 1024)."""
    t = text.strip()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if t[-1:].upper() == "B" and len(t) > 1 and not t[:-1].isdigit():
        t = t[:-1]
    mult = 1
    if t[-1:].upper() in units:
        mult = units[t[-1].upper()]
        t = t[:-1]
    if not t.isdigit():
        raise argparse.ArgumentTypeError(f"bad size '{text}'")
    return int(t) * mult


def human_size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def find_binary(build_dir: Path, name: str) -> Path | None:
    direct = build_dir / BINARIES[name]
    if direct.is_file() and os.access(direct, os.X_OK):
        return direct
    for root, dirs, files in os.walk(build_dir):
        dirs[:] = [d for d in dirs if d != "CMakeFiles"]
        if name in files:
            p = Path(root) / name
            if os.access(p, os.X_OK):
                return p
    return None


# --------------------------------------------------------------------------
# Running one program, bounded by a timeout
# --------------------------------------------------------------------------

@dataclass
class RunResult:
    ok: bool
    seconds: float
    json: dict | None = None
    error: str = ""


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group the child leads, then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_group(cmds: list[tuple[list[str], dict]], timeout: float) -> tuple[int | None, str, str]:
    """Start every (argv, env) at once, each in its own session; wait for all
    with one deadline. Returns (worst exit code or None on timeout, stdout of
    the first, stderr of all)."""
    procs = []
    outs = []
    try:
        for argv, env in cmds:
            out = tempfile.TemporaryFile()
            err = tempfile.TemporaryFile()
            outs.append((out, err))
            procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=err,
                                          stdin=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + timeout
        rc: int | None = 0
        grace_end = None  # set once a process failed: the rest get 10 s, then go
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed and rc == 0:
                rc = failed[0]
                grace_end = time.monotonic() + 10
            if all(c is not None for c in codes):
                break
            now = time.monotonic()
            if now >= deadline:
                rc = None
                break
            if grace_end is not None and now >= grace_end:
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                kill_group(p)
    stdout = ""
    stderr = ""
    for i, (out, err) in enumerate(outs):
        out.seek(0)
        err.seek(0)
        if i == 0:
            stdout = out.read().decode(errors="replace")
        e = err.read().decode(errors="replace").strip()
        if e:
            stderr += (f"[rank {i}] " if len(outs) > 1 else "") + e + "\n"
        out.close()
        err.close()
    return rc, stdout, stderr


@dataclass
class Setup:
    args: argparse.Namespace
    bins: dict
    mpirun: str | None
    workdir: Path
    sweep: list[str] = field(default_factory=list)


def sweep_flags(a: argparse.Namespace) -> list[str]:
    f = ["-b", a.minbytes, "-e", a.maxbytes]
    if a.stepfactor and a.stepfactor > 1:
        f += ["-f", str(a.stepfactor)]
    else:
        f += ["-i", a.stepbytes]
    return f + ["-n", str(a.iters), "-w", str(a.warmup), "-c", str(a.check)]


def program_commands(s: Setup, prog: str, n: int, json_path: Path) -> list[tuple[list[str], dict]] | str:
    """The processes to start for one run, or a reason why it cannot run."""
    a = s.args
    base_env = dict(os.environ)
    common = s.sweep + ["--json", str(json_path)]
    if prog.startswith("strata-"):
        exe = s.bins.get("strata-perf")
        if not exe:
            return "strata-perf not built"
        transport = prog.split("-", 1)[1]
        argv = [str(exe), "--ranks", str(n), "--transport", transport,
                "-t", "all_reduce", "-d", "float", "-o", "sum"] + common
        if a.strata_blocking is not None:
            argv += ["-z", str(a.strata_blocking)]
        argv += shlex.split(a.strata_args)
        for k in list(base_env):
            if k.startswith("STRATA_") and k not in ("STRATA_TIMEOUT_S",):
                base_env.pop(k)  # --ranks spawns its own job
        base_env.update(kv.split("=", 1) for kv in a.strata_env)
        return [(argv, base_env)]
    if prog == "gloo":
        exe = s.bins.get("strata-peer-gloo")
        if not exe:
            return "strata-peer-gloo not built"
        run_id = f"compare-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        cmds = []
        for r in range(n):
            env = dict(base_env)
            env.update(STRATA_RANK=str(r), STRATA_WORLD_SIZE=str(n), STRATA_LOCAL_RANK=str(r),
                       STRATA_LOCAL_SIZE=str(n), STRATA_RUN_ID=run_id)
            # Every rank gets --json; only rank 0 writes it.
            cmds.append(([str(exe)] + common + shlex.split(a.gloo_args), env))
        return cmds
    if prog in ("mpi-sm", "mpi-tcp"):
        exe = s.bins.get("strata-peer-mpi")
        if not exe:
            return "strata-peer-mpi not built"
        if not s.mpirun:
            return "mpirun not found"
        argv = [s.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n),
                "--bind-to", a.mpi_bind, "--mca", "pml", "ob1"]
        if prog == "mpi-sm":
            argv += ["--mca", "btl", "self,vader"]
        else:
            argv += ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]
        argv += shlex.split(a.mpirun_args) + [str(exe)] + common
        return [(argv, base_env)]
    return f"unknown program {prog}"


def run_one(s: Setup, prog: str, n: int, rep: int) -> RunResult:
    json_path = s.workdir / f"{prog}-n{n}-r{rep}.json"
    cmds = program_commands(s, prog, n, json_path)
    if isinstance(cmds, str):
        return RunResult(False, 0.0, error=cmds)
    if s.args.dry_run:
        for argv, _ in cmds[:1]:
            log(f"  would run ({len(cmds)} process(es)): {shlex.join(argv)}")
        return RunResult(False, 0.0, error="dry run")
    t0 = time.monotonic()
    rc, stdout, stderr = run_group(cmds, s.args.timeout)
    secs = time.monotonic() - t0
    if prog == "gloo":
        run_id = cmds[0][1]["STRATA_RUN_ID"]
        shutil.rmtree(f"/tmp/strata-gloo-{run_id}", ignore_errors=True)
    (s.workdir / f"{prog}-n{n}-r{rep}.out").write_text(stdout + ("\n--- stderr ---\n" + stderr if stderr else ""))
    if rc is None:
        return RunResult(False, secs, error=f"timed out after {s.args.timeout:.0f} s\n{tail(stderr)}")
    doc = None
    if json_path.is_file():
        try:
            doc = json.loads(json_path.read_text())
        except (OSError, ValueError) as e:
            return RunResult(False, secs, error=f"bad JSON {json_path}: {e}")
    if doc is None:
        return RunResult(False, secs, error=f"exit {rc}, no JSON\n{tail(stderr or stdout)}")
    # Exit 1 with a JSON means wrong results: keep the figures, flag them.
    return RunResult(rc == 0, secs, doc, "" if rc == 0 else f"exit {rc}\n{tail(stderr or stdout)}")


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------

def fmt_bw(v: float | None) -> str:
    if v is None:
        return "n/a"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 0.1:
        return f"{v:.2f}"
    if v == 0:
        return "0"
    return f"{v:.2g}"


def fmt_us(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fmt_ratio(num: float | None, den: float | None) -> str:
    if num is None or den is None or den <= 0:
        return "n/a"
    r = num / den
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build", type=Path, help="CMake build directory (default ./build)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4], help="rank counts (default 2 4)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per program and rank count (default 3)")
    ap.add_argument("--strata-perf", type=Path, default=None, help="strata-perf binary (default: from --build-dir)")
    ap.add_argument("--gloo", type=Path, default=None, help="strata-peer-gloo binary (default: from --build-dir)")
    ap.add_argument("--mpi", type=Path, default=None, help="strata-peer-mpi binary (default: from --build-dir)")
    ap.add_argument("--programs", default=",".join(PROGRAMS),
                    help=f"comma list, subset of {','.join(PROGRAMS)} (default all)")
    ap.add_argument("-b", "--minbytes", default="8", help="smallest size (default 8)")
    ap.add_argument("-e", "--maxbytes", default="256M", help="largest size (default 256M)")
    ap.add_argument("-f", "--stepfactor", type=int, default=4, help="size factor (default 4)")
    ap.add_argument("-i", "--stepbytes", default="1M", help="size increment when -f is 1 (default 1M)")
    ap.add_argument("-n", "--iters", type=int, default=20, help="timed iterations (default 20)")
    ap.add_argument("-w", "--warmup", type=int, default=5, help="warm-up iterations (default 5)")
    ap.add_argument("-c", "--check", type=int, default=1, help="validate results (default 1)")
    ap.add_argument("--column", choices=["in_place", "out_of_place"], default="in_place",
                    help="which group to compare (default in_place: Gloo is in-place only)")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per run (default 1200)")
    ap.add_argument("--strata-blocking", type=int, choices=[0, 1, 2], default=None,
                    help="pass -z to strata-perf (default: strata-perf's own, 0 = issue all iterations, "
                         "then wait; 2 = wait after each, like the blocking peers)")
    ap.add_argument("--strata-args", default="", help="extra arguments for strata-perf")
    ap.add_argument("--strata-env", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for strata-perf's ranks, e.g. STRATA_SHARED_MEMORY=0 (repeatable; "
                         "the caller's own STRATA_ settings are not passed on)")
    ap.add_argument("--gloo-args", default="", help="extra arguments for strata-peer-gloo (e.g. --no-sync)")
    ap.add_argument("--mpirun", default=None, help="mpirun to use (default: from PATH)")
    ap.add_argument("--mpirun-args", default="", help="extra mpirun arguments")
    ap.add_argument("--mpi-bind", default="none", help="mpirun --bind-to value (default none, like the others)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep every run's JSON and output in this directory")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = ap.parse_args()
    for kv in a.strata_env:
        if "=" not in kv or not kv.startswith("STRATA_"):
            ap.error(f"--strata-env {kv!r}: expected STRATA_NAME=VALUE")

    programs = [p.strip() for p in a.programs.split(",") if p.strip()]
    for p in programs:
        if p not in PROGRAMS:
            ap.error(f"unknown program '{p}' (choose from {', '.join(PROGRAMS)})")
    if a.repeat < 1 or any(n < 1 for n in a.ranks):
        ap.error("--repeat and --ranks must be >= 1")
    try:
        parse_size(a.minbytes)
        parse_size(a.maxbytes)
        parse_size(a.stepbytes)
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))

    build = a.build_dir
    if not build.is_dir():
        ap.error(f"build directory {build} does not exist")
    bins = {name: find_binary(build, name) for name in BINARIES}
    for name, override in (("strata-perf", a.strata_perf), ("strata-peer-gloo", a.gloo),
                           ("strata-peer-mpi", a.mpi)):
        if override:
            if not (override.is_file() and os.access(override, os.X_OK)):
                ap.error(f"{override} is not an executable")
            bins[name] = override
    mpirun = a.mpirun or shutil.which("mpirun") or shutil.which("mpiexec")

    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
        workdir = a.keep
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="strata-compare-")
        workdir = Path(cleanup.name)
    s = Setup(a, bins, mpirun, workdir)
    s.sweep = sweep_flags(a)

    for name, path in bins.items():
        log(f"{name}: {path if path else 'NOT FOUND under ' + str(build)}")
    log(f"mpirun: {mpirun or 'NOT FOUND'}")

    # results[n][prog] -> list of RunResult
    results: dict[int, dict[str, list[RunResult]]] = {n: {p: [] for p in programs} for n in a.ranks}
    failures: list[str] = []
    t_start = time.monotonic()
    for rep in range(a.repeat):
        for n in a.ranks:
            k = (rep + a.ranks.index(n)) % len(programs)
            order = programs[k:] + programs[:k]
            for prog in order:
                log(f"[repeat {rep + 1}/{a.repeat}] {n} ranks {prog} ...")
                r = run_one(s, prog, n, rep)
                results[n][prog].append(r)
                status = "ok" if r.ok else ("skipped: " + r.error if r.seconds == 0 else "FAILED")
                log(f"[repeat {rep + 1}/{a.repeat}] {n} ranks {prog}: {status} ({r.seconds:.1f} s)")
                if not r.ok and r.seconds > 0:
                    failures.append(f"{prog}, {n} ranks, repeat {rep + 1}: {r.error}")
    elapsed = time.monotonic() - t_start

    # ---- markdown ----
    col = a.column
    out = []
    out.append("# Allreduce: strata vs Gloo vs Open MPI")
    out.append("")
    out.append(f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}, host {platform.node()}, "
               f"{os.cpu_count()} CPUs, {platform.platform()}")
    out.append(f"- float sum, sweep `{' '.join(s.sweep)}`; {a.repeat} repeat(s), interleaved; "
               f"cells are medians; group compared: {col.replace('_', '-')}")
    out.append(f"- busbw = algbw x 2(n-1)/n, GB/s (1e9 B/s); time = max over ranks of each rank's mean")
    sb = "its default -z 0 (all iterations issued, then waited for)" if a.strata_blocking is None \
        else f"-z {a.strata_blocking}"
    out.append(f"- strata-perf with {sb}" + (f", {' '.join(a.strata_env)}" if a.strata_env else "")
               + "; Gloo and MPI calls are blocking, one after the other")
    out.append(f"- gloo: the fastest of Gloo's algorithms per size (see the gloo algo column); "
               f"MPI: `--mca pml ob1`, `--bind-to {a.mpi_bind}`; mpi-sm = btl self,vader, mpi-tcp = btl self,tcp on lo")
    out.append(f"- wall time {elapsed / 60:.1f} min; runs failing or giving wrong results are listed at the end")
    out.append("")

    for n in a.ranks:
        # per program: size -> list of busbw / time; wrong flags; gloo algos
        busbw: dict[str, dict[int, list[float]]] = {p: {} for p in programs}
        times: dict[str, dict[int, list[float]]] = {p: {} for p in programs}
        wrong: dict[str, set[int]] = {p: set() for p in programs}
        algos: dict[int, Counter] = {}
        sizes: set[int] = set()
        for p in programs:
            for r in results[n][p]:
                if not r.json:
                    continue
                for row in r.json.get("results", []):
                    g = row.get(col) or {}
                    size = int(row["size"])
                    if g.get("bus_bw") is None or g.get("time") is None:
                        continue
                    sizes.add(size)
                    busbw[p].setdefault(size, []).append(float(g["bus_bw"]))
                    times[p].setdefault(size, []).append(float(g["time"]))
                    if g.get("nwrong"):
                        wrong[p].add(size)
                    if p == "gloo" and row.get("algo"):
                        algos.setdefault(size, Counter())[row["algo"]] += 1

        def med(table, p, size):
            return median_or_none(table[p].get(size, []))

        runs = ", ".join(f"{p} {sum(1 for r in results[n][p] if r.json)}/{len(results[n][p])}" for p in programs)
        out.append(f"## {n} ranks")
        out.append("")
        out.append(f"Runs with results: {runs}.")
        out.append("")
        head = ["size"] + [f"{p}" for p in programs]
        ratio_cols = []
        if "strata-tcp" in programs and "gloo" in programs:
            ratio_cols.append(("strata-tcp/gloo", "strata-tcp", "gloo"))
        if "strata-ucx" in programs and "mpi-sm" in programs:
            ratio_cols.append(("strata-ucx/mpi-sm", "strata-ucx", "mpi-sm"))
        head += [c[0] for c in ratio_cols]
        if "gloo" in programs:
            head.append("gloo algo")
        out.append("busbw in GB/s (median); ratios > 1 mean strata is faster. `!` marks wrong results.")
        out.append("")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---:"] * (len(head) - (1 if "gloo" in programs else 0))
                                  + (["---"] if "gloo" in programs else [])) + "|")
        for size in sorted(sizes):
            cells = [human_size(size)]
            for p in programs:
                v = med(busbw, p, size)
                cells.append(fmt_bw(v) + ("!" if size in wrong[p] else ""))
            for _, num, den in ratio_cols:
                cells.append(fmt_ratio(med(busbw, num, size), med(busbw, den, size)))
            if "gloo" in programs:
                c = algos.get(size)
                cells.append(", ".join(f"{k}" + (f" ({v})" if len(c) > 1 else "") for k, v in c.most_common())
                             if c else "")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")

        # Latency at the smallest size (8 B by default).
        lat_size = 8 if 8 in sizes else (min(sizes) if sizes else None)
        if lat_size is not None:
            out.append(f"Latency at {human_size(lat_size)} (median time, us; ratios < 1 mean strata is faster):")
            out.append("")
            out.append("| " + " | ".join(programs) + " | strata-tcp/gloo | strata-ucx/gloo | strata-ucx/mpi-sm |")
            out.append("|" + "|".join(["---:"] * (len(programs) + 3)) + "|")
            lat = {p: med(times, p, lat_size) for p in programs}
            cells = [fmt_us(lat[p]) for p in programs]
            cells.append(fmt_ratio(lat.get("strata-tcp"), lat.get("gloo")))
            cells.append(fmt_ratio(lat.get("strata-ucx"), lat.get("gloo")))
            cells.append(fmt_ratio(lat.get("strata-ucx"), lat.get("mpi-sm")))
            out.append("| " + " | ".join(cells) + " |")
            out.append("")
        if lat_size is not None and lat_size != 8:
            out.append("(8 B is not in the sweep; the latency row uses the smallest size.)")
            out.append("")

    skipped = sorted({f"{p}: {r.error}" for n in a.ranks for p in programs for r in results[n][p]
                      if not r.ok and r.seconds == 0})
    if skipped:
        out.append("## Not run")
        out.append("")
        out.extend(f"- {x}" for x in skipped)
        out.append("")
    if failures:
        out.append("## Failures")
        out.append("")
        for f in failures:
            first, _, rest = f.partition("\n")
            out.append(f"- {first}")
            if rest.strip():
                out.append("")
                out.append("  ```")
                out.extend("  " + line for line in rest.splitlines())
                out.append("  ```")
        out.append("")
    if a.keep:
        out.append(f"Raw JSON and output: `{a.keep}`.")
        out.append("")

    print("\n".join(out))
    if cleanup:
        cleanup.cleanup()
    ran = any(r.json for n in a.ranks for p in programs for r in results[n][p])
    return 0 if ran or a.dry_run else 1


if __name__ == "__main__":
    sys.exit(main())

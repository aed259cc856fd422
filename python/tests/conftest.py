"""Runs scenarios (scenarios.py) on real rank processes: one Python process per rank,
meeting through torch's own rendezvous (file://, tcp://, env:// or torchrun)."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ranks:
    def __init__(self, results, seconds):
        self.results = results  # [(returncode, output)] by rank
        self.seconds = seconds

    def output(self, rank):
        return self.results[rank][1]

    def check(self):
        bad = [f"--- rank {r} exited {rc}:\n{out}" for r, (rc, out) in enumerate(self.results) if rc != 0]
        assert not bad, "\n".join(bad)
        return self


@pytest.fixture
def outside_store():
    """The port of a torch TCPStore this test process serves, outside every rank (as a
    launcher's would be); ranks find it in STORE_PORT."""
    from datetime import timedelta

    import torch.distributed as dist

    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))
    yield port
    del store


@pytest.fixture
def run_ranks(tmp_path):
    """run_ranks(scenario, n, init="file", env={}, per_rank_env=None, timeout=180, args=(),
    program="scenarios.py")"""

    def run(scenario, n, init="file", env=None, per_rank_env=None, timeout=180, args=(), program="scenarios.py"):
        port = free_port()
        if init == "file":
            method = f"file://{tmp_path}/rendezvous-{scenario}-{time.monotonic_ns()}"
        elif init == "tcp":
            method = f"tcp://127.0.0.1:{port}"
        else:
            method = "env://"
        procs = []
        start = time.monotonic()
        for r in range(n):
            e = dict(os.environ)
            e.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(r), "WORLD_SIZE": str(n),
                      "STRATA_TRANSPORT": e.get("STRATA_TRANSPORT", "tcp")})
            e.update(env or {})
            if per_rank_env:
                e.update(per_rank_env(r))
            cmd = [sys.executable, str(HERE / program), scenario, str(r), str(n), method, str(tmp_path), *args]
            procs.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        results = []
        deadline = start + timeout
        for p in procs:
            try:
                out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                out += f"\n[killed after {timeout} s]"
            results.append((p.returncode, out))
        return Ranks(results, time.monotonic() - start)

    return run

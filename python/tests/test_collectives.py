"""Every collective of the backend through torch.distributed on 1-4 ranks against a
reference (scenarios.collectives) and init methods; CUDA tensors are test_cuda.py's."""
import subprocess
import sys

import pytest

from conftest import HERE, free_port


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_collectives_match_reference(run_ranks, world):
    r = run_ranks("collectives", world, timeout=240).check()
    assert all("collectives ok" in out for _, out in r.results)


def test_across_two_regions_and_ucx(run_ranks):
    r = run_ranks("collectives", 4, env={"STRATA_TRANSPORT": "ucx", "STRATA_WAN_EMULATE": "delay=1ms"},
                  per_rank_env=lambda rank: {"STRATA_REGION": "east" if rank < 2 else "west"}, timeout=240).check()
    assert all("collectives ok" in out for _, out in r.results)


def test_debug_detail(run_ranks):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL asks the backend for sequence numbers before every
    collective; with them every collective works and a mismatch is caught by torch."""
    r = run_ranks("debug_detail", 3, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, timeout=240).check()
    assert all("detail ok" in out for _, out in r.results)
    assert all("mismatch caught" in out for _, out in r.results)


@pytest.mark.parametrize("init", ["file", "tcp", "env"])
def test_init_methods(run_ranks, init):
    r = run_ranks("init_methods", 3, init=init).check()
    assert all("init ok" in out for _, out in r.results)


def test_torchrun():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
           str(HERE / "scenarios.py"), "torchrun"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("init ok") == 2, p.stdout

"""The backend on CUDA tensors, where torch sees a GPU (skipped elsewhere): every
collective against a reference on 2 and 4 ranks in two emulated regions, DDP beside
NCCL's own backend from the same initial weights, and the compressing comm hook.

Ranks share the machine's GPU. For NCCL (torch's backend, and the NCCL communicators
strata makes inside a region for CUDA tensors) each rank gets an NCCL_HOSTID of its own,
so NCCL takes them for separate hosts (it refuses two ranks on one GPU of one host) and
runs over its own Socket transport on loopback."""
import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

NCCL_ON_LOOPBACK = {"NCCL_NET_PLUGIN": "none", "NCCL_NET": "Socket", "NCCL_SOCKET_IFNAME": "lo"}
TWO_REGIONS = {"STRATA_WAN_EMULATE": "delay=1ms"} | NCCL_ON_LOOPBACK


def regions(world):
    return lambda rank: {"STRATA_REGION": "east" if rank < world // 2 else "west", "NCCL_HOSTID": f"host{rank}"}


def show_versions(r):
    for line in r.output(0).splitlines():
        if line.startswith("versions:"):
            print(line)


@pytest.mark.parametrize("world", [2, 4])
def test_cuda_collectives_in_two_regions(run_ranks, world):
    r = run_ranks("collectives_cuda", world, env=TWO_REGIONS, per_rank_env=regions(world), timeout=300).check()
    show_versions(r)
    assert all("cuda collectives ok" in out for _, out in r.results)


def test_cuda_ddp_matches_nccl(run_ranks, tmp_path):
    nccl_env = NCCL_ON_LOOPBACK
    saved = {}
    for backend in ("nccl", "strata"):
        path = tmp_path / f"{backend}.pt"
        per_rank = (lambda rank: {"NCCL_HOSTID": f"ddp-host{rank}"}) if backend == "nccl" else regions(2)
        r = run_ranks("ddp_cuda", 2, env=nccl_env | TWO_REGIONS, per_rank_env=per_rank, timeout=240,
                      args=(backend, str(path))).check()
        show_versions(r)
        print(r.output(0).strip().splitlines()[-1])
        saved[backend] = torch.load(path)
    for k, want in saved["nccl"].items():
        torch.testing.assert_close(saved["strata"][k], want, rtol=1e-4, atol=1e-5, msg=k)


def test_cuda_compress_hook(run_ranks):
    r = run_ranks("hook_cuda", 2, env=TWO_REGIONS, per_rank_env=regions(2), timeout=240).check()
    show_versions(r)
    print(r.output(0).strip().splitlines()[-1])
    assert all("cuda hook ok" in out for _, out in r.results)

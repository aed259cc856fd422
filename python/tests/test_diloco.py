"""strata.torch.DiLoCo on 4 ranks in two emulated regions (diloco_scenarios.py): outer
steps equal to a plain-torch reference of the paper's, global parameters bit-identical on
every replica (exact, int4, streaming with int8), checkpoint and share_state; a region
lost at a sync, the others going on, and a replacement joining."""
import pytest
import torch.distributed as dist

REGIONS = {"STRATA_WAN_EMULATE": "delay=1ms"}


def region(rank):
    return {"STRATA_REGION": "east" if rank < 2 else "west"}


@pytest.mark.parametrize("scenario", ["exact", "compressed", "streaming", "checkpoint"])
def test_diloco(run_ranks, scenario):
    r = run_ranks(scenario, 4, env=REGIONS, per_rank_env=region, timeout=240, program="diloco_scenarios.py").check()
    for rank in range(4):
        assert f"rank {rank}: {scenario} ok" in r.output(rank), r.output(rank)


@pytest.mark.skipif(not hasattr(dist, "_reconfigure"), reason="torch without the reconfigure API")
def test_diloco_region_lost_then_replaced(run_ranks, outside_store):
    regions = ["east", "west", "north", "north"]
    r = run_ranks("region_lost", 4, env={**REGIONS, "STORE_PORT": str(outside_store)},
                  per_rank_env=lambda rank: {"STRATA_REGION": regions[rank]}, timeout=240,
                  program="diloco_scenarios.py")
    assert r.results[2][0] != 0  # killed
    for rank in (0, 1, 3):
        assert r.results[rank][0] == 0, r.output(rank)
        assert f"rank {rank}: region_lost ok" in r.output(rank), r.output(rank)
    for rank in (0, 1):
        assert f"rank {rank}: recovered at step {2 * 5}" in r.output(rank), r.output(rank)

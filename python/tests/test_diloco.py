"""strata.torch.DiLoCo on 4 ranks in two emulated regions (diloco_scenarios.py): outer
steps equal to a plain-torch reference of the paper's, global parameters bit-identical on
every replica (exact, int4, streaming with int8), checkpoint and share_state."""
import pytest

REGIONS = {"STRATA_WAN_EMULATE": "delay=1ms"}


def region(rank):
    return {"STRATA_REGION": "east" if rank < 2 else "west"}


@pytest.mark.parametrize("scenario", ["exact", "compressed", "streaming", "checkpoint"])
def test_diloco(run_ranks, scenario):
    r = run_ranks(scenario, 4, env=REGIONS, per_rank_env=region, timeout=240, program="diloco_scenarios.py").check()
    for rank in range(4):
        assert f"rank {rank}: {scenario} ok" in r.output(rank), r.output(rank)

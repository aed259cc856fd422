"""torch's reconfigure API (init_process_group(enable_reconfigure=True),
dist._get_reconfigure_handle, dist._reconfigure) on strata: the scenarios of torch's own
fault-tolerance tests, each ending in an exact allreduce over the new members, on TCP in
one region and across two emulated regions over the WAN link (reconfigure_scenarios.py)."""
import re

import pytest
import torch.distributed as dist

pytestmark = pytest.mark.skipif(not hasattr(dist, "_reconfigure"), reason="torch without the reconfigure API")

LAYOUTS = {
    "tcp": ({}, None),
    "wan": ({"STRATA_WAN_EMULATE": "delay=1ms"}, lambda rank: {"STRATA_REGION": "east" if rank < 2 else "west"}),
}


@pytest.fixture
def reconfigure_ranks(run_ranks, outside_store):
    def run(scenario, layout, n=3, timeout=150):
        env, per_rank = LAYOUTS[layout]
        return run_ranks(scenario, n, env={**env, "STORE_PORT": str(outside_store)}, per_rank_env=per_rank,
                         timeout=timeout, program="reconfigure_scenarios.py")

    return run


def ok(r, scenario, rank, new_rank, new_size):
    assert f"rank {rank}: {scenario} ok as rank {new_rank} of {new_size}" in r.output(rank), r.output(rank)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_shrink_the_last_rank(reconfigure_ranks, layout):
    r = reconfigure_ranks("shrink_last", layout).check()
    ok(r, "shrink_last", 0, 0, 2)
    ok(r, "shrink_last", 1, 1, 2)
    assert "ok as" not in r.output(2)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_shrink_a_middle_rank(reconfigure_ranks, layout):
    r = reconfigure_ranks("shrink_middle", layout).check()
    ok(r, "shrink_middle", 0, 0, 2)
    ok(r, "shrink_middle", 2, 1, 2)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scale_down_and_back_up(reconfigure_ranks, layout):
    r = reconfigure_ranks("scale_down_up", layout).check()
    for rank in range(3):
        ok(r, "scale_down_up", rank, 0, 1)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_late_join(reconfigure_ranks, layout):
    r = reconfigure_ranks("late_join", layout).check()
    for rank in range(3):
        ok(r, "late_join", rank, rank, 3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_merge_and_split(reconfigure_ranks, layout):
    r = reconfigure_ranks("merge_split", layout).check()
    for rank in range(3):
        ok(r, "merge_split", rank, 2 - rank, 3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_identity(reconfigure_ranks, layout):
    r = reconfigure_ranks("identity", layout).check()
    for rank in range(3):
        ok(r, "identity", rank, rank, 3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_reused_uuid_is_refused(reconfigure_ranks, layout):
    r = reconfigure_ranks("reused_uuid", layout).check()
    for rank in range(3):
        ok(r, "reused_uuid", rank, rank, 3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_after_abort(reconfigure_ranks, layout):
    r = reconfigure_ranks("after_abort", layout).check()
    for rank in range(3):
        ok(r, "after_abort", rank, rank, 3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_killed_rank_then_a_replacement(reconfigure_ranks, layout):
    r = reconfigure_ranks("killed", layout, n=4)
    assert r.results[2][0] != 0  # killed
    for rank in (0, 1, 3):
        assert r.results[rank][0] == 0, r.output(rank)
    for rank in (0, 1):
        assert re.search(rf"rank {rank}: lost \[2\]", r.output(rank)), r.output(rank)
    ok(r, "killed", 0, 0, 3)
    ok(r, "killed", 1, 1, 3)
    ok(r, "killed", 3, 2, 3)

"""Failures reach Python as exceptions carrying strata's message, within a bounded time,
instead of hanging or aborting the interpreter."""
import re

import pytest


def raised(out):
    m = re.search(r"raised (\w+) after ([\d.]+) s: (.*)", out)
    assert m, out
    return m.group(1), float(m.group(2)), m.group(3)


def test_mismatched_calls_raise_naming_the_mismatch(run_ranks):
    r = run_ranks("mismatch", 3, timeout=120).check()
    for rank in range(3):
        kind, seconds, msg = raised(r.output(rank))
        assert kind == "DistBackendError", msg
        assert seconds < 25, f"rank {rank} took {seconds} s"
    # The ranks that see the other side's fingerprint say what each called.
    msgs = " ".join(raised(r.output(k))[2] for k in range(3))
    assert "mismatch" in msgs and "allreduce" in msgs and "broadcast" in msgs, msgs


def test_killed_rank_is_named_on_the_survivors(run_ranks):
    world = 3
    r = run_ranks("killed", world, timeout=120)
    assert r.results[world - 1][0] != 0  # killed by SIGKILL
    for rank in range(world - 1):
        assert r.results[rank][0] == 0, r.output(rank)
        kind, seconds, msg = raised(r.output(rank))
        assert kind == "DistBackendError", msg
        assert seconds < 20, f"rank {rank} took {seconds} s: {msg}"
        assert "rank 2" in msg, msg


@pytest.mark.parametrize("scenario,low,high", [("group_timeout", 2.5, 10), ("call_timeout", 1.5, 8)])
def test_timeouts_are_honoured(run_ranks, scenario, low, high):
    # group_timeout: a 3 s group timeout; call_timeout: a 2 s call timeout in a 60 s group.
    r = run_ranks(scenario, 2, timeout=120)
    assert r.results[0][0] == 0, r.output(0)
    kind, seconds, msg = raised(r.output(0))
    assert kind == "DistBackendError", msg
    assert low < seconds < high, f"{scenario}: timed out after {seconds} s: {msg}"
    assert "timed out" in msg, msg

"""What each rank runs for test_diloco.py: python diloco_scenarios.py NAME RANK WORLD INIT TMPDIR.

Ranks are placed in two regions by the test (STRATA_REGION); inner steps run under DDP on
the region's group, the outer sync across the world. Each scenario prints
"rank R: NAME ok" and raises on a failed check."""
import datetime
import hashlib
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import strata.torch as st

H = 5


def init():
    _, name, rank, world, method, _ = sys.argv[:6]
    dist.init_process_group("strata", init_method=method, rank=int(rank), world_size=int(world),
                            timeout=datetime.timedelta(seconds=60))
    return name, dist.get_rank(), dist.get_world_size()


def net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


def batch(step, rank):
    g = torch.Generator().manual_seed(step * 101 + rank)
    x = torch.randn(16, 8, generator=g)
    return x, (x[:, :3] * 2 - x[:, 3:6]).detach()


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def same_everywhere(tensors, what):
    mine = digest(tensors)
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    assert len(set(every)) == 1, f"{what}: ranks hold different bits {every}"


def train(model, diloco, inner, steps, first=0, before_step=None, ddp=True):
    ddp = DDP(model, process_group=REGION) if ddp else model
    for s in range(first, first + steps):
        x, y = batch(s, dist.get_rank())
        ((ddp(x) - y) ** 2).mean().backward()
        inner.step()
        inner.zero_grad()
        if before_step:
            before_step(s + 1)
        diloco.step()


def reference_outer(glob, momentum, locals_all, lr=0.7, mu=0.9):
    """The paper's outer step in plain torch: the pseudo-gradient averaged over all ranks,
    SGD with Nesterov momentum."""
    for i, g in enumerate(glob):
        delta = torch.stack([g - loc[i].float() for loc in locals_all]).double().mean(0).float()
        momentum[i] = delta.clone() if momentum[i] is None else momentum[i] * mu + delta
        g -= lr * (delta + mu * momentum[i])


def exact():
    """Outer steps equal the reference's, and the global parameters are bit-identical."""
    model = net()
    inner = torch.optim.SGD(model.parameters(), lr=0.05)
    diloco = st.DiLoCo(model, inner, sync_every=H)
    glob = [p.detach().clone() for p in model.parameters()]
    momentum = [None] * len(glob)

    def before_step(step):
        if step % H == 0:  # the sync this step: the reference sees every rank's local parameters
            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, [p.detach().clone() for p in model.parameters()])
            reference_outer(glob, momentum, everyone)

    train(model, diloco, inner, 4 * H, before_step=before_step)
    for got, want in zip(diloco.global_params, glob):
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (got - want).abs().max()
    for p, g in zip(model.parameters(), diloco.global_params):
        assert torch.equal(p.detach(), g), "local parameters did not start again from the global ones"
    same_everywhere(diloco.global_params, "global parameters")


def compressed():
    model = net()
    inner = torch.optim.Adam(model.parameters(), lr=1e-2)
    diloco = st.DiLoCo(model, inner, sync_every=H, compression="int4")
    train(model, diloco, inner, 3 * H)
    same_everywhere(diloco.global_params, "global parameters (int4)")
    start = net()
    moved = sum((g - p.detach()).abs().sum().item() for g, p in zip(diloco.global_params, start.parameters()))
    assert moved > 0, "the outer steps did not move the global parameters"


def streaming():
    """Three fragments, staggered, each sync overlapping the next inner steps."""
    model = net()
    inner = torch.optim.SGD(model.parameters(), lr=0.05)
    diloco = st.DiLoCo(model, inner, sync_every=2 * H, fragments=3, delay=2, compression="int8")
    synced = []
    orig_apply = diloco._apply

    def apply(f, work, delta):
        synced.append((diloco.steps, f))
        orig_apply(f, work, delta)

    diloco._apply = apply
    train(model, diloco, inner, 4 * H)
    # Fragment f starts at the steps where step % 10 == (0, 3, 6)[f] and lands 2 steps later.
    assert synced[:5] == [(5, 1), (8, 2), (12, 0), (15, 1), (18, 2)], synced
    diloco.sync()
    same_everywhere(diloco.global_params, "global parameters (streaming)")
    region_params = [p.detach().clone() for p in model.parameters()]
    peers = [None] * dist.get_world_size(group=REGION)
    dist.all_gather_object(peers, digest(region_params), group=REGION)
    assert len(set(peers)) == 1, "local parameters differ inside a region"


def checkpoint():
    """state_dict/load_state_dict round trip, and share_state to a rank whose state is off."""
    model = net()
    inner = torch.optim.SGD(model.parameters(), lr=0.05)
    diloco = st.DiLoCo(model, inner, sync_every=H)
    train(model, diloco, inner, 2 * H)
    sd = diloco.state_dict()
    other_model = net(seed=7)
    other = st.DiLoCo(other_model, torch.optim.SGD(other_model.parameters(), lr=0.05), sync_every=H)
    other.load_state_dict(sd)
    assert digest(other.global_params) == digest(diloco.global_params)
    assert other.steps == diloco.steps
    mom = [other.outer_optimizer.state[g]["momentum_buffer"] for g in other.global_params]
    assert digest(mom) == digest([diloco.outer_optimizer.state[g]["momentum_buffer"] for g in diloco.global_params])
    # A rank that lost its state (a replacement) gets rank 0's.
    if dist.get_rank() == 1:
        fresh_model = net(seed=3)
        diloco = st.DiLoCo(fresh_model, torch.optim.SGD(fresh_model.parameters(), lr=0.05), sync_every=H)
    d = diloco.share_state(root=0)
    assert diloco.steps == 2 * H
    same_everywhere(diloco.global_params, "global parameters after share_state")
    print(f"digest {d[:16]}")


def region_lost():
    """Three regions of one rank; the third dies at a sync. The others shrink, recover and
    go on; then a replacement joins (torch's reconfigure API), receives the state through
    share_state, and all three train on with identical global parameters."""
    import os
    import signal

    store = dist.TCPStore("127.0.0.1", int(os.environ["STORE_PORT"]), is_master=False,
                          timeout=datetime.timedelta(seconds=60))
    me = int(sys.argv[2])
    model = net()
    inner = torch.optim.SGD(model.parameters(), lr=0.05)
    if me == 3:  # the replacement: waits until the others have gone on without the lost one
        store.wait(["recovered"], datetime.timedelta(seconds=120))
        dist.init_process_group("strata", store=store, rank=0, world_size=1, enable_reconfigure=True,
                                timeout=datetime.timedelta(seconds=60))
    else:
        dist.init_process_group("strata", store=store, rank=me, world_size=3, timeout=datetime.timedelta(seconds=60))
    diloco = st.DiLoCo(model, inner, sync_every=H)
    if me < 3:
        global REGION
        REGION = st.region_group()
        try:
            for s in range(4 * H):
                if me == 2 and s + 1 == 2 * H:
                    os.kill(os.getpid(), signal.SIGKILL)  # at the second sync
                train(model, diloco, inner, 1, first=s)
        except dist.DistBackendError:
            lost = st.lost_ranks()
            assert lost == [2], lost
            st.shrink(lost)
            d = diloco.recover()
            print(f"rank {me}: recovered at step {diloco.steps} ({d[:16]})", flush=True)
        assert diloco.steps == 2 * H, diloco.steps  # the sync that failed is the step the ranks restart from
        train(model, diloco, inner, H, first=diloco.steps, ddp=False)
        same_everywhere(diloco.global_params, "global parameters of the survivors")
        if me == 0:
            store.set("recovered", "1")
    # Grow: the survivors and the replacement, in that order.
    store.set(f"grow/{me}", dist._get_reconfigure_handle())
    members = [0, 1, 3]
    dist._reconfigure(4242, [store.get(f"grow/{r}").decode() for r in members],
                      timeout=datetime.timedelta(seconds=60)).wait()
    diloco.recover(root=0)
    assert diloco.steps == 3 * H, diloco.steps
    train(model, diloco, inner, 2 * H, first=diloco.steps, ddp=False)
    same_everywhere(diloco.global_params, "global parameters after the replacement joined")


SCENARIOS = {f.__name__: f for f in (exact, compressed, streaming, checkpoint, region_lost)}

if __name__ == "__main__":
    name, rank = sys.argv[1], int(sys.argv[2])
    if name != "region_lost":
        init()
        REGION = st.region_group()
    SCENARIOS[name]()
    print(f"rank {rank}: {name} ok", flush=True)
    dist.destroy_process_group()

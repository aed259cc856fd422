"""Data-parallel training with DDP over strata (or gloo, to compare), on generated data.

    torchrun --nproc-per-node 4 examples/torch/train.py --regions 2                # exact
    torchrun --nproc-per-node 4 examples/torch/train.py --regions 2 --compress topk:0.01+int8

A teacher network labels random inputs; a student MLP learns them. --regions 2 puts the
first half of the local ranks in region "east" and the rest in "west" (STRATA_REGION),
so strata reduces inside each region first and only a shard per rank crosses between
them; STRATA_WAN_EMULATE shapes that crossing. Prints the loss and the step time.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="strata", choices=["strata", "gloo"])
    p.add_argument("--compress", default="none", help="strata compression for the gradients (none: exact)")
    p.add_argument("--warmup", type=int, default=100, help="exact steps before compression starts")
    p.add_argument("--regions", type=int, default=1, help="emulated regions the local ranks are split into")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--print-every", type=int, default=200)
    p.add_argument("--save", help="write the final parameters here (rank 0)")
    return p.parse_args()


def place_in_region(regions):
    if regions > 1 and "STRATA_REGION" not in os.environ:
        local, local_world = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        os.environ["STRATA_REGION"] = f"region{local * regions // local_world}"


def model(hidden, seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def batches(rank, batch, steps, seed):
    """Each rank's own stream of (x, label): the teacher's argmax over random inputs."""
    teacher = model(64, seed + 1000)
    g = torch.Generator().manual_seed(seed * 7919 + rank)
    for _ in range(steps):
        x = torch.randn(batch, 32, generator=g)
        with torch.no_grad():
            y = teacher(x).argmax(1)
        yield x, y


def main():
    a = parse()
    place_in_region(a.regions)
    if a.backend == "strata":
        import strata.torch  # noqa: F401  registers the backend
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)  # several ranks share this machine's cores
    net = DDP(model(a.hidden, a.seed))
    state = None
    if a.compress != "none":
        import strata.torch
        state = strata.torch.CompressionState(a.compress, warmup_steps=a.warmup, momentum=0.9)
        net.register_comm_hook(state, strata.torch.compress_hook)
    # With compression the hook applies the momentum (CompressionState's momentum correction).
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9 if state is None else 0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, a.steps)
    loss_fn = nn.CrossEntropyLoss()
    times, losses = [], []
    for step, (x, y) in enumerate(batches(rank, a.batch, a.steps, a.seed)):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        sched.step()
        times.append(time.perf_counter() - t0)
        # The mean over ranks of this step's loss (kept out of the timed region).
        l = loss.detach().clone()
        dist.all_reduce(l)
        losses.append(l.item() / world)
        if rank == 0 and (step % a.print_every == 0 or step == a.steps - 1):
            print(f"step {step:4d}  loss {losses[-1]:.4f}  step {times[-1] * 1e3:7.2f} ms", flush=True)
    # The final loss on held-out data every run shares (the replicas are identical).
    x, y = next(batches(-1, 8192, 1, a.seed))
    with torch.no_grad():
        final = loss_fn(net.module(x), y).item()
    if rank == 0:
        print(f"final: backend {a.backend} compress {a.compress} ranks {world} "
              f"loss {final:.5f} median step {statistics.median(times[1:] or times) * 1e3:.2f} ms",
              flush=True)
        if a.save:
            torch.save({k: v.detach().clone() for k, v in net.module.state_dict().items()}, a.save)
    if state is not None:
        sd = state.state_dict()  # what a checkpoint would hold
        if rank == 0:
            print(f"compression state: {len(sd['residuals'])} bytes of residuals after {sd['steps']} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
